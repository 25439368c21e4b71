"""The text indexes behind one interface, whichever database holds the library.

SQLite: the FTS5 word index (:mod:`mindory.store.words_fts`) and trigram index
(:mod:`mindory.store.fts`). PostgreSQL: the ``tsvector`` GIN index over the same
analysed terms and ``pg_trgm`` (:mod:`mindory.store.pg_search`, revision 0007). The
search room calls these and never asks which database it has.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Connection

from mindory.store import pg_search, words_fts
from mindory.store.fts import Filters

__all__ = ["has_phrase_index", "has_word_index", "words_search"]


def _postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def has_word_index(conn: Connection, has_fts: bool) -> bool:
    """Whether this database has the word index (``has_fts``: SQLite has FTS5)."""
    if _postgres(conn):
        return pg_search.has_pg_indexes(conn)
    return has_fts and words_fts.has_words_table(conn)


def has_phrase_index(conn: Connection, has_fts: bool) -> bool:
    """Whether the trigram list has an index (FTS5 trigrams, pg_trgm) or a scan instead."""
    return _postgres(conn) or has_fts


def words_search(
    conn: Connection, terms: Sequence[str], *, limit: int, filters: Filters | None = None
) -> list[tuple[int, float]]:
    """``(chunk row id, BM25 score)`` best first for any of the analysed ``terms``."""
    search = pg_search.words_search if _postgres(conn) else words_fts.words_search
    return search(conn, terms, limit=limit, filters=filters)
