"""The word index's SQL (SQLite FTS5 ``chunk_terms_fts`` over the analysed terms of each
chunk, revision 0004), and how one query of it stays fast on a large library.

FTS5's ``bm25()`` costs one to two microseconds per chunk that holds *any* query term,
so a question with one common word ("old", 最后) ranks tens of thousands of chunks at
100k (~40 ms). :func:`words_search` therefore asks FTS5 only for the **rarest** terms
whose chunks add up to :data:`BM25_BUDGET`, takes the best :data:`RERANK_DEPTH` of those,
and re-scores them with **every** term by FTS5's own formula: the same ``N`` and total
token count (the index's averages record), the same document frequencies
(``fts5vocab``), the same token counts (the tokenizer's categories), so a re-scored
chunk gets exactly the score ``bm25()`` would give it (a test holds this to 1e-9).
What the budget can lose is a chunk that holds only common terms: it ranks low anyway.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy import bindparam, select, text
from sqlalchemy.engine import Connection

from mindory.store.fts import Filters, bm25_search, fts_quote
from mindory.store.tables import TERMS_FTS_TABLE, chunk_table, chunk_terms_table, derivation_table

__all__ = [
    "BM25_BUDGET",
    "RERANK_DEPTH",
    "bm25_of",
    "bm25_scores",
    "current_chunk_ids",
    "index_totals",
    "term_row_ids",
    "term_rows",
    "terms_state",
    "has_words_table",
    "phrase_tokens",
    "tokens_of",
    "words_search",
]

# The rarest terms are asked for until the chunks holding them add up to this many
# (~3 ms of bm25()); the best RERANK_DEPTH of those are re-scored with every term.
BM25_BUDGET = 2500
RERANK_DEPTH = 100
BM25_K1 = 1.2  # FTS5's bm25() constants
BM25_B = 0.75
_VOCAB = "chunk_terms_vocab"  # an fts5vocab 'row' table in each connection's temp schema
# unicode61's token characters (its default ``categories 'L* N* Co'``): what a token is.
# ``[^\W_]`` is L* and N* in ``re`` (fast); the private-use ranges are Co. Inside a token
# FTS5 also keeps the combining diacritics of its own table (U+0300–U+0331, some of them:
# Pepys's "coronac̃on" is one token). (FTS5 knows Unicode 6.1, where a character encoded
# later is unassigned and a token character: the few such characters that are not
# letters or digits today split a token here, not there.)
_TOKEN_CHAR = r"[^\W_]|[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]"
_DIACRITIC = r"[\u0300-\u0304\u0306-\u030c\u030f\u0311\u031b\u0323-\u0328\u032d\u032e\u0330\u0331]"
_TOKEN = re.compile(rf"(?:{_TOKEN_CHAR})(?:{_TOKEN_CHAR}|{_DIACRITIC})*")

_SPLIT_INSIDE = re.compile(r"[^\w\s]|_")  # a character that splits a piece (or may: Co)

_CURRENT_OF = (
    select(chunk_table.c.id)
    .join(derivation_table, derivation_table.c.id == chunk_table.c.derivation_id)
    .where(
        chunk_table.c.id.in_(bindparam("ids", expanding=True)),
        derivation_table.c.is_current.is_(True),
    )
)
_TERMS_OF = select(chunk_terms_table.c.chunk_id, chunk_terms_table.c.terms).where(
    chunk_terms_table.c.chunk_id.in_(bindparam("ids", expanding=True))
)


def has_words_table(conn: Connection) -> bool:
    """True when the database has the FTS5 word index (SQLite with revision 0004)."""
    return bool(
        conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (TERMS_FTS_TABLE,)
        ).first()
    )


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (big-endian, 7 bits a byte, a ninth byte of 8), as FTS5 writes them."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def _averages(conn: Connection) -> tuple[int, int]:
    """``(rows, tokens)`` of the index: its averages record (FTS5 keeps it at id 1)."""
    row = conn.exec_driver_sql(f"SELECT block FROM {TERMS_FTS_TABLE}_data WHERE id = 1").first()
    values = _varints(bytes(row[0])) if row is not None and row[0] is not None else []
    return (values[0], values[1]) if len(values) >= 2 else (0, 0)


def index_totals(conn: Connection) -> tuple[int, int]:
    """``(rows, tokens)`` of the word index, as FTS5's ``bm25()`` counts them."""
    return _averages(conn)


_TERMS_STATE = text(
    "SELECT (SELECT max(chunk_id) FROM chunk_terms), "
    "(SELECT value FROM library_facts WHERE key = 'word_analysis'), "
    "(SELECT group_concat(id) FROM (SELECT id FROM derivations WHERE is_current ORDER BY id))"
)


def terms_state(conn: Connection) -> tuple[Any, ...]:
    """What changes whenever the rows of ``chunk_terms`` or the current chunks may have:
    the index's totals, its largest row, the analysis on record, the current derivations."""
    row = conn.execute(_TERMS_STATE).one()
    return (*_averages(conn), row[0], row[1], row[2])


def term_row_ids(conn: Connection) -> np.ndarray:
    """The chunk row ids ``chunk_terms`` holds (the word index's rows), ascending."""
    cursor = conn.exec_driver_sql("SELECT chunk_id FROM chunk_terms ORDER BY chunk_id")
    return np.fromiter((int(r[0]) for r in cursor), dtype=np.int64)


def term_rows(conn: Connection, ids: np.ndarray) -> list[tuple[int, str]]:
    """``(chunk row id, analysed terms)`` of some ``chunk_terms`` rows."""
    out: list[tuple[int, str]] = []
    wanted = [int(i) for i in ids]
    for lo in range(0, len(wanted), _ROWS_BATCH):
        part = wanted[lo : lo + _ROWS_BATCH]
        out.extend((int(i), str(t)) for i, t in conn.execute(_TERMS_OF, {"ids": part}))
    return out


def current_chunk_ids(conn: Connection) -> np.ndarray:
    """Row ids of the chunks of current derivations, ascending."""
    cursor = conn.exec_driver_sql(
        "SELECT c.id FROM chunks AS c JOIN derivations AS d ON d.id = c.derivation_id "
        "WHERE d.is_current ORDER BY c.id"
    )
    return np.fromiter((int(r[0]) for r in cursor), dtype=np.int64)


_ROWS_BATCH = 5000


def _doc_counts(conn: Connection, tokens: Sequence[str]) -> dict[str, int]:
    """How many chunks hold each token (exact, from the index's vocabulary)."""
    conn.exec_driver_sql(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_VOCAB} "
        f"USING fts5vocab(main, '{TERMS_FTS_TABLE}', 'row')"
    )
    wanted = list(dict.fromkeys(tokens))
    counts = dict.fromkeys(wanted, 0)
    if wanted:  # one statement: fts5vocab looks each term up (an IN list of equalities)
        marks = ", ".join("?" * len(wanted))
        for term, doc in conn.exec_driver_sql(
            f"SELECT term, doc FROM temp.{_VOCAB} WHERE term IN ({marks})", tuple(wanted)
        ):
            counts[str(term)] = int(doc)
    return counts


def tokens_of(terms_text: str) -> list[str]:
    """The tokens FTS5 makes of a chunk's terms (space-separated; a piece with a
    separator in it, such as an apostrophe, is more than one)."""
    low = terms_text.lower()
    if not _SPLIT_INSIDE.search(low):
        return low.split()  # the usual case: every piece is one token
    out: list[str] = []
    for piece in low.split():
        if piece.isalnum():
            out.append(piece)
        else:
            out.extend(_TOKEN.findall(piece))
    return out


def phrase_tokens(term: str) -> tuple[str, ...]:
    # FTS5 folds case; a term the tokenizer splits ("o'clock") is a phrase of its tokens.
    return tuple(_TOKEN.findall(term.lower()))


def _occurrences(tokens: Sequence[str], counted: Counter[str], phrase: tuple[str, ...]) -> int:
    if len(phrase) == 1:
        return counted[phrase[0]]
    n = len(phrase)
    return sum(1 for i in range(len(tokens) - n + 1) if tuple(tokens[i : i + n]) == phrase)


def bm25_scores(
    conn: Connection,
    terms: Sequence[str],
    ids: Sequence[int],
    doc_counts: dict[str, int] | None = None,
) -> dict[int, float]:
    """``-bm25()`` of each chunk in ``ids`` for the OR of ``terms``, computed as FTS5
    computes it (module doc) without asking FTS5 to rank anything. ``doc_counts``: the
    tokens' chunk counts when the caller has them already."""
    phrases = {t: phrase_tokens(t) for t in dict.fromkeys(terms)}
    phrases = {t: p for t, p in phrases.items() if p}
    if not phrases or not ids:
        return {}
    n_rows, n_tokens = _averages(conn)
    if n_rows == 0:
        return {}
    avgdl = n_tokens / n_rows
    idf: dict[str, float] = {}
    wanted = [p[0] for p in phrases.values() if len(p) == 1]
    known = doc_counts or {}
    singles = {t: known[t] for t in wanted if t in known}
    singles.update(_doc_counts(conn, [t for t in wanted if t not in known]))
    for term, phrase in phrases.items():
        if len(phrase) == 1:
            df = singles[phrase[0]]
        else:  # a phrase's document frequency is FTS5's own count of it
            df = int(
                conn.exec_driver_sql(
                    f"SELECT count(*) FROM {TERMS_FTS_TABLE} WHERE {TERMS_FTS_TABLE} MATCH ?",
                    (fts_quote(term),),
                ).scalar()
                or 0
            )
        idf[term] = max(1e-6, math.log((n_rows - df + 0.5) / (df + 0.5)))
    scores: dict[int, float] = {}
    for chunk_id, terms_text in conn.execute(_TERMS_OF, {"ids": list(ids)}).all():
        scores[int(chunk_id)] = bm25_of(str(terms_text), phrases, idf, avgdl)
    return scores


def bm25_of(
    terms_text: str,
    phrases: Mapping[str, tuple[str, ...]],
    idf: Mapping[str, float],
    avgdl: float,
) -> float:
    """FTS5's ``bm25()`` (negated) of one chunk's analysed terms for the OR of
    ``phrases`` (each query term as its tokens, :func:`phrase_tokens`), given each
    term's ``idf`` and the index's average tokens per chunk."""
    tokens = tokens_of(terms_text)
    counted = Counter(tokens)
    norm = BM25_K1 * (1 - BM25_B + BM25_B * len(tokens) / avgdl)
    score = 0.0
    for term, phrase in phrases.items():
        tf = _occurrences(tokens, counted, phrase)
        if tf:
            score += idf[term] * tf * (BM25_K1 + 1) / (tf + norm)
    return score


def _ranked(
    conn: Connection, terms: Sequence[str], limit: int, filters: Filters
) -> list[tuple[int, float]]:
    """FTS5's own ranking of the OR of ``terms`` over current derivations."""
    expression = " OR ".join(fts_quote(t) for t in dict.fromkeys(terms))
    return bm25_search(conn, expression, limit, filters, table=TERMS_FTS_TABLE)


def words_search(
    conn: Connection,
    terms: Sequence[str],
    *,
    limit: int,
    filters: Filters | None = None,
    budget: int = BM25_BUDGET,
) -> list[tuple[int, float]]:
    """``(chunk row id, -bm25)`` best first over current derivations: the word index
    for analysed query terms, any of them (OR). A query whose terms are held by more
    than ``budget`` chunks in all is ranked by its rarest terms and re-scored exactly
    (module doc)."""
    filters = filters or Filters()
    unique = [t for t in dict.fromkeys(terms) if phrase_tokens(t)]
    if not unique:
        return []
    single = [t for t in unique if len(phrase_tokens(t)) == 1]
    counts = _doc_counts(conn, [phrase_tokens(t)[0] for t in single])
    held = {t: counts[phrase_tokens(t)[0]] for t in single}
    if len(single) < len(unique) or sum(held.values()) <= budget:
        return _ranked(conn, unique, limit, filters)  # small enough to rank whole
    chosen: list[str] = []
    rows = 0
    for term in sorted(single, key=lambda t: (held[t], t)):
        if held[term] == 0:
            continue
        if chosen and rows + held[term] > budget:
            break
        chosen.append(term)
        rows += held[term]
    if not chosen:
        return []
    if len(chosen) == len([t for t in single if held[t]]):
        return _ranked(conn, chosen, limit, filters)
    candidates = _ranked(conn, chosen, max(limit, RERANK_DEPTH), filters)
    scores = bm25_scores(conn, unique, [i for i, _ in candidates], counts)
    rescored = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return rescored[:limit]
