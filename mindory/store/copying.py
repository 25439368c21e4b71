"""Copying a library's rows into another database (``mindory copy --to URL``): every model
table in foreign-key order, row ids kept, in batches, inside the target's one transaction.

What the target derives from the rows, it derives itself: SQLite's FTS5 tables (triggers
of revisions 0002 and 0004), PostgreSQL's pgvector rows and HNSW indexes (triggers of
revision 0007); its GIN indexes follow the rows. On PostgreSQL the id sequences are then
moved past the copied ids (an explicit id does not advance them). Import jobs are not
copied: they belong to the servers of the old database.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError
from mindory.store.models import Base, BookRow

__all__ = ["COPY_BATCH", "SKIPPED_TABLES", "copy_rows", "is_empty"]

COPY_BATCH = 1000
SKIPPED_TABLES = frozenset({"jobs"})


def is_empty(conn: Connection) -> bool:
    """True when the database holds no book."""
    return not conn.execute(select(func.count()).select_from(BookRow)).scalar()


def copy_rows(
    source: Connection,
    target: Connection,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, int]:
    """Copy every model table's rows from ``source`` to ``target`` (which must hold no
    book): ``{table: rows}``. The caller owns ``target``'s transaction."""
    if not is_empty(target):
        raise MindoryError("the target library is not empty: copy into a new database")
    tables = [t for t in Base.metadata.sorted_tables if t.name not in SKIPPED_TABLES]
    # What a new library fills itself (the local reader, library facts) is replaced.
    for table in reversed(tables):
        target.execute(table.delete())
    counts: dict[str, int] = {}
    for table in tables:
        n = 0
        order = list(table.primary_key.columns) or list(table.columns)
        result = source.execution_options(stream_results=True, yield_per=COPY_BATCH).execute(
            select(table).order_by(*order)
        )
        for part in result.mappings().partitions(COPY_BATCH):
            rows = [dict(r) for r in part]
            try:
                target.execute(table.insert(), rows)
            except Exception as exc:
                raise MindoryError(
                    f"cannot copy the rows of {table.name}: {str(getattr(exc, 'orig', exc))}"
                ) from exc
            n += len(rows)
            if progress is not None:
                progress(table.name, n)
        counts[table.name] = n
    if target.dialect.name == "postgresql":
        _advance_sequences(target)
    return counts


def _advance_sequences(conn: Connection) -> None:
    """Move each id sequence past the largest copied id."""
    for table in Base.metadata.sorted_tables:
        column = table.autoincrement_column
        if column is None:
            continue
        conn.execute(
            text(
                "SELECT setval(pg_get_serial_sequence(:t, :c), "
                f'coalesce((SELECT max("{column.name}") FROM "{table.name}"), 0) + 1, false)'
            ),
            {"t": table.name, "c": column.name},
        )
