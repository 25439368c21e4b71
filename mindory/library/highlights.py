"""Quotes and highlights: quote calibration, highlight CRUD in source coordinates, and
re-anchoring every highlight onto a new edition of its book."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mindory.errors import LimitError, MindoryError, NotFoundError
from mindory.library.records import ImportResult, ImportStatus
from mindory.library.ruby import ruby_loader
from mindory.library.state import State
from mindory.reading import anchoring
from mindory.reading.anchoring import (
    DEFAULT_MIN_PREFIX,
    DEFAULT_MIN_PREFIX_CJK,
    SectionHint,
    SectionText,
    StoredAnchor,
    _is_cjk_text,
    reanchor_all,
)
from mindory.reading.highlights import (
    MAX_QUOTE_CHARS,
    UNITS,
    UNSET,
    Calibration,
    Highlight,
    ReanchorReport,
    Unset,
    check_color,
    check_note,
    mark_duplicates,
)
from mindory.reading.locate import DEFAULT_PAGE_SIZE, SectionPlace, locate_span, places_from_book
from mindory.store.annotations import (
    find_highlight,
    highlight_of,
    highlight_values,
    same_identifiers,
)
from mindory.store.models import LOCAL_READER, BookRow, HighlightRow, SectionRow
from mindory.store.places import place_of, resolve_cfi_in
from mindory.store.queries import find_chunk, resolve_book
from mindory.text.offsets import Utf16Index
from mindory.text.records import Book


def _from_utf16(place: SectionPlace, start: int, end: int) -> tuple[int, int]:
    """Book UTF-16 positions of a section → book code point positions."""
    base = place.to_utf16(place.source_start)
    index = Utf16Index(place.source_text)
    out = []
    for u in (start, end):
        try:
            out.append(place.source_start + index.from_utf16(u - base))
        except IndexError as exc:
            raise MindoryError(
                f"UTF-16 position {u} of section {place.ordinal}: {exc} "
                f"(the section spans [{base}, {base + index.utf16_length}])"
            ) from exc
    return out[0], out[1]


def _clip(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def section_texts(st: State, ref: str, ordinals: Iterable[int] | None = None) -> list[SectionText]:
    """The book's sections as :class:`~mindory.reading.anchoring.SectionText` (all, or the
    given ordinals), cached: their folded text is computed once."""
    with st.read() as s:
        return section_texts_of(st, s, resolve_book(s, ref), ordinals)


def section_texts_of(
    st: State, s: Session, book: BookRow, ordinals: Iterable[int] | None = None
) -> list[SectionText]:
    wanted = None if ordinals is None else sorted(set(ordinals))
    if wanted is not None:
        for n in wanted:
            if not 0 <= n < book.section_count:
                raise NotFoundError(
                    f"{book.title!r} has no section {n} (sections 0–{book.section_count - 1})"
                )
    every = wanted if wanted is not None else list(range(book.section_count))
    found: dict[int, SectionText] = {}
    missing: list[int] = []
    for n in every:
        cached = st.texts.get((book.sha256, n))
        if cached is None:
            missing.append(n)
        else:
            found[n] = cached
    if missing:
        rows = s.execute(
            select(
                SectionRow.ordinal,
                SectionRow.source_text,
                SectionRow.source_start,
                SectionRow.href,
                SectionRow.title,
            ).where(SectionRow.book_id == book.id, SectionRow.ordinal.in_(missing))
        ).all()
        for ordinal, text, start, href, title in rows:
            ruby = ruby_loader(st, book.sha256, href) if book.format == "epub" else None
            text_of = SectionText(int(ordinal), text, int(start), href, title, ruby)
            st.texts.put((book.sha256, int(ordinal)), text_of)
            found[int(ordinal)] = text_of
    return [found[n] for n in every if n in found]


def calibrate_quote(
    st: State,
    ref: str,
    quote: str,
    *,
    section: int | None = None,
    chunk: str | None = None,
    min_prefix: int | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Calibration:
    """Find the exact source span of a quote (an assistant's citation) in a book.

    Searched: the chunk's source text, then its section (``chunk``, an id or a
    unique prefix; the chunk's span is the hint); or one ``section``; or every
    section. :func:`mindory.reading.anchoring.calibrate_quote` decides: ``exact``,
    ``normalized``, ``prefix`` (at least ``min_prefix`` folded code points;
    default 16, 5 for CJK) or ``rejected``. The answer never holds text that is
    not in the book, and keeps the raw quote.
    """
    if len(quote) > MAX_QUOTE_CHARS:
        raise LimitError(f"the quote has {len(quote):,} characters; at most {MAX_QUOTE_CHARS:,}")
    if min_prefix is not None and min_prefix < 1:
        raise MindoryError(f"min_prefix must be 1 or more, not {min_prefix}")
    chunk_ref: str | None = None
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, ref)
        hint: tuple[int, int] | None = None
        items: list[SectionText]
        if chunk is not None:
            c, insert_normalization = find_chunk(s, row, chunk)
            chunk_ref = c.chunk_id
            ordinal = int(
                s.execute(
                    select(SectionRow.ordinal).where(SectionRow.id == c.section_id)
                ).scalar_one()
            )
            if section is not None and section != ordinal:
                raise MindoryError(
                    f"chunk {c.chunk_id[:12]} is in section {ordinal}, not {section}"
                )
            (whole,) = section_texts_of(st, s, row, [ordinal])
            a, b = c.source_start - whole.source_start, c.source_end - whole.source_start
            layout = whole.ruby_layout
            if whole.ruby_index is not None and layout is not None:  # no ruby cut at its edges
                a, b = whole.ruby_index.widen(a, b)
                layout = layout.window(a, b)
            piece = SectionText(
                ordinal,
                whole.source_text[a:b],
                whole.source_start + a,
                whole.href,
                whole.title,
                layout,
            )
            items, hint, scope, searched = (
                [piece, whole],
                (c.source_start, c.source_end),
                "chunk",
                ordinal,
            )
        elif section is not None:
            items, scope, searched = section_texts_of(st, s, row, [section]), "section", section
        else:
            items, scope, searched = section_texts_of(st, s, row), "book", None
        match = anchoring.calibrate_quote(items, quote, hint=hint, min_prefix=min_prefix)
        locator = None
        if match.source_start is not None and match.source_end is not None:
            assert match.section is not None
            place = place_of(st.places_for(conn), s, row, match.section)
            locator = locate_span(place, match.source_start, match.source_end, page_size=page_size)
    floor = min_prefix
    if floor is None:
        floor = DEFAULT_MIN_PREFIX_CJK if _is_cjk_text(quote) else DEFAULT_MIN_PREFIX
    return Calibration(
        book=row.sha256,
        match=match,
        locator=locator,
        scope=scope,
        min_prefix=floor,
        chunk=chunk_ref,
        searched_section=searched,
    )


def add_highlight(
    st: State,
    ref: str,
    *,
    section: int | None = None,
    start: int | None = None,
    end: int | None = None,
    unit: str = "codepoint",
    cfi: str | None = None,
    exact: str | None = None,
    note: str | None = None,
    color: str | None = None,
    reader: str = LOCAL_READER,
) -> Highlight:
    """Store a highlight: ``section`` + ``[start, end)`` in book source coordinates
    (``unit`` ``codepoint`` or ``utf16``: as a chunk's ``source_*`` / ``utf16_*``;
    plain text counts from the file's start, EPUB from the section's), or an EPUB
    range ``cfi``. ``exact``, when given, must be the text there (a check against
    stale positions). The quote, its 32-code-point context, both spans and the
    CFI (EPUB) are stored."""
    color = check_color(color)
    note = check_note(note)
    if unit not in UNITS:
        raise MindoryError(f"unknown unit {unit!r}: use codepoint or utf16")
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, ref)
        if cfi is not None:
            if start is not None or end is not None:
                raise MindoryError("give either a CFI or a span (start, end), not both")
            if row.format != "epub":
                raise MindoryError(f"{row.title!r} is plain text: CFIs address EPUB books")
            ordinal, start, end = resolve_cfi_in(st.places_for(conn), s, row, cfi)
            if section is not None and section != ordinal:
                raise MindoryError(f"the CFI points into section {ordinal}, not {section}")
            section = ordinal
            place = place_of(st.places_for(conn), s, row, section)
        else:
            if section is None or start is None or end is None:
                raise MindoryError("a highlight needs a section and a span (start, end), or a CFI")
            place = place_of(st.places_for(conn), s, row, section)
            if unit == "utf16":
                start, end = _from_utf16(place, start, end)
        if start >= end and cfi is not None:
            raise MindoryError(
                f"the CFI {cfi} names a point (section {section}, offset {start}): a "
                "highlight needs a range, epubcfi(parent,start,end)"
            )
        if start >= end:
            raise MindoryError(
                f"the span [{start}, {end}) is empty: a highlight needs a range of text "
                "(start < end)"
            )
        if not place.source_start <= start < end <= place.source_end:
            raise MindoryError(
                f"the span [{start}, {end}) is outside section {section} "
                f"[{place.source_start}, {place.source_end})"
            )
        loc = locate_span(place, start, end)
        if exact is not None and loc.highlight != exact:
            raise MindoryError(
                f"section {section} [{start}, {end}) holds {_clip(loc.highlight)!r}, "
                f"not the given quote {_clip(exact)!r}"
            )
    now = datetime.now(UTC)
    values = highlight_values(loc, row.sha256, row.format)
    new = HighlightRow(
        uid=uuid.uuid4().hex,
        reader_id=reader,
        book_sha256=row.sha256,
        status="anchored",
        note=note,
        color=color,
        reanchored=None,
        created_at=now,
        updated_at=now,
        **values,
    )
    with st.write() as w:
        w.add(new)
    return _with_duplicates(st, ref, highlight_of(new), reader)


def highlights(
    st: State,
    ref: str,
    *,
    section: int | None = None,
    status: str | None = None,
    reader: str = LOCAL_READER,
) -> list[Highlight]:
    """The book's highlights in reading order (orphans last, by creation);
    ``section``: the anchored ones in that section; ``status``: anchored/orphaned."""
    if status is not None and status not in ("anchored", "orphaned"):
        raise MindoryError(f"unknown status {status!r}: use anchored or orphaned")
    with st.read() as s:
        row = resolve_book(s, ref)
        q = select(HighlightRow).where(
            HighlightRow.book_sha256 == row.sha256, HighlightRow.reader_id == reader
        )
        if section is not None:
            q = q.where(HighlightRow.section == section, HighlightRow.status == "anchored")
        if status is not None:
            q = q.where(HighlightRow.status == status)
        q = q.order_by(
            HighlightRow.status,
            HighlightRow.section,
            HighlightRow.source_start,
            HighlightRow.source_end,
            HighlightRow.created_at,
            HighlightRow.id,
        )
        return mark_duplicates([highlight_of(h) for h in s.scalars(q)])


def highlight(st: State, ref: str, highlight: str, *, reader: str = LOCAL_READER) -> Highlight:
    """One highlight of the book by its id (``urn:uuid:…`` or the bare UUID)."""
    with st.read() as s:
        found = highlight_of(find_highlight(s, resolve_book(s, ref), highlight, reader))
    return _with_duplicates(st, ref, found, reader)


def _with_duplicates(st: State, ref: str, h: Highlight, reader: str) -> Highlight:
    """``h`` with ``duplicate_of`` set when an earlier highlight of the reader marks the
    same span (allowed, and reported so an app can decide)."""
    if h.status != "anchored":
        return h
    same = [o for o in highlights(st, ref, section=h.section, reader=reader) if o.same_span(h)]
    return next((o for o in mark_duplicates(same) if o.id == h.id), h)


def update_highlight(
    st: State,
    ref: str,
    highlight: str,
    *,
    note: str | None | Unset = UNSET,
    color: str | Unset = UNSET,
    reader: str = LOCAL_READER,
) -> Highlight:
    """Change a highlight's note (None clears it) and/or colour; the rest stays."""
    new_note = note if isinstance(note, Unset) else check_note(note)
    new_color = color if isinstance(color, Unset) else check_color(color)
    with st.write() as w:
        h = find_highlight(w, resolve_book(w, ref), highlight, reader)
        if not isinstance(new_note, Unset):
            h.note = new_note
        if not isinstance(new_color, Unset):
            h.color = new_color
        h.updated_at = datetime.now(UTC)
        w.flush()
        return highlight_of(h)


def delete_highlight(
    st: State, ref: str, highlight: str, *, reader: str = LOCAL_READER
) -> Highlight:
    """Delete one highlight; returns it as it was."""
    with st.write() as w:
        h = find_highlight(w, resolve_book(w, ref), highlight, reader)
        out = highlight_of(h)
        w.delete(h)
    return out


def replaced_book(st: State, p: Path, sha: str, replaces: str) -> str:
    """The SHA-256 of the book ``replaces`` names (a new edition must differ)."""
    with st.read() as s:
        row = resolve_book(s, replaces)
    if row.sha256 == sha:
        raise MindoryError(
            f"this is the very file of {row.title!r} ({sha[:12]}); "
            "a new edition to replace it must differ",
            path=str(p),
        )
    return row.sha256


def new_edition(
    st: State, s: Session, book: Book, status: ImportStatus, replaces: str | None
) -> dict[str, Any]:
    """Inside an import's write transaction: move the highlights, reading positions and
    bookmarks of the book ``replaces`` names — or, for a new book, of the books sharing
    a package identifier with it — onto ``book``. The ImportResult fields to set."""
    olds = [replaces] if replaces is not None else []
    if not olds and status == "created":
        olds = same_identifiers(s, book)
    if not olds:
        return {}
    places: dict[int, SectionPlace] = {}

    def place(ordinal: int) -> SectionPlace:
        if ordinal not in places:
            places[ordinal] = places_from_book(book, only=ordinal)[0]
        return places[ordinal]

    texts = SectionText.from_book(book)
    reports = move_highlights(st, s, olds, book.sha256, book.format, texts, place)
    reports += _move_places(st, s, olds, book.sha256, book.format, texts, place)
    _alias_keys(s, olds, book.sha256)
    return {"replaces": tuple(olds), "reanchored": tuple(reports)}


def _alias_keys(s: Session, olds: Sequence[str], new_sha: str) -> None:
    """KOReader's document keys of the replaced files, kept as aliases of the new edition."""
    from mindory.store.document_keys import add_aliases

    for old in olds:
        add_aliases(s, old, new_sha)


def reanchor_stored(st: State, result: ImportResult, old: str) -> ImportResult:
    """An import that found its file already stored, with ``replaces``: move the
    old book's highlights onto it in a transaction of their own."""
    with st.write() as w:
        row = resolve_book(w, result.book)
        conn = w.connection()
        places: dict[int, SectionPlace] = {}

        def place(ordinal: int) -> SectionPlace:
            if ordinal not in places:
                places[ordinal] = place_of(st.places_for(conn), w, row, ordinal)
            return places[ordinal]

        texts = section_texts_of(st, w, row)
        reports = move_highlights(st, w, [old], row.sha256, row.format, texts, place)
        reports += _move_places(st, w, [old], row.sha256, row.format, texts, place)
        _alias_keys(w, [old], row.sha256)
    return replace(result, replaces=(old,), reanchored=tuple(reports))


def _move_places(
    st: State,
    s: Session,
    olds: Sequence[str],
    new_sha: str,
    new_format: str,
    new_texts: Sequence[SectionText],
    new_place: Callable[[int], SectionPlace],
) -> list[ReanchorReport]:
    """The reading positions and bookmarks, re-anchored as the highlights were."""
    from mindory.library.positions import move_places

    def old_texts(s: Session, book: BookRow, ordinals: list[int]) -> list[SectionText]:
        return section_texts_of(st, s, book, ordinals)

    return move_places(s, olds, new_sha, new_format, new_texts, new_place, old_texts)


def move_highlights(
    st: State,
    s: Session,
    olds: Sequence[str],
    new_sha: str,
    new_format: str,
    new_texts: Sequence[SectionText],
    new_place: Callable[[int], SectionPlace],
) -> list[ReanchorReport]:
    """Re-anchor every highlight of the books ``olds`` onto the book ``new_sha``
    (inside the caller's write transaction) and move them to it; one report each.

    A placed highlight gets the new coordinates, quote, context and CFI; an orphan
    keeps its old place and quote (``edition`` still names the book they refer to)
    and is listed under the new book as ``orphaned``. The old sections are given to
    re-anchoring as text when their book is still here (landmarks carry positions
    over precisely), else as ordinal + href.
    """
    rows = list(
        s.scalars(
            select(HighlightRow)
            .where(HighlightRow.book_sha256.in_(list(olds)))
            .order_by(HighlightRow.id)
        )
    )
    if not rows:
        return []
    by_edition: dict[str, list[HighlightRow]] = {}
    for h in rows:
        by_edition.setdefault(h.edition_sha256, []).append(h)
    now = datetime.now(UTC)
    reports: dict[int, ReanchorReport] = {}
    for edition, group in by_edition.items():
        ed_row = s.scalar(select(BookRow).where(BookRow.sha256 == edition))
        hints: list[SectionText | SectionHint] = []
        wanted = sorted({h.section for h in group})
        if ed_row is not None:
            known = [n for n in wanted if 0 <= n < ed_row.section_count]
            hints.extend(section_texts_of(st, s, ed_row, known))
            wanted = [n for n in wanted if n not in known]
        hrefs = {h.section: h.href for h in group}
        hints.extend(SectionHint(ordinal=n, href=hrefs[n]) for n in wanted)
        anchors = [
            StoredAnchor(
                section=h.section,
                source_start=h.source_start,
                source_end=h.source_end,
                exact=h.exact,
                prefix=h.prefix,
                suffix=h.suffix,
                href=h.href,
                id=h.uid,
            )
            for h in group
        ]
        for h, r in zip(group, reanchor_all(anchors, hints, new_texts), strict=True):
            report = ReanchorReport(
                id=h.uid,
                status=r.status,
                confidence=r.confidence,
                note=r.note,
                old_book=h.book_sha256,
                old_section=h.section,
                old_source=(h.source_start, h.source_end),
                old_exact=h.exact,
                new_book=new_sha,
                changed=r.changed,
                edits=r.edits,
            )
            if r.placed:
                assert r.section is not None
                assert r.source_start is not None and r.source_end is not None
                loc = locate_span(new_place(r.section), r.source_start, r.source_end)
                for key, value in highlight_values(loc, new_sha, new_format).items():
                    setattr(h, key, value)
                h.status = "anchored"
                report = replace(
                    report,
                    new_section=loc.section,
                    new_source=(loc.source_start, loc.source_end),
                    new_utf16=(loc.utf16_start, loc.utf16_end),
                    new_exact=loc.highlight,
                )
            else:
                h.status = "orphaned"
            h.book_sha256 = new_sha
            h.reanchored = report.stored(now)
            h.updated_at = now
            reports[h.id] = report
    s.flush()
    return [reports[h.id] for h in rows]
