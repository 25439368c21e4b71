"""Highlight rows: found by id within their book, turned into
:class:`~mindory.reading.highlights.Highlight` records, and the columns of a placed one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mindory.errors import NotFoundError
from mindory.reading.highlights import Highlight, parse_highlight_id
from mindory.reading.locate import Locator
from mindory.store.models import LOCAL_READER, BookmarkRow, BookRow, HighlightRow, PositionRow
from mindory.text.records import Book


def highlight_values(loc: Locator, sha: str, fmt: str) -> dict[str, Any]:
    """The columns of a highlight placed at ``loc`` in the book ``sha``."""
    return {
        "edition_sha256": sha,
        "section": loc.section,
        "href": loc.href if fmt == "epub" else None,
        "target": loc.href,
        "source_start": loc.source_start,
        "source_end": loc.source_end,
        "utf16_start": loc.utf16_start,
        "utf16_end": loc.utf16_end,
        "exact": loc.highlight,
        "prefix": loc.quote_prefix,
        "suffix": loc.quote_suffix,
        "cfi": loc.cfi,
    }


def highlight_of(h: HighlightRow) -> Highlight:
    return Highlight(
        id=h.uid,
        book=h.book_sha256,
        edition=h.edition_sha256,
        format="epub" if h.href is not None else "txt",
        status="orphaned" if h.status == "orphaned" else "anchored",
        section=h.section,
        href=h.href,
        target=h.target,
        source_start=h.source_start,
        source_end=h.source_end,
        utf16_start=h.utf16_start,
        utf16_end=h.utf16_end,
        exact=h.exact,
        prefix=h.prefix,
        suffix=h.suffix,
        cfi=h.cfi,
        note=h.note,
        color=h.color,
        created=utc(h.created_at),
        modified=utc(h.updated_at),
        reanchored=h.reanchored,
    )


def utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def find_highlight(
    s: Session, row: BookRow, ref: str, reader_id: str = LOCAL_READER
) -> HighlightRow:
    """A highlight of the book by id — the reader's own only: another reader's is
    "not found", exactly as an id that does not exist."""
    uid = parse_highlight_id(ref)
    found = (
        s.scalar(
            select(HighlightRow).where(
                HighlightRow.uid == uid,
                HighlightRow.book_sha256 == row.sha256,
                HighlightRow.reader_id == reader_id,
            )
        )
        if uid is not None
        else None
    )
    if found is None:
        raise NotFoundError(f"{row.title!r} has no highlight {ref!r}")
    return found


def same_identifiers(s: Session, book: Book) -> list[str]:
    """Other books sharing a package identifier with ``book`` that have highlights (or
    reading positions, or bookmarks).

    The books with reading state are found first (few, and through indexes) and only
    their identifiers are read: reading every book's identifiers made each import cost
    time in proportion to the library (25 ms an import at 1,500 books)."""
    idents = {i.strip() for i in book.identifiers if i and i.strip()}
    if not idents:
        return []
    marked: set[str] = set()
    for model in (HighlightRow, PositionRow, BookmarkRow):
        marked.update(s.scalars(select(model.book_sha256).distinct()))
    marked.discard(book.sha256)
    wanted = sorted(marked)
    sharing: list[str] = []
    for lo in range(0, len(wanted), 500):
        rows = s.execute(
            select(BookRow.sha256, BookRow.identifiers).where(
                BookRow.sha256.in_(wanted[lo : lo + 500]), BookRow.format == book.format
            )
        ).all()
        sharing += [sha for sha, theirs in rows if idents & {str(i).strip() for i in theirs or ()}]
    return sorted(sharing)
