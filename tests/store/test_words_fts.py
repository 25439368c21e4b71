"""The word index's budgeted search: re-scored chunks get exactly FTS5's bm25()."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.engine import Connection

from mindory.library import Library
from mindory.store.fts import Filters
from mindory.store.words_fts import _ranked, bm25_scores, tokens_of, words_search
from tests.conftest import SAMPLES


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connection]:
    with Library.open(tmp_path_factory.mktemp("words") / "lib.sqlite") as lib:
        list(lib.import_many([SAMPLES]))
        with lib.state.engine.connect() as c:
            yield c


def _vocabulary(conn: Connection) -> list[str]:
    rows = conn.execute(text("SELECT terms FROM chunk_terms ORDER BY chunk_id")).scalars()
    words: dict[str, None] = {}
    for terms in rows:
        words.update(dict.fromkeys(tokens_of(terms)))
    return sorted(words)


@pytest.fixture(scope="module")
def vocabulary(conn: Connection) -> list[str]:
    return _vocabulary(conn)


def test_tokens_split_where_unicode61_splits() -> None:
    assert tokens_of("whale ship") == ["whale", "ship"]
    assert tokens_of("o'clock 宝玉 Café") == ["o", "clock", "宝玉", "café"]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_rescored_chunks_get_fts5s_own_bm25(
    conn: Connection, vocabulary: list[str], data: st.DataObject
) -> None:
    terms = data.draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=6))
    ranked = _ranked(conn, terms, 30, Filters())
    scores = bm25_scores(conn, terms, [i for i, _ in ranked])
    for chunk, fts5_score in ranked:
        assert scores[chunk] == pytest.approx(fts5_score, rel=1e-9, abs=1e-9)


def test_a_budgeted_query_ranks_by_every_term(conn: Connection, vocabulary: list[str]) -> None:
    # Common terms held by many chunks and a rare one: with a tiny budget only the
    # rare term generates candidates, and their scores are still the full bm25().
    counts = {
        t: int(
            conn.execute(
                text("SELECT count(*) FROM chunk_terms_fts WHERE chunk_terms_fts MATCH :q"),
                {"q": f'"{t}"'},
            ).scalar()
            or 0
        )
        for t in vocabulary[::7]
    }
    common = sorted(counts, key=lambda t: -counts[t])[:2]
    rare = next(t for t in sorted(counts, key=counts.__getitem__) if counts[t] >= 2)
    terms = [*common, rare]
    budgeted = words_search(conn, terms, limit=10, budget=counts[rare])
    full = dict(_ranked(conn, terms, 10_000, Filters()))
    assert budgeted
    for chunk, score in budgeted:
        assert score == pytest.approx(full[chunk], rel=1e-9)
    # Every chunk holding the rare term is a candidate: the best of them come back.
    assert budgeted[0][1] == pytest.approx(
        max(
            s for c, s in full.items() if c in {c for c, _ in _ranked(conn, [rare], 100, Filters())}
        )
    )


def test_tokens_keep_the_combining_diacritics_fts5_keeps() -> None:
    # unicode61 continues a token over some combining marks (U+0300–U+0331): Pepys's
    # "coronac̃on" is one token there, and must be one here (the postings' lengths).
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 0')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    samples = [f"a{chr(c)}b" for c in range(0x0300, 0x0370)] + ["coronac\u0303on", "\u0301b"]
    db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", list(enumerate(samples)))
    for n, sample in enumerate(samples):
        fts5 = [r[0] for r in db.execute("SELECT term FROM v WHERE doc = ? ORDER BY offset", (n,))]
        assert tokens_of(sample) == fts5, repr(sample)
