"""The shelf: the list of books with their derivations, read in SQLAlchemy Core.

Listing a library (``mindory books``, ``GET /books``) is the read people run most and
wait for most: it never loads the ORM (importing it costs more than the whole command
does otherwise; docs/benchmarks.md, "Start-up and doors"). A book's details, its
sections and chunks are read through the ORM in :mod:`mindory.store.queries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy import select

from mindory.store.records import BookInfo, DerivationInfo, iso
from mindory.store.tables import book_file_table, book_table, derivation_table

__all__ = ["book_info", "derivations_by_book", "list_books"]


class _Executes(Protocol):
    """A Core connection or an ORM session: both execute a Core statement."""

    def execute(self, statement: Any, /) -> Any: ...


def list_books(conn: _Executes) -> list[BookInfo]:
    """Every book, by title (then id)."""
    b, f = book_table.c, book_file_table.c
    rows = conn.execute(
        select(book_table, f.data.is_(None).label("by_path"))
        .join(book_file_table, f.book_id == b.id)
        .order_by(b.title, b.sha256)
    ).all()
    derivations = derivations_by_book(conn, [r.id for r in rows])
    return [book_info(r, bool(r.by_path), derivations.get(r.id, ())) for r in rows]


def derivations_by_book(
    conn: _Executes, ids: Sequence[int]
) -> dict[int, tuple[DerivationInfo, ...]]:
    """The derivations of each book, oldest first."""
    if not ids:
        return {}
    d = derivation_table.c
    out: dict[int, list[DerivationInfo]] = {}
    for row in conn.execute(
        select(derivation_table).where(d.book_id.in_(ids)).order_by(d.book_id, d.created_at, d.id)
    ):
        out.setdefault(row.book_id, []).append(
            DerivationInfo(
                fingerprint=row.fingerprint,
                settings=row.settings,
                current=row.is_current,
                chunk_count=row.chunk_count,
                created_at=iso(row.created_at),
            )
        )
    return {k: tuple(v) for k, v in out.items()}


def book_info(row: Any, by_path: bool, derivations: tuple[DerivationInfo, ...]) -> BookInfo:
    """A book's info from its row (a Core row of ``books`` or a ``BookRow``)."""
    return BookInfo(
        id=row.sha256,
        title=row.title,
        format=row.format,
        file_name=row.file_name,
        file_size=row.file_size,
        encoding=row.encoding,
        lossy=row.lossy,
        bad_bytes=row.bad_bytes,
        first_bad_byte=row.first_bad_byte,
        creators=tuple(row.creators),
        language=row.language,
        identifiers=tuple(row.identifiers),
        warnings=tuple(row.warnings),
        section_count=row.section_count,
        toc_count=row.toc_count,
        stored="path" if by_path else "copy",
        imported_at=iso(row.imported_at),
        derivations=derivations,
    )
