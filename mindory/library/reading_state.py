"""The reading-state half of :class:`~mindory.library.Library`: quotes, highlights,
annotation files, readers, positions and bookmarks. Each method is a short delegation
to the module of its concern (:mod:`~mindory.library.highlights`,
:mod:`~mindory.library.annotations`, :mod:`~mindory.library.readers`,
:mod:`~mindory.library.positions`), imported when first used. Kept apart so the
``Library`` class stays one screenful per concern; ``Library`` inherits it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from mindory.library.state import State
from mindory.reading.highlights import UNSET
from mindory.reading.positions import LOCAL_READER
from mindory.reading.units import DEFAULT_PAGE_SIZE

if TYPE_CHECKING:
    from datetime import datetime

    from mindory.library.annotations import AnnotationImport, QuotedHighlight
    from mindory.library.kosync import SyncProgress, SyncPushed
    from mindory.library.readers import NewReader, Reader, RemovedReader
    from mindory.reading.anchoring import SectionText
    from mindory.reading.highlights import Calibration, Highlight, Unset
    from mindory.reading.positions import Bookmark, PlaceIn, Position

__all__ = ["ReadingStateMethods"]


class ReadingStateMethods:
    """Methods of :class:`~mindory.library.Library` about what readers make. (The
    annotation functions take the whole Library: ``self`` is one, cast because this
    module may not import the one that inherits it.)"""

    state: State

    def section_texts(self, ref: str, ordinals: Iterable[int] | None = None) -> list[SectionText]:
        """The book's sections as :class:`~mindory.reading.anchoring.SectionText` (all, or the
        given ordinals), cached: their folded text is computed once."""
        from mindory.library import highlights

        return highlights.section_texts(self.state, ref, ordinals)

    def calibrate_quote(
        self,
        ref: str,
        quote: str,
        *,
        section: int | None = None,
        chunk: str | None = None,
        min_prefix: int | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> Calibration:
        """Find the exact source span of a quote (an assistant's citation) in a book."""
        from mindory.library import highlights

        return highlights.calibrate_quote(
            self.state,
            ref,
            quote,
            section=section,
            chunk=chunk,
            min_prefix=min_prefix,
            page_size=page_size,
        )

    def add_highlight(
        self,
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
        reader: str | None = None,
    ) -> Highlight:
        """Store a highlight: ``section`` + ``[start, end)`` in book source coordinates
        (``unit`` ``codepoint`` or ``utf16``: as a chunk's ``source_*`` / ``utf16_*``;
        plain text counts from the file's start, EPUB from the section's), or an EPUB
        range ``cfi``. ``exact``, when given, must be the text there (a check against
        stale positions). The quote, its 32-code-point context, both spans and the
        CFI (EPUB) are stored."""
        from mindory.library import highlights

        return highlights.add_highlight(
            self.state,
            ref,
            section=section,
            start=start,
            end=end,
            unit=unit,
            cfi=cfi,
            exact=exact,
            note=note,
            color=color,
            reader=reader or LOCAL_READER,
        )

    def highlights(
        self,
        ref: str,
        *,
        section: int | None = None,
        status: str | None = None,
        reader: str | None = None,
    ) -> list[Highlight]:
        """The book's highlights in reading order (orphans last, by creation);
        ``section``: the anchored ones in that section; ``status``: anchored/orphaned."""
        from mindory.library import highlights

        return highlights.highlights(
            self.state, ref, section=section, status=status, reader=reader or LOCAL_READER
        )

    def highlight(self, ref: str, highlight: str, *, reader: str | None = None) -> Highlight:
        """One highlight of the book by its id (``urn:uuid:…`` or the bare UUID)."""
        from mindory.library import highlights

        return highlights.highlight(self.state, ref, highlight, reader=reader or LOCAL_READER)

    def update_highlight(
        self,
        ref: str,
        highlight: str,
        *,
        note: str | None | Unset = UNSET,
        color: str | Unset = UNSET,
        reader: str | None = None,
    ) -> Highlight:
        """Change a highlight's note (None clears it) and/or colour; the rest stays."""
        from mindory.library import highlights

        return highlights.update_highlight(
            self.state, ref, highlight, note=note, color=color, reader=reader or LOCAL_READER
        )

    def delete_highlight(self, ref: str, highlight: str, *, reader: str | None = None) -> Highlight:
        """Delete one highlight; returns it as it was."""
        from mindory.library import highlights

        return highlights.delete_highlight(
            self.state, ref, highlight, reader=reader or LOCAL_READER
        )

    # ------------------------------------------------------------------ annotations

    def highlight_quote(
        self,
        ref: str,
        quote: str,
        *,
        section: int | None = None,
        note: str | None = None,
        color: str | None = None,
        reader: str | None = None,
    ) -> QuotedHighlight:
        """Highlight where a quote comes from (through quote calibration; only the whole
        quote, exact or normalized, is highlighted)."""
        from mindory.library.annotations import highlight_quote

        return highlight_quote(
            cast(Any, self),
            ref,
            quote,
            section=section,
            note=note,
            color=color,
            reader=reader,
        )

    def export_annotations(
        self, ref: str | None = None, *, reader: str | None = None
    ) -> dict[str, Any]:
        """The reader's highlights of one book (or all) as a W3C AnnotationCollection."""
        # (not ``from mindory.library import annotations``: that name is __future__'s)
        from mindory.library.annotations import export_annotations

        return export_annotations(cast(Any, self), ref, reader=reader)

    def import_annotations(
        self,
        source: Path | Mapping[str, Any] | Any,
        *,
        book: str | None = None,
        reader: str | None = None,
    ) -> AnnotationImport:
        """Import a W3C AnnotationCollection (a file as a ``Path``, or its parsed JSON):
        every quote is verified against its book; orphans are reported by quote, never
        placed. Nothing is written unless the whole document is a collection."""
        from mindory.library.annotations import import_annotations

        return import_annotations(cast(Any, self), source, book=book, reader=reader)

    # ------------------------------------------------------------------ readers
    # ``reader`` is a reader's id (:meth:`reader_id`); None: the implicit local reader.

    def add_reader(self, name: str) -> NewReader:
        """Add a reader; the answer carries their token, shown this once."""
        from mindory.library import readers

        return readers.add_reader(self.state, name)

    def readers(self) -> list[Reader]:
        from mindory.library import readers

        return readers.readers(self.state)

    def remove_reader(self, name: str) -> RemovedReader:
        """Remove a reader with their highlights, positions and bookmarks."""
        from mindory.library import readers

        return readers.remove_reader(self.state, name)

    def reader_id(self, name: str | None) -> str:
        """The id of the reader ``name`` (None: the local reader); NotFoundError if none."""
        from mindory.library import readers

        return readers.reader_named(self.state, name)

    def reader_for_token(self, token: str) -> str | None:
        """The id of the reader whose token this is (None: no reader's)."""
        from mindory.library import readers

        return readers.reader_for_token(self.state, token)

    def has_readers(self) -> bool:
        from mindory.library import readers

        return readers.has_readers(self.state)

    # ------------------------------------------------------------------ passwords, KOReader

    def set_password(self, name: str, password: str) -> Reader:
        """Give reader ``name`` a password (HTTP Basic on the catalogue, KOReader's sync)."""
        from mindory.library import readers

        return readers.set_password(self.state, name, password)

    def reader_for_password(self, name: str, password: str) -> str | None:
        """The id of reader ``name`` when ``password`` is theirs (HTTP Basic), else None."""
        from mindory.library import readers

        return readers.reader_for_password(self.state, name, password)

    def reader_for_sync_key(self, name: str, key: str) -> str | None:
        """The id of reader ``name`` when ``key`` is their password's MD5 (KOReader)."""
        from mindory.library import readers

        return readers.reader_for_sync_key(self.state, name, key)

    def register_sync_reader(self, name: str, key: str) -> Reader:
        """KOReader's registration: a new reader whose password's MD5 is ``key``."""
        from mindory.library import readers

        return readers.register_sync_reader(self.state, name, key)

    def push_progress(
        self,
        *,
        document: str,
        progress: object,
        percentage: object,
        device: object,
        device_id: object = None,
        reader: str | None = None,
    ) -> SyncPushed:
        """Keep a position KOReader pushed (its document key and xpointer)."""
        from mindory.library import kosync

        return kosync.push_progress(
            self.state,
            document=document,
            progress=progress,
            percentage=percentage,
            device=device,
            device_id=device_id,
            reader=reader or LOCAL_READER,
        )

    def pull_progress(self, document: str, *, reader: str | None = None) -> SyncProgress:
        """The reader's newest position in the book KOReader names, as an xpointer."""
        from mindory.library import kosync

        return kosync.pull_progress(self.state, document, reader=reader or LOCAL_READER)

    # ------------------------------------------------------------------ positions, bookmarks

    def set_position(
        self,
        ref: str,
        place: PlaceIn,
        *,
        device: str,
        modified: str | datetime,
        reader: str | None = None,
    ) -> Position:
        """Keep a reading position (newest ``modified`` wins; an older one: ConflictError)."""
        from mindory.library import positions

        return positions.set_position(
            self.state, ref, place, device=device, modified=modified, reader=reader or LOCAL_READER
        )

    def position(self, ref: str, *, reader: str | None = None) -> Position:
        """The newest reading position in the book (NotFoundError: none yet)."""
        from mindory.library import positions

        return positions.position(self.state, ref, reader=reader or LOCAL_READER)

    def position_history(
        self, ref: str, *, device: str | None = None, limit: int = 100, reader: str | None = None
    ) -> list[Position]:
        """Kept reading positions in the book, newest first (of one device, or all)."""
        from mindory.library import positions

        return positions.position_history(
            self.state, ref, device=device, limit=limit, reader=reader or LOCAL_READER
        )

    def add_bookmark(
        self, ref: str, place: PlaceIn, *, title: str | None = None, reader: str | None = None
    ) -> Bookmark:
        """Bookmark a place (the same place again: the same bookmark)."""
        from mindory.library import positions

        return positions.add_bookmark(
            self.state, ref, place, title=title, reader=reader or LOCAL_READER
        )

    def bookmarks(self, ref: str, *, reader: str | None = None) -> list[Bookmark]:
        from mindory.library import positions

        return positions.bookmarks(self.state, ref, reader=reader or LOCAL_READER)

    def bookmark(self, ref: str, bookmark: str, *, reader: str | None = None) -> Bookmark:
        from mindory.library import positions

        return positions.bookmark(self.state, ref, bookmark, reader=reader or LOCAL_READER)

    def delete_bookmark(self, ref: str, bookmark: str, *, reader: str | None = None) -> Bookmark:
        from mindory.library import positions

        return positions.delete_bookmark(self.state, ref, bookmark, reader=reader or LOCAL_READER)
