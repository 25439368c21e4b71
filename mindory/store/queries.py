"""Reads every concern shares: a book by reference, its derivation, chunk rows, the
stored file. Statements over the models of :mod:`mindory.store.models` that are the
same on every database (the reads a search makes on every call are in Core, in
:mod:`mindory.store.reads`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from mindory.errors import MindoryError, NotFoundError
from mindory.store.fts import Filters
from mindory.store.models import (
    BookRow,
    ChunkRow,
    DerivationRow,
    EmbeddingRow,
    SectionRow,
    SectionTextRow,
)
from mindory.store.reads import book_file_bytes
from mindory.store.records import ChunkInfo, EmbeddingInfo, iso

_HEX = frozenset("0123456789abcdef")


def resolve_book(s: Session, ref: str) -> BookRow:
    """Id, id prefix (4+ hex digits) or unique title prefix (case-insensitive);
    failing that, a unique part of a title."""
    ref = ref.strip()
    if not ref:
        raise NotFoundError("no book named: the book reference is empty")
    low = ref.lower()
    if len(low) >= 4 and set(low) <= _HEX:
        rows = list(
            s.scalars(select(BookRow).where(BookRow.sha256.startswith(low, autoescape=True)))
        )
        if len(rows) == 1:
            return rows[0]
        if len(rows) > 1:
            raise MindoryError(f"{ref!r} is the start of {len(rows)} book ids; give more of it")
    rows = list(
        s.scalars(
            select(BookRow)
            .where(func.lower(BookRow.title).startswith(low, autoescape=True))
            .order_by(BookRow.title, BookRow.sha256)
        )
    )
    if not rows:
        # SQLite's lower() folds ASCII only: compare in Python, prefixes first,
        # then (as a convenience) words inside the title: "waste" finds "The Waste Land".
        everything = list(s.scalars(select(BookRow).order_by(BookRow.title, BookRow.sha256)))
        key = ref.casefold()
        rows = [r for r in everything if r.title.casefold().startswith(key)]
        if not rows:
            rows = [r for r in everything if key in r.title.casefold()]
    if len(rows) == 1:
        return rows[0]
    exact = [r for r in rows if r.title.casefold() == ref.casefold()]
    if len(exact) == 1:
        return exact[0]
    if not rows:
        raise NotFoundError(f"no book with id or title starting with {ref!r}")
    names = "; ".join(f"{r.title} ({r.sha256[:12]})" for r in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    raise MindoryError(f"{ref!r} matches {len(rows)} books: {names}{more}; use the id")


def get_derivation(s: Session, book: BookRow, fingerprint: str | None) -> DerivationRow:
    q = select(DerivationRow).where(DerivationRow.book_id == book.id)
    if fingerprint is None:
        found = s.scalar(q.where(DerivationRow.is_current.is_(True)))
        what = "current derivation"
    else:
        matches = list(
            s.scalars(q.where(DerivationRow.fingerprint.startswith(fingerprint, autoescape=True)))
        )
        if len(matches) > 1:
            raise MindoryError(f"{fingerprint!r} starts {len(matches)} fingerprints; give more")
        found = matches[0] if matches else None
        what = f"derivation with fingerprint {fingerprint!r}"
    if found is None:
        raise NotFoundError(f"{book.title!r} has no {what}")
    return found


def chunk_infos(
    s: Session,
    derivation_id: int,
    section: int | None,
    offset: int,
    limit: int | None,
    with_cfi: bool,
) -> list[ChunkInfo]:
    q = (
        select(
            ChunkRow.id,
            ChunkRow.chunk_id,
            SectionRow.ordinal,
            ChunkRow.index,
            ChunkRow.start,
            ChunkRow.end,
            ChunkRow.source_start,
            ChunkRow.source_end,
            ChunkRow.utf16_start,
            ChunkRow.utf16_end,
            ChunkRow.text,
            ChunkRow.byte_start,
            ChunkRow.byte_end,
            ChunkRow.section_id,
            ChunkRow.context_start,
            ChunkRow.context_end,
        )
        .join(SectionRow, SectionRow.id == ChunkRow.section_id)
        .where(ChunkRow.derivation_id == derivation_id)
        .order_by(SectionRow.ordinal, ChunkRow.index)
    )
    if section is not None:
        q = q.where(SectionRow.ordinal == section)
    if offset:
        q = q.offset(offset)
    if limit is not None:
        q = q.limit(limit)
    rows = s.execute(q).all()
    cfi_docs: dict[int, Any] = {}
    if with_cfi:
        section_ids = sorted({r[13] for r in rows})
        for sid, table, text in s.execute(
            select(SectionRow.id, SectionRow.cfi_table, SectionRow.source_text).where(
                SectionRow.id.in_(section_ids), SectionRow.cfi_table.is_not(None)
            )
        ):
            from mindory.importers.cfi import CfiDocument

            cfi_docs[sid] = CfiDocument.from_json(str(table), text)
    out: list[ChunkInfo] = []
    for rid, cid, o, i, st, en, ss, se, us, ue, text, bs, be, sid, cs, ce in rows:
        doc = cfi_docs.get(sid)
        cfi = cfi_ej = None
        if doc is not None:
            cfi = doc.range(ss, se)
            cfi_ej = doc.range(ss, se, "epubjs")
        out.append(
            ChunkInfo(cid, o, i, st, en, ss, se, us, ue, text, bs, be, cfi, cfi_ej, rid, cs, ce)
        )
    return out


def find_chunk(s: Session, row: BookRow, chunk: str) -> tuple[ChunkRow, int]:
    """A chunk of the book by id or unique id prefix (the current derivation's first):
    the row and its derivation's normalization id."""
    found = s.execute(
        select(ChunkRow, DerivationRow.normalization_id)
        .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
        .where(
            DerivationRow.book_id == row.id,
            ChunkRow.chunk_id.startswith(chunk.strip().lower(), autoescape=True),
        )
        .order_by(DerivationRow.is_current.desc(), ChunkRow.id)
        .limit(3)
    ).all()
    if not found or not chunk.strip():
        raise NotFoundError(f"{row.title!r} has no chunk {chunk!r}")
    ids = {r[0].chunk_id for r in found}
    if len(ids) > 1:
        raise MindoryError(f"{chunk!r} starts {len(ids)} chunk ids; give more of it")
    c, normalization_id = found[0]
    return c, int(normalization_id)


def get_section_id(s: Session, row: BookRow, ordinal: int) -> int:
    section_id = s.scalar(
        select(SectionRow.id).where(SectionRow.book_id == row.id, SectionRow.ordinal == ordinal)
    )
    if section_id is None:
        raise NotFoundError(
            f"{row.title!r} has no section {ordinal} (sections 0–{row.section_count - 1})"
        )
    return int(section_id)


def count_blocks(s: Session, normalization_id: int) -> int:
    total = s.scalar(
        select(func.coalesce(func.sum(SectionTextRow.block_count), 0)).where(
            SectionTextRow.normalization_id == normalization_id
        )
    )
    return int(total or 0)


def make_current(s: Session, book_id: int, derivation_id: int) -> None:
    s.execute(
        update(DerivationRow)
        .where(DerivationRow.book_id == book_id)
        .values(is_current=DerivationRow.id == derivation_id)
    )


def embedding_info(row: EmbeddingRow, vectors: int) -> EmbeddingInfo:
    return EmbeddingInfo(
        fingerprint=row.fingerprint,
        embedder_id=row.embedder_id,
        spec=row.spec,
        dim=row.dim,
        context_header=bool(row.context_header),
        current=bool(row.is_current),
        vectors=vectors,
        created_at=iso(row.created_at),
    )


def read_book_file(s: Session, ref: str) -> bytes:
    """The original file's bytes of the book ``ref`` names (any reference): as
    :func:`mindory.store.reads.book_file_bytes` reads and checks them."""
    return book_file_bytes(s.connection(), resolve_book(s, ref).sha256)


def search_filters(s: Session, book: str, section: int | None) -> tuple[str, Filters]:
    """A search's restriction to a book (any reference) and one of its sections:
    ``(the book's SHA-256, Filters by row ids)``."""
    row = resolve_book(s, book)
    section_row: int | None = None
    if section is not None:
        section_row = get_section_id(s, row, section)
    return row.sha256, Filters(book_id=int(row.id), section_id=section_row)
