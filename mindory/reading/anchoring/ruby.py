"""The text a reader reads where a section has ruby: annotations left out, elements kept whole.

A Japanese or Chinese book glosses words with ruby (``<ruby>智<rt>ち</rt></ruby>``).
The DOM's text — the source text — holds the gloss inline (``智ち``), but a reader
who copies or types the sentence writes ``智``. :class:`ReaderText` is a section's
source text without its ruby annotations (the ``<rt>`` / ``<rp>`` spans of a
:class:`~mindory.importers.xhtml.ruby.RubyLayout`), folded like every other text
quotes are matched in, with the way back to source positions: folded → reader text
(the folding map) → source (a map whose only edits delete the annotations).

:func:`widen` grows a source span to whole ``<ruby>`` elements (a highlight starts
at or before a ruby element's start and ends at or after its end), and
:func:`is_clean` says whether that growth added only annotation characters (the
reader-visible text is unchanged) — calibration prefers such places.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import cached_property
from itertools import accumulate

from mindory.importers.xhtml.ruby import RubyLayout
from mindory.reading.anchoring.folding import FoldedText, fold
from mindory.text.offsets import OffsetMap

__all__ = ["ReaderText", "RubyIndex", "is_clean", "visible_text", "widen"]


class RubyIndex:
    """Lookups over one :class:`RubyLayout` (binary search; built once per section)."""

    def __init__(self, layout: RubyLayout) -> None:
        self.layout = layout
        rubies = [r for r in layout.rubies if r[1] > r[0]]
        self._starts = [a for a, _ in rubies]
        self._ends = [b for _, b in rubies]
        self._max_end = list(accumulate(self._ends, max))
        ann = layout.annotations
        self._ann_starts = [a for a, _ in ann]
        self._ann_ends = [b for _, b in ann]
        self._hidden_before = [0, *accumulate(b - a for a, b in ann)]

    def widen(self, start: int, end: int) -> tuple[int, int]:
        """The smallest span holding ``[start, end)`` that cuts no ruby element."""
        s, e = start, end
        while True:
            hi = bisect_left(self._starts, e)  # rubies starting before the end
            lo = bisect_right(self._max_end, s)  # the first that may end after the start
            ns, ne = s, e
            for k in range(lo, hi):
                a, b = self._starts[k], self._ends[k]
                if b > s and a < e:
                    ns, ne = min(ns, a), max(ne, b)
            if (ns, ne) == (s, e):
                return s, e
            s, e = ns, ne

    def visible(self, pos: int) -> int:
        """Reader-text position of source ``pos`` (a position inside an annotation → its
        start)."""
        k = bisect_right(self._ann_starts, pos)
        if k == 0:
            return pos
        hidden = self._hidden_before[k - 1]
        a, b = self._ann_starts[k - 1], self._ann_ends[k - 1]
        return pos - hidden - (min(pos, b) - a)

    def is_clean(self, start: int, end: int) -> bool:
        """Widening ``[start, end)`` adds no reader-visible character."""
        ws, we = self.widen(start, end)
        return self.visible(ws) == self.visible(start) and self.visible(we) == self.visible(end)

    def hides(self, start: int, end: int) -> bool:
        """``[start, end)`` holds annotation characters."""
        return self.visible(end) - self.visible(start) != end - start

    def visible_text(self, text: str, start: int, end: int) -> str:
        """``text[start:end]`` without its annotation characters."""
        return visible_text(text, self.layout, start, end)


def widen(layout: RubyLayout | None, start: int, end: int) -> tuple[int, int]:
    return (start, end) if layout is None else RubyIndex(layout).widen(start, end)


def is_clean(layout: RubyLayout | None, start: int, end: int) -> bool:
    return True if layout is None else RubyIndex(layout).is_clean(start, end)


def visible_text(text: str, layout: RubyLayout, start: int = 0, end: int | None = None) -> str:
    """``text[start:end]`` with the layout's annotation spans left out."""
    end = len(text) if end is None else end
    out: list[str] = []
    pos = start
    for a, b in layout.annotations:
        if b <= pos:
            continue
        if a >= end:
            break
        if a > pos:
            out.append(text[pos:a])
        pos = max(pos, b)
    if pos < end:
        out.append(text[pos:end])
    return "".join(out)


class ReaderText:
    """A section's text as a reader reads it (ruby annotations left out), folded.

    ``text`` is the reader text, ``map`` its :class:`OffsetMap` (the "normalized"
    side is the reader text, the source side the section's source text; every edit
    deletes one annotation span). The methods answer in the section's source
    positions, like :class:`~mindory.reading.anchoring.folding.FoldedText`'s.
    """

    def __init__(self, source_text: str, layout: RubyLayout) -> None:
        if layout.source_length != len(source_text):
            raise ValueError(
                f"the ruby layout describes {layout.source_length} characters, "
                f"the text has {len(source_text)}"
            )
        parts: list[str] = []
        edits: list[tuple[int, int, int, int]] = []
        last = pos = 0
        for a, b in layout.annotations:
            parts.append(source_text[last:a])
            pos += a - last
            edits.append((pos, 0, a, b - a))
            last = b
        parts.append(source_text[last:])
        self.text = "".join(parts)
        self.map = OffsetMap(edits, len(self.text), len(source_text))
        self.layout = layout
        self.index = RubyIndex(layout)

    @cached_property
    def folded(self) -> FoldedText:
        return fold(self.text)

    def haystack(self, case_insensitive: bool) -> str:
        return self.folded.haystack(case_insensitive)

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """Smallest source span that produced folded reader text ``[start, end)``."""
        rs, re_ = self.folded.source_span(start, end)
        return self.map.source_span(rs, re_)

    def to_folded(self, pos: int) -> int:
        """Folded reader-text position of source position ``pos`` (clamped)."""
        pos = min(max(pos, 0), self.map.source_length)
        return self.folded.to_folded(self.index.visible(pos))
