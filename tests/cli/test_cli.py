"""The command line over a library: import (files, folders, bad files), books, show,
chunks, blocks, verify, export (byte-identical across processes), delete, errors."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import update

from mindory.cli import main
from mindory.library import Library
from mindory.store.models import ChunkRow
from tests.conftest import ROOT, SAMPLES


def run(db: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["--db", str(db), *args], env=env)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library holding the three samples (imported once for the module)."""
    db = tmp_path_factory.mktemp("cli") / "lib.sqlite"
    result = run(db, "import", str(SAMPLES), "--json")
    assert result.exit_code == 0, result.output
    return db


def test_import_folder_with_bad_files(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "news.txt").write_bytes((SAMPLES / "news-from-nowhere.txt").read_bytes())
    (folder / "empty.txt").write_bytes(b"")
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    (folder / "broken.epub").write_bytes(b"PK\x03\x04 not really a zip")
    db = tmp_path / "lib.sqlite"
    result = run(db, "import", str(folder), str(SAMPLES / "wasteland.epub"))
    assert result.exit_code == 1
    assert "2 imported, 3 failed" in result.stdout
    for name in ("empty.txt", "binary.txt", "broken.epub"):
        assert f"mindory: failed: {folder / name}:" in result.stderr
    assert "Traceback" not in result.output
    books = json.loads(run(db, "books", "--json").stdout)
    assert sorted(b["title"] for b in books) == ["News from Nowhere", "The Waste Land"]
    # Again: everything that is there is unchanged, the bad files fail again.
    again = json.loads(run(db, "import", str(folder), "--json").stdout)
    assert [r["status"] for r in again["results"]] == ["failed", "failed", "failed", "unchanged"]
    assert again["failed"] == 3 and again["imported"] == 1


def test_import_json_and_settings(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    news = str(SAMPLES / "news-from-nowhere.txt")
    first = run(db, "import", news, "--json")
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    (r,) = doc["results"]
    assert r["status"] == "created" and r["chunks"] > 0 and set(r["timings"]) >= {"parse", "write"}
    second = json.loads(
        run(db, "import", news, "--size", "400", "--overlap", "40", "--json").stdout
    )
    assert second["results"][0]["status"] == "rederived"
    info = json.loads(run(db, "show", "news", "--json").stdout)
    assert len(info["derivations"]) == 2 and info["chunk_count"] == second["results"][0]["chunks"]
    bad = run(db, "import", news, "--size", "5")
    assert bad.exit_code != 0 and bad.stderr.startswith("mindory: error: chunk size")


def test_books_show_chunks_blocks(library: Path) -> None:
    table = run(library, "books")
    assert table.exit_code == 0 and "News from" in table.stdout
    books = json.loads(run(library, "books", "--json").stdout)
    assert {b["format"] for b in books} == {"txt", "epub"}
    shown = run(library, "show", "The Waste", "--toc")
    assert shown.exit_code == 0 and "THE BURIAL OF THE DEAD" in shown.stdout
    doc = json.loads(run(library, "show", "waste", "--toc", "--json").stdout)
    assert doc["sections"][0]["href"].endswith(".xhtml") and len(doc["toc"]) == 6

    chunks = json.loads(run(library, "chunks", "news", "--json").stdout)
    with Library.open(library) as lib:
        stored = lib.chunks("news")
    assert [c["id"] for c in chunks["chunks"]] == [c.id for c in stored]
    assert all("byte_start" in c for c in chunks["chunks"])
    some = json.loads(
        run(library, "chunks", "news", "--section", "2", "--limit", "3", "--json").stdout
    )
    assert [c["section"] for c in some["chunks"]] == [2, 2, 2]
    epub = json.loads(run(library, "chunks", "waste", "--limit", "2", "--json").stdout)
    assert all(c["cfi"].startswith("epubcfi(") for c in epub["chunks"] if "cfi" in c)
    assert "│" in run(library, "chunks", "qiaoshi", "--limit", "4").stdout

    page = json.loads(
        run(library, "blocks", "news", "1", "--page", "2", "--page-size", "3", "--json").stdout
    )
    assert page["page"] == 2 and len(page["blocks"]) == 3 and page["blocks"][0]["index"] == 3
    assert run(library, "blocks", "news", "1").exit_code == 0


def test_verify_command(library: Path, tmp_path: Path) -> None:
    ok = run(library, "verify")
    assert ok.exit_code == 0 and "ok" in ok.stdout
    report = json.loads(run(library, "verify", "--json").stdout)
    assert report["ok"] and report["books"] == 3

    db = tmp_path / "broken.sqlite"
    assert run(db, "import", str(SAMPLES / "wasteland.epub")).exit_code == 0
    with Library.open(db) as lib, lib.engine.begin() as conn:
        conn.execute(update(ChunkRow).where(ChunkRow.index == 3).values(end=ChunkRow.end - 1))
    bad = run(db, "verify")
    assert bad.exit_code == 1
    assert "mindory: violation:" in bad.stderr and "chunk 3" in bad.stderr
    assert bad.stderr.strip().splitlines()[-1].startswith("mindory: error: verify found")


def _export_hash(db: Path, book: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "mindory.cli", "--db", str(db), "export", book, "--jsonl"],
        capture_output=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout
    return hashlib.sha256(out).hexdigest()


def test_export_is_byte_identical_across_processes_and_libraries(
    library: Path, tmp_path: Path
) -> None:
    in_process = run(library, "export", "qiaoshi", "--jsonl").stdout_bytes
    assert in_process.count(b"\n") > 100
    first = _export_hash(library, "qiaoshi")
    assert first == hashlib.sha256(in_process).hexdigest()
    assert _export_hash(library, "qiaoshi") == first
    other = tmp_path / "other.sqlite"  # another library, another import order
    for name in ("wasteland.epub", "qiaoshi-yanyi.txt"):
        assert run(other, "import", str(SAMPLES / name)).exit_code == 0
    assert _export_hash(other, "qiaoshi") == first
    out = tmp_path / "q.jsonl"
    assert run(library, "export", "qiaoshi", "-o", str(out)).exit_code == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == first


def test_delete(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    run(db, "import", str(SAMPLES / "wasteland.epub"), str(SAMPLES / "qiaoshi-yanyi.txt"))
    # not a terminal (CliRunner's stdin): no one to ask, so it refuses without --yes
    refused = run(db, "delete", "waste")
    assert refused.exit_code == 2 and "--yes" in refused.output
    assert "not a terminal" in refused.output
    assert len(json.loads(run(db, "books", "--json").stdout)) == 2
    gone = run(db, "delete", "waste", "--yes")
    assert gone.exit_code == 0 and "deleted The Waste Land" in gone.stdout
    assert [b["title"] for b in json.loads(run(db, "books", "--json").stdout)] == ["qiaoshi-yanyi"]
    again = run(db, "delete", "waste", "--yes")
    assert again.exit_code == 1
    missing = run(db, "delete", "waste")  # a missing book is an error, not a question
    assert missing.exit_code == 1 and "no book" in missing.stderr


def _on_a_terminal(db: Path, answer: bytes, *args: str) -> tuple[int, str]:
    """Run ``mindory --db DB delete ARGS`` with a pseudo-terminal as stdin and stderr,
    type ``answer``; the exit code and everything the terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mindory", "--db", str(db), "delete", *args],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=ROOT,
    )
    os.close(follower)
    shown = b""
    try:
        while b"?" not in shown:  # the question, then the answer
            chunk = os.read(leader, 1024)
            if not chunk:
                break
            shown += chunk
        os.write(leader, answer)
        out, _ = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(OSError):
            while chunk := os.read(leader, 1024):
                shown += chunk
        os.close(leader)
    return proc.returncode, (shown + out).decode("utf-8", "replace")


def test_delete_asks_on_a_terminal(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    run(db, "import", str(SAMPLES / "wasteland.epub"), str(SAMPLES / "qiaoshi-yanyi.txt"))
    code, shown = _on_a_terminal(db, b"n\n", "waste")
    assert code == 1, shown
    assert "Delete 'The Waste Land'" in shown and "[y/N]" in shown
    assert "nothing deleted" in shown
    assert len(json.loads(run(db, "books", "--json").stdout)) == 2
    code, shown = _on_a_terminal(db, b"y\n", "waste")
    assert code == 0, shown
    assert "deleted The Waste Land" in shown
    assert [b["title"] for b in json.loads(run(db, "books", "--json").stdout)] == ["qiaoshi-yanyi"]


def test_errors_are_one_line(library: Path, tmp_path: Path) -> None:
    missing = run(library, "show", "no such book")
    assert missing.exit_code == 1
    assert (
        missing.stderr == "mindory: error: no book with id or title starting with 'no such book'\n"
    )
    assert run(library, "blocks", "news", "999").stderr.startswith("mindory: error: ")
    nofile = run(library, "import", str(tmp_path / "nope.txt"))
    assert nofile.exit_code == 1 and "no such file" in nofile.stderr
    debug = CliRunner().invoke(main, ["--db", str(library), "--debug", "show", "no such book"])
    assert debug.exit_code != 0 and type(debug.exception).__name__ == "NotFoundError"
    # A library that cannot be opened: one line too.
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    bad_db = run(blocked / "lib.sqlite", "books")
    assert bad_db.exit_code == 1 and bad_db.stderr.count("\n") == 1
    assert bad_db.stderr.startswith("mindory: error: ")


def test_library_location(tmp_path: Path) -> None:
    env = {"MINDORY_DB": str(tmp_path / "env.sqlite"), "MINDORY_DATABASE_URL": ""}
    result = CliRunner().invoke(main, ["import", str(SAMPLES / "wasteland.epub")], env=env)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "env.sqlite").exists()
    where = CliRunner().invoke(main, ["where"], env=env)
    assert where.stdout.strip() == str(tmp_path / "env.sqlite")
    home = {"MINDORY_DB": "", "MINDORY_DATABASE_URL": "", "XDG_DATA_HOME": str(tmp_path / "xdg")}
    where = CliRunner().invoke(main, ["where"], env=home)
    assert where.stdout.strip() == str(tmp_path / "xdg" / "mindory" / "library.sqlite")


def test_chunk_command_needs_no_library(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["chunk", str(SAMPLES / "news-from-nowhere.txt"), "--json"],
        env={"HOME": str(tmp_path)},
    )
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["book"]["title"] == "News from Nowhere" and doc["chunks"]


def test_show_toc_explains_entries_outside_the_spine(tmp_path: Path) -> None:
    from tests.importers.test_epub import NAV, _with_nav_property, make_epub, xhtml

    path = make_epub(
        tmp_path / "b.epub",
        {
            "nav.xhtml": xhtml(NAV),
            "a.xhtml": xhtml('<p>Intro text.</p><section id="s2"> <h2>Two</h2></section>'),
            "b.xhtml": xhtml("<p>b</p>"),
        },
        spine='<itemref idref="d1"/><itemref idref="d2"/>',
    )
    path = _with_nav_property(path, "d0")
    db = tmp_path / "lib.sqlite"
    assert run(db, "import", str(path)).exit_code == 0
    shown = run(db, "show", "Test Book", "--toc")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    web = next(line for line in lines if "Web" in line)
    assert "— (not in the spine)" in web and "example.com" in web
    assert "?" not in shown.stdout
    assert "— (no link)" in next(line for line in lines if "Heading only" in line)
    assert any("Bee" in line and "§1 @0" in line for line in lines)
    assert any(line.startswith("§N @M: the entry opens section N") for line in lines)
    assert any(line.startswith("—: the entry has no section to open") for line in lines)
    # a book whose entries all have a section gets the first legend line only
    plain = run(db, "import", str(SAMPLES / "wasteland.epub"))
    assert plain.exit_code == 0
    waste = run(db, "show", "The Waste", "--toc").stdout
    assert "§N @M:" in waste and "not in the spine" not in waste
