"""The lexical index's SQL: SQLite FTS5 (``chunks_fts``, trigram tokenizer) and a plain
scan for databases without it. Only this module knows how the index is queried;
:mod:`mindory.search.lexical` decides which terms to ask for.

**FTS5.** ``"t1" OR "t2" OR …`` ranked by ``bm25()`` (higher returned score is better:
``-bm25``). A two-character CJK run has no trigram of its own: it is expanded through the
index's vocabulary (``chunks_fts_vocab``) into every indexed trigram that *starts* with
it; each chunk is indexed with a trailing newline, so every occurrence starts one.

**Scan.** :func:`scan_search` ranks the chunks that contain the terms (``LIKE``) by how
many, and how long, terms they contain: other databases, and queries the trigram index
cannot answer (one-character terms).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, case, func, literal, or_, select, text
from sqlalchemy.engine import Connection

from mindory.store.tables import FTS_TABLE, chunk_table, derivation_table

__all__ = [
    "MAX_EXPANSIONS",
    "Filters",
    "bm25_search",
    "capped_count",
    "chunk_texts",
    "fts_quote",
    "max_chunk_id",
    "scan_search",
    "short_term_expansions",
]

MAX_EXPANSIONS = 256  # trigrams a two-character term may expand into


def fts_quote(term: str) -> str:
    """An FTS5 string: double quotes around, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def short_term_expansions(conn: Connection, term: str) -> list[tuple[str, int]] | None:
    """Indexed trigrams starting with ``term`` (a two-character CJK run), with the
    number of chunks holding each. None when there are more than MAX_EXPANSIONS (too
    common a term to rank by)."""
    rows = conn.execute(
        text(f"SELECT term, doc FROM {FTS_TABLE}_vocab WHERE term >= :lo AND term < :hi LIMIT :n"),
        {"lo": term, "hi": term + "\U0010ffff", "n": MAX_EXPANSIONS + 1},
    ).all()
    found = [(str(t), int(d)) for t, d in rows]
    return None if len(found) > MAX_EXPANSIONS else found


_COUNT_SQL = text(
    f"SELECT count(*) FROM (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH :q LIMIT :n)"
)


def capped_count(conn: Connection, phrase: str, cap: int) -> int:
    """How many chunks hold ``phrase``, counting no further than ``cap`` (cheap)."""
    return int(conn.execute(_COUNT_SQL, {"q": fts_quote(phrase), "n": cap}).scalar() or 0)


@dataclass(frozen=True, slots=True)
class Filters:
    """Search restrictions: a book (its row id) and a section (its row id)."""

    book_id: int | None = None
    section_id: int | None = None

    def where(self, params: dict[str, Any], current: str = "d.is_current = TRUE") -> str:
        """The SQL condition of current derivations (``d``) and these restrictions on
        chunks (``c``), its parameters added to ``params`` (SQLite and PostgreSQL)."""
        where = [current]
        if self.book_id is not None:
            where.append("d.book_id = :book")
            params["book"] = self.book_id
        if self.section_id is not None:
            where.append("c.section_id = :section")
            params["section"] = self.section_id
        return " AND ".join(where)


_TEXTS_OF = select(chunk_table.c.id, chunk_table.c.text).where(
    chunk_table.c.id.in_(bindparam("ids", expanding=True))
)


_MAX_ID = select(func.max(chunk_table.c.id))
MAX_SCAN_TERMS = 64  # terms of one scan (the caller orders them)


def chunk_texts(conn: Connection, ids: Sequence[int]) -> dict[int, str]:
    """The texts of the given chunk rows."""
    return {int(i): str(t) for i, t in conn.execute(_TEXTS_OF, {"ids": list(ids)}).all()}


def max_chunk_id(conn: Connection) -> int:
    """The largest chunk row id (at least the number of indexed chunks)."""
    return int(conn.execute(_MAX_ID).scalar() or 0)


_CURRENT_OF = (
    select(chunk_table.c.id)
    .join(derivation_table, derivation_table.c.id == chunk_table.c.derivation_id)
    .where(
        chunk_table.c.id.in_(bindparam("ids", expanding=True)),
        derivation_table.c.is_current.is_(True),
    )
)


def bm25_search(
    conn: Connection, expression: str, limit: int, filters: Filters, table: str = FTS_TABLE
) -> list[tuple[int, float]]:
    """The best ``limit`` chunks of current derivations for an FTS expression over
    ``table`` (the trigram index, or the word index: ``chunk_terms_fts``); equal
    scores by row id, as PostgreSQL orders them (:mod:`mindory.store.pg_search`)."""
    if filters.book_id is None and filters.section_id is None:
        # Rank in the FTS table alone (no join per matching row), then keep the
        # current chunks among the first few; join only if too few of them are.
        wide = 3 * limit
        ranked = [
            (int(i), -float(s))
            for i, s in conn.execute(
                text(
                    f"SELECT rowid, bm25({table}) AS s FROM {table} "
                    f"WHERE {table} MATCH :q ORDER BY s, rowid LIMIT :n"
                ),
                {"q": expression, "n": wide},
            )
        ]
        current = set(conn.execute(_CURRENT_OF, {"ids": [i for i, _ in ranked]}).scalars())
        kept = [(i, s) for i, s in ranked if i in current]
        if len(kept) >= limit or len(ranked) < wide:
            return kept[:limit]
    params: dict[str, Any] = {"q": expression, "n": limit}
    where = filters.where(params)
    sql = (
        f"SELECT f.rowid, bm25({table}) AS s FROM {table} AS f "
        "JOIN chunks AS c ON c.id = f.rowid "
        "JOIN derivations AS d ON d.id = c.derivation_id "
        f"WHERE {table} MATCH :q AND {where} "
        "ORDER BY s, f.rowid LIMIT :n"
    )
    return [(int(i), -float(s)) for i, s in conn.execute(text(sql), params)]


def scan_search(
    conn: Connection, terms: Sequence[str], *, limit: int, filters: Filters | None = None
) -> list[tuple[int, float]]:
    """Chunks containing the query's terms, by a full scan (no FTS index needed).

    The score of a chunk is the summed length of the distinct terms it contains
    (longer terms are rarer), ties by row id. Case-insensitive for ASCII letters
    (``lower()``). Used on databases without FTS5, and on SQLite for queries the
    trigram index cannot answer (one-character terms).
    """
    filters = filters or Filters()
    scan = [t.lower() for t in terms][:MAX_SCAN_TERMS]
    if not scan:
        return []
    low = func.lower(chunk_table.c.text)
    hits = [low.contains(t, autoescape=True) for t in scan]
    score = sum(
        (case((h, literal(len(t))), else_=literal(0)) for h, t in zip(hits, scan)), literal(0)
    )
    q = (
        select(chunk_table.c.id, score.label("s"))
        .join(derivation_table, derivation_table.c.id == chunk_table.c.derivation_id)
        .where(derivation_table.c.is_current.is_(True), or_(*hits))
        .order_by(score.desc(), chunk_table.c.id)
        .limit(limit)
    )
    if filters.book_id is not None:
        q = q.where(derivation_table.c.book_id == filters.book_id)
    if filters.section_id is not None:
        q = q.where(chunk_table.c.section_id == filters.section_id)
    return [(int(i), float(s)) for i, s in conn.execute(q)]


_MISSING_TERMS = text(
    "SELECT count(*) FROM chunks AS c JOIN derivations AS d ON d.id = c.derivation_id "
    "LEFT JOIN chunk_terms AS t ON t.chunk_id = c.id "
    "WHERE d.is_current = TRUE AND t.chunk_id IS NULL"
)


def chunks_without_terms(conn: Connection) -> int:
    """How many chunks of current derivations have no word index entry."""
    return int(conn.execute(_MISSING_TERMS).scalar() or 0)


_CURRENT_DERIVATIONS = text("SELECT id FROM derivations WHERE is_current = TRUE ORDER BY id")


def current_derivations(conn: Connection) -> tuple[int, ...]:
    """The ids of the current derivations (what changes when the indexed set may have)."""
    return tuple(int(i) for i in conn.execute(_CURRENT_DERIVATIONS).scalars())
