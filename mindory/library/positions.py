"""Reading positions and bookmarks (docs/reading-state.md): a place a client names
(:class:`~mindory.reading.positions.PlaceIn`) resolved into the full Locator and kept like a
highlight — source coordinates of an edition plus a text quote — per reader; the newest
``modified`` wins; and every kept place re-anchored onto a new edition of its book."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from mindory.errors import ConflictError, MindoryError, NotFoundError
from mindory.library.state import State
from mindory.reading.anchoring import SectionHint, SectionText, StoredAnchor, reanchor_all
from mindory.reading.highlights import ReanchorReport
from mindory.reading.locate import SectionPlace
from mindory.reading.positions import (
    Bookmark,
    PlaceIn,
    Position,
    bookmark_id,
    check_device,
    check_title,
    parse_time,
    position_id,
)
from mindory.store.annotations import utc
from mindory.store.models import LOCAL_READER, BookmarkRow, BookRow, PositionRow, SectionRow
from mindory.store.places import place_of, resolve_cfi_in
from mindory.store.queries import resolve_book
from mindory.store.readers import (
    bookmark_of,
    find_bookmark,
    latest_position,
    place_values,
    position_of,
)
from mindory.text.offsets import Utf16Index

HISTORY_KEEP = 100  # positions kept per reader, book and device
MAX_HISTORY = 1000

OldTexts = Callable[[Session, BookRow, list[int]], list[SectionText]]


# --------------------------------------------------------------------------- resolving


def _section_of(s: Session, row: BookRow, place: PlaceIn) -> int:
    if place.section is not None:
        if not 0 <= place.section < row.section_count:
            raise MindoryError(
                f"{row.title!r} has no section {place.section} "
                f"(sections 0–{row.section_count - 1}): the place is outside the book"
            )
        return place.section
    assert place.href is not None
    if row.format != "epub":
        raise MindoryError(f"{row.title!r} is plain text: name the section, not an href")
    found = s.scalar(
        select(SectionRow.ordinal).where(
            SectionRow.book_id == row.id, SectionRow.href == place.href.split("#", 1)[0]
        )
    )
    if found is None:
        raise MindoryError(f"{row.title!r} has no content document {place.href!r}")
    return int(found)


def _from_offset(p: SectionPlace, offset: int, unit: str) -> int:
    if unit == "utf16":
        base = p.to_utf16(p.source_start)
        index = Utf16Index(p.source_text)
        try:
            return p.source_start + index.from_utf16(offset - base)
        except IndexError as exc:
            raise MindoryError(
                f"UTF-16 offset {offset} is outside section {p.ordinal} "
                f"[{base}, {base + index.utf16_length}] (or inside a character): {exc}"
            ) from exc
    if not p.source_start <= offset <= p.source_end:
        # The hint names the book's own convention (docs/coordinates.md).
        counts = (
            "plain text counts from the file's start"
            if p.book_format == "txt"
            else "EPUB offsets count from the section's start"
        )
        raise MindoryError(
            f"offset {offset} is outside section {p.ordinal} [{p.source_start}, {p.source_end}] "
            f"(book source coordinates: {counts})"
        )
    return offset


def _total(
    st: State, conn: Connection, s: Session, row: BookRow, fraction: float
) -> tuple[SectionPlace, int]:
    """(place, point) at ``fraction`` of the book's source characters."""
    rows = s.execute(
        select(SectionRow.ordinal, SectionRow.source_start, SectionRow.source_length)
        .where(SectionRow.book_id == row.id)
        .order_by(SectionRow.ordinal)
    ).all()
    if row.format == "txt":
        total = max(int(a) + int(n) for _, a, n in rows)
        target = round(fraction * total)
        ordinal = max((int(o) for o, a, _ in rows if int(a) <= target), default=0)
        p = place_of(st.places_for(conn), s, row, ordinal)
        return p, min(max(target, p.source_start), p.source_end)
    total = sum(int(n) for _, _, n in rows)
    target = round(fraction * total)
    before = 0
    for ordinal, _, n in rows:
        if target < before + int(n) or int(ordinal) == int(rows[-1][0]):
            p = place_of(st.places_for(conn), s, row, int(ordinal))
            return p, min(max(0, target - before), p.source_end)
        before += int(n)
    raise MindoryError(f"{row.title!r} has no sections")  # pragma: no cover


def resolve_place(
    st: State, conn: Connection, s: Session, row: BookRow, place: PlaceIn
) -> tuple[SectionPlace, int]:
    """A place as a client names it → its section's place and the point (book source
    coordinates). MindoryError when it is not in the book."""
    places = st.places_for(conn)
    if place.cfi is not None:
        if row.format != "epub":
            raise MindoryError(f"{row.title!r} is plain text: CFIs address EPUB books")
        ordinal, start, _end = resolve_cfi_in(places, s, row, place.cfi)
        return place_of(places, s, row, ordinal), start
    if place.total_progression is not None:
        return _total(st, conn, s, row, place.total_progression)
    if place.position is not None:  # Readium's position N: the place an app shows for it
        from mindory.library.manifest import resolve_position

        return resolve_position(st, conn, s, row, place.position)
    if place.progression is not None and place.href is not None:
        from mindory.library.manifest import resolve_progression

        found = resolve_progression(st, conn, s, row, place.href, place.progression)
        if found is not None:  # an href of the Readium manifest: Readium's rule
            return found
    p = place_of(places, s, row, _section_of(s, row, place))
    if place.offset is not None:
        return p, _from_offset(p, place.offset, place.unit)
    if place.progression is not None:
        return p, p.source_start + round(place.progression * len(p.source_text))
    return p, p.source_start


def _resolved(st: State, ref: str, place: PlaceIn) -> tuple[BookRow, dict[str, object]]:
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, ref)
        p, point = resolve_place(st, conn, s, row, place)
        return row, place_values(p, point, row.sha256, row.format)


# --------------------------------------------------------------------------- positions


def set_position(
    st: State,
    ref: str,
    place: PlaceIn,
    *,
    device: str,
    modified: str | datetime,
    reader: str = LOCAL_READER,
    client: dict[str, Any] | None = None,
) -> Position:
    """Keep the reader's position in the book as ``device`` sent it at ``modified`` (the
    client's time). An older ``modified`` than the newest kept one (or the same one with
    another place) raises :class:`~mindory.errors.ConflictError` carrying the current
    position, and writes nothing; the very same write again returns it unchanged.
    ``client``: what the app sent beside the place (KOReader: its xpointer, percentage,
    device id), kept with the row, never used to place it."""
    device = check_device(device)
    when = parse_time(modified)
    row, values = _resolved(st, ref, place)
    with st.write() as w:
        current = latest_position(w, reader, row.sha256)
        if current is not None:
            now_at = utc(current.modified)
            same = current.device == device and current.point == values["point"]
            if when == now_at and same and current.status == "anchored":
                return position_of(current)
            if when <= now_at:
                raise ConflictError(
                    f"a newer position is kept (modified {now_at.isoformat()} on "
                    f"{current.device!r}); this one (modified {when.isoformat()}) is older",
                    current=position_of(current).to_json(),
                )
        new = PositionRow(
            uid=position_id(reader, row.sha256, device, when),
            reader_id=reader,
            book_sha256=row.sha256,
            status="anchored",
            device=device,
            modified=when,
            received_at=datetime.now(UTC),
            reanchored=None,
            client=client,
            **values,
        )
        w.add(new)
        w.flush()
        old = list(
            w.scalars(
                select(PositionRow)
                .where(
                    PositionRow.reader_id == reader,
                    PositionRow.book_sha256 == row.sha256,
                    PositionRow.device == device,
                )
                .order_by(PositionRow.modified.desc(), PositionRow.id.desc())
                .offset(HISTORY_KEEP)
            )
        )
        for gone in old:
            w.delete(gone)
        return position_of(new)


def position(st: State, ref: str, *, reader: str = LOCAL_READER) -> Position:
    """The reader's newest position in the book (NotFoundError: none yet)."""
    with st.read() as s:
        row = resolve_book(s, ref)
        found = latest_position(s, reader, row.sha256)
        if found is None:
            raise NotFoundError(f"no reading position in {row.title!r} yet")
        return position_of(found)


def position_history(
    st: State,
    ref: str,
    *,
    reader: str = LOCAL_READER,
    device: str | None = None,
    limit: int = HISTORY_KEEP,
) -> list[Position]:
    """The reader's kept positions in the book, newest first (one device's, or all)."""
    if not 1 <= limit <= MAX_HISTORY:
        raise MindoryError(f"limit must be 1–{MAX_HISTORY}, not {limit}")
    with st.read() as s:
        row = resolve_book(s, ref)
        q = select(PositionRow).where(
            PositionRow.reader_id == reader, PositionRow.book_sha256 == row.sha256
        )
        if device is not None:
            q = q.where(PositionRow.device == device)
        q = q.order_by(PositionRow.modified.desc(), PositionRow.id.desc()).limit(limit)
        return [position_of(p) for p in s.scalars(q)]


# --------------------------------------------------------------------------- bookmarks


def add_bookmark(
    st: State, ref: str, place: PlaceIn, *, title: str | None = None, reader: str = LOCAL_READER
) -> Bookmark:
    """Bookmark a place; its id is derived from (reader, book, place), so the same place
    again gives the same bookmark (its title updated when one is given; ``new`` False)."""
    title = check_title(title)
    row, values = _resolved(st, ref, place)
    uid = bookmark_id(reader, row.sha256, int(str(values["section"])), int(str(values["point"])))
    with st.write() as w:
        found = w.scalar(
            select(BookmarkRow).where(BookmarkRow.uid == uid, BookmarkRow.reader_id == reader)
        )
        if found is not None:
            if title is not None:
                found.title = title
            w.flush()
            return bookmark_of(found)
        new = BookmarkRow(
            uid=uid,
            reader_id=reader,
            book_sha256=row.sha256,
            status="anchored",
            title=title,
            created_at=datetime.now(UTC),
            reanchored=None,
            **values,
        )
        w.add(new)
        w.flush()
        return bookmark_of(new, new=True)


def bookmarks(st: State, ref: str, *, reader: str = LOCAL_READER) -> list[Bookmark]:
    """The reader's bookmarks in the book, in reading order (orphans last)."""
    with st.read() as s:
        row = resolve_book(s, ref)
        q = (
            select(BookmarkRow)
            .where(BookmarkRow.reader_id == reader, BookmarkRow.book_sha256 == row.sha256)
            .order_by(BookmarkRow.status, BookmarkRow.section, BookmarkRow.point, BookmarkRow.uid)
        )
        return [bookmark_of(b) for b in s.scalars(q)]


def bookmark(st: State, ref: str, bookmark: str, *, reader: str = LOCAL_READER) -> Bookmark:
    with st.read() as s:
        return bookmark_of(find_bookmark(s, reader, resolve_book(s, ref), bookmark))


def delete_bookmark(st: State, ref: str, bookmark: str, *, reader: str = LOCAL_READER) -> Bookmark:
    """Delete one of the reader's bookmarks; returns it as it was."""
    with st.write() as w:
        found = find_bookmark(w, reader, resolve_book(w, ref), bookmark)
        out = bookmark_of(found)
        w.delete(found)
    return out


# --------------------------------------------------------------------------- new editions


def move_places(
    s: Session,
    olds: Sequence[str],
    new_sha: str,
    new_format: str,
    new_texts: Sequence[SectionText],
    new_place: Callable[[int], SectionPlace],
    old_texts: OldTexts,
) -> list[ReanchorReport]:
    """Re-anchor every position and bookmark of the books ``olds`` onto ``new_sha``,
    exactly as highlights are (position → exact quote → normalized → fuzzy → orphaned),
    inside the caller's write transaction; one report each (``kind`` says which).

    A placed one gets the new point (the quoted text's start, or its end when the place
    was at a section's end), quote and Locator; an orphan keeps its old place and quote.
    """
    reports: list[ReanchorReport] = []
    now = datetime.now(UTC)
    for kind, model in (("position", PositionRow), ("bookmark", BookmarkRow)):
        rows: list[PositionRow | BookmarkRow] = list(
            s.scalars(select(model).where(model.book_sha256.in_(list(olds))).order_by(model.id))
        )
        by_edition: dict[str, list[PositionRow | BookmarkRow]] = {}
        for r in rows:
            by_edition.setdefault(r.edition_sha256, []).append(r)
        for edition, group in by_edition.items():
            ed_row = s.scalar(select(BookRow).where(BookRow.sha256 == edition))
            hints: list[SectionText | SectionHint] = []
            wanted = sorted({r.section for r in group})
            if ed_row is not None:
                known = [n for n in wanted if 0 <= n < ed_row.section_count]
                hints.extend(old_texts(s, ed_row, known))
                wanted = [n for n in wanted if n not in known]
            hrefs = {r.section: r.href for r in group}
            hints.extend(SectionHint(ordinal=n, href=hrefs[n]) for n in wanted)
            quoted = [r for r in group if r.exact]
            anchors = [
                StoredAnchor(
                    section=r.section,
                    source_start=r.source_start,
                    source_end=r.source_end,
                    exact=r.exact,
                    prefix=r.prefix,
                    suffix=r.suffix,
                    href=r.href,
                    id=r.uid,
                )
                for r in quoted
            ]
            results = dict(zip((r.uid for r in quoted), reanchor_all(anchors, hints, new_texts)))
            for r in group:
                got = results.get(r.uid)
                report = ReanchorReport(
                    id=r.uid,
                    kind=kind,
                    status=got.status if got is not None else "orphaned",
                    confidence=got.confidence if got is not None else 0.0,
                    note=got.note if got is not None else "an empty section: no text to look for",
                    old_book=r.book_sha256,
                    old_section=r.section,
                    old_source=(r.point, r.point),
                    old_exact=r.exact,
                    new_book=new_sha,
                    changed=got.changed if got is not None else False,
                    edits=got.edits if got is not None else None,
                )
                if got is not None and got.placed:
                    assert got.section is not None
                    assert got.source_start is not None and got.source_end is not None
                    at_end = r.point >= r.source_end and r.source_end > r.source_start
                    point = got.source_end if at_end else got.source_start
                    values = place_values(new_place(got.section), point, new_sha, new_format)
                    for key, value in values.items():
                        setattr(r, key, value)
                    r.status = "anchored"
                    loc = r.locator["source"]
                    report = replace(
                        report,
                        new_section=got.section,
                        new_source=(point, point),
                        new_utf16=(int(loc["utf16Start"]), int(loc["utf16End"])),
                        new_exact=r.exact,
                    )
                else:
                    r.status = "orphaned"
                r.book_sha256 = new_sha
                r.reanchored = report.stored(now)
                reports.append(report)
    s.flush()
    return reports
