"""The rough edges of the command's doors (issue 24, "The doors"): the library-wide
options after the command, ``-o -``, embed progress in logs, and messages that say
what they mean (re-anchoring counts, the search fallback, show's labels, the import
table's file names in 80 columns, the offset hint)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from mindory.cli import COMMANDS, main
from tests.conftest import SAMPLES

NEWS = SAMPLES / "news-from-nowhere.txt"
EPUB = SAMPLES / "wasteland.epub"
QUOTE = "there are likely to be salmon-nets"


def mindory(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library with both samples (no vectors) and a reader alice with one highlight."""
    path = tmp_path_factory.mktemp("edges") / "lib.sqlite"
    made = mindory("--db", str(path), "import", "--no-embed", "--json", str(NEWS), str(EPUB))
    assert made.exit_code == 0, made.output
    assert mindory("--db", str(path), "users", "add", "alice").exit_code == 0
    added = mindory(
        "--db", str(path), "--user", "alice", "highlight", "add", "News", "--quote", QUOTE
    )
    assert added.exit_code == 0, added.output
    return path


def _count(result: Result) -> int:
    assert result.exit_code == 0, result.output
    return len(json.loads(result.stdout))


# --------------------------------------------------------------------------- --db, --user


def test_db_and_user_work_after_the_command(db: Path) -> None:
    # The command: --user after a group's subcommand.
    out = mindory("--db", str(db), "annotations", "export", "--user", "alice")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["total"] == 1
    # --db after the command, and after a group and its subcommand; --user between them.
    assert _count(mindory("books", "--json", "--db", str(db))) == 2
    assert _count(mindory("users", "list", "--json", "--db", str(db))) == 1
    assert _count(mindory("highlights", "News", "--json", "--db", str(db), "--user", "alice")) == 1
    assert _count(mindory("--db", str(db), "highlights", "News", "--json")) == 0  # local reader
    got = mindory("--db", str(db), "annotations", "--user", "alice", "export")
    assert got.exit_code == 0 and json.loads(got.stdout)["total"] == 1, got.output


def test_the_one_given_last_wins(db: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-folder" / "x.sqlite")
    assert _count(mindory("--db", missing, "books", "--json", "--db", str(db))) == 2
    # root --user names nobody: the command's --user wins.
    args = ["--db", str(db), "--user", "nobody", "highlights", "News", "--json"]
    assert _count(mindory(*args, "--user", "alice")) == 1
    # the environment is the root option's: a command-line --user after the command wins
    env = {"MINDORY_USER": "nobody", "MINDORY_DB": missing}
    assert (
        _count(mindory("highlights", "News", "--json", "--user", "alice", "--db", str(db), env=env))
        == 1
    )
    # and without options the environment still counts
    env = {"MINDORY_USER": "alice", "MINDORY_DB": str(db)}
    assert _count(mindory("highlights", "News", "--json", env=env)) == 1


def test_every_command_and_subcommand_takes_db_and_user() -> None:
    ctx = click.Context(main)

    def check(command: click.Command, name: str) -> None:
        opts = {o for p in command.params for o in p.opts}
        assert {"--db", "--user"} <= opts, name
        if isinstance(command, click.Group):
            for sub_name, sub in command.commands.items():
                check(sub, f"{name} {sub_name}")

    for name in COMMANDS:
        command = main.get_command(ctx, name)
        assert command is not None
        check(command, name)


# --------------------------------------------------------------------------- -o -


def test_output_dash_is_standard_output(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = mindory("--db", str(db), "--user", "alice", "annotations", "export", "News", "-o", "-")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["total"] == 1
    exported = mindory("--db", str(db), "export", "The Waste", "-o", "-")
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.stdout.splitlines()[0])["type"] == "book"
    assert not (tmp_path / "-").exists() and not (tmp_path / "-.part").exists()


# --------------------------------------------------------------------------- embed progress


def test_progress_lines_every_interval_or_step() -> None:
    from mindory.cli.common import ProgressLines

    now = [0.0]
    lines: list[str] = []
    report = ProgressLines("embedded", "chunks", clock=lambda: now[0], echo=lines.append)
    for t, done in [(0.0, 0), (2.0, 256), (84.5, 1200), (90.0, 1300), (95.0, 2600), (100.0, 2700)]:
        now[0] = t
        report(done, 25506)
    assert lines[0] == "embedded 0/25506 chunks (0.0 %)"
    # 84.5 s: over 10 s since the last line; 95 s: past 10 %; 100 s: neither.
    assert lines[1] == "embedded 1200/25506 chunks (4.7 %), 14.2 chunks/s, about 29 min left"
    assert lines[2].startswith("embedded 2600/25506 chunks (10.2 %), 27.4 chunks/s, about 14 min")
    assert len(lines) == 3
    now[0] = 120.0
    report(25506, 25506)
    assert lines[3] == "embedded 25506/25506 chunks (100.0 %), 212.6 chunks/s, done"
    report(25506, 25506)  # the last line once
    assert len(lines) == 4


def test_embed_prints_progress_lines_when_not_a_terminal(tmp_path: Path) -> None:
    path = str(tmp_path / "lib.sqlite")
    assert mindory("--db", path, "import", "--no-embed", str(NEWS)).exit_code == 0
    out = mindory("--db", path, "embed", "--batch", "100")
    assert out.exit_code == 0, out.output
    lines = [line for line in out.stderr.splitlines() if line.startswith("embedded ")]
    assert lines[0] == "embedded 0/800 chunks (0.0 %)", out.stderr
    assert lines[-1].startswith("embedded 800/800 chunks (100.0 %), ") and lines[-1].endswith(
        "done"
    )
    assert len(lines) >= 3
    for line in lines[1:-1]:
        assert re.fullmatch(
            r"embedded \d+/800 chunks \(\d+\.\d %\), [\d,.]+ chunks/s, about .+ left", line
        )
    assert "embedded 800 chunk(s)" in out.stdout  # the summary is unchanged


# --------------------------------------------------------------------------- messages


def test_reanchored_counts_highlights_and_positions_apart(tmp_path: Path) -> None:
    path = str(tmp_path / "lib.sqlite")
    assert mindory("--db", path, "import", "--no-embed", str(NEWS)).exit_code == 0
    assert mindory("--db", path, "highlight", "add", "News", "--quote", QUOTE).exit_code == 0
    assert (
        mindory("--db", path, "position", "News", "--section", "2", "--offset", "12100").exit_code
        == 0
    )
    new = tmp_path / "news-2.txt"
    new.write_text(
        NEWS.read_text(encoding="utf-8").replace("salmon-nets, Tay", "salmon-nets, the Tay")
    )
    out = mindory("--db", path, "import", "--no-embed", str(new), "--replaces", "News")
    assert out.exit_code == 0, out.output
    said = [line for line in out.stderr.splitlines() if "new edition of" in line]
    assert len(said) == 1, out.stderr
    assert "2 position" not in said[0]
    assert re.search(r"\b1 highlight \(", said[0]) and re.search(
        r"\b1 reading position \(", said[0]
    ), said[0]


def test_search_without_vectors_says_what_it_ran(db: Path) -> None:
    out = mindory("--db", str(db), "search", "river thames", "--k", "2")
    assert out.exit_code == 0, out.output
    footer = out.stdout.strip().splitlines()[-1]
    assert "(hybrid)" not in footer and "words and trigram" in footer, footer
    assert "no vectors" in footer
    # The warning comes first, before the hits it explains.
    text = out.output
    assert text.index("mindory: warning: no vectors yet") < text.index(" 1. ")


def test_show_labels_the_book_id_and_the_settings_fingerprint(db: Path) -> None:
    out = mindory("--db", str(db), "show", "News")
    assert out.exit_code == 0, out.output
    info = json.loads(mindory("--db", str(db), "show", "News", "--json").stdout)
    flat = " ".join(out.stdout.split())
    assert f"book id {info['id']}" in flat
    assert f"settings fingerprint {info['fingerprint']}" in flat
    assert f"derivation {info['fingerprint']}" not in flat


CORPUS_NAMES = [
    "txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt",
    "txt_zh-Hant_honglou-meng_big5-cp950_crlf.txt",
    "txt_zh-Hant_honglou-meng_gbk_crlf.txt",
    "txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt",
]


def test_import_table_keeps_long_names_apart_in_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindory.cli import common

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(common, "_consoles", {})  # a console made at 80 columns
    folder = tmp_path / "in"
    folder.mkdir()
    for i, name in enumerate(CORPUS_NAMES):
        (folder / name).write_text(f"Book {i}\n\nA tiny book number {i}, for a table.\n")
    out = mindory("--db", str(tmp_path / "lib.sqlite"), "import", "--no-embed", str(folder))
    assert out.exit_code == 0, out.output
    rows = [line for line in out.stdout.splitlines() if "created" in line]
    assert len(rows) == 4 and all(len(row) <= 80 for row in rows), out.stdout
    shown = [row.split("│")[1].strip() for row in rows]
    assert len(set(shown)) == 4, shown
    assert all(s.endswith("_crlf.txt") for s in shown), shown  # the distinguishing end kept


def test_offset_hint_only_for_plain_text(db: Path) -> None:
    far = ["--add", "--section", "0", "--offset", "99999999"]
    epub = mindory("--db", str(db), "bookmarks", "The Waste", *far)
    assert epub.exit_code == 1
    assert "plain text counts from the file's start" not in epub.stderr, epub.stderr
    assert "EPUB offsets count from the section's start" in epub.stderr
    txt = mindory("--db", str(db), "bookmarks", "News", *far)
    assert txt.exit_code == 1
    assert "plain text counts from the file's start" in txt.stderr, txt.stderr
