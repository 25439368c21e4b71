"""Locating: a CFI, a section offset or a chunk → section, block, page, Locator."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mindory.errors import MindoryError, NotFoundError
from mindory.library.records import LocateResult
from mindory.library.state import State
from mindory.reading.locate import (
    DEFAULT_PAGE_SIZE,
    Locator,
    SectionPlace,
    chunks_containing,
    locate_position,
    resolve_cfi,
)
from mindory.search.hits import chunk_locator
from mindory.store.models import SectionRow
from mindory.store.queries import chunk_infos, find_chunk, get_derivation, resolve_book
from mindory.text.offsets import Utf16Index


def place(st: State, ref: str, section: int) -> SectionPlace:
    """What locating needs about one section (current derivation's normalization)."""
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, ref)
        derivation = get_derivation(s, row, None)
        section_id = s.scalar(
            select(SectionRow.id).where(SectionRow.book_id == row.id, SectionRow.ordinal == section)
        )
        if section_id is None:
            raise NotFoundError(
                f"{row.title!r} has no section {section} (sections 0–{row.section_count - 1})"
            )
        places = st.places_for(conn)
        return places.get(int(section_id), derivation.normalization_id)


def locate(
    st: State,
    ref: str,
    *,
    cfi: str | None = None,
    section: int | None = None,
    offset: int | None = None,
    utf16: bool = False,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> LocateResult:
    """A place in a book → section, block, page, and the chunks containing it.

    Either ``cfi`` (EPUB; a point or the start of a range) or ``section`` and
    ``offset`` — the offset counted from the start of the section's source text,
    in code points (``utf16=True``: UTF-16 units).
    """
    if (cfi is None) == (section is None or offset is None):
        raise MindoryError("give either a CFI, or a section and an offset")
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, ref)
        derivation = get_derivation(s, row, None)
        places = st.places_for(conn)
        sections = s.execute(
            select(SectionRow.id, SectionRow.ordinal)
            .where(SectionRow.book_id == row.id)
            .order_by(SectionRow.ordinal)
        ).all()
        id_of = {int(o): int(i) for i, o in sections}
        end: int | None = None
        if cfi is not None:
            if row.format != "epub":
                raise MindoryError(f"{row.title!r} is plain text: CFIs address EPUB books")
            from mindory.importers.cfi import CfiError

            with_tables = [
                places.get(i, derivation.normalization_id)
                for i in s.scalars(
                    select(SectionRow.id).where(
                        SectionRow.book_id == row.id, SectionRow.cfi_table.is_not(None)
                    )
                )
            ]
            try:
                ordinal, position, end = resolve_cfi(with_tables, cfi)
            except CfiError as exc:
                raise MindoryError(f"{row.title!r}: {exc}") from exc
            place = places.get(id_of[ordinal], derivation.normalization_id)
        else:
            assert section is not None and offset is not None
            if section not in id_of:
                raise NotFoundError(
                    f"{row.title!r} has no section {section} (sections 0–{row.section_count - 1})"
                )
            place = places.get(id_of[section], derivation.normalization_id)
            local = offset
            if utf16:
                u16 = Utf16Index(place.source_text)
                if not 0 <= offset <= u16.utf16_length:
                    raise MindoryError(
                        f"UTF-16 offset {offset} outside section {section} [0, {u16.utf16_length}]"
                    )
                try:
                    local = u16.from_utf16(offset)
                except IndexError as exc:
                    raise MindoryError(f"section {section}: {exc}") from exc
            if not 0 <= local <= len(place.source_text):
                raise MindoryError(
                    f"offset {offset} outside section {section} [0, {len(place.source_text)}]"
                )
            position = place.source_start + local
        where = locate_position(place, position, page_size=page_size)
        chunk_rows = chunk_infos(
            s, derivation.id, place.ordinal, 0, None, with_cfi=row.format == "epub"
        )
        containing = chunks_containing(chunk_rows, position)
    return LocateResult(
        book=row.sha256,
        title=row.title,
        position=where,
        chunks=tuple(containing),
        range_end=end if end is not None and end != position else None,
    )


def locate_chunk(st: State, ref: str, chunk: str, *, page_size: int = DEFAULT_PAGE_SIZE) -> Locator:
    """The Locator of a chunk of the book (its id, or a unique prefix of it)."""
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, ref)
        c, normalization_id = find_chunk(s, row, chunk)
        places = st.places_for(conn)
        place = places.get(int(c.section_id), int(normalization_id))
        places.know_bytes(int(row.id), c)
        return chunk_locator(place, c, page_size)
