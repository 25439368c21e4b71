"""Reads a search makes on every call, in SQLAlchemy Core: the candidates it ranks, each
book's analysis language, a book file's bytes.

Like :mod:`mindory.store.shelf`, it never loads the ORM: a words-only search imports
none of it (``sqlalchemy.orm`` and mapping :mod:`mindory.store.models` cost ~0.2 s of a
cold ``mindory search``). Reads that need a book reference resolved (an id prefix, a
title) stay with the ORM in :mod:`mindory.store.queries`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError, NotFoundError
from mindory.store.tables import book_file_table, book_table, chunk_table, section_table

__all__ = ["book_file_bytes", "book_language_rows", "candidate_rows", "read_file"]

_CANDIDATES_STMT = (
    select(
        chunk_table.c.id,
        chunk_table.c.chunk_id,
        chunk_table.c.text,
        section_table.c.ordinal,
        section_table.c.title,
        book_table.c.sha256,
        book_table.c.title,
    )
    .join(section_table, section_table.c.id == chunk_table.c.section_id)
    .join(book_table, book_table.c.id == section_table.c.book_id)
    .where(chunk_table.c.id.in_(bindparam("ids", expanding=True)))
)


def candidate_rows(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    """Per chunk row id: chunk id, text, section ordinal and title, book SHA-256 and title
    (what ranking by structure and folding duplicates look at)."""
    if not ids:
        return {}
    return {int(r[0]): r for r in conn.execute(_CANDIDATES_STMT, {"ids": list(ids)})}


def book_language_rows(conn: Connection) -> list[tuple[int, str | None, str]]:
    """``(book row id, language tag, first section's text start)`` of every book: what
    each book's analysis language is chosen from."""
    b, s = book_table.c, section_table.c
    q = (
        select(b.id, b.language, func.substr(s.source_text, 1, 2000))
        .join(section_table, (s.book_id == b.id) & (s.ordinal == 0))
        .order_by(b.id)
    )
    return [(int(r[0]), r[1], str(r[2] or "")) for r in conn.execute(q)]


_BOOK_FILE_STMT = (
    select(book_table.c.sha256, book_file_table.c.data, book_file_table.c.path)
    .join(book_file_table, book_file_table.c.book_id == book_table.c.id)
    .where(book_table.c.sha256 == bindparam("sha"))
)


def read_file(path: Path) -> bytes:
    if not path.exists():
        raise MindoryError("no such file", path=str(path))
    if not path.is_file():
        raise MindoryError("not a file", path=str(path))
    try:
        return path.read_bytes()
    except OSError as exc:
        raise MindoryError(f"cannot read file: {exc.strerror or exc}", path=str(path)) from exc


def book_file_bytes(conn: Connection, sha: str) -> bytes:
    """The original file of the book with this SHA-256 (read from its path when it was
    not copied), checked against it."""
    row = conn.execute(_BOOK_FILE_STMT, {"sha": sha.strip().lower()}).first()
    if row is None:
        raise NotFoundError(f"no book with id {sha!r}")
    if row.data is not None:
        return bytes(row.data)
    path = Path(row.path or "")
    data = read_file(path)
    if hashlib.sha256(data).hexdigest() != row.sha256:
        raise MindoryError("the book file changed since it was imported", path=str(path))
    return data
