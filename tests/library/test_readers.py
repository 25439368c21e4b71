"""Readers through the Library: a token shown once and stored only as its hash, ids
derived from names, every reader's highlights, positions and bookmarks their own, and a
removed reader's data gone with them. The schema revision that adds readers keeps the
highlights made before it as the local reader's."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from mindory.errors import MindoryError, NotFoundError
from mindory.library import Library
from mindory.library.readers import reader_id_of
from mindory.reading.positions import LOCAL_READER, PlaceIn
from mindory.store.engine import downgrade, make_engine, upgrade
from tests.conftest import SAMPLES

NEWS = SAMPLES / "news-from-nowhere.txt"


@pytest.fixture
def lib(db_url: str) -> Iterator[Library]:
    """A new library on each backend (SQLite, PostgreSQL: tests/pg.py)."""
    with Library.open(db_url) as library:
        yield library


def test_add_list_and_tokens(lib: Library) -> None:
    assert not lib.has_readers() and lib.readers() == []
    made = lib.add_reader("alice")
    assert made.reader.id == reader_id_of("alice") and len(made.token) >= 40
    assert lib.has_readers()
    assert [r.name for r in lib.readers()] == ["alice"]
    assert lib.reader_for_token(made.token) == made.reader.id
    assert lib.reader_for_token(made.token + "x") is None and lib.reader_for_token("") is None
    assert lib.reader_id("alice") == made.reader.id and lib.reader_id(None) == LOCAL_READER
    # only the token's hash is stored
    with lib.engine.connect() as conn:
        stored = conn.execute(text("SELECT token_hash FROM readers")).scalar_one()
        rows = conn.execute(text("SELECT * FROM readers")).all()
    assert stored == hashlib.sha256(made.token.encode()).hexdigest()
    assert all(made.token not in str(v) for row in rows for v in row)
    assert "token" not in {k for r in lib.readers() for k in r.to_json()}
    with pytest.raises(MindoryError, match="already"):
        lib.add_reader("alice")
    for bad in ("", "local", "a b", "x" * 65, "-dash", "naïve"):
        with pytest.raises(MindoryError):
            lib.add_reader(bad)
    with pytest.raises(NotFoundError):
        lib.reader_id("nobody")


def test_each_reader_has_their_own_and_removal_takes_it(lib: Library) -> None:
    book = lib.import_book(NEWS, embed=False).book
    alice = lib.add_reader("alice").reader.id
    bob = lib.add_reader("bob").reader.id
    start = lib.section(book, 2).info.source_start
    for who in (alice, bob, None):
        lib.add_highlight(book, section=2, start=start + 10, end=start + 30, reader=who)
        lib.set_position(
            book, PlaceIn(section=2, offset=start), device="d", modified="2026-12-01", reader=who
        )
        lib.add_bookmark(book, PlaceIn(section=2, offset=start + 5), reader=who)
    ha = lib.highlights(book, reader=alice)
    hb = lib.highlights(book, reader=bob)
    assert len(ha) == len(hb) == len(lib.highlights(book)) == 1 and ha[0].id != hb[0].id
    with pytest.raises(NotFoundError):
        lib.highlight(book, ha[0].id, reader=bob)
    with pytest.raises(NotFoundError):
        lib.update_highlight(book, ha[0].id, note="bob's", reader=bob)
    with pytest.raises(NotFoundError):
        lib.delete_highlight(book, ha[0].id, reader=bob)
    ba = lib.bookmarks(book, reader=alice)
    with pytest.raises(NotFoundError):
        lib.bookmark(book, ba[0].id, reader=bob)
    with pytest.raises(NotFoundError):
        lib.delete_bookmark(book, ba[0].id, reader=bob)
    assert lib.bookmarks(book, reader=bob)[0].id != ba[0].id
    assert lib.position(book, reader=alice).id != lib.position(book, reader=bob).id

    gone = lib.remove_reader("alice")
    assert (gone.highlights, gone.positions, gone.bookmarks) == (1, 1, 1)
    assert [r.name for r in lib.readers()] == ["bob"]
    assert lib.highlights(book, reader=alice) == [] and lib.bookmarks(book, reader=alice) == []
    with pytest.raises(NotFoundError):
        lib.position(book, reader=alice)
    assert len(lib.highlights(book, reader=bob)) == 1 and len(lib.highlights(book)) == 1
    with pytest.raises(NotFoundError):
        lib.remove_reader("alice")
    with pytest.raises(MindoryError, match="local"):
        lib.remove_reader("local")
    # the same name again is the same id, with a new token and nothing of before
    back = lib.add_reader("alice")
    assert back.reader.id == alice and lib.highlights(book, reader=alice) == []


def test_revision_0005_keeps_old_highlights_as_the_local_readers(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with Library.open(db) as lib:
        book = lib.import_book(NEWS, embed=False).book
        start = lib.section(book, 1).info.source_start
        made = lib.add_highlight(book, section=1, start=start, end=start + 12)
    engine = make_engine(f"sqlite:///{db}", 5000)
    downgrade(engine, "0004")
    with engine.connect() as conn:
        cols = [r[1] for r in conn.exec_driver_sql("PRAGMA table_info(highlights)")]
        assert "reader_id" not in cols
        tables = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master")}
        assert not tables & {"readers", "positions", "bookmarks"}
    upgrade(engine)
    engine.dispose()
    with Library.open(db) as lib:
        assert [h.id for h in lib.highlights(book)] == [made.id]
        lib.add_reader("zoe")
        assert lib.highlights(book, reader=lib.reader_id("zoe")) == []
    check = create_engine(f"sqlite:///{db}")
    with check.connect() as conn:
        assert conn.execute(text("SELECT reader_id FROM highlights")).scalars().all() == ["local"]
    check.dispose()
