"""crengine's view of a plain-text book as KOReader opens it by default.

KOReader sets ``crengine.file.txt.preformatted`` to 1 unless the reader turns on
"Auto-detect TXT files layout" (``frontend/apps/reader/modules/readertypeset.lua``),
so crengine's ``LVTextParser::Parse`` (crengine/src/lvxml.cpp) skips
``detectFormatFlags`` and ``LVTextLineQueue::DoPreFormattedImport`` writes one
``<pre>`` per non-blank line and one ``<empty-line/>`` per blank one, under
``/FictionBook/body`` (after a ``description`` element). So KOReader sends
``/FictionBook/body/pre[N]/text().K``: ``N`` counts non-blank lines, ``K`` code
points into the line, which is kept verbatim (no tab expansion, no collapsing: the
text does not go through ``PreProcessXmlString``).

Lines are what ``LVTextFileBase::ReadLine`` reads: they end at ``\\r``, ``\\n``,
``\\r\\n`` or ``\\n\\r``, and a line reaching 2,000 characters (the queue's
``maxLineSize``) ends after its next space or tab. ``ReadLine`` rewrites two kinds
of line: one made only of ``-``, ``*`` or ``=`` (and blanks) becomes ``* * *``, and
a LIB.RU header ``\\x14...\\x15`` loses its markers; a point inside such a line maps
to the line's start. An old Project Gutenberg etext ("The Project Gutenberg Etext of
T, by A" on its first line) loses its header up to the ``*END*`` line
(``LVTextLineQueue::testProjectGutenbergHeader``). Offsets are book-global source
code points (the decoded file).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from mindory.errors import XPointerError
from mindory.reading.xpointer.parse import XPointer, format_steps, parse_xpointer

__all__ = ["MAX_LINE_CHARS", "TxtView"]

MAX_LINE_CHARS = 2000  # LVTextParser::Parse: LVTextLineQueue queue(this, 2000)
_PG_PREFIX = "The Project Gutenberg Etext of "


@dataclass(frozen=True, slots=True)
class _Line:
    start: int  # source offset of the line's first character
    end: int  # source offset after its last character (before the line break)
    blank: bool  # only spaces and tabs: an <empty-line/>
    verbatim: bool  # crengine holds the characters as they are


def _read_lines(text: str) -> list[_Line]:
    """ReadLine's lines of ``text``."""
    lines: list[_Line] = []
    n = len(text)
    i = 0
    while i < n:
        start = i
        while i < n:
            ch = text[i]
            if ch in "\r\n":
                break
            i += 1
            if ch in " \t" and i - start >= MAX_LINE_CHARS:
                break
        end = i
        if i < n and text[i] in "\r\n":
            nxt = text[i + 1] if i + 1 < n else ""
            i += 2 if nxt in "\r\n" and nxt != text[i] else 1
        lines.append(_make_line(text, start, end))
    return lines


def _make_line(text: str, start: int, end: int) -> _Line:
    body = text[start:end]
    stripped = body.strip(" \t")
    blank = not stripped
    verbatim = True
    if stripped:
        first = stripped[0]
        if first == "\x14" and body.endswith("\x15"):
            verbatim = False  # LIB.RU header markers erased
        elif first in "-*=" and not stripped.replace(first, "").strip(" \t"):
            verbatim = False  # a rule line, rewritten as "* * *"
    return _Line(start, end, blank, verbatim)


def _gutenberg_skip(text: str, lines: list[_Line]) -> int:
    """Lines testProjectGutenbergHeader removes (0 when the header is not there)."""
    i = 0
    while i < len(lines) and lines[i].blank:
        i += 1
    if i >= len(lines):
        return 0
    first = text[lines[i].start : lines[i].end]
    if not first.startswith(_PG_PREFIX) or first.find(", by ", len(_PG_PREFIX)) <= len(_PG_PREFIX):
        return 0  # crengine: no ", by " after the title (byPos <= 0)
    while i < len(lines) and i < 500 and text[lines[i].start : lines[i].end].find("*END*") != 0:
        i += 1
    if i < len(lines) and i < 500:
        i += 1
        while i < len(lines) and i < 500 and lines[i].start == lines[i].end:
            i += 1
        return i
    return 0


class TxtView:
    """The ``<pre>`` lines crengine makes of a decoded plain-text file."""

    def __init__(self, text: str) -> None:
        self.source_text = text
        lines = _read_lines(text)
        self.lines = lines[_gutenberg_skip(text, lines) :]
        self.pre = [ln for ln in self.lines if not ln.blank]
        self.empty = [ln for ln in self.lines if ln.blank]
        self._pre_starts = [ln.start for ln in self.pre]

    def _pre_step(self, n: int, explicit_first: bool) -> str:
        steps = [("FictionBook", 1, 1), ("body", 1, 1), ("pre", n, len(self.pre))]
        return format_steps(steps, explicit_first=explicit_first)

    def xpointer_at(self, source_offset: int, *, explicit_first: bool = False) -> str:
        """The xpointer of the character at ``source_offset`` (book-global); a point
        in a line break, a blank line or a skipped header maps forward to the next
        ``<pre>`` line's start."""
        if not 0 <= source_offset <= len(self.source_text):
            raise XPointerError(
                f"offset {source_offset} is outside the book [0, {len(self.source_text)}]"
            )
        if not self.pre:
            body = format_steps(
                [("FictionBook", 1, 1), ("body", 1, 1)], explicit_first=explicit_first
            )
            return f"{body}.0"
        k = bisect_right(self._pre_starts, source_offset) - 1
        if k >= 0:
            line = self.pre[k]
            if source_offset < line.end:
                offset = source_offset - line.start if line.verbatim else 0
                return self._text_point(k, offset, explicit_first)
        if k + 1 < len(self.pre):
            return self._text_point(k + 1, 0, explicit_first)
        last = self.pre[-1]
        return self._text_point(len(self.pre) - 1, self._length(last), explicit_first)

    def _text_point(self, k: int, offset: int, explicit_first: bool) -> str:
        text_step = format_steps([("text()", 1, 1)], explicit_first=explicit_first)
        return f"{self._pre_step(k + 1, explicit_first)}{text_step}.{offset}"

    def _length(self, line: _Line) -> int:
        """The length of crengine's text of a line."""
        if line.verbatim:
            return line.end - line.start
        body = self.source_text[line.start : line.end]
        if body.strip(" \t")[0] == "\x14":
            return len(body.lstrip(" \t")) - 2  # leading blanks and both markers erased
        return len("* * *")

    def canonical(self, source_offset: int) -> int:
        """Where a source offset lands after a round trip through an xpointer."""
        return self.resolve(parse_xpointer(self.xpointer_at(source_offset)))

    def resolve(self, xp: XPointer) -> int:
        """The book-global source offset of an xpointer into this view."""
        names = [n for n, _ in xp.steps]
        if names[:2] != ["FictionBook", "body"]:
            raise XPointerError(
                "a plain-text xpointer starts /FictionBook/body, not /" + "/".join(names[:2])
            )
        rest = xp.steps[2:]
        if not rest:  # a point in <body>: child N is the N-th line
            if xp.text_index is not None:
                raise XPointerError("<body> holds no text node in a plain-text book")
            n = xp.offset or 0
            if n > len(self.lines):
                raise XPointerError(f"point .{n} is past the {len(self.lines)} lines of <body>")
            return self.lines[n].start if n < len(self.lines) else len(self.source_text)
        if len(rest) > 1 or rest[0][0] not in ("pre", "empty-line"):
            raise XPointerError(
                f"<{rest[0][0]}> is not in crengine's pre-formatted view of a .txt file: the "
                "xpointer comes from KOReader's 'Auto-detect TXT files layout' (paragraphs "
                "chosen by LVTextLineQueue's heuristics), which mindory cannot rebuild"
            )
        name, index = rest[0]
        lines = self.pre if name == "pre" else self.empty
        n = index or 1
        if n > len(lines):
            raise XPointerError(f"the book has {len(lines)} <{name}> line(s), not {name}[{n}]")
        line = lines[n - 1]
        if name == "empty-line" or xp.text_index is None:
            return line.start
        if xp.text_index != 1:
            raise XPointerError(f"<pre> holds one text node, not text()[{xp.text_index}]")
        offset = xp.offset or 0
        length = self._length(line)
        if offset > length:
            raise XPointerError(
                f"offset {offset} is past the end of its text node ({length} characters)"
            )
        if not line.verbatim:
            return line.start if offset < length else line.end
        return line.start + offset
