"""Structure-aware chunking strategies with the same exactness as ``window``.

Every strategy is a pure function of a section's normalized text and render
blocks that returns normalized ``[start, end)`` spans; ``chunking.make_chunks``
turns them into chunks with source and UTF-16 spans through the offset map,
exactly as for ``window``. The rules (docs/chunking.md has the long form):

* **Units.** The blocks *tile* the text: block ``k`` owns ``[start_k,
  start_{k+1})``, so every character belongs to exactly one unit and no text
  can be dropped. Unit edges are trimmed of whitespace (``chunking``'s set) and
  never fall inside a grapheme cluster. *Atomic* units are never split: a
  ``preformatted`` block, a run of consecutive ``table_row`` blocks (one table),
  and a code fence (a line starting with three backticks up to the next three
  backticks, extended to whole blocks; an unclosed fence is ordinary text).
* **Cutting a long unit** (``_Cutter.cut``): the last sentence end (Latin
  ``.!?`` with closing quotes, followed by whitespace; ``。！？；…．`` with
  closing quotes) in the last two thirds of the room, else the last clause end
  (``,;:`` followed by whitespace, ``，、：``, or a line break) in the last half,
  else the last space in the last half, else the same three anywhere, else a
  hard cut at the size that never splits a grapheme cluster.
* ``paragraph``: one block per chunk. A block shorter than ``min_size``, and a
  heading, joins the next block (at the end of a section, the previous
  chunk); a block longer than ``size`` is cut as above and a cut-off tail
  shorter than ``min_size`` joins the piece before it.
* ``structured``: consecutive units are packed greedily up to ``size``; a
  heading never ends a chunk while text follows it (the heading moves to the
  next chunk with the text it introduces); a unit too long for the chunk first
  fills the chunk with its leading sentences, then continues in new chunks.
  A last chunk shorter than ``min_size`` joins the one before it.
* ``parent-child``: ``structured`` parents of ``max(parent_size, size)``
  characters, each packed again into ``structured`` children of ``size``
  inside it; children are the chunks and carry their parent's span.
* ``dialogue``: turns are atomic units. Chat logs: a line starting with ``>``
  starts a user turn (consecutive ``>`` lines are one turn), and the reply runs
  up to the next ``>`` line or through a ``---`` line. Plays: a speaker label
  starts a turn — a block that is an upper-case name (``ROMEO``, ``LADY
  CAPULET.``), a title-case name of one to three words that recurs as a block in
  the section (``Nurse``, ``First Musician``), or — when fewer than three such
  blocks exist — a block beginning with an upper-case name and ``.`` or ``:``
  (``ROMEO. But soft!``) — and runs up to the
  next label or heading. Turns pack like ``structured`` units; a turn longer
  than ``max(max_turn, size)`` is cut like a long unit. Fewer than three turns
  in a section: ``paragraph``.

Only ``window`` overlaps; these strategies tile the text without overlap.
Chunks longer than ``size`` carry a reason (``Plan.reasons``): an atomic unit
(``table``, ``preformatted``, ``code fence``, ``dialogue turn``), a ``heading``
kept with its text, a ``short block joined`` to its neighbour or a ``short
tail`` (both at most ``size + min_size``), or a ``long grapheme cluster``.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any

import numpy as np
import regex

from mindory.text.chunking import _WS, grapheme_ceil, grapheme_floor, window_spans
from mindory.text.normalize import BlockTable, is_heading_line
from mindory.text.records import (
    HEADING,
    PREFORMATTED,
    STRATEGIES,
    TABLE_ROW,
    Block,
    Book,
    Chunk,
    ChunkSettings,
    Section,
    TocEntry,
)

__all__ = [
    "ATOMIC_REASONS",
    "REASONS",
    "Plan",
    "atomic_regions",
    "chunk_context_header",
    "chunk_stats",
    "context_header",
    "context_source_span",
    "dialogue_spans",
    "find_turns",
    "paragraph_spans",
    "parent_child_spans",
    "plan_section",
    "span_stats",
    "structured_spans",
    "toc_path",
]

Span = tuple[int, int]
# A unit: trimmed start, trimmed end, flags, reason (why it may exceed the size).
Unit = tuple[int, int, int, str]

_HEAD = 1  # a heading: never the last unit of a chunk while text follows
_ATOMIC = 2  # never split

R_TABLE = "table"
R_PRE = "preformatted"
R_FENCE = "code fence"
R_TURN = "dialogue turn"
R_HEADING = "heading"
R_JOINED = "short block joined"
R_TAIL = "short tail"
R_CLUSTER = "long grapheme cluster"
# Why a chunk may be longer than ``size``; the atomic ones have no length bound.
REASONS = (R_TABLE, R_PRE, R_FENCE, R_TURN, R_HEADING, R_JOINED, R_TAIL, R_CLUSTER)
ATOMIC_REASONS = (R_TABLE, R_PRE, R_FENCE, R_TURN)

# Sentence ends (searched backwards): the position just after the ender and
# its closing quotes; Latin enders need whitespace after them.
_SENT_R = regex.compile(
    r"(?r)[.!?][\"')\]\u201d\u2019\u00bb]*(?=\s)"
    r"|[。！？；…．][」』”’）》〉】〕\"'\u300f\u3011]*"
)
# Clause ends: Latin ,;: before whitespace, CJK ，、：, or a line break.
_CLAUSE_R = regex.compile(r"(?r)[,;:](?=\s)|[，、：\n]")
# A chunk that ends a sentence (for statistics).
_ENDS_SENTENCE = re.compile(
    r"(?:[.!?]|[。！？；…．])[\"')\]\u201d\u2019\u00bb」』”’）》〉】〕\u300f\u3011]*$"
)
_ENDS_CLAUSE = re.compile(r"[,;:，、：]$")

_FENCE_RE = re.compile(r"(?m)^[ \t]*```")
_CHAT_RE = re.compile(r"(?m)^>")
_CHAT_SEP_RE = re.compile(r"(?m)^-{3,}[ \t]*$")
_CAPS_WORD = r"\p{Lu}[\p{Lu}'’\-]*\.?"
_CAPS_LABEL_RE = regex.compile(rf"{_CAPS_WORD}(?: {_CAPS_WORD}){{0,3}}:?")
_TITLE_LABEL_RE = regex.compile(r"\p{Lu}\p{Ll}+(?: \p{Lu}\p{Ll}+){0,2}[.:]?")
_INLINE_LABEL_RE = regex.compile(r"(\p{Lu}[\p{Lu}'’\-]+(?: \p{Lu}[\p{Lu}'’\-]+){0,3})[.:] (?=\S)")
_ROMAN_RE = re.compile(r"[IVXLCDM]+\.?")
_LABEL_MAX = 40
# Words that start structural lines, not speaker names.
_NOT_SPEAKERS = frozenset(
    (
        "ACT", "SCENE", "PROLOGUE", "EPILOGUE", "CHAPTER", "BOOK", "PART", "VOLUME",
        "CONTENTS", "INDEX", "FINIS", "PREFACE", "INTRODUCTION", "APPENDIX", "NOTE", "NOTES",
        "FOOTNOTE", "FOOTNOTES", "DRAMATIS", "PERSONAE", "CANTO", "SECTION", "END", "TABLE",
        "FIGURE",
    )
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Plan:
    """The spans of one section under one strategy.

    ``reasons[i]`` says why chunk ``i`` is longer than the size (see
    ``REASONS``); ``contexts[i]`` is chunk ``i``'s parent span (parent-child
    only); ``strategy`` is the strategy that made the spans (``dialogue`` falls
    back to ``paragraph``).
    """

    strategy: str
    spans: list[Span]
    reasons: dict[int, str]
    contexts: list[Span] | None = None


# --------------------------------------------------------------------------- units


def _skip_ws(text: str, p: int, end: int) -> int:
    while p < end and text[p] in _WS:
        p += 1
    return p


def _trim_back(text: str, s: int, e: int) -> int:
    while e > s and text[e - 1] in _WS:
        e -= 1
    return e


def _trim(text: str, a: int, b: int, ascii_only: bool) -> Span:
    """``[a, b)`` without edge whitespace; starts on a grapheme boundary."""
    s = a
    if s < b and text[s] in _WS:
        s = _skip_ws(text, s, b)
    if s >= b:
        return (b, b)
    if not ascii_only and s > 0:
        s = grapheme_floor(text, s)  # " \u0301" is one cluster: keep it whole
    e = b
    if text[e - 1] in _WS:
        e = _trim_back(text, s, e)
    return (s, e)


def _text_blocks(text: str) -> tuple[list[int], list[str]]:
    """Blocks of a bare normalized text: paragraphs between blank lines."""
    seps = list(re.finditer(r"\n\n+", text))
    starts = [0, *(m.end() for m in seps)]
    ends = [*(m.start() for m in seps), len(text)]
    kinds: list[str] = []
    for s, e in zip(starts, ends):
        kinds.append(HEADING if is_heading_line(text[s:e]) else "paragraph")
    return starts, kinds


def _tiles(text: str, blocks: Sequence[Block] | None) -> tuple[list[int], list[str]]:
    """Sorted tile starts (the first is 0) and the kind of each tile."""
    n = len(text)
    if blocks is None:
        return _text_blocks(text)
    if isinstance(blocks, BlockTable):
        arr = blocks.starts
        kinds: list[str] = blocks.kinds
    else:
        arr = np.asarray([b.start for b in blocks], dtype=np.int64)
        kinds = [b.kind for b in blocks]
    if len(arr) == 0:
        return [0], ["paragraph"]
    if (len(arr) > 1 and bool((np.diff(arr) <= 0).any())) or int(arr[0]) < 0 or int(arr[-1]) >= n:
        # Unsorted, repeated or out-of-range starts: keep the first kind per start.
        seen: dict[int, str] = {}
        for s, k in zip(arr.tolist(), kinds):
            if 0 <= s < n and s not in seen:
                seen[s] = k
        order = sorted(seen)
        starts, kinds = order, [seen[s] for s in order]
    else:
        starts = arr.tolist()
    if not starts or starts[0] != 0:
        starts = [0, *starts]
        kinds = ["paragraph", *kinds]
    return starts, kinds


def _fence_regions(text: str) -> list[Span]:
    """``[open line start, end of the closing backticks)`` of each closed code fence."""
    if "```" not in text:
        return []
    out: list[Span] = []
    pos = 0
    while True:
        m = _FENCE_RE.search(text, pos)
        if m is None:
            break
        close = text.find("```", m.end())
        if close < 0:
            break  # unclosed: ordinary text
        out.append((m.start(), close + 3))
        pos = close + 3
    return out


def _units(
    text: str,
    starts: list[int],
    kinds: list[str],
    regions: Sequence[tuple[int, int, int, str]] = (),
) -> list[Unit]:
    """Trimmed units over the tiles; tiles meeting a region merge into one unit.

    ``regions`` are ``(start, end, flags, reason)`` ranges, sorted by start;
    overlapping ones are merged (an atomic reason wins over a turn).
    """
    n = len(text)
    ascii_only = text.isascii()
    out: list[Unit] = []
    # Table runs and code fences become regions too.
    regs: list[tuple[int, int, int, str]] = list(regions)
    k = 0
    t = len(starts)
    if TABLE_ROW in kinds:
        while k < t:
            if kinds[k] == TABLE_ROW:
                j = k
                while j + 1 < t and kinds[j + 1] == TABLE_ROW:
                    j += 1
                regs.append((starts[k], starts[j + 1] if j + 1 < t else n, _ATOMIC, R_TABLE))
                k = j + 1
            else:
                k += 1
    for a, b in _fence_regions(text):
        regs.append((a, b, _ATOMIC, R_FENCE))
    if regs:
        regs.sort()
        merged: list[tuple[int, int, int, str]] = []
        for r in regs:
            if merged and r[0] < merged[-1][1]:
                a, b, f, why = merged[-1]
                if r[2] & _ATOMIC and why == R_TURN or (r[2] & _ATOMIC and not f & _ATOMIC):
                    f, why = r[2] | _ATOMIC, r[3]
                merged[-1] = (a, max(b, r[1]), f | (r[2] & _ATOMIC), why)
            else:
                merged.append(r)
        regs = merged
    ri = 0
    i = 0
    while i < t:
        a = starts[i]
        # Skip regions that ended before this tile.
        while ri < len(regs) and regs[ri][1] <= a:
            ri += 1
        if ri < len(regs) and regs[ri][0] < (starts[i + 1] if i + 1 < t else n):
            ra, rb, flags, why = regs[ri]
            a = min(a, ra)
            # Take every tile that starts before the region ends.
            j = i
            while j + 1 < t and starts[j + 1] < rb:
                j += 1
            b = starts[j + 1] if j + 1 < t else n
            if why == R_TURN and PREFORMATTED in kinds[i : j + 1]:
                why = R_PRE  # a turn holding a preformatted block is never split
            ri += 1
            i = j + 1
        else:
            b = starts[i + 1] if i + 1 < t else n
            kind = kinds[i]
            flags = _HEAD if kind == HEADING else (_ATOMIC if kind == PREFORMATTED else 0)
            why = R_PRE if kind == PREFORMATTED else ""
            i += 1
        s, e = _trim(text, a, b, ascii_only)
        if e > s:
            if out and s < out[-1][1]:  # a region reached back into the previous unit
                ps, _, pf, pw = out.pop()
                s, flags, why = ps, flags | (pf & _ATOMIC), why or pw
            out.append((s, e, flags, why))
    return out


def _section_units(text: str, blocks: Sequence[Block] | None) -> list[Unit]:
    if blocks is not None and len(blocks):
        if isinstance(blocks, BlockTable):
            fast = _fast_units(text, blocks.starts, blocks.ends, blocks.kinds)
        else:
            fast = _fast_units(
                text,
                np.fromiter((b.start for b in blocks), dtype=np.int64, count=len(blocks)),
                np.fromiter((b.end for b in blocks), dtype=np.int64, count=len(blocks)),
                [b.kind for b in blocks],
            )
        if fast is not None:
            return fast
    starts, kinds = _tiles(text, blocks)
    return _units(text, starts, kinds)


_WS_CODES = np.array(sorted({ord(c) for c in _WS}), dtype=np.uint32)
_WS_TABLE = np.zeros(256, dtype=bool)
_WS_TABLE[[c for c in _WS_CODES.tolist() if c < 256]] = True
_KIND_FLAGS = {HEADING: (_HEAD, ""), PREFORMATTED: (_ATOMIC, R_PRE)}


def _fast_units(text: str, S: np.ndarray, E: np.ndarray, kinds: list[str]) -> list[Unit] | None:
    """``_units`` for regular blocks (sorted, trimmed, ``"\\n\\n"`` between), vectorized.

    Tiles that do not look regular are trimmed one by one; ``None`` when the
    blocks need the general path (tables, code fences, unsorted starts, text
    before block 0).
    """
    n = len(text)
    if TABLE_ROW in kinds or int(S[0]) != 0 or (len(S) > 1 and bool((np.diff(S) <= 0).any())):
        return None
    if int(S[-1]) >= n:
        return None
    ascii_only = text.isascii()
    if ascii_only:
        codes = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    else:
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    if "`" in text and "```" in text:
        return None  # code fences: the general path

    def is_ws(c: np.ndarray) -> np.ndarray:
        return _WS_TABLE[c] if ascii_only else np.isin(c, _WS_CODES)

    T = np.empty_like(S)
    T[:-1] = S[1:]
    T[-1] = n
    ok = (E > S) & (E <= T)
    Ec = np.clip(E, 1, n)
    ok &= ~is_ws(codes[S]) & ~is_ws(codes[Ec - 1])
    gap = T - E
    after = np.minimum(Ec, n - 1)
    lf2 = (codes[after] == 10) & (codes[np.minimum(after + 1, n - 1)] == 10)
    ok &= (gap == 0) | ((gap == 2) & lf2)
    if not ascii_only:
        # After a line feed (or at 0) a grapheme cluster always begins (GB4); a
        # block running into the next one must end the text.
        ok &= (S == 0) | (codes[np.maximum(S - 1, 0)] == 10)
        ok &= (gap != 0) | (n == T)
    starts = S.tolist()
    ends = E.tolist()
    count = len(starts)
    fl = [0] * count
    ws = [""] * count
    for kind in (HEADING, PREFORMATTED):
        i = -1
        while True:  # list.index: a C scan, and headings are few
            try:
                i = kinds.index(kind, i + 1)
            except ValueError:
                break
            fl[i], ws[i] = _KIND_FLAGS[kind]
    if bool(ok.all()):
        return list(zip(starts, ends, fl, ws))
    out: list[Unit] = []
    tile_ends = T.tolist()
    for i, good in enumerate(ok.tolist()):
        f, w = fl[i], ws[i]
        if good:
            out.append((starts[i], ends[i], f, w))
        else:
            a, b = _trim(text, starts[i], tile_ends[i], ascii_only)
            if b > a:
                if out and a < out[-1][1]:
                    return None  # a cluster across tiles: take the general path
                out.append((a, b, f, w))
    return out


# --------------------------------------------------------------------------- cutting


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


# --------------------------------------------------------------------------- dialogue


def _caps_label(line: str) -> bool:
    """An upper-case speaker name: ``ROMEO``, ``LADY CAPULET.``, ``HAMLET:``."""
    if len(line) > _LABEL_MAX or not line.isupper() or not _CAPS_LABEL_RE.fullmatch(line):
        return False
    first = line.split()[0].strip(".:")
    if len(line.rstrip(".:")) < 2 or first in _NOT_SPEAKERS:
        return False
    return not _ROMAN_RE.fullmatch(line.rstrip(":"))


def find_turns(text: str, blocks: Sequence[Block] | None = None) -> tuple[str, list[Span]]:
    """The dialogue turns of a section: ``("chat" | "play" | "", [(start, end), ...])``.

    Spans are ``[start, end)`` ranges of normalized text (a chat turn's end may
    include the whitespace before the next turn); see the module doc for the
    markers. Chat wins when it has at least three turns.
    """
    kind, turns, _ = _find_turns(text, _section_units(text, blocks))
    return kind, turns


def _find_turns(text: str, units: list[Unit]) -> tuple[str, list[Span], list[Span] | None]:
    """Kind, turn spans and, for plays, each turn as a range of unit indices."""
    n = len(text)
    # Chat logs.
    chat: list[int] = []
    if ">" in text:
        prev_end = -1
        for m in _CHAT_RE.finditer(text):
            line_end = text.find("\n", m.start())
            line_end = n if line_end < 0 else line_end
            if prev_end >= 0 and not text[prev_end : m.start()].strip(_WS):
                prev_end = line_end  # a continued user turn
                continue
            chat.append(m.start())
            prev_end = line_end
    if len(chat) >= 3:
        heads = [u[0] for u in units if u[2] & _HEAD]
        seps = [m.end() for m in _CHAT_SEP_RE.finditer(text)] if "---" in text else []
        return "chat", _turn_spans(chat, sorted(set(heads) | set(seps)), n), None
    # Plays: speaker labels are blocks (units that are not headings, tables or
    # preformatted text), judged once per distinct text.
    short = [k for k, u in enumerate(units) if not u[2] and u[1] - u[0] <= _LABEL_MAX]
    texts = [text[units[k][0] : units[k][1]] for k in short]
    certain = "\0"  # the verdict of an upper-case label
    verdict: dict[str, str | None] = {}
    for block in set(texts):
        if _caps_label(block):
            verdict[block] = certain
        elif block.istitle() and _TITLE_LABEL_RE.fullmatch(block):
            first = block.split()[0].rstrip(".:").upper()
            verdict[block] = None if first in _NOT_SPEAKERS else block.rstrip(".:")
        else:
            verdict[block] = None
    title_counts = Counter(v for b in texts if (v := verdict[b]) is not None and v != certain)
    labels = {
        k
        for k, b in zip(short, texts)
        if (v := verdict[b]) is not None and (v == certain or title_counts[v] >= 2)
    }
    # Blocks that begin with an upper-case name ("ROMEO. But soft!"), looked for
    # when the names are not blocks of their own.
    inline = (
        [
            k
            for k, (p, q, fl, _) in enumerate(units)
            if not fl
            and q - p > 3
            and text[p + 1].isupper()
            and text[p].isupper()
            and k not in labels
        ]
        if len(labels) < 3
        else []
    )
    for k in inline:
        p, q = units[k][0], units[k][1]
        m = _INLINE_LABEL_RE.match(text, p, q)
        if m is not None and _caps_label(m.group(1)):
            labels.add(k)
    if len(labels) < 3:
        return "", [], None
    order = sorted(labels)
    heads = [k for k, u in enumerate(units) if u[2] & _HEAD]
    ranges: list[Span] = []
    j = 0
    count = len(units)
    for t, label in enumerate(order):
        end = order[t + 1] if t + 1 < len(order) else count
        while j < len(heads) and heads[j] <= label:
            j += 1
        if j < len(heads) and heads[j] < end:
            end = heads[j]
        ranges.append((label, end))
    return "play", [(units[a][0], units[e - 1][1]) for a, e in ranges], ranges


def _turn_spans(turn_starts: list[int], breaks: list[int], n: int) -> list[Span]:
    """Each turn runs to the next turn start or the first break after it (both sorted)."""
    out: list[Span] = []
    j = 0
    nb = len(breaks)
    last = len(turn_starts) - 1
    for k, t in enumerate(turn_starts):
        end = turn_starts[k + 1] if k < last else n
        while j < nb and breaks[j] <= t:
            j += 1
        if j < nb and breaks[j] < end:
            end = breaks[j]
        out.append((t, end))
    return out


def _dialogue_units(
    text: str,
    blocks: Sequence[Block] | None,
    units: list[Unit],
    turns: list[Span],
    ranges: list[Span] | None,
    max_turn: int,
) -> list[Unit]:
    """Units with every turn merged into one (atomic up to ``max_turn``)."""
    if ranges is not None:
        return _merge_ranges(units, ranges, max_turn)
    merged = _merge_turns(units, turns)
    if merged is None:
        # A turn starts or ends inside a block (a ">" line, a "---" line): split
        # the tiles there and merge them as regions.
        starts, kinds = _tiles(text, blocks)
        extra = {p for span in turns for p in span if 0 < p < len(text)} - set(starts)
        if extra:
            kind_at = dict(zip(starts, kinds))
            new_starts = sorted(set(starts) | extra)
            new_kinds = []
            for p in new_starts:
                if p in kind_at:
                    new_kinds.append(kind_at[p])
                else:
                    k = kinds[bisect_right(starts, p) - 1]
                    new_kinds.append("paragraph" if k == HEADING else k)
            starts, kinds = new_starts, new_kinds
        regions = [(a, b, _ATOMIC, R_TURN) for a, b in turns if b > a]
        merged = _units(text, starts, kinds, regions)
    # A turn longer than the limit is cut like any long unit.
    return [
        (s, e, 0, "") if why == R_TURN and e - s > max_turn else (s, e, f, why)
        for s, e, f, why in merged
    ]


def _merge_ranges(units: list[Unit], ranges: list[Span], max_turn: int) -> list[Unit]:
    """Merge each range ``[a, e)`` of unit indices (a play's turns) into one unit."""
    atomic = [k for k, u in enumerate(units) if u[2] & _ATOMIC]
    out: list[Unit] = []
    prev = 0
    for a, e in ranges:
        if prev < a:
            out.extend(units[prev:a])
        s, t = units[a][0], units[e - 1][1]
        i = bisect_left(atomic, a) if atomic else 0
        if atomic and i < len(atomic) and atomic[i] < e:
            # A table, preformatted block or code fence inside: never split.
            out.append((s, t, _ATOMIC, units[atomic[i]][3]))
        elif t - s > max_turn:
            out.append((s, t, 0, ""))  # cut like any long unit
        else:
            out.append((s, t, _ATOMIC, R_TURN))
        prev = e
    out.extend(units[prev:])
    return out


def _merge_turns(units: list[Unit], turns: list[Span]) -> list[Unit] | None:
    """Merge the units of each turn; ``None`` when a turn edge falls inside a unit."""
    out: list[Unit] = []
    i = 0
    count = len(units)
    for a, b in turns:
        while i < count and units[i][1] <= a:
            out.append(units[i])
            i += 1
        if i == count or units[i][0] >= b:
            continue  # a turn of whitespace only
        if units[i][0] < a:
            return None
        first = i
        atomic = ""
        while i < count and units[i][0] < b:
            if units[i][2] & _ATOMIC and not atomic:
                atomic = units[i][3]
            i += 1
        if units[i - 1][1] > b:
            return None
        out.append((units[first][0], units[i - 1][1], _ATOMIC, atomic or R_TURN))
    out.extend(units[i:])
    return out


# --------------------------------------------------------------------------- plans


def _blocks_of(blocks: Sequence[Block] | None) -> Sequence[Block] | None:
    return blocks if blocks is None or len(blocks) else None


def plan_section(text: str, blocks: Sequence[Block] | None, settings: ChunkSettings) -> Plan:
    """Spans of one section's normalized ``text`` under ``settings.strategy``.

    ``blocks`` are the section's render blocks; ``None`` (or none at all)
    derives paragraph blocks from blank lines.
    """
    strategy = settings.strategy
    if not text.strip(_WS):
        return Plan(strategy, [], {})
    blocks = _blocks_of(blocks)
    size, min_size = settings.size, settings.min_size
    if strategy == "structured":
        out = _pack(text, _section_units(text, blocks), size, min_size)
        return Plan(strategy, out.spans, out.reasons)
    if strategy == "paragraph":
        out = _pack_paragraph(text, _section_units(text, blocks), size, min_size)
        return Plan(strategy, out.spans, out.reasons)
    if strategy == "parent-child":
        return _parent_child(text, blocks, settings)
    if strategy == "dialogue":
        units = _section_units(text, blocks)
        _, turns, ranges = _find_turns(text, units)
        if len(turns) < 3:
            out = _pack_paragraph(text, units, size, min_size)
            return Plan("paragraph", out.spans, out.reasons)
        limit = max(settings.max_turn, size)
        units = _dialogue_units(text, blocks, units, turns, ranges, limit)
        out = _pack(text, units, size, min_size)
        return Plan(strategy, out.spans, out.reasons)
    if strategy == "window":
        spans = window_spans(text, size, settings.overlap, min_size)
        reasons = {k: R_TAIL for k, (s, e) in enumerate(spans) if e - s > size}
        return Plan(strategy, spans, reasons)
    raise ValueError(f"unknown chunking strategy {strategy!r} (one of {', '.join(STRATEGIES)})")


def _parent_child(text: str, blocks: Sequence[Block] | None, settings: ChunkSettings) -> Plan:
    size, min_size = settings.size, settings.min_size
    head_max = size // 2
    # Parents see headings as the children do, so no heading is cut from its text
    # (and a split unit, even one marked as a heading, is text).
    units = [
        (s, e, f & ~_HEAD, w) if f & _HEAD and e - s > head_max else (s, e, f, w)
        for s, e, f, w in _section_units(text, blocks)
    ]
    parents = _pack(text, units, max(settings.parent_size, size), min_size, head_max).spans
    spans: list[Span] = []
    reasons: dict[int, str] = {}
    contexts: list[Span] = []
    unit_starts = [u[0] for u in units]
    unit_ends = [u[1] for u in units]
    for ps, pe in parents:
        i = bisect_right(unit_ends, ps)  # the first unit ending after ps
        j = bisect_left(unit_starts, pe, i)  # the first unit starting at or after pe
        inside = units[i:j]
        if inside:
            us, ue, fl, why = inside[0]
            if us < ps:
                inside[0] = (ps, ue, fl, why)
            us, ue, fl, why = inside[-1]
            if ue > pe:
                inside[-1] = (us, pe, fl, why)
        kids = _pack(text, inside, size, min_size)
        for k, why in kids.reasons.items():
            reasons[len(spans) + k] = why
        spans.extend(kids.spans)
        contexts.extend([(ps, pe)] * len(kids.spans))
    return Plan("parent-child", spans, reasons, contexts)


def paragraph_spans(
    text: str, blocks: Sequence[Block] | None = None, size: int = 800, min_size: int = 50
) -> list[Span]:
    """Spans of the ``paragraph`` strategy (see the module doc)."""
    return plan_section(
        text, blocks, ChunkSettings(strategy="paragraph", size=size, min_size=min_size)
    ).spans


def structured_spans(
    text: str, blocks: Sequence[Block] | None = None, size: int = 800, min_size: int = 50
) -> list[Span]:
    """Spans of the ``structured`` strategy (see the module doc)."""
    return plan_section(
        text, blocks, ChunkSettings(strategy="structured", size=size, min_size=min_size)
    ).spans


def parent_child_spans(
    text: str,
    blocks: Sequence[Block] | None = None,
    size: int = 400,
    parent_size: int = 1600,
    min_size: int = 50,
) -> list[tuple[Span, Span]]:
    """``(child span, parent span)`` pairs of the ``parent-child`` strategy."""
    plan = plan_section(
        text,
        blocks,
        ChunkSettings(
            strategy="parent-child",
            size=size,
            min_size=min_size,
            overlap=0,
            parent_size=parent_size,
        ),
    )
    return list(zip(plan.spans, plan.contexts or []))


def dialogue_spans(
    text: str,
    blocks: Sequence[Block] | None = None,
    size: int = 800,
    min_size: int = 50,
    max_turn: int = 1600,
) -> list[Span]:
    """Spans of the ``dialogue`` strategy (``paragraph`` below three turns)."""
    return plan_section(
        text,
        blocks,
        ChunkSettings(strategy="dialogue", size=size, min_size=min_size, max_turn=max_turn),
    ).spans


def context_source_span(section: Section, chunk: Chunk) -> Span | None:
    """The source span of a chunk's context (its parent), in book coordinates."""
    if chunk.context is None:
        return None
    s, e = section.offset_map.source_span(*chunk.context)
    return (s + section.source_start, e + section.source_start)


# --------------------------------------------------------------------------- headers


def toc_path(
    toc: Sequence[TocEntry], section: int, source_offset: int | None = None
) -> tuple[str, ...]:
    """Titles from the TOC root to the last entry in ``section`` at or before ``source_offset``.

    ``source_offset`` is in the TOC's coordinates (book source, see records);
    ``None`` takes the section's first entry.
    """
    best: tuple[str, ...] = ()
    best_offset = -1

    def walk(entries: Sequence[TocEntry], path: tuple[str, ...]) -> None:
        nonlocal best, best_offset
        for entry in entries:
            here = (*path, entry.title)
            if entry.section == section:
                off = entry.source_offset if entry.source_offset is not None else -1
                if source_offset is None:
                    if not best:
                        best, best_offset = here, off
                elif off <= source_offset and (off > best_offset or not best):
                    best, best_offset = here, off
            walk(entry.children, here)

    walk(toc, ())
    return best


def context_header(book_title: str, path: Sequence[str], sep: str = " › ") -> str:
    """``"Book title › Part › Chapter"`` (empty and repeated parts dropped)."""
    parts: list[str] = []
    for part in (book_title, *path):
        part = " ".join(part.split())
        if part and (not parts or parts[-1] != part):
            parts.append(part)
    return sep.join(parts)


def chunk_context_header(book: Book, chunk: Chunk, sep: str = " › ") -> str:
    """The context header of a chunk for embedding (never part of its spans)."""
    path = toc_path(book.toc, chunk.section, chunk.source_start)
    if not path:
        title = next((s.title for s in book.sections if s.ordinal == chunk.section), "")
        path = (title,) if title else ()
    return context_header(book.title, path, sep)


# --------------------------------------------------------------------------- statistics


def _end_kind(text: str, e: int, block_ends: set[int]) -> str:
    """How a chunk ending at ``e`` ends: end, paragraph, sentence, line, clause, word, inside."""
    n = len(text)
    if e >= n or not text[e:].strip(_WS):
        return "end"
    if e in block_ends or text.startswith("\n\n", e):
        return "paragraph"
    tail = text[max(0, e - 8) : e]
    if _ENDS_SENTENCE.search(tail):
        return "sentence"
    if text[e] == "\n":
        return "line"
    if _ENDS_CLAUSE.search(tail):
        return "clause"
    if text[e] in _WS:
        return "word"
    return "inside word"


def span_stats(
    items: Iterable[tuple[str, Sequence[Block] | None, Sequence[Span], Mapping[int, str]]],
    size: int,
) -> dict[str, Any]:
    """Length and boundary statistics of chunks given as ``(text, blocks, spans, reasons)``.

    ``reasons`` (chunk index → why it exceeds ``size``) may be empty; an
    over-size chunk without one counts as ``"unknown"``.
    """
    lengths: list[int] = []
    ends: Counter[str] = Counter()
    over: Counter[str] = Counter()
    for text, blocks, spans, reasons in items:
        if blocks is not None and len(blocks):
            block_ends = {
                int(x)
                for x in (
                    blocks.ends if isinstance(blocks, BlockTable) else [b.end for b in blocks]
                )
            }
        else:
            block_ends = set()
        for k, (s, e) in enumerate(spans):
            lengths.append(e - s)
            ends[_end_kind(text, e, block_ends)] += 1
            if e - s > size:
                over[reasons.get(k, "unknown")] += 1
    count = len(lengths)
    arr = np.asarray(lengths, dtype=np.float64)
    at_boundary = ends["end"] + ends["paragraph"] + ends["sentence"]
    return {
        "chunks": count,
        "mean": round(float(arr.mean()), 1) if count else 0.0,
        "median": float(np.median(arr)) if count else 0.0,
        "p95": round(float(np.percentile(arr, 95)), 1) if count else 0.0,
        "min": int(arr.min()) if count else 0,
        "max": int(arr.max()) if count else 0,
        "size": size,
        "ends": dict(sorted(ends.items())),
        "boundary_share": round(at_boundary / count, 4) if count else 0.0,
        "cut_inside_sentence": count - at_boundary,
        "over_max": sum(over.values()),
        "over_max_reasons": dict(sorted(over.items())),
    }


def chunk_stats(
    sections: Iterable[Section], settings: ChunkSettings, strategies: Sequence[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Per strategy, ``span_stats`` of every section of a book (``mindory stats``).

    ``strategies`` defaults to all; each runs with ``settings`` but its own
    strategy. A chunk "ends at a boundary" at the end of its section, a block
    end or a sentence end; ``cut_inside_sentence`` counts the rest; ``p95`` is
    numpy's linear-interpolation percentile.
    """
    secs = list(sections)
    out: dict[str, dict[str, Any]] = {}
    for name in strategies or STRATEGIES:
        cs = replace(settings, strategy=name)
        plans = [(s, plan_section(s.normalized_text, s.blocks, cs)) for s in secs]
        stats = span_stats(
            ((s.normalized_text, s.blocks, p.spans, p.reasons) for s, p in plans), cs.size
        )
        stats["fallback_sections"] = sum(1 for _, p in plans if p.strategy != name and p.spans)
        out[name] = stats
    return out


def atomic_regions(text: str, blocks: Sequence[Block] | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, reason)`` of the units no strategy splits (tables, pre, code fences)."""
    return [(s, e, why) for s, e, f, why in _section_units(text, _blocks_of(blocks)) if f & _ATOMIC]
