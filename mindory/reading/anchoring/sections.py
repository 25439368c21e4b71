"""The texts quotes are searched in, and the search for the occurrences nearest a place.

:class:`SectionText` (a section's source text, where it sits, its folded text
cached) and :class:`SectionHint` are the inputs of both calibration and
re-anchoring; :func:`_find_near` is the occurrence search both use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from mindory.importers.xhtml.ruby import RubyLayout
from mindory.importers.xhtml.ruby import ruby_layout as _layout_of
from mindory.reading.anchoring.folding import FoldedText, fold
from mindory.reading.anchoring.ruby import ReaderText, RubyIndex
from mindory.reading.anchoring.thresholds import MAX_OCCURRENCES
from mindory.text.records import Book, Section


@dataclass(frozen=True)
class SectionText:
    """A section's source text (or a slice of it) and where it sits.

    ``source_start`` is the offset of ``source_text`` in book source
    coordinates: file-global for plain text, 0 for a whole EPUB section, the
    slice start for a chunk's slice. ``ordinal`` / ``href`` / ``title``
    identify the section (used to match sections across editions). The folded
    text is computed on first use and cached: reuse the same objects for many
    quotes or highlights.

    ``ruby`` is the section's :class:`RubyLayout` (positions local to
    ``source_text``), or a function that makes it on first use (e.g. by parsing
    the stored content document), or None (no ruby: plain text). It gives
    :attr:`reader` — the text without ruby annotations, which quote calibration
    also searches — and :attr:`ruby_index` (whole ``<ruby>`` elements).
    """

    ordinal: int
    source_text: str
    source_start: int = 0
    href: str | None = None
    title: str = ""
    ruby: RubyLayout | Callable[[], RubyLayout | None] | None = field(
        default=None, compare=False, repr=False
    )

    @classmethod
    def from_section(cls, section: Section) -> SectionText:
        body = getattr(section.dom, "body", None)
        return cls(
            ordinal=section.ordinal,
            source_text=section.source_text,
            source_start=section.source_start,
            href=section.href,
            title=section.title,
            ruby=(lambda: _layout_of(body)) if body is not None else None,
        )

    @classmethod
    def from_book(cls, book: Book) -> tuple[SectionText, ...]:
        return tuple(cls.from_section(s) for s in book.sections)

    @property
    def source_end(self) -> int:
        return self.source_start + len(self.source_text)

    @cached_property
    def folded(self) -> FoldedText:
        return fold(self.source_text)

    @cached_property
    def ruby_layout(self) -> RubyLayout | None:
        """The section's ruby layout (None: none, or it does not fit this text)."""
        found = self.ruby() if callable(self.ruby) else self.ruby
        if found is None or found.source_length != len(self.source_text):
            return None
        if found.source_text is not None and found.source_text != self.source_text:
            return None
        if not found.rubies and not found.annotations:
            return None
        return found

    @cached_property
    def ruby_index(self) -> RubyIndex | None:
        layout = self.ruby_layout
        return None if layout is None else RubyIndex(layout)

    @cached_property
    def reader(self) -> ReaderText | None:
        """The text without ruby annotations (None when the section has none)."""
        layout = self.ruby_layout
        if layout is None or not layout.annotations:
            return None
        return ReaderText(self.source_text, layout)

    @property
    def hint(self) -> SectionHint:
        return SectionHint(
            ordinal=self.ordinal,
            source_start=self.source_start,
            length=len(self.source_text),
            href=self.href,
            title=self.title,
        )


@dataclass(frozen=True, slots=True)
class SectionHint:
    """What re-anchoring needs to know about a highlight's section in the OLD edition."""

    ordinal: int
    source_start: int = 0
    length: int | None = None
    href: str | None = None
    title: str = ""


def _find_near(hay: str, needle: str, around: int, limit: int = MAX_OCCURRENCES) -> list[int]:
    """Start positions of ``needle`` in ``hay`` (overlapping), the ``limit`` nearest ``around``.

    Searches forward from ``around`` and backward from it, so a needle with a
    huge number of occurrences costs ``limit`` finds, not a scan of all.
    """
    if not needle:
        return []
    around = min(max(around, 0), len(hay))
    out: list[int] = []
    i = hay.find(needle, around)
    while i >= 0 and len(out) < limit:
        out.append(i)
        i = hay.find(needle, i + 1)
    back: list[int] = []
    end = around + len(needle) - 1
    j = hay.rfind(needle, 0, end)
    while j >= 0 and len(back) < limit:
        if j < around:
            back.append(j)
        j = hay.rfind(needle, 0, j + len(needle) - 1) if j > 0 else -1
    back.reverse()
    return back + out
