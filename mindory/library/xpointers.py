"""KOReader (crengine) xpointers of a stored book: a mindory place ⇄ the xpointer
KOReader's progress sync sends (docs/koreader.md).

The translation itself is pure (:mod:`mindory.reading.xpointer`); this module finds a
book's spine (section media types and hrefs), reads a section's XHTML bytes from the
stored book file as :meth:`Library.resource` does, checks that crengine's view of them
rebuilds the stored source text exactly, and keeps the views in a small in-memory LRU
keyed by (book SHA-256, section ordinal, DOM version) — content keys, so a cached view
never goes stale — so a kosync request costs a dictionary lookup once the section has
been seen.

A plain-text book is mapped as KOReader opens it by default (pre-formatted: one
``<pre>`` per line, :class:`~mindory.reading.xpointer.TxtView`), in book-global source
coordinates, when crengine must decode it as mindory did (ASCII, UTF-8, UTF-16 with a
BOM, nothing replaced); other encodings and xpointers from KOReader's "auto-detect TXT
layout" are refused with :class:`~mindory.errors.XPointerError` saying why
(docs/koreader.md).
"""

from __future__ import annotations

import codecs
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass

from sqlalchemy import select

from mindory.errors import MindoryError, XPointerError
from mindory.library.state import State
from mindory.reading.xpointer import (
    DOM_20240114,
    DOM_20260812,
    CreView,
    TxtView,
    fragment_count,
    fragment_of_section,
    offset_of_xpointer,
    parse_xpointer,
    section_of_fragment,
    view_of_document,
    xpointer_of_offset,
)
from mindory.store.models import SectionRow
from mindory.store.queries import resolve_book

__all__ = ["clear_cache", "place_of_xpointer", "xpointer_of"]

VIEW_CACHE_ENTRIES = 64
VIEW_CACHE_CHARS = 8_000_000

# Encodings crengine's detection (LVTextFileBase::AutodetectEncoding) reads exactly as
# mindory's does; for legacy code pages the two detectors may pick different tables.
TXT_EXACT_ENCODINGS = frozenset({"ascii", "utf-8", "utf-16-le", "utf-16-be"})


@dataclass(frozen=True)
class _Spine:
    sha: str
    title: str
    format: str
    hrefs: tuple[str | None, ...]
    media_types: tuple[str, ...]
    parsers: tuple[str, ...]
    starts: tuple[int, ...]  # each section's source_start (plain text: file-global)
    ends: tuple[int, ...]
    encoding: str | None
    lossy: bool


class _Views:
    """A bounded LRU of crengine views (by entries and by source characters held)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, int], CreView | TxtView] = OrderedDict()
        self._chars = 0
        self.spines: dict[str, _Spine] = {}

    def get(self, key: tuple[str, int]) -> CreView | TxtView | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[str, int], view: CreView | TxtView) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = view
            self._chars += len(view.source_text)
            while len(self._items) > 1 and (
                len(self._items) > VIEW_CACHE_ENTRIES or self._chars > VIEW_CACHE_CHARS
            ):
                _, old = self._items.popitem(last=False)
                self._chars -= len(old.source_text)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.spines.clear()
            self._chars = 0


_VIEWS = _Views()


def clear_cache() -> None:
    """Forget every cached view and spine (tests; a process that wants memory back)."""
    _VIEWS.clear()


def _spine(st: State, ref: str) -> _Spine:
    with st.read() as s:
        row = resolve_book(s, ref)
        found = _VIEWS.spines.get(row.sha256)
        if found is not None:
            return found
        rows = s.execute(
            select(
                SectionRow.href,
                SectionRow.media_type,
                SectionRow.parser,
                SectionRow.source_start,
                SectionRow.source_length,
            )
            .where(SectionRow.book_id == row.id)
            .order_by(SectionRow.ordinal)
        ).all()
        spine = _Spine(
            row.sha256,
            row.title,
            row.format,
            tuple(r[0] for r in rows),
            tuple(str(r[1] or "") for r in rows),
            tuple(str(r[2] or "") for r in rows),
            tuple(int(r[3]) for r in rows),
            tuple(int(r[3]) + int(r[4]) for r in rows),
            row.encoding,
            bool(row.lossy),
        )
    _VIEWS.spines[spine.sha] = spine
    return spine


def _view(st: State, spine: _Spine, ordinal: int) -> CreView:
    key = (spine.sha, ordinal)
    found = _VIEWS.get(key)
    if isinstance(found, CreView):
        return found
    from mindory.library import catalogue

    href = spine.hrefs[ordinal]
    data = None
    if spine.parsers[ordinal] != "none" and href:
        data = catalogue.resource(st, spine.sha, href).data
    view = view_of_document(data, href or "", spine.title)
    with st.read() as s:
        row = resolve_book(s, spine.sha)
        stored = s.scalar(
            select(SectionRow.source_text).where(
                SectionRow.book_id == row.id, SectionRow.ordinal == ordinal
            )
        )
    if stored is None or view.source_text != stored:
        raise MindoryError(
            f"{spine.title!r}: section {ordinal} ({href}) of the book file does not rebuild "
            "its stored text; no xpointer can be mapped exactly"
        )
    _VIEWS.put(key, view)
    return view


def _txt_view(st: State, spine: _Spine) -> TxtView:
    """The pre-formatted view of a plain-text book (the whole decoded file)."""
    key = (spine.sha, -1)
    found = _VIEWS.get(key)
    if isinstance(found, TxtView):
        return found
    encoding = (spine.encoding or "").lower()
    if spine.lossy or encoding not in TXT_EXACT_ENCODINGS:
        raise XPointerError(
            f"{spine.title!r} is plain text decoded as {spine.encoding or 'unknown'}"
            f"{' with replaced bytes' if spine.lossy else ''}: crengine detects a .txt "
            "file's code page itself (LVTextFileBase::AutodetectEncoding), so its character "
            "offsets are known to match mindory's only for ASCII, UTF-8 and UTF-16 with a "
            "BOM; sync this book by percentage"
        )
    if encoding.startswith("utf-16"):
        from mindory.library import catalogue

        head = catalogue.book_file(st, spine.sha)[:2]
        if head not in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
            raise XPointerError(
                f"{spine.title!r} is UTF-16 without a byte-order mark: crengine's code page "
                "detection may read it otherwise; sync this book by percentage"
            )
    with st.read() as s:
        row = resolve_book(s, spine.sha)
        texts = s.execute(
            select(SectionRow.source_start, SectionRow.source_text)
            .where(SectionRow.book_id == row.id)
            .order_by(SectionRow.ordinal)
        ).all()
    pos = 0
    for start, text in texts:
        if int(start) != pos:
            raise MindoryError(f"{spine.title!r}: its sections are not contiguous at {pos}")
        pos += len(text)
    view = TxtView("".join(str(t) for _, t in texts))
    _VIEWS.put(key, view)
    return view


def _check_section(spine: _Spine, section: int) -> None:
    if not 0 <= section < len(spine.media_types):
        raise XPointerError(
            f"{spine.title!r} has no section {section} (sections 0–{len(spine.media_types) - 1})"
        )


def xpointer_of(
    st: State, ref: str, section: int, source_offset: int, *, dom_version: int = DOM_20240114
) -> str:
    """The xpointer KOReader would write for the character at ``source_offset`` (book
    source coordinates, as ``PlaceIn(section, offset)`` takes them: EPUB section-local,
    plain text file-global) of section ``section``. A point in whitespace crengine collapses or drops maps forward to
    the next character it keeps. ``dom_version``: 20240114 (KOReader's releases: ``[1]``
    only beside a same-name sibling) or 20260812 (``[1]`` on every step)."""
    spine = _spine(st, ref)
    _check_section(spine, section)
    if spine.format != "epub":
        start, end = spine.starts[section], spine.ends[section]
        if not start <= source_offset <= end:
            raise XPointerError(
                f"offset {source_offset} is outside section {section} [{start}, {end}] "
                "(plain text counts from the file's start)"
            )
        return _txt_view(st, spine).xpointer_at(
            source_offset, explicit_first=dom_version >= DOM_20260812
        )
    view = _view(st, spine, section)
    return xpointer_of_offset(
        view,
        source_offset,
        fragment=fragment_of_section(section, spine.media_types, dom_version),
        fragments=fragment_count(spine.media_types, dom_version),
        dom_version=dom_version,
    )


def place_of_xpointer(
    st: State, ref: str, xpointer: str, *, dom_version: int = DOM_20240114
) -> tuple[int, int]:
    """``(section ordinal, source offset)`` of an xpointer KOReader sent, in the
    coordinates ``Library.set_position(ref, PlaceIn(section=..., offset=...))`` takes
    (EPUB: section-local code points; plain text: file-global). Both DOM spellings
    (``p`` / ``p[1]``) are read. Raises :class:`XPointerError`: malformed, a DocFragment
    outside the spine, a path naming no node, an offset past its node's text, a
    plain-text book crengine may decode otherwise or read with auto-detected layout."""
    xp = parse_xpointer(xpointer)
    spine = _spine(st, ref)
    if spine.format != "epub":
        if xp.fragment is not None:
            raise XPointerError(
                f"xpointer {xpointer!r} names a DocFragment, but {spine.title!r} is plain text "
                "(KOReader writes /FictionBook/body/pre[N]/text().K for it)"
            )
        txt = _txt_view(st, spine)
        try:
            offset = txt.resolve(xp)
        except XPointerError as exc:
            raise XPointerError(f"xpointer {xpointer!r} in {spine.title!r}: {exc.message}") from exc
        # the section holding the offset (at a boundary: the one that starts there)
        ordinal = max(0, bisect_right(spine.starts, offset) - 1)
        return ordinal, offset
    if xp.fragment is None:
        raise XPointerError(
            f"xpointer {xpointer!r} has no DocFragment step: not an EPUB position "
            "(KOReader writes /body/DocFragment[N]/... for EPUB books)"
        )
    ordinal = section_of_fragment(xp.fragment, spine.media_types, dom_version)
    view = _view(st, spine, ordinal)
    try:
        return ordinal, offset_of_xpointer(view, xp)
    except XPointerError as exc:
        raise XPointerError(f"xpointer {xpointer!r} in {spine.title!r}: {exc.message}") from exc
