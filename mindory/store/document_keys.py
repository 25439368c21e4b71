"""KOReader document keys of the stored books (revision 0009): written with each import,
filled in for books imported before, carried to a new edition as aliases, and looked up
when KOReader pushes or pulls a position (docs/apps.md)."""

from __future__ import annotations

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from mindory.errors import MindoryError
from mindory.importers.document_keys import document_keys
from mindory.store.models import BookRow, DocumentKeyRow
from mindory.store.queries import read_book_file

__all__ = [
    "add_aliases",
    "book_for_key",
    "delete_keys",
    "fill_missing_keys",
    "insert_keys",
    "keys_of",
]


def insert_keys(s: Session, sha256: str, data: bytes, file_name: str) -> None:
    """The keys KOReader may name this file by (inside the import's transaction)."""
    have = {(r.method, r.key) for r in keys_of(s, sha256, aliases=False)}
    rows = [
        {"book_sha256": sha256, "method": method, "key": key, "alias": False}
        for method, key in document_keys(data, file_name)
        if (method, key) not in have
    ]
    if rows:
        s.connection().execute(insert(DocumentKeyRow), rows)


def keys_of(s: Session, sha256: str, *, aliases: bool = True) -> list[DocumentKeyRow]:
    q = select(DocumentKeyRow).where(DocumentKeyRow.book_sha256 == sha256)
    if not aliases:
        q = q.where(DocumentKeyRow.alias.is_(False))
    return list(
        s.scalars(q.order_by(DocumentKeyRow.alias, DocumentKeyRow.method, DocumentKeyRow.key))
    )


def add_aliases(s: Session, old_sha256: str, new_sha256: str) -> int:
    """Give a new edition the keys of the book it replaces (as aliases): KOReader still
    holding the old file finds the new edition once the old book is gone."""
    have = {(r.method, r.key) for r in keys_of(s, new_sha256)}
    added = 0
    for row in keys_of(s, old_sha256):
        if (row.method, row.key) in have:
            continue
        s.add(DocumentKeyRow(book_sha256=new_sha256, method=row.method, key=row.key, alias=True))
        have.add((row.method, row.key))
        added += 1
    s.flush()
    return added


def delete_keys(s: Session, sha256: str) -> None:
    """The keys of a deleted book (its own and its aliases); other books' aliases of it
    stay."""
    s.execute(delete(DocumentKeyRow).where(DocumentKeyRow.book_sha256 == sha256))


def fill_missing_keys(s: Session) -> int:
    """Compute the keys of books that have none (imported before revision 0009) from
    their stored files; the number of books filled. A file that cannot be read (moved
    since a ``--no-copy`` import) is passed over."""
    with_keys = select(DocumentKeyRow.book_sha256).where(DocumentKeyRow.alias.is_(False))
    missing = list(s.scalars(select(BookRow).where(BookRow.sha256.not_in(with_keys))))
    filled = 0
    for row in missing:
        try:
            data = read_book_file(s, row.sha256)
        except (MindoryError, OSError):
            continue
        insert_keys(s, row.sha256, data, row.file_name)
        filled += 1
    return filled


def book_for_key(s: Session, key: str) -> BookRow | None:
    """The book KOReader means by ``key``: the book whose own file has it (the lowest id
    when two files share a name), else the newest edition that took it over as an alias."""
    rows = s.execute(
        select(BookRow, DocumentKeyRow.alias)
        .join(DocumentKeyRow, DocumentKeyRow.book_sha256 == BookRow.sha256)
        .where(DocumentKeyRow.key == key.lower())
        .order_by(DocumentKeyRow.alias, DocumentKeyRow.method, BookRow.id)
    ).all()
    if not rows:
        return None
    own = [book for book, alias in rows if not alias]
    if own:
        return own[0]
    return max((book for book, _ in rows), key=lambda b: b.id)
