"""The lexical indexes' SQL on PostgreSQL (revision 0007): the word index over
``to_tsvector('simple', chunk_terms.terms)`` (GIN) and the trigram index over
``lower(chunks.text)`` (``pg_trgm`` GIN). The SQLite counterparts are
:mod:`mindory.store.words_fts` and :mod:`mindory.store.fts`; the search pipeline calls
these instead when ``conn.dialect.name == "postgresql"``.

**Words.** The GIN index finds the chunks; the ranking is not ``ts_rank`` (it has no
inverse document frequency: a common word would weigh as much as a rare one) but the
same BM25 the SQLite word index computes (:func:`mindory.store.words_fts.bm25_scores`'s
formula, FTS5's constants, the same tokens of the stored terms), with document
frequencies counted through the GIN index. As on SQLite, a query whose terms are held
by more than ``budget`` chunks is asked for by its rarest terms first and the best
candidates are scored with every term. The ``simple`` configuration still runs
PostgreSQL's parser, which splits tokens at apostrophes, ``_`` and ``+`` and splits
hyphenated words; the query goes through the same parser (``phraseto_tsquery``), so
finding is consistent, and scoring uses the SQLite tokens.

**Trigrams.** ``lower(text) LIKE '%term%'`` is what the scan of :func:`scan_search`
already asks; the ``pg_trgm`` index answers it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mindory.store.fts import Filters
from mindory.store.words_fts import BM25_BUDGET, bm25_of, phrase_tokens

__all__ = ["has_pg_indexes", "words_search"]


_TSV = "to_tsvector('simple'::regconfig, t.terms)"


def has_pg_indexes(conn: Connection) -> bool:
    """True when revision 0007's word index exists (PostgreSQL)."""
    return bool(
        conn.exec_driver_sql("SELECT to_regclass('ix_chunk_terms_tsv') IS NOT NULL").scalar()
    )


def _where(filters: Filters, params: dict[str, Any]) -> str:
    return filters.where(params, current="d.is_current")


def _doc_count(conn: Connection, term: str, cap: int | None = None) -> int:
    """Chunks (any derivation) whose terms hold ``term`` (a phrase of its tokens)."""
    inner = f"SELECT 1 FROM chunk_terms AS t WHERE {_TSV} @@ phraseto_tsquery('simple', :q)" + (
        " LIMIT :cap" if cap is not None else ""
    )
    params: dict[str, Any] = {"q": term}
    if cap is not None:
        params["cap"] = cap
    return int(conn.execute(text(f"SELECT count(*) FROM ({inner}) AS x"), params).scalar() or 0)


_STATS: dict[tuple[object, ...], tuple[int, float]] = {}


def _stats(conn: Connection) -> tuple[int, float]:
    """``(rows, average tokens per row)`` of the word index: exact (a scan of the terms),
    kept per process until the rows, the largest row id or the analysis change."""
    row = conn.execute(
        text(
            "SELECT count(*), max(chunk_id), (SELECT value FROM library_facts "
            "WHERE key = 'word_analysis') FROM chunk_terms"
        )
    ).first()
    key = (conn.engine.url.render_as_string(), *(tuple(row) if row is not None else ()))
    found = _STATS.get(key)
    if found is not None:
        return found
    tokens = conn.execute(
        text(
            "SELECT coalesce(sum(array_length(regexp_split_to_array(btrim(terms), "
            "'\\s+'), 1)), 0) FROM chunk_terms WHERE btrim(terms) <> ''"
        )
    ).scalar()
    n = int(row[0]) if row is not None else 0
    found = (n, (int(tokens or 0) / n if n else 0.0))
    if len(_STATS) > 64:
        _STATS.clear()
    _STATS[key] = found
    return found


def _candidates(
    conn: Connection, terms: Sequence[str], limit: int | None, filters: Filters
) -> list[tuple[int, str]]:
    """``(chunk row id, terms)`` of current chunks holding any of ``terms``."""
    params: dict[str, Any] = {}
    query = " || ".join(f"phraseto_tsquery('simple', :t{i})" for i in range(len(terms)))
    for i, term in enumerate(terms):
        params[f"t{i}"] = term
    # The GIN index first (MATERIALIZED): a planner without statistics on the indexed
    # expression (a fresh import) would otherwise parse every chunk's terms in a join.
    sql = (
        f"WITH t AS MATERIALIZED (SELECT t.chunk_id, t.terms FROM chunk_terms AS t "
        f"WHERE {_TSV} @@ ({query})) "
        "SELECT t.chunk_id, t.terms FROM t "
        "JOIN chunks AS c ON c.id = t.chunk_id JOIN derivations AS d ON d.id = c.derivation_id "
        f"WHERE {_where(filters, params)}"
    )
    if limit is not None:
        sql += " LIMIT :n"
        params["n"] = limit
    return [(int(i), str(t)) for i, t in conn.execute(text(sql), params).all()]


def words_search(
    conn: Connection,
    terms: Sequence[str],
    *,
    limit: int,
    filters: Filters | None = None,
    budget: int = BM25_BUDGET,
) -> list[tuple[int, float]]:
    """``(chunk row id, BM25 score)`` best first over current derivations, for any of the
    analysed query ``terms`` (OR): PostgreSQL's :func:`mindory.store.words_fts.words_search`."""
    filters = filters or Filters()
    phrases = {t: phrase_tokens(t) for t in dict.fromkeys(terms)}
    phrases = {t: p for t, p in phrases.items() if p}
    if not phrases:
        return []
    n_rows, avgdl = _stats(conn)
    if n_rows == 0:
        return []
    held = {t: _doc_count(conn, t) for t in phrases}
    wanted = [t for t in phrases if held[t]]
    if not wanted:
        return []
    chosen = wanted
    if sum(held[t] for t in wanted) > budget:
        chosen = []
        rows = 0
        for term in sorted(wanted, key=lambda t: (held[t], t)):
            if chosen and rows + held[term] > budget:
                break
            chosen.append(term)
            rows += held[term]
    idf = {t: max(1e-6, math.log((n_rows - df + 0.5) / (df + 0.5))) for t, df in held.items()}
    scored: list[tuple[int, float]] = []
    for chunk_id, terms_text in _candidates(conn, chosen, None, filters):
        score = bm25_of(terms_text, phrases, idf, avgdl)
        if score > 0:
            scored.append((chunk_id, score))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:limit]
