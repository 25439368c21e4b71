"""Ruby in a content document: where each ``<ruby>`` element and its annotations sit.

:func:`ruby_layout` walks ``<body>`` exactly as :mod:`.walk` does for the source
text (every text node in document order: an element's text at its start, its tail
at its end, comment and processing-instruction tails, ``body``'s own tail left
out) and records, in section-local source coordinates (code points):

* ``rubies`` — the source span of every ``<ruby>`` element (from its first text
  character to the end of its last), in document order;
* ``annotations`` — the source spans of ``<rt>`` and ``<rp>`` content (the
  furigana and its fallback parentheses), merged where they touch; these are the
  characters the normalizing walk deletes and a reader does not read as part of
  the sentence.

The layout is found from the DOM, never by searching the text, so repeated words
and repeated readings are placed exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lxml import etree

from mindory.importers.xhtml.parse import XHTML_NS

__all__ = ["RubyLayout", "ruby_layout"]

_RUBY = frozenset({"ruby", f"{{{XHTML_NS}}}ruby"})
_ANNOTATION = frozenset({"rt", "rp", f"{{{XHTML_NS}}}rt", f"{{{XHTML_NS}}}rp"})

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class RubyLayout:
    """The ruby elements and ruby annotations of one section (section-local spans).

    ``source_length`` is the length of the source text the layout describes (a
    check that it belongs to that text); ``source_text`` is that text itself when
    the layout was made from a DOM (None when given by hand).
    """

    rubies: tuple[Span, ...]
    annotations: tuple[Span, ...]
    source_length: int
    source_text: str | None = None

    @classmethod
    def empty(cls, source_length: int) -> RubyLayout:
        return cls((), (), source_length)

    def __post_init__(self) -> None:
        last = 0
        for a, b in self.annotations:
            if not last <= a < b <= self.source_length:
                raise ValueError(f"ruby annotation span [{a}, {b}) out of order or range")
            last = b
        for a, b in self.rubies:
            if not 0 <= a <= b <= self.source_length:
                raise ValueError(f"ruby span [{a}, {b}) outside the text")

    def window(self, start: int, end: int) -> RubyLayout:
        """The layout of ``text[start:end]`` (positions shifted by ``-start``); a ruby
        element or annotation crossing an edge is clipped to it."""
        return RubyLayout(
            tuple(
                (max(a, start) - start, min(b, end) - start)
                for a, b in self.rubies
                if a < end and b > start
            ),
            tuple(
                (max(a, start) - start, min(b, end) - start)
                for a, b in self.annotations
                if a < end and b > start
            ),
            end - start,
            None if self.source_text is None else self.source_text[start:end],
        )


def ruby_layout(body: Any) -> RubyLayout:
    """The :class:`RubyLayout` of one ``<body>`` (an lxml element; None: empty)."""
    if body is None:
        return RubyLayout((), (), 0, "")
    pieces: list[str] = []
    pos = 0
    rubies: list[Span] = []
    annotations: list[Span] = []
    # Per open node: (tag kind, start position); kind 1 ruby, 2 annotation, 0 other.
    stack: list[tuple[int, int]] = []
    depth_in_annotation = 0
    for event, el in etree.iterwalk(body, events=("start", "end", "comment", "pi")):
        if event == "start":
            tag = el.tag
            kind = 0
            if isinstance(tag, str):
                if tag in _RUBY:
                    kind = 1
                elif tag in _ANNOTATION:
                    kind = 2
                    depth_in_annotation += 1
            stack.append((kind, pos))
            t = el.text
            if t:
                pieces.append(t)
                pos += len(t)
        elif event == "end":
            kind, start = stack.pop()
            if kind == 1:
                rubies.append((start, pos))
            elif kind == 2:
                depth_in_annotation -= 1
                if depth_in_annotation == 0 and pos > start:
                    if annotations and annotations[-1][1] == start:
                        annotations[-1] = (annotations[-1][0], pos)
                    else:
                        annotations.append((start, pos))
            if stack:  # body's own tail is outside the body
                t = el.tail
                if t:
                    pieces.append(t)
                    pos += len(t)
        else:  # a comment or processing instruction: its tail is text
            t = el.tail
            if t:
                pieces.append(t)
                pos += len(t)
    rubies.sort()
    return RubyLayout(tuple(rubies), tuple(annotations), pos, "".join(pieces))
