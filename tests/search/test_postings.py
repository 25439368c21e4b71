"""The word index's postings in memory: the same ranking and scores as FTS5's bm25()
over the same rows, kept equal to the database through imports and deletes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.engine import Connection

from mindory.library import Library
from mindory.search.postings import WordPostings, merge
from mindory.store.fts import Filters
from mindory.store.words_fts import (
    _ranked,
    current_chunk_ids,
    index_totals,
    term_row_ids,
    term_rows,
    tokens_of,
)
from tests.conftest import SAMPLES


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connection]:
    with Library.open(tmp_path_factory.mktemp("postings") / "lib.sqlite") as lib:
        list(lib.import_many([SAMPLES]))
        with lib.state.engine.connect() as c:
            yield c


@pytest.fixture(scope="module")
def rows(conn: Connection) -> list[tuple[int, str]]:
    return term_rows(conn, term_row_ids(conn))


@pytest.fixture(scope="module")
def vocabulary(rows: list[tuple[int, str]]) -> list[str]:
    words: dict[str, None] = {}
    for _, terms in rows:
        words.update(dict.fromkeys(tokens_of(terms)))
    return sorted(words)


def _search(wp: WordPostings, conn: Connection, terms: list[str], limit: int = 30) -> list:
    n, tokens = index_totals(conn)
    usable = wp.masks(current_chunk_ids(conn))
    return wp.search(terms, rows=n, total_tokens=tokens, limit=limit, usable=usable)


def test_totals_are_fts5s(conn: Connection, rows: list[tuple[int, str]]) -> None:
    assert WordPostings.build(rows).totals() == index_totals(conn)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_ranking_and_scores_are_fts5s_bm25(
    conn: Connection, rows: list[tuple[int, str]], vocabulary: list[str], data: st.DataObject
) -> None:
    wp = WordPostings.build(rows)
    terms = data.draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=6))
    expected = _ranked(conn, terms, 30, Filters())
    got = _search(wp, conn, terms)
    assert [i for i, _ in got] == [i for i, _ in expected]
    for (_, a), (_, b) in zip(got, expected):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9)


def test_segments_removals_and_merges_change_nothing(
    conn: Connection, rows: list[tuple[int, str]], vocabulary: list[str]
) -> None:
    whole = WordPostings.build(rows)
    odd = [r for r in rows if r[0] % 2]
    pieces = WordPostings.build(odd)
    pieces.add(r for r in rows if not r[0] % 2)
    assert len(pieces.segments) == 2
    # Rows removed and added back (a re-import) leave a masked copy behind.
    some = np.array([i for i, _ in rows[::5]], dtype=np.int64)
    pieces.remove(some)
    pieces.add(r for r in rows if r[0] in set(some.tolist()))
    merged = WordPostings([merge(pieces.segments, pieces.alive)])
    assert np.array_equal(pieces.ids(), whole.ids())
    assert pieces.totals() == merged.totals() == whole.totals()
    for terms in (vocabulary[:3], vocabulary[10:12], vocabulary[-4:], ["the", "whale"]):
        assert _search(pieces, conn, terms) == _search(whole, conn, terms)
        assert _search(merged, conn, terms) == _search(whole, conn, terms)


def test_ties_go_to_the_smaller_id() -> None:
    wp = WordPostings.build([(9, "river"), (3, "river"), (5, "bank")])
    found = wp.search(["river"], rows=3, total_tokens=3, limit=1, usable=wp.masks(wp.ids()))
    assert [i for i, _ in found] == [3]


def test_the_file_round_trips_and_refuses_damage(
    tmp_path: Path, conn: Connection, rows: list[tuple[int, str]], vocabulary: list[str]
) -> None:
    wp = WordPostings.build(rows)
    path = tmp_path / "lib.sqlite.words"
    wp.save(path, {"analysis": "a1"})
    loaded = WordPostings.load(path)
    assert loaded is not None
    again, facts = loaded
    assert facts["analysis"] == "a1"
    assert _search(again, conn, vocabulary[:4]) == _search(wp, conn, vocabulary[:4])
    path.write_bytes(path.read_bytes()[:1000])
    assert WordPostings.load(path) is None
    assert WordPostings.load(tmp_path / "missing.words") is None


def test_one_chunk_twice_is_refused() -> None:
    with pytest.raises(Exception, match="one chunk twice"):
        WordPostings.build([(1, "a"), (1, "b")])


# ----------------------------------------------------------------- through the library


def _words(lib: Library, query: str, book: str | None = None) -> list[int]:
    found = lib.search(query, k=10, mode="words", book=book)
    return [h.row_id for h in found.hits]


def test_the_library_ranks_by_the_postings_and_keeps_them_equal(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    with Library.open(db) as lib:
        lib.import_book(SAMPLES / "news-from-nowhere.txt")
        store = lib.state.words
        queries = ["river thames boat", "old man guest", "宝玉 黛玉", "the"]
        by_fts = {q: _words(lib, q) for q in queries}  # below the threshold: FTS5
        assert store.loaded is None
        store.min_rows = 0
        assert {q: _words(lib, q) for q in queries} == by_fts
        assert store.loaded is not None and store.loaded.status == "built"
        assert (tmp_path / "lib.sqlite.words").exists()
        # Another book: repaired from its rows, and found.
        lib.import_book(SAMPLES / "qiaoshi-yanyi.txt")
        hits = lib.search("宝玉 黛玉", k=10, mode="words").hits
        assert store.loaded.status == "repaired"
        store.min_rows = 10**9
        fts_hits = lib.search("宝玉 黛玉", k=10, mode="words").hits
        assert [h.row_id for h in hits] == [h.row_id for h in fts_hits]
        store.min_rows = 0
        book = hits[0].book
        assert _words(lib, "river thames", book=book) == []  # a filter to the other book
        # Deleted: gone from the postings too.
        lib.delete_book(book)
        assert all(h.book != book for h in lib.search("宝玉 黛玉", k=10, mode="words").hits)
        assert store.loaded.postings.totals() == index_totals_of(lib)
    # Reopened: the file is read, not rebuilt.
    with Library.open(db) as lib:
        lib.state.words.min_rows = 0
        assert _words(lib, "river thames boat")
        assert lib.state.words.loaded is not None
        assert lib.state.words.loaded.status == "loaded"


def test_a_damaged_or_foreign_file_is_rebuilt(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    with Library.open(db) as lib:
        lib.import_book(SAMPLES / "news-from-nowhere.txt")
        lib.state.words.min_rows = 0
        expected = _words(lib, "river thames boat")
    (tmp_path / "lib.sqlite.words").write_bytes(b"not an index")
    with Library.open(db) as lib:
        lib.state.words.min_rows = 0
        assert _words(lib, "river thames boat") == expected
        assert lib.state.words.loaded.status == "built"
        with lib.state.engine.begin() as c:
            c.execute(text("UPDATE library_facts SET value = 'other' WHERE key = 'word_analysis'"))
    with Library.open(db) as lib:
        lib.state.words.min_rows = 0
        assert _words(lib, "river thames boat") == expected
        assert lib.state.words.loaded.status == "built"  # another analysis on record


def index_totals_of(lib: Library) -> tuple[int, int]:
    with lib.state.engine.connect() as c:
        return index_totals(c)


def test_reindex_makes_the_postings_of_a_large_library(tmp_path: Path) -> None:
    with Library.open(tmp_path / "lib.sqlite") as lib:
        lib.import_book(SAMPLES / "news-from-nowhere.txt")
        lib.reindex()
        assert lib.state.words.loaded is None  # below the threshold: FTS5 answers
        lib.state.words.min_rows = 0
        lib.reindex()
        assert lib.state.words.loaded is not None
        assert (tmp_path / "lib.sqlite.words").exists()


@pytest.mark.parametrize("budget", [40, 300, 2500])
def test_below_the_exact_size_the_postings_rank_as_fts5s_budgeted_list(
    conn: Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """Below EXACT_MIN the postings answer with words_search's list (the rarest terms,
    their best re-scored), so which of the two answers never changes a ranking."""
    import mindory.search.word_store as ws
    from mindory.store.words_fts import words_search

    monkeypatch.setattr(ws, "BM25_BUDGET", budget)
    store = ws.WordStore(tmp_path / "lib.words", min_rows=0)
    queries = [
        ["river", "thames", "boat", "old", "man"],
        ["guest", "hous", "the", "day", "time", "come"],
        ["宝玉", "黛玉", "说", "道"],
        ["nowher", "ellen", "dick", "hammond", "clara", "love"],
        ["qqq"],
    ]
    for terms in queries:
        fts = words_search(conn, terms, limit=10, filters=Filters(), budget=budget)
        got = store.search(conn, terms, 10, Filters())
        assert got is not None
        assert [i for i, _ in got] == [i for i, _ in fts], terms
        assert np.allclose([s for _, s in got], [s for _, s in fts], rtol=0, atol=1e-9)


def test_a_process_that_keeps_searching_uses_the_postings_from_fewer_rows(
    conn: Connection, tmp_path: Path
) -> None:
    import mindory.search.word_store as ws

    rows = index_totals(conn)[0]
    store = ws.WordStore(tmp_path / "lib.words", min_rows=rows + 1, serve_min_rows=rows)
    for _ in range(ws.WARM_SEARCHES):  # a one-off search: FTS5 answers, nothing is made
        assert store.search(conn, ["river"], 10, Filters()) is None
    assert store.loaded is None and not (tmp_path / "lib.words").exists()
    assert store.search(conn, ["river"], 10, Filters())  # then the postings
    assert store.loaded is not None and (tmp_path / "lib.words").exists()
