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

**Trigrams.** The same list as SQLite's FTS5 trigram index (issue 24): the same
phrases (:func:`mindory.search.lexical.lexical_search` asks both databases the same
questions), ranked by FTS5's own ``bm25()`` computed in Python. ``pg_trgm``'s GIN index
over ``lower(text)`` finds the chunks holding a phrase (``LIKE ANY``); their texts are
folded and counted as FTS5's trigram tokenizer sees them (``lower(text) || '\\n'``, so a
two-character term at a chunk's end still starts a trigram), and the score uses FTS5's
constants and totals: ``N`` = the chunks of every derivation, the average length of
``length(text) - 1`` trigrams, and — what ``columnsize=0`` makes FTS5 do — a document
length of ``-1`` (no length normalization). The sums run in the same order on the same
doubles, so the scores are FTS5's to the last bit and ties fall to the row id on both.
A two-character CJK term has no trigram: its "vocabulary" (the trigrams that start with
it, FTS5's ``chunks_fts_vocab``) is read from the chunks holding it, which ``pg_trgm``
cannot find by its index (a scan of ``chunks``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from mindory.store.fts import MAX_EXPANSIONS, Filters
from mindory.store.words_fts import BM25_B, BM25_BUDGET, BM25_K1, bm25_of, phrase_tokens

__all__ = [
    "has_pg_indexes",
    "trigram_bm25",
    "trigram_counts",
    "trigram_expansions",
    "words_search",
]


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


# ---------------------------------------------------------------------- trigram list

_LIKE_ESCAPE = str.maketrans({"\\": "\\\\", "%": "\\%", "_": "\\_"})
MANY_PHRASES = 16  # more trigram phrases than this: a two-character term's expansions


def _needle(phrase: str) -> str:
    """What every chunk holding ``phrase`` in its folded text holds in ``lower(text)``:
    the phrase without the newline FTS5 adds after a text (a chunk ending with a
    two-character term holds the trigram ``term + "\n"``)."""
    return phrase.replace("\n", "")


def _holding(needles: Sequence[str], all_of: bool, params: dict[str, Any]) -> tuple[str, bool]:
    """The SQL condition of a chunk ``c`` holding any (``all_of``: every) needle, and
    whether ``pg_trgm``'s index answers it (every needle has a trigram). Otherwise the
    chunks are scanned, and a needle without letter case is looked for in ``text``
    itself: the same chunks, and ``lower()`` of every chunk was two thirds of the scan."""
    if all(len(n) >= 3 for n in needles):
        params["pats"] = ["%" + n.translate(_LIKE_ESCAPE) + "%" for n in needles]
        return f"lower(c.text) LIKE {'ALL' if all_of else 'ANY'} (:pats)", True
    conditions = []
    for i, n in enumerate(needles):
        if n.lower() == n == n.upper():
            params[f"n{i}"] = n
            conditions.append(f"strpos(c.text, :n{i}) > 0")
        else:
            params[f"n{i}"] = "%" + n.translate(_LIKE_ESCAPE) + "%"
            conditions.append(f"lower(c.text) LIKE :n{i}")
    return "(" + (" AND " if all_of else " OR ").join(conditions) + ")", False


@contextmanager
def _index_first(conn: Connection, indexable: bool) -> Iterator[None]:
    """Within the block, the planner takes ``pg_trgm``'s index: it prices ``lower(text)``
    of a TOASTed chunk far too low and scans a small library instead (~50 µs a chunk:
    70 ms a question at 1k chunks, against a few through the index)."""
    if not indexable:
        yield
        return
    was = conn.exec_driver_sql(
        "SELECT current_setting('enable_seqscan'), set_config('enable_seqscan', 'off', true)"
    ).scalar()
    try:
        yield
    finally:
        conn.exec_driver_sql("SELECT set_config('enable_seqscan', %(v)s, true)", {"v": was})


def _folded(chunk_text: str) -> str:
    # What FTS5's trigram tokenizer indexes: the case-folded text and a newline.
    return chunk_text.lower() + "\n"


def _occurrences(folded: str, phrase: str) -> int:
    """Instances of ``phrase`` in ``folded``, overlapping ones too (FTS5 counts a
    phrase at every token position it starts at)."""
    n = 0
    at = folded.find(phrase)
    while at >= 0:
        n += 1
        at = folded.find(phrase, at + 1)
    return n


def _cover(phrases: Sequence[str]) -> list[str]:
    """Needles that every chunk holding any of ``phrases`` holds, few: the expansions
    of a two-character term (up to 256 trigrams) by the term itself."""
    unique = list(dict.fromkeys(_needle(p) for p in phrases))
    if len(unique) <= MANY_PHRASES:
        return unique
    by_start: dict[str, list[str]] = {}
    for n in unique:
        by_start.setdefault(n[:2] if len(n) <= 3 else n, []).append(n)
    return [k if len(ns) > 1 else ns[0] for k, ns in by_start.items()]


def _frequencies(phrases: Sequence[str]) -> Callable[[str], list[int]]:
    """A function of a folded text: each phrase's instances in it. Many trigrams (a
    term's expansions) are tallied at the places of their first two characters."""
    if len(phrases) <= MANY_PHRASES:
        return lambda folded: [_occurrences(folded, p) for p in phrases]
    starts = {p[:2] for p in phrases if len(p) == 3}
    longer = [len(p) != 3 for p in phrases]

    def count(folded: str) -> list[int]:
        tally: Counter[str] = Counter()
        for start in starts:
            at = folded.find(start)
            while at >= 0:
                tally[folded[at : at + 3]] += 1
                at = folded.find(start, at + 1)
        return [
            _occurrences(folded, p) if long else tally[p]
            for p, long in zip(phrases, longer, strict=True)
        ]

    return count


def trigram_counts(conn: Connection, phrases: Sequence[str], cap: int | None) -> dict[str, int]:
    """How many chunks (any derivation) hold each phrase, counting no further than
    ``cap`` (None: exact); one statement. FTS5's ``capped_count`` on SQLite."""
    wanted = list(dict.fromkeys(phrases))
    if not wanted:
        return {}
    params: dict[str, Any] = {}
    limit = ""
    if cap is not None:
        limit = " LIMIT :cap"
        params["cap"] = cap
    parts = []
    for i, phrase in enumerate(wanted):
        params[f"p{i}"] = "%" + phrase.translate(_LIKE_ESCAPE) + "%"
        # (a phrase with FTS5's newline: only a chunk's end holds it, exactly; no index)
        held = f"lower(text) || E'\\n' LIKE :p{i}" if "\n" in phrase else f"lower(text) LIKE :p{i}"
        parts.append(f"(SELECT count(*) FROM (SELECT 1 FROM chunks WHERE {held}{limit}) AS x{i})")
    with _index_first(conn, all(len(p) >= 3 and "\n" not in p for p in wanted)):
        row = conn.execute(text("SELECT " + ", ".join(parts)), params).one()
    return {p: int(n or 0) for p, n in zip(wanted, row, strict=True)}


def trigram_expansions(conn: Connection, term: str) -> list[tuple[str, int]] | None:
    """The trigrams starting with ``term`` (a two-character CJK run) that the chunks'
    folded texts hold, with how many chunks hold each, in FTS5's vocabulary order;
    None when there are more than MAX_EXPANSIONS (SQLite: ``chunks_fts_vocab``)."""
    params: dict[str, Any] = {}
    held, _ = _holding([term], False, params)
    docs: Counter[str] = Counter()
    for (chunk_text,) in conn.execute(text(f"SELECT c.text FROM chunks AS c WHERE {held}"), params):
        folded = _folded(str(chunk_text))
        found: set[str] = set()
        at = folded.find(term)
        while at >= 0:
            if at + 3 <= len(folded):
                found.add(folded[at : at + 3])
            at = folded.find(term, at + 1)
        docs.update(found)
    if len(docs) > MAX_EXPANSIONS:
        return None
    return sorted(docs.items())  # code point order: fts5vocab's (UTF-8 bytes)


_TRIGRAM_STATS: dict[tuple[object, ...], tuple[int, int]] = {}


def _trigram_stats(conn: Connection) -> tuple[int, int]:
    """``(rows, trigrams)`` of the chunks, as FTS5's averages record counts them (every
    chunk, ``length(text) + 1 - 2`` trigrams each); kept per process until the number of
    chunks or the largest row id changes (chunk texts never change in place)."""
    row = conn.execute(text("SELECT count(*), max(id) FROM chunks")).one()
    key = (conn.engine.url.render_as_string(), int(row[0]), row[1])
    found = _TRIGRAM_STATS.get(key)
    if found is None:
        tokens = conn.execute(
            text("SELECT coalesce(sum(greatest(length(text) - 1, 0)), 0) FROM chunks")
        ).scalar()
        found = (int(row[0]), int(tokens or 0))
        if len(_TRIGRAM_STATS) > 64:
            _TRIGRAM_STATS.clear()
        _TRIGRAM_STATS[key] = found
    return found


def trigram_bm25(
    conn: Connection,
    phrases: Sequence[str],
    limit: int,
    filters: Filters,
    *,
    all_of: bool = False,
    doc_counts: Mapping[str, int] | None = None,
) -> list[tuple[int, float]]:
    """``(chunk row id, -bm25)`` best first (ties by row id) of the current chunks
    holding any (``all_of``: every) phrase: what FTS5 answers for ``"p1" OR "p2" …``
    over the trigram index (module doc). ``doc_counts``: phrases' exact chunk counts
    the caller has already."""
    if not phrases:
        return []
    n_rows, n_tokens = _trigram_stats(conn)
    if n_rows == 0:
        return []
    known = dict(doc_counts or {})
    missing = [p for p in dict.fromkeys(phrases) if p not in known]
    known.update(trigram_counts(conn, missing, None))
    idf = []
    for phrase in phrases:  # FTS5: one idf per phrase of the expression, in its order
        df = known[phrase]
        value = math.log((n_rows - df + 0.5) / (df + 0.5))
        idf.append(value if value > 0.0 else 1e-6)
    avgdl = n_tokens / n_rows
    # FTS5 with columnsize=0 and no content reads every document's size as -1.
    norm = BM25_K1 * (1 - BM25_B + BM25_B * -1.0 / avgdl)
    k1_plus = BM25_K1 + 1.0
    params: dict[str, Any] = {}
    needles = list(dict.fromkeys(_needle(p) for p in phrases)) if all_of else _cover(phrases)
    held, indexable = _holding(needles, all_of, params)
    # The trigram index first (MATERIALIZED), then the current / filtered chunks.
    sql = (
        "WITH m AS MATERIALIZED (SELECT c.id, c.derivation_id, c.section_id, c.text "
        f"FROM chunks AS c WHERE {held}) "
        "SELECT c.id, c.text FROM m AS c JOIN derivations AS d ON d.id = c.derivation_id "
        f"WHERE {_where(filters, params)}"
    )
    with _index_first(conn, indexable):
        rows = conn.execute(text(sql), params).all()
    frequencies = _frequencies(phrases)
    scored: list[tuple[int, float]] = []
    for chunk_id, chunk_text in rows:
        freqs = frequencies(_folded(str(chunk_text)))
        if not (all(freqs) if all_of else any(freqs)):
            continue
        score = 0.0
        for weight, f in zip(idf, freqs, strict=True):  # fts5Bm25Function, term by term
            score += weight * ((f * k1_plus) / (f + norm))
        scored.append((int(chunk_id), score))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:limit]
