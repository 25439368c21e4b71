"""Display text: a span's source text as a reader sees it, without ruby annotations.

A Locator's ``text.highlight`` is raw DOM text (Readium): in a book with ruby it
holds the furigana inline (``智ちに働けば角かどが立つ``). What a reader sees — and
what a terminal or a list of hits should print — leaves out what the importer
deleted from the normalized text because it is not read as part of the sentence:
``<rt>``/``<rp>`` content (and ``<script>``/``<style>`` content, soft hyphens,
zero-width characters). Those are exactly the non-whitespace characters of the
section's offset map's deleting runs (DESIGN §1: "a deleted ruby text with
n == 0"), so the display text is made from the map, never by searching the text.
Whitespace is kept as it is in the source (a deleting run also trims whitespace at
block edges, which still separates words on a screen).

:func:`display_text` answers a :class:`DisplayText` for a source span: the display
text of the span and of the context before and after it (the Locator's
``CONTEXT_CHARS``), and the hidden spans inside the highlight so positions in the
highlight (a word match) can be carried over (:meth:`DisplayText.position`).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from mindory.reading.locate import CONTEXT_CHARS, SectionPlace

__all__ = ["DisplayText", "display_text", "hidden_spans"]


def hidden_spans(place: SectionPlace, start: int, end: int) -> list[tuple[int, int]]:
    """Section-local source spans in section-local ``[start, end)`` that a reader does
    not see: the non-whitespace characters of the offset map's deleting runs."""
    text = place.source_text
    out: list[tuple[int, int]] = []
    for a, b in place.offset_map.deletions(start, end):
        i = a
        while i < b:
            while i < b and text[i].isspace():
                i += 1
            j = i
            while j < b and not text[j].isspace():
                j += 1
            if j > i:
                if out and out[-1][1] == i:
                    out[-1] = (out[-1][0], j)
                else:
                    out.append((i, j))
            i = j
    return out


def _without(text: str, start: int, end: int, hidden: list[tuple[int, int]]) -> str:
    parts: list[str] = []
    pos = start
    for a, b in hidden:
        if a > pos:
            parts.append(text[pos:a])
        pos = max(pos, b)
    if pos < end:
        parts.append(text[pos:end])
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class DisplayText:
    """The display text of a span and of its context (see the module doc).

    ``hidden`` lists the spans of the highlight (relative to its start, in its raw
    text) that the display text leaves out.
    """

    before: str
    highlight: str
    after: str
    hidden: tuple[tuple[int, int], ...] = ()

    def position(self, offset: int) -> int:
        """Display position of raw highlight position ``offset`` (inside a hidden span:
        where it was)."""
        k = bisect_right([a for a, _ in self.hidden], offset)
        gone = 0
        for a, b in self.hidden[:k]:
            gone += min(b, offset) - a
        return offset - gone

    def to_json(self) -> dict[str, Any]:
        """The keys added beside a Locator's ``text.before / highlight / after``."""
        return {
            "displayBefore": self.before,
            "display": self.highlight,
            "displayAfter": self.after,
        }


def display_text(place: SectionPlace, source_start: int, source_end: int) -> DisplayText:
    """The :class:`DisplayText` of source ``[source_start, source_end)`` (book source
    coordinates), with the Locator's context lengths (counted on the raw text)."""
    ls, le = place.check_source(source_start), place.check_source(source_end)
    text = place.source_text
    bs, ae = max(0, ls - CONTEXT_CHARS), min(len(text), le + CONTEXT_CHARS)
    hidden = hidden_spans(place, bs, ae)
    before = [(a, b) for a, b in hidden if a < ls]
    inside = [(max(a, ls), min(b, le)) for a, b in hidden if a < le and b > ls]
    after = [(a, b) for a, b in hidden if b > le]
    return DisplayText(
        before=_without(text, bs, ls, [(a, min(b, ls)) for a, b in before]),
        highlight=_without(text, ls, le, inside),
        after=_without(text, le, ae, [(max(a, le), b) for a, b in after]),
        hidden=tuple((a - ls, b - ls) for a, b in inside),
    )
