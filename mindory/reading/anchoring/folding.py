"""Folding: the whitespace-, width-, quote- and dash-insensitive comparison, with its map.

Folding (the "normalized" comparison) is done once per text and cached on the
:class:`SectionText`: a 1:1 translation through a code point lookup array
(width, quote marks, dashes, single whitespace characters), then two regex
scans for what changes length (whitespace runs collapse to one space,
whitespace between CJK characters and invisible characters vanish, NFKC
expansions and combining sequences). The
length-changing edits are kept as an :class:`~mindory.text.offsets.OffsetMap`
(folded ↔ source, binary search over the edits, so memory grows with the
number of edits and never with the text); every match in folded text is mapped
back to the smallest source span that produced it — never re-found with
``str.find`` on the original.

This module owns the folding tables, :class:`FoldedText` and :func:`fold`, and
the CJK tests that folding, calibration and re-anchoring share.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np

from mindory.text.offsets import OffsetMap

_IGNORABLE = (
    "\u00ad\u034f\u061c\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
)
_PUNCT_FOLD = {
    **dict.fromkeys(map(ord, "\u2018\u2019\u201a\u201b\u2032\u02bc"), "'"),
    **dict.fromkeys(map(ord, "\u201c\u201d\u201e\u201f\u2033\u300c\u300d\u300e\u300f"), '"'),
    **dict.fromkeys(map(ord, "\ufe41\ufe42\ufe43\ufe44\uff62\uff63"), '"'),
    **dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58"), "-"),
}
# Letters of scripts written without spaces between words, and their punctuation.
_CJK_LETTER = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303c\u3040-\u30ff\u3100-\u312f"
    "\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003ffff"
)
# CJK punctuation and full-width forms; then punctuation CJK text shares with others.
_CJK_WIDE = "\u3001-\u3004\u3008-\u3020\u3030\u303d\u30fb\ufe10-\ufe4f\uff01-\uff65"
_SHARED_PUNCT = "\u2014\u2026\u201c\u201d\u2018\u2019\u00b7"
_CJK_PUNCT = _CJK_WIDE + _SHARED_PUNCT
_HANGUL = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
_CJK_OR_HANGUL_RE = re.compile(f"[{_CJK_LETTER}{_HANGUL}]")


def _fold_chars(s: str) -> str:
    """Fold a short string character by character (used to build the tables)."""
    out: list[str] = []
    for c in unicodedata.normalize("NFKC", s):
        if c.isspace():
            out.append(" ")
        elif c in _IGNORABLE:
            continue
        else:
            out.append(c.translate(_PUNCT_FOLD))
    return "".join(out)


def _char_class(cps: Iterable[int]) -> str:
    """A regex character class body for a set of code points (as ranges)."""
    parts: list[str] = []
    run: list[int] = []
    for cp in sorted(cps):
        if run and cp == run[1] + 1:
            run[1] = cp
            continue
        if run:
            parts.append(_range(run[0], run[1]))
        run = [cp, cp]
    if run:
        parts.append(_range(run[0], run[1]))
    return "".join(parts)


def _range(a: int, b: int) -> str:
    if a == b:
        return re.escape(chr(a))
    return f"{re.escape(chr(a))}-{re.escape(chr(b))}"


@dataclass(frozen=True)
class _Tables:
    translate: dict[int, str]  # 1:1 replacements (position-preserving)
    lut: np.ndarray  # the same as a lookup array over all code points
    rare_re: re.Pattern[str]  # one character that may change length when folded
    spaces_re: re.Pattern[str]  # spaces that may change length ("  ", " " before CJK)
    run_re: re.Pattern[str]  # a whitespace run (with invisible characters)
    marks_re: re.Pattern[str]  # a run of combining marks
    blank: frozenset[str]  # whitespace and invisible characters
    expand: dict[str, str]  # single characters whose folding changes the length


@cache
def _tables() -> _Tables:
    """Folding tables, built once per process (planes 0–2, ~60 ms)."""
    one: dict[int, str] = {}
    expand: dict[str, str] = {}
    marks: list[int] = []
    blank: set[int] = {ord(c) for c in _IGNORABLE}
    for cp in range(0x30000):
        c = chr(cp)
        if unicodedata.category(c).startswith("M") or 0x1160 <= cp <= 0x11FF:
            marks.append(cp)
            continue
        if c.isspace():
            blank.add(cp)
            if c != " ":
                one[cp] = " "
            continue
        if c in _IGNORABLE:
            expand[c] = ""
            continue
        if not unicodedata.decomposition(c) and cp not in _PUNCT_FOLD:
            continue
        f = _fold_chars(c)
        if f == c:
            continue
        if len(f) == 1:
            one[cp] = f
        else:
            expand[c] = f
    lut = np.arange(0x110000, dtype=np.uint32)
    for cp, c in one.items():
        lut[cp] = ord(c)
    # One character class finds every spot that may change length, except plain
    # spaces: the regex engine skips to members of a single class at C speed, which
    # an alternation of patterns would not. Classes stay in the BMP (a class with
    # hundreds of astral ranges costs a range test each); astral characters are
    # matched by one range and sorted out in Python.
    bmp = {cp for cp in blank if cp != 0x20 and cp < 0x10000}
    bmp |= {cp for cp in marks if cp < 0x10000}
    bmp |= {ord(c) for c in expand if ord(c) < 0x10000}
    blank_class = _char_class(blank)
    return _Tables(
        translate=one,
        lut=lut,
        rare_re=re.compile(f"[{_char_class(bmp)}\U00010000-\U0010ffff][{blank_class}]*"),
        spaces_re=re.compile(f"  +| (?=[{_CJK_LETTER}{_CJK_PUNCT}])"),
        run_re=re.compile(f"[{blank_class}]+"),
        marks_re=re.compile(f"[{_char_class(marks)}]+"),
        blank=frozenset(chr(cp) for cp in blank),
        expand=expand,
    )


class FoldedText:
    """A text folded for whitespace/width/quote-insensitive matching, with its map.

    ``text`` is the folded text; ``map`` is an :class:`OffsetMap` whose
    "normalized" side is the folded text and whose source side is the original
    text (its copy runs are 1:1 in position; the characters there may differ by
    a 1:1 fold such as full-width → ASCII). ``lower`` is ``text`` lower-cased,
    position for position.
    """

    def __init__(self, text: str, fmap: OffsetMap, original_length: int) -> None:
        self.text = text
        self.map = fmap
        self.original_length = original_length

    @cached_property
    def lower(self) -> str:
        low = self.text.lower()
        if len(low) == len(self.text):
            return low
        # "İ".lower() is two characters: keep such letters as they are.
        return "".join(c.lower() if len(c.lower()) == 1 else c for c in self.text)

    def haystack(self, case_insensitive: bool) -> str:
        return self.lower if case_insensitive else self.text

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """Smallest original span that produced folded ``[start, end)``."""
        return self.map.source_span(start, end)

    def to_folded(self, pos: int) -> int:
        """Folded position of original position ``pos`` (clamped to the text)."""
        return self.map.to_normalized(min(max(pos, 0), self.original_length))


def fold(text: str) -> FoldedText:
    """Fold ``text``: see the module doc and docs/anchoring.md ("Folding")."""
    tables = _tables()
    if len(text) < 4096:
        translated = text.translate(tables.translate)
    else:  # the same through a lookup array: ~10x faster on long non-ASCII text
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        translated = tables.lut[codes].astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
    # Spots that may change length: (start, end, kind), kind "ws" | "seq" (marks; the
    # character before them joins) | "seq+" (a character and its marks) | "exp".
    spots: list[tuple[int, int, str]] = []
    blank, expand = tables.blank, tables.expand
    run_match, marks_match = tables.run_re.match, tables.marks_re.match
    covered = 0
    for m in tables.rare_re.finditer(text):
        # one rare character, and the blanks after it
        p, b = m.span()
        if p >= covered:
            c = text[p]
            if c in blank:
                a = p
                while a > 0 and text[a - 1] in blank:
                    a -= 1
                spots.append((a, b, "ws"))
                covered = b
                continue
            if unicodedata.category(c).startswith("M") or "\u1160" <= c <= "\u11ff":
                ms = marks_match(text, p)
                covered = ms.end() if ms is not None else p + 1
                spots.append((p, covered, "seq"))
            elif c in expand:
                ms = marks_match(text, p + 1)
                if ms is not None:  # marks after it fold with it: ﬁ + U+0301 -> fí
                    spots.append((p, ms.end(), "seq+"))
                    covered = ms.end()
                else:
                    spots.append((p, p + 1, "exp"))
                    covered = p + 1
            else:
                covered = p + 1
        if b > covered and text[covered] in blank:
            run = run_match(text, covered)
            assert run is not None
            spots.append((covered, run.end(), "ws"))
            covered = run.end()
    for m in tables.spaces_re.finditer(text):
        a, b = m.span()
        while a > 0 and text[a - 1] in blank:
            a -= 1
        run = run_match(text, b)
        spots.append((a, run.end() if run is not None else b, "ws"))
    if not spots:
        return FoldedText(translated, OffsetMap((), len(text), len(text)), len(text))
    spots.sort(key=lambda t: (t[0], -t[1]))
    parts: list[str] = []
    edits: list[tuple[int, int, int, int]] = []
    last = 0
    pos = 0  # folded length so far
    for a, b, kind in spots:
        if a < last:
            continue  # inside a run already handled
        if kind == "ws":
            seg = text[a:b]
            invisible = not seg.isascii() and all(ch in _IGNORABLE for ch in seg)
            repl = "" if invisible or _between_cjk(text, a, b) else " "
        elif kind == "seq":
            if a > last:
                a -= 1  # with the character before the marks
            repl = _fold_chars(text[a:b])
        elif kind == "seq+":
            repl = _fold_chars(text[a:b])
        else:
            repl = expand[text[a]]
        if repl == translated[a:b]:
            continue  # a single line break, a sequence that folds to itself
        if a > last:
            parts.append(translated[last:a])
            pos += a - last
        edits.append((pos, len(repl), a, b - a))
        parts.append(repl)
        pos += len(repl)
        last = b
    if not edits:
        return FoldedText(translated, OffsetMap((), len(text), len(text)), len(text))
    parts.append(translated[last:])
    pos += len(text) - last
    return FoldedText("".join(parts), OffsetMap(edits, pos, len(text)), len(text))


_CJK_STRONG_RE = re.compile(f"[{_CJK_LETTER}{_CJK_WIDE}]")
_CJK_ANY_RE = re.compile(f"[{_CJK_LETTER}{_CJK_PUNCT}]")


def _between_cjk(text: str, a: int, b: int) -> bool:
    """Whitespace ``text[a:b]`` sits between CJK characters (a line wrap, an indent).

    Both neighbours are CJK letters or punctuation, and at least one is a CJK
    letter or CJK/full-width punctuation (so ``”\n“`` in English stays a space).
    """
    if a == 0 or b >= len(text):
        return False
    before, after = text[a - 1], text[b]
    if before < "\u00b7" or after < "\u00b7":
        return False
    if not (_CJK_ANY_RE.match(before) and _CJK_ANY_RE.match(after)):
        return False
    return bool(_CJK_STRONG_RE.match(before) or _CJK_STRONG_RE.match(after))


def _is_cjk_text(s: str) -> bool:
    """Mostly Han / kana / Hangul (at least half of the non-space characters)."""
    letters = sum(1 for c in s if not c.isspace())
    return letters > 0 and 2 * len(_CJK_OR_HANGUL_RE.findall(s)) >= letters


def _is_word_char(c: str) -> bool:
    """A character inside a space-separated word (CJK letters are words by themselves)."""
    return c.isalnum() and not _CJK_OR_HANGUL_RE.match(c)
