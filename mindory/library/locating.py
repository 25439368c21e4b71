"""Locating: a CFI, a section offset or a chunk → section, block, page, Locator."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mindory.errors import MindoryError, NotFoundError
from mindory.library.records import LocateResult
from mindory.library.state import State
from mindory.reading.chunk_spans import chunks_containing
from mindory.reading.locate import (
    DEFAULT_PAGE_SIZE,
    Locator,
    SectionPlace,
    locate_position,
    resolve_cfi,
)
from mindory.search.hits import chunk_locator
from mindory.store.models import BookRow, SectionRow
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
    section_offset: int | None = None,
    utf16: bool = False,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> LocateResult:
    """A place in a book → section, block, page, and the chunks containing it.

    Either ``cfi`` (EPUB; a point or the start of a range), or ``offset`` — a position
    in **book source coordinates** (docs/coordinates.md): plain text counts from the
    start of the decoded file, as a chunk's ``source_start``, a hit's ``char=N`` and
    ``POST /highlights`` do; EPUB from the start of the section's DOM text — with
    ``section`` (which a plain-text book may leave out: the section holding the offset
    is taken), or ``section`` and ``section_offset``, counted from the start of that
    section's source text. Code points, or UTF-16 units with ``utf16=True`` (then
    ``offset`` is a chunk's ``utf16_start`` kind of number).
    """
    if offset is not None and section_offset is not None:
        raise MindoryError("give an offset (book coordinates) or a section offset, not both")
    if section_offset is not None and section is None:
        raise MindoryError("a section offset needs its section")
    if (cfi is None) == (offset is None and section_offset is None):
        raise MindoryError(
            "give either a CFI, or an offset (book coordinates), or a section and a section offset"
        )
    if cfi is not None and section is not None:
        raise MindoryError("give either a CFI or a section, not both")
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
            if section is None:
                assert offset is not None
                section = _section_holding(s, row, offset, utf16)
            if section not in id_of:
                raise NotFoundError(
                    f"{row.title!r} has no section {section} (sections 0–{row.section_count - 1})"
                )
            place = places.get(id_of[section], derivation.normalization_id)
            position = _source_position(place, offset, section_offset, utf16)
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


def _section_holding(s: Session, row: BookRow, offset: int, utf16: bool) -> int:
    """The section of a plain-text book whose source span holds a book offset (a section
    boundary belongs to the section it starts; the end of the file to the last one)."""
    if row.format != "txt":
        raise MindoryError(
            f"{row.title!r} is an EPUB: its offsets count from each section's start, "
            "so give the section too"
        )
    start_col = SectionRow.utf16_start if utf16 else SectionRow.source_start
    found = s.scalar(
        select(SectionRow.ordinal)
        .where(SectionRow.book_id == row.id, start_col <= offset)
        .order_by(SectionRow.ordinal.desc())
        .limit(1)
    )
    if found is None:
        raise MindoryError(f"offset {offset} is before the first section of {row.title!r}")
    return int(found)


def _source_position(
    place: SectionPlace, offset: int | None, section_offset: int | None, utf16: bool
) -> int:
    """A book offset or a section offset (code points or UTF-16 units) → a book source
    position in code points, checked to lie in the section ``[source_start, source_end]``."""
    u16 = Utf16Index(place.source_text) if utf16 else None
    base = place.to_utf16(place.source_start) if utf16 else place.source_start
    length = u16.utf16_length if u16 is not None else len(place.source_text)
    unit = "UTF-16 offset" if utf16 else "offset"
    if section_offset is not None:
        local = section_offset
        if not 0 <= local <= length:
            raise MindoryError(
                f"section {unit} {section_offset} outside section {place.ordinal} [0, {length}]"
            )
    else:
        assert offset is not None
        local = offset - base
        if not 0 <= local <= length:
            hint = (
                " (book coordinates: plain text counts from the start of the file; to count "
                "from the section's start, give a section offset: --section-offset, "
                "section_offset)"
                if place.book_format == "txt"
                else ""
            )
            raise MindoryError(
                f"{unit} {offset} outside section {place.ordinal} [{base}, {base + length}]{hint}"
            )
    if u16 is not None:
        try:
            local = u16.from_utf16(local)
        except IndexError as exc:
            raise MindoryError(f"section {place.ordinal}: {exc}") from exc
    return place.source_start + local


def locate_chunk(st: State, ref: str, chunk: str, *, page_size: int = DEFAULT_PAGE_SIZE) -> Locator:
    """The Locator of a chunk of the book (its id, or a unique prefix of it)."""
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, ref)
        c, normalization_id = find_chunk(s, row, chunk)
        places = st.places_for(conn)
        place = places.get(int(c.section_id), int(normalization_id))
        places.know_bytes(int(row.id), c)
        return chunk_locator(place, c, page_size)
