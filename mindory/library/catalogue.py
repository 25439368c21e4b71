"""Reading the catalogue: books, their files, TOCs, sections, chunks and render blocks; deleting a book."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import delete, func, select

from mindory.errors import MindoryError, NotFoundError
from mindory.library.state import State

if TYPE_CHECKING:
    from mindory.library.resources import Resource
from mindory.store.models import (
    BlockRow,
    BookFileRow,
    BookRow,
    ChunkRow,
    SectionRow,
    SectionTextRow,
    TocEntryRow,
)
from mindory.store.queries import (
    chunk_infos,
    get_derivation,
    read_book_file,
    resolve_book,
)
from mindory.store.records import (
    BlockInfo,
    BlockPage,
    BookInfo,
    ChunkInfo,
    SectionDetail,
    SectionInfo,
    TocNode,
)
from mindory.store.shelf import book_info, derivations_by_book


def book(st: State, ref: str) -> BookInfo:
    """A book by id (its SHA-256 or a prefix of it) or a unique prefix of its title."""
    with st.read() as s:
        row = resolve_book(s, ref)
        by_path = s.scalar(select(BookFileRow.data.is_(None)).where(BookFileRow.book_id == row.id))
        derivations = derivations_by_book(s, [row.id])
        return book_info(row, bool(by_path), derivations.get(row.id, ()))


def book_file(st: State, ref: str) -> bytes:
    """The original file's bytes (read from its path when it was not copied)."""
    with st.read() as s:
        return read_book_file(s, ref)


def toc(st: State, ref: str) -> tuple[TocNode, ...]:
    with st.read() as s:
        row = resolve_book(s, ref)
        entries = s.execute(
            select(TocEntryRow).where(TocEntryRow.book_id == row.id).order_by(TocEntryRow.position)
        ).scalars()
        children: dict[int | None, list[TocEntryRow]] = {}
        for e in entries:
            children.setdefault(e.parent_id, []).append(e)

    def build(parent: int | None) -> tuple[TocNode, ...]:
        return tuple(
            TocNode(e.title, e.href, e.section_ordinal, e.source_offset, build(e.id))
            for e in children.get(parent, [])
        )

    return build(None)


def sections(st: State, ref: str, *, fingerprint: str | None = None) -> list[SectionInfo]:
    with st.read() as s:
        row = resolve_book(s, ref)
        derivation = get_derivation(s, row, fingerprint)
        chunk_counts = dict(
            s.execute(
                select(ChunkRow.section_id, func.count())
                .where(ChunkRow.derivation_id == derivation.id)
                .group_by(ChunkRow.section_id)
            ).all()
        )
        rows = s.execute(
            select(
                SectionRow.id,
                SectionRow.ordinal,
                SectionRow.title,
                SectionRow.href,
                SectionRow.media_type,
                SectionRow.parser,
                SectionRow.linear,
                SectionRow.source_start,
                SectionRow.source_length,
                SectionRow.utf16_start,
                func.length(SectionTextRow.normalized_text),
                SectionTextRow.block_count,
            )
            .join(SectionTextRow, SectionTextRow.section_id == SectionRow.id)
            .where(
                SectionRow.book_id == row.id,
                SectionTextRow.normalization_id == derivation.normalization_id,
            )
            .order_by(SectionRow.ordinal)
        )
        return [
            SectionInfo(
                ordinal=o,
                title=title,
                href=href,
                media_type=mt,
                parser=parser,
                linear=bool(linear),
                source_start=ss,
                source_end=ss + sl,
                utf16_start=us,
                normalized_length=int(nl or 0),
                block_count=bc,
                chunk_count=int(chunk_counts.get(sid, 0)),
            )
            for sid, o, title, href, mt, parser, linear, ss, sl, us, nl, bc in rows
        ]


def section(st: State, ref: str, ordinal: int, *, fingerprint: str | None = None) -> SectionDetail:
    """One section with its source text, normalized text and offset map."""
    from mindory.text.offsets import OffsetMap  # numpy: not for commands that list books

    with st.read() as s:
        row = resolve_book(s, ref)
        derivation = get_derivation(s, row, fingerprint)
        found = s.execute(
            select(SectionRow, SectionTextRow)
            .join(SectionTextRow, SectionTextRow.section_id == SectionRow.id)
            .where(
                SectionRow.book_id == row.id,
                SectionRow.ordinal == ordinal,
                SectionTextRow.normalization_id == derivation.normalization_id,
            )
        ).first()
        if found is None:
            raise NotFoundError(
                f"{row.title!r} has no section {ordinal} (sections 0–{row.section_count - 1})"
            )
        sec, text = found
        chunk_count = s.scalar(
            select(func.count()).where(
                ChunkRow.derivation_id == derivation.id, ChunkRow.section_id == sec.id
            )
        )
    info = SectionInfo(
        ordinal=sec.ordinal,
        title=sec.title,
        href=sec.href,
        media_type=sec.media_type,
        parser=sec.parser,
        linear=sec.linear,
        source_start=sec.source_start,
        source_end=sec.source_start + sec.source_length,
        utf16_start=sec.utf16_start,
        normalized_length=len(text.normalized_text),
        block_count=text.block_count,
        chunk_count=int(chunk_count or 0),
    )
    return SectionDetail(
        book=row.sha256,
        info=info,
        source_text=sec.source_text,
        normalized_text=text.normalized_text,
        offset_map=OffsetMap.from_bytes(text.offset_map),
        cfi_table=sec.cfi_table,
    )


def chunks(
    st: State,
    ref: str,
    *,
    section: int | None = None,
    fingerprint: str | None = None,
    offset: int = 0,
    limit: int | None = None,
    with_cfi: bool = False,
) -> list[ChunkInfo]:
    """Chunks of the current (or the given) derivation, in reading order.

    ``with_cfi`` adds EPUB CFIs (both flavors) from the stored CFI tables.
    """
    with st.read() as s:
        row = resolve_book(s, ref)
        derivation = get_derivation(s, row, fingerprint)
        return chunk_infos(s, derivation.id, section, offset, limit, with_cfi)


def blocks(
    st: State,
    ref: str,
    section: int,
    page: int = 1,
    page_size: int = 50,
    *,
    fingerprint: str | None = None,
) -> BlockPage:
    """One page (counted from 1) of a section's render blocks, with their text."""
    if page < 1:
        raise MindoryError(f"page must be 1 or more, not {page}")
    if page_size < 1:
        raise MindoryError(f"page size must be 1 or more, not {page_size}")
    with st.read() as s:
        row = resolve_book(s, ref)
        derivation = get_derivation(s, row, fingerprint)
        found = s.execute(
            select(SectionTextRow)
            .join(SectionRow, SectionRow.id == SectionTextRow.section_id)
            .where(
                SectionRow.book_id == row.id,
                SectionRow.ordinal == section,
                SectionTextRow.normalization_id == derivation.normalization_id,
            )
        ).scalar()
        if found is None:
            raise NotFoundError(
                f"{row.title!r} has no section {section} (sections 0–{row.section_count - 1})"
            )
        blocks = s.execute(
            select(BlockRow)
            .where(BlockRow.section_text_id == found.id)
            .order_by(BlockRow.index)
            .offset((page - 1) * page_size)
            .limit(page_size)
        ).scalars()
        text = found.normalized_text
        infos = tuple(
            BlockInfo(
                b.index,
                b.kind,
                b.level,
                b.start,
                b.end,
                b.source_start,
                b.source_end,
                text[b.start : b.end],
            )
            for b in blocks
        )
        return BlockPage(row.sha256, section, page, page_size, found.block_count, infos)


def delete_book(st: State, ref: str) -> BookInfo:
    """Delete a book and everything derived from it; returns what was deleted."""
    info = book(st, ref)
    from mindory.store.document_keys import delete_keys

    with st.write() as s:
        s.execute(delete(BookRow).where(BookRow.sha256 == info.id))
        # KOReader's keys of this file go with it; a newer edition keeps them as aliases
        delete_keys(s, info.id)
    st.forget_book(info.id)
    # Its chunks' vectors went with it (cascade); take them out of the index too.
    path = st.index_path
    if st.vectors.loaded is not None or (path is not None and path.exists()):
        from mindory.store.vectors import current_embedding_state

        with st.engine.connect() as conn:
            embedding = current_embedding_state(conn)
            if embedding is not None:
                st.vectors.ensure(conn, embedding)
    return info


def resource(st: State, ref: str, href: str) -> Resource:
    """A member of an EPUB book by its ZIP path (names leaving the book refused first)."""
    from mindory.library.resources import member_name, read_resource

    member_name(href)
    info = book(st, ref)
    item = st.resources.get(info, lambda: book_file(st, info.id), lambda: sections(st, info.id))
    return read_resource(item, href)
