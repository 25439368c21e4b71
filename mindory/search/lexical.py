"""Lexical search: which terms of a query the full-text index is asked for, and how the
work stays bounded (the SQL itself is :mod:`mindory.store.fts`).

* a word of three or more characters is one phrase (its trigrams in a row, so it
  also matches inside longer words: *whale* finds *whales*);
* a CJK run of three or more characters gives its overlapping trigrams (so a question
  that shares only some characters with the text still finds it) and, when longer
  than three, the whole run as a phrase (a rare phrase weighs heavily, so exact
  quotes come first);
* a two-character CJK run (宝玉, 寶玉, 曹操) is expanded into the indexed trigrams that
  start with it, up to :data:`~mindory.store.fts.MAX_EXPANSIONS`; a term with more
  continuations than that is too common to rank by;
* when nothing else is left (a one-character query, or only two-letter words), the
  chunks are scanned (:func:`mindory.store.fts.scan_search`).

SQLite asks its FTS5 trigram table; PostgreSQL asks the same questions of ``pg_trgm``
(:mod:`mindory.store.pg_search`: the same counts, expansions and FTS5 ``bm25()``), so
both databases answer the same list (issue 24; ``tests/search/test_pg_parity.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from sqlalchemy.engine import Connection

from mindory.search.analysis import QueryTerms, unique
from mindory.store import pg_search
from mindory.store.fts import (
    Filters,
    bm25_search,
    capped_count,
    chunk_texts,
    fts_quote,
    max_chunk_id,
    scan_search,
    short_term_expansions,
)

__all__ = ["fts_expression", "fts_quote", "lexical_search", "scan"]


MAX_FTS_TERMS = 64  # OR terms of one lexical query (longest first)


# A term held by this many chunks or more does not generate candidates when rarer
# terms exist (bm25() costs ~1 µs per matching chunk; docs/search.md). Libraries
# smaller than this use every term.
SELECTIVE_ROWS = 1000


# The rarest terms are used until the chunks they hold add up to this many; the best
# RERANK_DEPTH candidates are then re-scored with the other terms.
BM25_BUDGET = 4000


RERANK_DEPTH = 100


def fts_expression(terms: Sequence[str], expansions: Sequence[str] = ()) -> str | None:
    """``"t1" OR "t2" OR …`` (longest terms first, at most MAX_FTS_TERMS), or None."""
    ordered = sorted(unique(terms), key=lambda t: (-len(t), t))[:MAX_FTS_TERMS]
    phrases = [fts_quote(t) for t in ordered] + [fts_quote(t) for t in unique(expansions)]
    return " OR ".join(phrases) if phrases else None


def lexical_search(
    conn: Connection,
    terms: QueryTerms,
    *,
    limit: int,
    filters: Filters | None = None,
    selective_rows: int = SELECTIVE_ROWS,
) -> list[tuple[int, float]]:
    """``(chunk row id, score)`` best first, over current derivations; SQLite FTS5.

    The score is ``-bm25()`` (higher is better). bm25() costs one to two microseconds
    per matching chunk, so the work is bounded: every term is counted cheaply (up to
    ``selective_rows``); a term held by that many chunks or more does not take part
    when rarer terms exist (like a stop word, it would add many candidates and little
    weight), and the rarer terms are taken rarest first until the chunks they hold
    reach :data:`BM25_BUDGET`. A query of common terms only asks for the chunks that
    hold both of its two longest terms (else the longest). Falls back to :func:`scan_search`
    when the query has nothing the trigram index can look up.
    """
    filters = filters or Filters()
    expansions: list[tuple[str, int]] = []
    unexpandable: list[str] = []
    for term in terms.short_terms():
        found = _expansions(conn, term)
        if found is None:
            unexpandable.append(term)
        else:
            expansions.extend(found)
    phrases = sorted(unique(terms.fts_terms()), key=lambda t: (-len(t), t))[:MAX_FTS_TERMS]
    if not phrases and not expansions:
        if terms.short_terms() and not unexpandable:
            return []  # a two-character term that occurs nowhere
        return scan(conn, terms, limit=limit, filters=filters)
    counts = _counts(conn, phrases, selective_rows)
    # Counts below the cap are exact: PostgreSQL's bm25 takes them as document frequencies.
    exact = {p: n for p, n in counts.items() if n < selective_rows} | dict(expansions)
    selective = sorted((p for p in phrases if counts[p] < selective_rows), key=counts.__getitem__)
    if selective:
        # The rarest terms, until the chunks they hold reach the budget: bm25() then
        # ranks a few thousand chunks, not every chunk holding a common word. The
        # other terms still count: the best candidates are re-scored with them.
        chosen: list[str] = []
        rows = 0
        for p in selective:
            if chosen and rows + counts[p] > BM25_BUDGET:
                break
            chosen.append(p)
            rows += counts[p]
        rest = [p for p in phrases if p not in chosen and counts[p] > 0]
        rare = [t for t, doc in expansions if doc < selective_rows]
        if not rest:
            return _bm25(conn, chosen + rare, limit, filters, exact)
        depth = max(limit, RERANK_DEPTH)
        ranked = _bm25(conn, chosen + rare, depth, filters, exact)
        return _rescore(conn, ranked, rest, counts)[:limit]
    if expansions:
        return _bm25(conn, [t for t, _ in expansions], limit, filters, exact)
    # Only common terms: the chunks holding both of the two longest (an intersection
    # is cheap to rank), else those holding the longest one.
    common = [p for p in phrases if counts[p] > 0]
    if not common:
        return []
    if len(common) >= 2:
        both = _bm25(conn, common[:2], limit, filters, exact, all_of=True)
        if both:
            return both
    return _bm25(conn, common[:1], limit, filters, exact)


def _postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def _expansions(conn: Connection, term: str) -> list[tuple[str, int]] | None:
    """The indexed trigrams starting with a two-character term (FTS5's vocabulary, or
    the chunks on PostgreSQL), None when too many."""
    if _postgres(conn):
        return pg_search.trigram_expansions(conn, term)
    return short_term_expansions(conn, term)


def _counts(conn: Connection, phrases: Sequence[str], cap: int) -> dict[str, int]:
    """How many chunks hold each phrase, counting no further than ``cap``."""
    if _postgres(conn):
        return pg_search.trigram_counts(conn, phrases, cap)  # one statement
    return {p: capped_count(conn, p, cap) for p in phrases}


def _bm25(
    conn: Connection,
    phrases: Sequence[str],
    limit: int,
    filters: Filters,
    doc_counts: Mapping[str, int],
    *,
    all_of: bool = False,
) -> list[tuple[int, float]]:
    """FTS5's ranking of the OR (``all_of``: AND) of ``phrases`` over current chunks;
    on PostgreSQL the same scores computed from ``pg_trgm`` (``doc_counts``: the exact
    chunk counts known already)."""
    if _postgres(conn):
        return pg_search.trigram_bm25(
            conn, phrases, limit, filters, all_of=all_of, doc_counts=doc_counts
        )
    expression = (" AND " if all_of else " OR ").join(map(fts_quote, phrases))
    return bm25_search(conn, expression, limit, filters)


BM25_K1 = 1.2  # FTS5's bm25() constant (columnsize=0: no length normalization)


def _rescore(
    conn: Connection,
    ranked: Sequence[tuple[int, float]],
    phrases: Sequence[str],
    counts: Mapping[str, int],
) -> list[tuple[int, float]]:
    """Add to each candidate's bm25() score what ``phrases`` (left out of the FTS
    query) would have added: the same formula, with idf from their counted chunks
    (a common term's count stops at the cap, so its idf is a little high)."""
    if not ranked:
        return []
    n = max_chunk_id(conn)  # >= the number of indexed chunks
    idf = {}
    for p in phrases:
        df = counts[p]
        idf[p] = max(1e-6, math.log((n - df + 0.5) / (df + 0.5))) if n > df else 1e-6
    texts = chunk_texts(conn, [i for i, _ in ranked])
    out: list[tuple[int, float]] = []
    for i, score in ranked:
        low = str(texts.get(i, "")).lower()
        for p in phrases:
            tf = low.count(p)
            if tf:
                score += idf[p] * tf * (BM25_K1 + 1) / (tf + BM25_K1)
        out.append((i, score))
    out.sort(key=lambda item: -item[1])
    return out


def scan(
    conn: Connection, terms: QueryTerms, *, limit: int, filters: Filters | None = None
) -> list[tuple[int, float]]:
    """Chunks holding the query's terms by a full scan (:func:`mindory.store.fts.scan_search`)."""
    return scan_search(conn, terms.scan_terms()[:MAX_FTS_TERMS], limit=limit, filters=filters)


QUOTE_MIN_CHARS = 16  # a query this long (8 for CJK) may be a quote of the book
QUOTE_MIN_CHARS_CJK = 8
QUOTE_MAX_HOLDERS = 20  # held verbatim by more chunks than this: a common phrase


def quote_holders(terms: QueryTerms, texts: Mapping[int, str]) -> list[int]:
    """Among the candidates' texts (chunk row id → normalized text), the chunks that hold
    the whole query verbatim (case folded, runs of white space as one), when it is long
    enough to be a quote and rare enough to point somewhere (else none).

    Only candidates are looked at (the first 50 of the fused list): a chunk holding a
    quote of 16 characters or more holds all of its words and trigrams, so every list
    ranks it high; asking the trigram index for the phrase over the whole library cost
    ~3 ms of every search at 100k chunks (it reads the doclists of every trigram of the
    question) and found nothing more on the eval sets."""
    phrase = " ".join(terms.query.split())
    cjk = sum(len(r) for r in terms.cjk_runs)
    if len(phrase) < (QUOTE_MIN_CHARS_CJK if cjk * 2 >= len(phrase) else QUOTE_MIN_CHARS):
        return []
    folded = phrase.lower()
    first = folded.split(" ", 1)[0]  # no white space inside: a cheap first test
    found = []
    for i, text in texts.items():
        low = text.lower()
        if first in low and (folded in low or folded in " ".join(low.split())):
            found.append(i)
    found.sort()
    return found if len(found) <= QUOTE_MAX_HOLDERS else []
