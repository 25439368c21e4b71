"""Stored sentence windows (``chunk_windows``, revision 0010): each chunk's windows embedded
once for the second stage (:mod:`mindory.search.rerank`), as ``count`` × ``dim`` float16
unit rows, little-endian, under the ``windows_key`` of the model and rule that made them.

In SQLAlchemy Core, like :mod:`mindory.store.reads`: a search reads them without the ORM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Select, bindparam, func, insert, select
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError
from mindory.store.tables import chunk_table, chunk_window_table, derivation_table

__all__ = [
    "chunks_without_windows",
    "count_windows",
    "count_chunks_without_windows",
    "has_windows",
    "store_windows",
    "stored_windows",
    "single_windows_in_scope",
]

_STORED_STMT = select(
    chunk_window_table.c.chunk_id,
    chunk_window_table.c.count,
    chunk_window_table.c.dim,
    chunk_window_table.c.vectors,
).where(
    chunk_window_table.c.windows_key == bindparam("key"),
    chunk_window_table.c.chunk_id.in_(bindparam("ids", expanding=True)),
)


def stored_windows(
    conn: Connection, windows_key: str, chunk_ids: Sequence[int]
) -> dict[int, np.ndarray]:
    """The stored windows of those chunks that have them under ``windows_key``: chunk row
    id → ``(count, dim)`` float16 array. A blob of the wrong length is an error that names
    the row (the library was damaged), never a silently wrong score."""
    if not chunk_ids:
        return {}
    out: dict[int, np.ndarray] = {}
    rows = conn.execute(_STORED_STMT, {"key": windows_key, "ids": [int(i) for i in chunk_ids]})
    for chunk_id, count, dim, blob in rows:
        if len(blob) != int(count) * int(dim) * 2:
            raise MindoryError(
                f"the stored windows of chunk row {chunk_id} have the wrong length for "
                f"{count} × {dim}: run mindory verify"
            )
        out[int(chunk_id)] = np.frombuffer(blob, dtype="<f2").reshape(int(count), int(dim))
    return out


def single_windows_in_scope(
    conn: Connection,
    windows_key: str,
    *,
    book_id: int | None = None,
    section_id: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The chunks (current; of ``book_id``, of ``section_id``) stored with exactly one
    window under ``windows_key`` — a rule that reads each chunk whole: their row ids,
    ascending, and their rows as one ``(n, dim)`` float16 matrix. One query, no list of
    ids, one array: a book of 12,000 chunks reads in tens of milliseconds."""
    q = (
        select(
            chunk_window_table.c.chunk_id, chunk_window_table.c.dim, chunk_window_table.c.vectors
        )
        .join(chunk_table, chunk_table.c.id == chunk_window_table.c.chunk_id)
        .join(derivation_table, derivation_table.c.id == chunk_table.c.derivation_id)
        .where(
            chunk_window_table.c.windows_key == windows_key,
            chunk_window_table.c.count == 1,
            derivation_table.c.is_current.is_(True),
        )
        .order_by(chunk_window_table.c.chunk_id)
    )
    if book_id is not None:
        q = q.where(derivation_table.c.book_id == book_id)
    if section_id is not None:
        q = q.where(chunk_table.c.section_id == section_id)
    rows = conn.execute(q).all()
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float16)
    dim = int(rows[0][1])
    for chunk_id, row_dim, blob in rows:
        if int(row_dim) != dim or len(blob) != dim * 2:
            raise MindoryError(
                f"the stored windows of chunk row {chunk_id} have the wrong length for "
                f"1 × {dim}: run mindory verify"
            )
    ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype="<f2")
    return ids, matrix.reshape(len(rows), dim)


def count_windows(conn: Connection) -> int:
    """How many rows ``chunk_windows`` holds (rows are only added, or deleted with their
    chunks: with the current derivations, a cheap sign that stored windows changed)."""
    return int(conn.execute(select(func.count()).select_from(chunk_window_table)).scalar() or 0)


def has_windows(
    conn: Connection, windows_key: str | None = None, *, rule: str | None = None
) -> bool:
    """Whether the library keeps windows (under ``windows_key``, or any; ``rule``: under
    a key that ends ``/rule``, whatever the model)."""
    q = select(chunk_window_table.c.chunk_id).limit(1)
    if windows_key is not None:
        q = q.where(chunk_window_table.c.windows_key == windows_key)
    if rule is not None:
        q = q.where(chunk_window_table.c.windows_key.like(f"%/{rule}"))
    return conn.execute(q).first() is not None


def chunks_without_windows(
    conn: Connection,
    windows_key: str,
    *,
    after: int,
    limit: int,
    book_id: int | None = None,
) -> list[tuple[int, str]]:
    """``(row id, text)`` of the next current chunks (row id above ``after``, in row-id
    order) that have no windows under ``windows_key``; only ``book_id``'s if given."""
    q = _without(select(chunk_table.c.id, chunk_table.c.text), windows_key, book_id).where(
        chunk_table.c.id > after
    )
    return [(int(i), str(t)) for i, t in conn.execute(q.order_by(chunk_table.c.id).limit(limit))]


def count_chunks_without_windows(
    conn: Connection, windows_key: str, book_id: int | None = None
) -> int:
    """How many current chunks have no windows under ``windows_key`` (``book_id``'s only)."""
    q = _without(select(func.count()).select_from(chunk_table), windows_key, book_id)
    return int(conn.execute(q).scalar() or 0)


def _without(q: Select[Any], windows_key: str, book_id: int | None) -> Select[Any]:
    q = (
        q.join(derivation_table, derivation_table.c.id == chunk_table.c.derivation_id)
        .outerjoin(
            chunk_window_table,
            (chunk_window_table.c.chunk_id == chunk_table.c.id)
            & (chunk_window_table.c.windows_key == windows_key),
        )
        .where(
            derivation_table.c.is_current.is_(True),
            chunk_window_table.c.chunk_id.is_(None),
        )
    )
    return q if book_id is None else q.where(derivation_table.c.book_id == book_id)


def store_windows(conn: Connection, windows_key: str, windows: Mapping[int, np.ndarray]) -> None:
    """Store each chunk's windows (chunk row id → ``(count, dim)`` float16 array)."""
    if not windows:
        return
    conn.execute(
        insert(chunk_window_table),
        [
            {
                "chunk_id": int(chunk_id),
                "windows_key": windows_key,
                "count": int(rows.shape[0]),
                "dim": int(rows.shape[1]) if rows.ndim == 2 else 0,
                "vectors": np.ascontiguousarray(rows, dtype="<f2").tobytes(),
            }
            for chunk_id, rows in sorted(windows.items())
        ],
    )
