"""``copy --to``: a SQLite library copied into PostgreSQL is the same library: verify
passes, every book exports byte for byte the same, reading state and search agree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mindory.cli import main as cli_main
from mindory.errors import MindoryError
from mindory.library import Library
from mindory.reading.positions import PlaceIn
from tests.conftest import SAMPLES
from tests.pg import PgServer

WASTE = SAMPLES / "wasteland.epub"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    """The samples in SQLite, embedded, with a reader, highlights, a position, a bookmark."""
    with Library.open(tmp_path_factory.mktemp("copy") / "lib.sqlite") as lib:
        list(lib.import_many([SAMPLES]))
        lib.embed()
        alice = lib.add_reader("alice").reader.id
        book = next(b.id for b in lib.books() if b.file_name == WASTE.name)
        lib.highlight_quote(book, "Unreal City", note="a note")
        lib.highlight_quote(book, "April is the cruellest month", reader=alice)
        lib.set_position(
            book, PlaceIn(section=0, offset=10), device="phone", modified="2026-12-01T08:00:00Z"
        )
        lib.add_bookmark(book, PlaceIn(section=0, progression=0.5), title="half", reader=alice)
        yield lib


def _exports(lib: Library) -> dict[str, bytes]:
    return {b.id: "\n".join(lib.export(b.id)).encode("utf-8") for b in lib.books()}


def test_copy_into_postgresql_is_the_same_library(
    source: Library, pg_server: PgServer, pg_template: str
) -> None:
    url = pg_server.create_database("copy_api", template=pg_template)
    report = source.copy_to(url)
    assert report.verified and report.problems == (), report.problems
    assert report.rows["books"] == 3 and report.rows["chunk_vectors"] == report.rows["chunks"]
    with Library.open(url) as copy:
        assert copy.engine.dialect.name == "postgresql"
        assert _exports(copy) == _exports(source)  # byte-identical, every book
        assert [b.to_json() for b in copy.books()] == [b.to_json() for b in source.books()]
        book = next(b.id for b in source.books() if b.file_name == WASTE.name)
        alice = next(r.id for r in source.readers() if r.name == "alice")
        for reader in (None, alice):
            assert copy.highlights(book, reader=reader) == source.highlights(book, reader=reader)
            assert copy.bookmarks(book, reader=reader) == source.bookmarks(book, reader=reader)
        assert copy.position(book) == source.position(book)
        for q in ("Unreal City", "the old house by the river", "曹操"):
            for mode in ("words", "trigram", "vector", "hybrid"):
                a = [h.chunk for h in source.search(q, k=5, mode=mode).hits]
                b = [h.chunk for h in copy.search(q, k=5, mode=mode).hits]
                # words: the same BM25; vectors: exact on both. The trigram list is
                # ranked otherwise on PostgreSQL (docs/search.md, "PostgreSQL").
                if mode in ("words", "vector"):
                    assert a == b, (q, mode)
                elif mode == "hybrid":
                    assert a[:1] == b[:1], (q, mode)
                else:
                    assert len(b) == len(a), (q, mode)
        # new rows after the copy get new ids (the sequences moved past the copied ones)
        copy.add_reader("bob")
        assert copy.import_book(SAMPLES / "wasteland.epub").status == "unchanged"
        # a copy into a library that holds books is refused, and changes nothing
        with pytest.raises(MindoryError, match="not empty"):
            source.copy_to(url)
        assert len(copy.books()) == 3


def test_copy_command(source: Library, pg_server: PgServer, pg_template: str) -> None:
    url = pg_server.create_database("copy_cli", template=pg_template)
    db = source.path
    assert isinstance(db, Path)
    r = CliRunner().invoke(cli_main, ["--db", str(db), "copy", "--to", url, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["verified"] and doc["rows"]["books"] == 3
    r = CliRunner().invoke(cli_main, ["--db", url, "verify"])
    assert r.exit_code == 0, r.output
    # the URL alone (MINDORY_DATABASE_URL) switches every command to PostgreSQL
    env = {"MINDORY_DATABASE_URL": url, "MINDORY_DB": None}
    r = CliRunner().invoke(cli_main, ["books", "--json"], env=env)
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 3, r.output
    r = CliRunner().invoke(cli_main, ["search", "Unreal City", "--json"], env=env)
    assert r.exit_code == 0, r.output
    assert "Unreal City" in r.stdout
