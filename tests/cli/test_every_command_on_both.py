"""Every library command of the CLI, run in the same order on a SQLite file and on a
PostgreSQL database: each exits as on SQLite and prints the same JSON (the same ids, spans,
Locators, scores rounded as printed). ``serve`` and ``worker`` have their own tests on both
backends (tests/server/test_job_workers.py), ``copy`` in tests/library/test_copy.py; ``chunk``
opens no library and ``sweep`` builds throw-away SQLite libraries of its own."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mindory.cli import COMMANDS
from mindory.cli import main as cli_main
from tests.conftest import SAMPLES
from tests.pg import PgServer, new_database

EPUB = SAMPLES / "wasteland.epub"
TXT = SAMPLES / "qiaoshi-yanyi.txt"
NEWS = SAMPLES / "news-from-nowhere.txt"

# Fields whose values differ between two libraries by nature, not by backend: clocks,
# random annotation ids (urn:uuid), tokens, file locations.
VOLATILE = {"created", "modified", "imported_at", "id", "was", "token", "path", "source", "timings"}
TIMED = re.compile(r"(seconds|_per_second)$")
CLOCK = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
# The vector index is FAISS's file on SQLite and pgvector's HNSW on PostgreSQL.
VECTOR_INDEX = {"index", "vectors", "kind", "status"}


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: ("…" if k in VOLATILE or TIMED.search(k) else _scrub(v)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, str) and CLOCK.match(value):
        return "…"
    return value


def _same(a: Any, b: Any, where: str = "") -> None:
    """Equal, floats to 1e-5 relative (BM25 sums in another order on PostgreSQL)."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6), (where, a, b)
        return
    assert type(a) is type(b), (where, a, b)
    if isinstance(a, dict):
        assert a.keys() == b.keys(), (where, sorted(a.keys() ^ b.keys()))
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), (where, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


def _drop(value: Any, keys: set[str]) -> Any:
    if isinstance(value, dict):
        return {k: _drop(v, keys) for k, v in value.items() if k not in keys}
    return value


def _session(db: str, tmp: Path) -> list[tuple[str, int, Any]]:
    """The commands, in order: (command line, exit code, JSON or text printed)."""
    runner = CliRunner()
    out: list[tuple[str, int, Any]] = []

    def run(*args: str, stdin: str | None = None) -> Any:
        result = runner.invoke(cli_main, ["--db", db, *args], input=stdin)
        text = result.stdout
        try:
            printed: Any = json.loads(text)
        except ValueError:
            printed = text.replace(db, "<db>")
        out.append((" ".join(args), result.exit_code, _scrub(printed)))
        return printed

    run("import", str(EPUB), str(TXT), str(NEWS), "--no-embed", "--json")
    books = run("books", "--json")
    ids = {b["file_name"]: b["id"] for b in books}
    epub, txt, news = ids[EPUB.name], ids[TXT.name], ids[NEWS.name]
    run("embed", "--json")
    run("index", "--json")
    run("show", epub, "--json")
    run("chunks", txt, "--json")
    run("blocks", epub, "0", "--page", "1", "--page-size", "5", "--json")
    for mode in ("hybrid", "words", "trigram", "vector", "lexical"):
        run("search", "What did the hooded figure say?", "--mode", mode, "--json")
    run("search", "魏忠贤", "--book", txt, "--json")
    run("locate", epub, "--section", "0", "--offset", "40", "--json")
    run("export", news)
    run("stats", news, "--json")
    run("eval", str(SAMPLES / "queries" / "news-from-nowhere.jsonl"), "--json")
    run("highlight", "add", news, "--quote", "Guest House", "--note", "n", "--json")
    run("highlights", news, "--json")
    run("annotations", "export", news, "-o", str(tmp / "notes.jsonld"))
    run("annotations", "import", str(tmp / "notes.jsonld"), "--json")
    run("position", epub, "--section", "0", "--offset", "12", "--device", "d1", "--json")
    run("position", epub, "--json")
    run("bookmarks", epub, "--add", "--section", "0", "--offset", "30", "--title", "b", "--json")
    run("bookmarks", epub, "--json")
    run("users", "add", "alice", "--json")
    run("--user", "alice", "highlight", "add", txt, "--quote", "魏忠賢", "--json")
    run("--user", "alice", "highlights", txt, "--json")
    run("users", "list", "--json")
    run("users", "remove", "alice", "--yes", "--json")
    run("verify", "--json")
    run("delete", txt, "--yes", "--json")
    run("books", "--json")
    run("index", "--rebuild", "--json")
    run("verify")
    run("where")
    return out


@pytest.fixture
def pg_url(request: pytest.FixtureRequest, pg_server: PgServer, tmp_path: Path) -> Any:
    yield from new_database(request, "postgresql", tmp_path)


def test_every_command_says_the_same_on_both_backends(pg_url: str, tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "p").mkdir()
    on_sqlite = _session(str(tmp_path / "s" / "lib.sqlite"), tmp_path / "s")
    on_postgresql = _session(pg_url, tmp_path / "p")
    for (line, code, printed), (_, pg_code, pg_printed) in zip(
        on_sqlite, on_postgresql, strict=True
    ):
        assert code == 0, (line, printed)
        assert pg_code == code, (line, pg_printed)
        if line == "where":
            continue  # names the library itself
        if line.startswith(("embed", "index")):
            # The same vectors, counted alike; the index is the backend's own.
            assert _drop(pg_printed, VECTOR_INDEX) == _drop(printed, VECTOR_INDEX), line
            continue
        if "--mode trigram" in line:
            # pg_trgm ranks by trigram similarity, FTS5 by BM25 over trigrams: the same
            # matching chunks, in another order (docs/deploy.md, "Search").
            assert pg_printed["hits"], line
            continue
        _same(printed, pg_printed, line)
    used = {
        line.split()[2] if line.startswith("--user") else line.split()[0] for line, *_ in on_sqlite
    }
    assert used | {"serve", "worker", "chunk", "copy", "sweep"} == set(COMMANDS), (
        "a command of the CLI is missing from this test"
    )
