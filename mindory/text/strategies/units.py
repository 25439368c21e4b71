"""Units: the pieces of a section every strategy packs, and why a chunk may be long.

The blocks tile the text (block ``k`` owns ``[start_k, start_{k+1})``); each
tile, trimmed of edge whitespace and never cut inside a grapheme cluster, is a
unit. Table runs, ``preformatted`` blocks and closed code fences are atomic
units; headings are flagged. :func:`_section_units` picks the vectorized path
(:func:`_fast_units`) for regular blocks, else the general one (:func:`_units`).
The reason constants (``R_*``) name why a chunk may exceed the size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from mindory.text.normalize import BlockTable, is_heading_line
from mindory.text.records import HEADING, PREFORMATTED, TABLE_ROW, Block
from mindory.text.windows import _WS, grapheme_floor

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


_FENCE_RE = re.compile(r"(?m)^[ \t]*```")


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
