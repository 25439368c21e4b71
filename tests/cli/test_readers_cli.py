"""``mindory users``, ``--user``, ``mindory position`` and ``mindory bookmarks``: thin doors
onto one Library method each, printing the HTTP shapes with ``--json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mindory.cli import main as cli_main
from mindory.library import Library
from tests.conftest import SAMPLES

EPUB = SAMPLES / "wasteland.epub"
NEWS = SAMPLES / "news-from-nowhere.txt"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "lib.sqlite"
    with Library.open(path) as lib:
        lib.import_book(EPUB, embed=False)
        lib.import_book(NEWS, embed=False)
    return path


def _run(db: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli_main, ["--db", str(db), *args], input=input)


def _json(db: Path, *args: str) -> Any:
    result = _run(db, *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_users_add_list_remove(db: Path) -> None:
    added = _run(db, "users", "add", "alice")
    assert added.exit_code == 0, added.output
    token = added.stdout.strip()
    assert len(token) >= 40 and "shown only now" in added.stderr
    with Library.open(db) as lib:
        assert lib.reader_for_token(token) == lib.reader_id("alice")
    again = _run(db, "users", "add", "alice")
    assert again.exit_code == 1 and "already" in again.stderr
    listed = _json(db, "users", "list", "--json")
    assert [r["name"] for r in listed] == ["alice"] and "token" not in listed[0]
    assert "alice" in _run(db, "users", "list").stdout
    # alice keeps a bookmark; removing her asks first
    made = _json(
        db,
        "--user",
        "alice",
        "bookmarks",
        "news",
        "--add",
        "--section",
        "2",
        "--offset",
        str(_start(db, 2) + 3),
        "--json",
    )
    refused = _run(db, "users", "remove", "alice", input="n\n")
    assert refused.exit_code == 1 and "nothing removed" in refused.stderr
    assert [b["id"] for b in _json(db, "--user", "alice", "bookmarks", "news", "--json")] == [
        made["id"]
    ]
    asked = _run(db, "users", "remove", "alice", input="y\n")
    assert asked.exit_code == 0 and "1 bookmarks" in asked.stdout
    assert _json(db, "users", "list", "--json") == []
    _run(db, "users", "add", "bob")
    gone = _json(db, "users", "remove", "bob", "--yes", "--json")
    assert gone["name"] == "bob" and gone["removed"] == {
        "highlights": 0,
        "positions": 0,
        "bookmarks": 0,
    }
    missing = _run(db, "users", "remove", "nobody", "--yes")
    assert missing.exit_code == 1 and "no reader named 'nobody'" in missing.stderr
    unknown = _run(db, "--user", "nobody", "bookmarks", "news")
    assert unknown.exit_code == 1 and "no reader named" in unknown.stderr


def _start(db: Path, section: int) -> int:
    with Library.open(db) as lib:
        return lib.section("news", section).info.source_start


def test_position_set_and_show(db: Path) -> None:
    missing = _run(db, "position", "news")
    assert missing.exit_code == 1 and "no reading position" in missing.stderr
    at = _start(db, 4) + 77
    put = _json(db, "position", "news", "--section", "4", "--offset", str(at), "--json")
    assert put["locator"]["source"]["start"] == at and put["device"] == "cli"
    assert _json(db, "position", "news", "--json") == put
    shown = _run(db, "position", "news")
    assert shown.exit_code == 0 and f"section 4, offset {at}" in shown.stdout
    # EPUB by CFI, for another reader: the local reader's position is not theirs
    _run(db, "users", "add", "carol")
    cfi = _json(db, "position", "waste", "--section", "0", "--offset", "250", "--json")["locator"][
        "locations"
    ]["cfi"]
    theirs = _json(db, "--user", "carol", "position", "waste", "--set", cfi, "--json")
    assert theirs["locator"]["source"]["start"] == 250
    assert _run(db, "--user", "carol", "position", "news").exit_code == 1
    bad = _run(db, "position", "news", "--section", "4", "--offset", "1")
    assert bad.exit_code == 1 and "outside section 4" in bad.stderr
    assert _json(db, "position", "news", "--json") == put  # nothing written
    assert _run(db, "position", "news", "--offset", "5").exit_code == 2


def test_bookmarks_add_list_delete(db: Path) -> None:
    assert _json(db, "bookmarks", "waste", "--json") == []
    one = _json(
        db,
        "bookmarks",
        "waste",
        "--add",
        "--section",
        "0",
        "--offset",
        "40",
        "--title",
        "start",
        "--json",
    )
    two = _json(
        db, "bookmarks", "waste", "--add", "--section", "0", "--progression", "0.5", "--json"
    )
    assert one["title"] == "start" and one["locator"]["locations"]["cfi"]
    assert [b["id"] for b in _json(db, "bookmarks", "waste", "--json")] == [one["id"], two["id"]]
    listed = _run(db, "bookmarks", "waste")
    assert listed.exit_code == 0 and one["id"] in listed.stdout and "start" in listed.stdout
    gone = _json(db, "bookmarks", "waste", "--delete", one["id"], "--json")
    assert gone == one
    assert [b["id"] for b in _json(db, "bookmarks", "waste", "--json")] == [two["id"]]
    again = _run(db, "bookmarks", "waste", "--delete", one["id"])
    assert again.exit_code == 1 and "no bookmark" in again.stderr
    assert _run(db, "bookmarks", "waste", "--section", "0").exit_code == 2  # needs --add
