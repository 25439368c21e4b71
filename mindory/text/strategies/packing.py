"""Packing units into spans: cutting a long unit, and the two packers.

:class:`_Cutter` finds a cut inside one long unit (sentence end, clause end,
space, else a hard cut at a grapheme boundary), :func:`_split` cuts a unit into
pieces, and :func:`_pack` (the ``structured`` rule) and
:func:`_pack_paragraph` (the ``paragraph`` rule) turn units into spans with the
reason of each over-size span (:class:`_Out`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import accumulate
from typing import Any

import numpy as np
import regex

from mindory.text.strategies.units import (
    _ATOMIC,
    _HEAD,
    R_CLUSTER,
    R_HEADING,
    R_JOINED,
    R_TAIL,
    Span,
    Unit,
    _skip_ws,
    _trim_back,
)
from mindory.text.windows import grapheme_ceil, grapheme_floor

# Sentence ends (searched backwards): the position just after the ender and
# its closing quotes; Latin enders need whitespace after them.
_SENT_R = regex.compile(
    r"(?r)[.!?][\"')\]\u201d\u2019\u00bb]*(?=\s)"
    r"|[。！？；…．][」』”’）》〉】〕\"'\u300f\u3011]*"
)
# Clause ends: Latin ,;: before whitespace, CJK ，、：, or a line break.
_CLAUSE_R = regex.compile(r"(?r)[,;:](?=\s)|[，、：\n]")


def _last_end(rx: Any, text: str, lo: int, hi: int, ascii_only: bool) -> int:
    """End of the last match of ``rx`` (a reverse pattern) ending in ``[lo, hi]``, or -1.

    A match must end before the searched slice does, so its lookahead and its
    run of closing quotes saw real text (the window chunker's rule).
    """
    endpos = hi + 1
    start = lo - 4 if lo > 4 else 0
    while endpos > lo:
        if ascii_only:
            e = _last_ascii_match_end(rx is _SENT_R, text, start, min(endpos, len(text)))
            if e < 0:
                return -1
        else:
            m = rx.search(text, start, endpos)
            if m is None:
                return -1
            e = int(m.end())
        if e < endpos:
            if e < lo:
                return -1
            if not ascii_only:
                e = grapheme_floor(text, e)
            return e if e >= lo else -1
        endpos = e - 1
    return -1


_ASCII_SPACE = frozenset("\t\n\x0b\x0c\r ")  # the regex \\s of ASCII text
_ASCII_CLOSERS = frozenset("\"')]")  # _SENT_R's closing quotes within ASCII


def _last_ascii_match_end(sentence: bool, text: str, start: int, stop: int) -> int:
    """End of the last match of ``_SENT_R`` (else ``_CLAUSE_R``) in ASCII ``text[start:stop]``.

    ``str.rfind`` finds the candidate enders in C; the reverse regex search
    costs several times more per call, and long paragraphs make thousands.
    In ASCII text only the Latin alternatives can match: an ender, closing
    quotes, then whitespace (inside the slice); or, for clauses, a line feed.
    """
    best = -1
    if not sentence:
        j = text.rfind("\n", start, stop)
        if j >= 0:
            best = j + 1
    enders = ".!?" if sentence else ",;:"
    last = [text.rfind(c, start, stop) for c in enders]
    while True:
        p = max(last)
        if p < 0 or p + 1 <= best:
            return best
        e = p + 1
        if sentence:
            while e < stop and text[e] in _ASCII_CLOSERS:
                e += 1
        if e < stop and text[e] in _ASCII_SPACE:
            return max(best, e)
        k = last.index(p)
        last[k] = text.rfind(enders[k], start, p)


class _Cutter:
    """Finds cut positions inside one long unit, searching back from the limit."""

    __slots__ = ("ascii_only", "text")

    def __init__(self, text: str, ascii_only: bool) -> None:
        self.text = text
        self.ascii_only = ascii_only

    def _space(self, lo: int, hi: int) -> int:
        text = self.text
        j = text.rfind(" ", lo, hi)
        if not self.ascii_only:
            j = max(j, text.rfind("\u3000", lo, hi))
        return j if j >= lo else -1

    def cut(self, s: int, lo_min: int, hi: int, size: int, hard: bool) -> int:
        """A cut in ``(lo_min, hi]`` for a piece starting at ``s``; -1 if none and not ``hard``."""
        text, ascii_only = self.text, self.ascii_only
        lo = lo_min + 1
        third = s + size // 3
        if third < lo:
            third = lo
        half = s + size // 2
        if half < lo:
            half = lo
        c = _last_end(_SENT_R, text, third, hi, ascii_only)
        if c < 0:
            c = _last_end(_CLAUSE_R, text, half, hi, ascii_only)
        if c < 0:
            c = self._space(half, hi)
        if c < 0 and third > lo:
            c = _last_end(_SENT_R, text, lo, third - 1, ascii_only)
            if c < 0:
                c = _last_end(_CLAUSE_R, text, lo, half - 1, ascii_only)
            if c < 0:
                c = self._space(lo, half)
        if c >= 0 or not hard:
            return c
        if ascii_only:
            return hi
        c = grapheme_floor(text, hi)
        return c if c >= lo else grapheme_ceil(text, hi)


def _split(
    text: str,
    s: int,
    lo_min: int,
    e: int,
    size: int,
    first_hi: int,
    ascii_only: bool,
    hard: bool = True,
) -> list[Span] | None:
    """Cut ``[s, e)`` into pieces; the first cut lies after ``lo_min``.

    Every piece but the first is at most ``size`` long (unless a grapheme
    cluster is longer); the first ends by ``first_hi``. ``None`` when ``hard``
    is false and the first piece has no sentence, clause or space to end at.
    """
    cutter = _Cutter(text, ascii_only)
    pieces: list[Span] = []
    hi = first_hi
    while hi < e:
        c = cutter.cut(s, lo_min, hi, size, hard)
        if c < 0:
            return None
        pieces.append((s, _trim_back(text, s, c)))
        ns = _skip_ws(text, c, e)
        if not ascii_only and ns < e:
            ns = grapheme_floor(text, ns)
        s = lo_min = ns
        hi = s + size
        hard = True
    pieces.append((s, e))
    return pieces


# --------------------------------------------------------------------------- packers


class _Out:
    """Spans and the reason of each span longer than ``size``."""

    __slots__ = ("reasons", "size", "spans")

    def __init__(self, size: int) -> None:
        self.size = size
        self.spans: list[Span] = []
        self.reasons: dict[int, str] = {}

    def emit(self, s: int, e: int, why: str = "") -> None:
        if e - s > self.size:
            self.reasons[len(self.spans)] = why or R_CLUSTER
        self.spans.append((s, e))

    def pieces(self, pieces: list[Span], first_why: str, min_size: int) -> None:
        """Emit split pieces; a last piece shorter than ``min_size`` joins the one before."""
        joined = False
        if (
            len(pieces) >= 2
            and pieces[-1][1] - pieces[-1][0] < min_size
            and pieces[-1][1] - pieces[-2][0] <= self.size + min_size
        ):
            last = pieces.pop()
            pieces[-1] = (pieces[-1][0], last[1])
            joined = True
        final = len(pieces) - 1
        for k, (a, b) in enumerate(pieces):
            why = first_why if k == 0 else ""
            if joined and k == final:
                why = why or R_TAIL
            self.emit(a, b, why)

    def merge_tail(self, min_size: int) -> None:
        """Join a last span shorter than ``min_size`` to the one before it."""
        spans = self.spans
        if len(spans) < 2:
            return
        s, e = spans[-1]
        ps, pe = spans[-2]
        k = len(spans) - 2
        if e - s < min_size and k not in self.reasons and e - ps <= self.size + min_size:
            spans.pop()
            self.reasons.pop(k + 1, None)
            spans[-1] = (ps, e)
            if e - ps > self.size:
                self.reasons[k] = R_TAIL


def _pack(
    text: str, units: Sequence[Unit], size: int, min_size: int, head_max: int | None = None
) -> _Out:
    """Greedy packing of units up to ``size`` (the ``structured`` rule).

    A heading longer than ``head_max`` (default half the size) counts as text.
    """
    ascii_only = text.isascii()
    out = _Out(size)
    cs = ce = -1  # the open chunk
    hs = -1  # start of the heading run that ends the open chunk
    pe = -1  # end of the open chunk's content before that run
    cwhy = ""  # why the open chunk is longer than size
    if head_max is None:
        head_max = size // 2
    units = units if isinstance(units, list) else list(units)
    count = len(units)
    if not count:
        return out
    ends = [u[1] for u in units]
    # special[k]: how many of the first k units are headings or atomic (the
    # units that need the careful path below); plain units that fit are taken
    # in one step per chunk.
    if count > 256:
        marks = np.fromiter((u[2] for u in units), dtype=np.int64, count=count) != 0
        special = np.concatenate(([0], np.cumsum(marks))).tolist()
    else:
        special = list(accumulate((1 if u[2] else 0 for u in units), initial=0))
    i = 0
    while i < count:
        if cs >= 0 and ends[i] - cs <= size:
            j = bisect_right(ends, cs + size, i) - 1
            if special[j + 1] == special[i]:
                ce = ends[j]
                hs = -1
                i = j + 1
                continue
        us, ue, fl, why = units[i]
        i += 1
        if fl & _HEAD and ue - us > head_max:
            fl &= ~_HEAD  # an overlong "heading" is text
        head = bool(fl & _HEAD)
        if cs >= 0:
            if ue - cs <= size:
                if head:
                    if hs < 0:
                        hs, pe = us, ce
                else:
                    hs = -1
                ce = ue
                continue
            # The unit does not fit: fill the chunk with its first sentences…
            if not fl & _ATOMIC and ue - us > size and hs < 0 and cs + size - us >= size // 4:
                pieces = _split(text, cs, us, ue, size, cs + size, ascii_only, hard=False)
                if pieces is not None:
                    for a, b in pieces[:-1]:
                        out.emit(a, b, cwhy)
                    cs, ce = pieces[-1]
                    cwhy = ""
                    continue
            # …or close it; a heading run at its end moves on with the unit (a
            # run too long to move with another heading may end the chunk).
            if hs >= 0 and (not head or ue - hs <= size):
                if hs > cs:
                    out.emit(cs, pe, cwhy)
                p = hs
            else:
                out.emit(cs, ce, cwhy)
                p = us
        else:
            p = us
        # Open a chunk at p (before us only for a moved heading run).
        if ue - p <= size:
            hs = p if head else -1
            cs, ce, cwhy = p, ue, ""
        elif fl & _ATOMIC:
            out.emit(p, ue, why)
            cs = ce = hs = -1
        else:
            first_hi = p + size if us - p <= head_max else us + head_max
            pieces = _split(text, p, us, ue, size, first_hi, ascii_only)
            assert pieces is not None
            first_why = R_HEADING if p < us else ""
            for k, (a, b) in enumerate(pieces[:-1]):
                out.emit(a, b, first_why if k == 0 else "")
            cs, ce = pieces[-1]
            cwhy = first_why if len(pieces) == 1 else ""
            hs = -1
    if cs >= 0:
        out.emit(cs, ce, cwhy)
    out.merge_tail(min_size)
    return out


def _pack_paragraph(text: str, units: Iterable[Unit], size: int, min_size: int) -> _Out:
    """One unit per chunk; short units and headings join the next (the ``paragraph`` rule)."""
    ascii_only = text.isascii()
    out = _Out(size)
    limit = size + min_size
    head_max = size // 2
    ps = pe = -1  # pending short blocks and headings
    plast = False  # the pending run ends with a heading

    def to_previous() -> bool:
        """Give the pending blocks to the previous chunk when they fit there."""
        k = len(out.spans) - 1
        if k < 0 or k in out.reasons or pe - out.spans[k][0] > limit:
            return False
        out.spans[k] = (out.spans[k][0], pe)
        if pe - out.spans[k][0] > size:
            out.reasons[k] = R_JOINED
        return True

    for us, ue, fl, why in units:
        length = ue - us
        head = bool(fl & _HEAD) and length <= head_max
        atomic = bool(fl & _ATOMIC)
        if ps >= 0:
            if head:
                if ue - ps <= limit:
                    pe, plast = ue, True
                    continue
                # A heading that does not fit: the pending blocks go on their own
                # (ending with a heading only when this heading follows it).
                if plast or not to_previous():
                    out.emit(ps, pe, R_HEADING if plast else R_JOINED)
                ps, pe, plast = us, ue, True
                continue
            if atomic or (length <= size and ue - ps <= limit):
                if not atomic and ue - ps < min_size:
                    pe, plast = ue, False
                    continue
                out.emit(ps, ue, why if atomic else R_JOINED)
                ps = -1
                continue
            if length > size or plast or not to_previous():
                first_hi = ps + size if us - ps <= head_max else us + head_max
                pieces = _split(text, ps, us, ue, size, first_hi, ascii_only)
                assert pieces is not None
                out.pieces(pieces, R_HEADING if plast else R_JOINED, min_size)
                ps = -1
                continue
            ps = -1  # the pending blocks went to the previous chunk
        if head or (length < min_size and not atomic):
            ps, pe, plast = us, ue, head
        elif length <= size or atomic:
            out.emit(us, ue, why)
        else:
            pieces = _split(text, us, us, ue, size, us + size, ascii_only)
            assert pieces is not None
            out.pieces(pieces, "", min_size)
    if ps >= 0 and not to_previous():
        out.emit(ps, pe, R_HEADING if plast else R_JOINED)
    return out
