"""Readers and the places they keep: reader rows by name or token hash, a reader's
positions and bookmarks within a book, the columns of a kept place, and deleting all of a
reader's own data. Every query here is scoped by ``reader_id``: a row of another reader is
never found (callers answer "not found", exactly as for an id that does not exist)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from mindory.errors import NotFoundError
from mindory.importers.cfi import EPUBJS, SPEC
from mindory.reading.locate import SectionPlace, locate_span
from mindory.reading.positions import Bookmark, Position, quote_span
from mindory.store.annotations import utc
from mindory.store.models import (
    LOCAL_READER,
    BookmarkRow,
    BookRow,
    HighlightRow,
    PositionRow,
    ReaderRow,
)

__all__ = [
    "LOCAL_READER",
    "bookmark_of",
    "count_readers",
    "delete_reader_data",
    "find_bookmark",
    "latest_position",
    "place_values",
    "position_of",
    "reader_by_name",
    "reader_by_token_hash",
]


def count_readers(s: Session) -> int:
    return int(s.scalar(select(func.count()).select_from(ReaderRow)) or 0)


def reader_by_name(s: Session, name: str) -> ReaderRow | None:
    return s.scalar(select(ReaderRow).where(ReaderRow.name == name))


def reader_by_token_hash(s: Session, token_hash: str) -> ReaderRow | None:
    return s.scalar(select(ReaderRow).where(ReaderRow.token_hash == token_hash))


def delete_reader_data(s: Session, reader_id: str) -> tuple[int, int, int]:
    """Delete every highlight, position and bookmark of a reader: the three counts."""
    counts = []
    for model in (HighlightRow, PositionRow, BookmarkRow):
        result = s.execute(delete(model).where(model.reader_id == reader_id))
        counts.append(int(getattr(result, "rowcount", 0) or 0))
    return counts[0], counts[1], counts[2]


def place_values(place: SectionPlace, point: int, sha: str, fmt: str) -> dict[str, Any]:
    """The columns of a place kept at ``point`` (book source coordinates) of ``place``:
    the Locator of the point (point CFIs, EPUB) and the text quoted there."""
    local = point - place.source_start
    loc = locate_span(place, point, point)
    if place.cfi is not None:
        loc = replace(
            loc, cfi=place.cfi.point(local, SPEC), cfi_epubjs=place.cfi.point(local, EPUBJS)
        )
    qa, qb = quote_span(len(place.source_text), local)
    quote = locate_span(place, place.source_start + qa, place.source_start + qb)
    return {
        "edition_sha256": sha,
        "section": place.ordinal,
        "href": place.href if fmt == "epub" else None,
        "point": point,
        "source_start": quote.source_start,
        "source_end": quote.source_end,
        "exact": quote.highlight,
        "prefix": quote.quote_prefix,
        "suffix": quote.quote_suffix,
        "locator": loc.to_json(),
    }


def _kept(row: PositionRow | BookmarkRow) -> dict[str, Any]:
    return {
        "id": row.uid,
        "book": row.book_sha256,
        "edition": row.edition_sha256,
        "status": "orphaned" if row.status == "orphaned" else "anchored",
        "section": row.section,
        "href": row.href,
        "point": row.point,
        "source_start": row.source_start,
        "source_end": row.source_end,
        "exact": row.exact,
        "prefix": row.prefix,
        "suffix": row.suffix,
        "locator": row.locator,
        "reanchored": row.reanchored,
    }


def position_of(row: PositionRow) -> Position:
    return Position(
        **_kept(row),
        device=row.device,
        modified=utc(row.modified),
        received=utc(row.received_at),
    )


def bookmark_of(row: BookmarkRow, *, new: bool = False) -> Bookmark:
    return Bookmark(**_kept(row), title=row.title, created=utc(row.created_at), new=new)


def latest_position(s: Session, reader_id: str, sha: str) -> PositionRow | None:
    """The reader's newest position in the book (by the client's ``modified``)."""
    return s.scalar(
        select(PositionRow)
        .where(PositionRow.reader_id == reader_id, PositionRow.book_sha256 == sha)
        .order_by(PositionRow.modified.desc(), PositionRow.id.desc())
        .limit(1)
    )


def find_bookmark(s: Session, reader_id: str, row: BookRow, ref: str) -> BookmarkRow:
    uid = ref.strip().lower()
    found = (
        s.scalar(
            select(BookmarkRow).where(
                BookmarkRow.uid == uid,
                BookmarkRow.reader_id == reader_id,
                BookmarkRow.book_sha256 == row.sha256,
            )
        )
        if len(uid) == 32
        else None
    )
    if found is None:
        raise NotFoundError(f"{row.title!r} has no bookmark {ref!r}")
    return found
