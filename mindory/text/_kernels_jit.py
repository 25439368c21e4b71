"""The compiled loops themselves (numba); imported only through ``kernels``.

Inputs are ``uint8`` (ASCII), ``uint16`` (no astral characters) or ``uint32``
code arrays, as made by ``normalize.text_codes``. numba caches the machine code
beside the package, so only the first run on a machine compiles.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

# --------------------------------------------------------------- characters
# Whitespace classes of the first 256 code points, as bits: 1 whitespace,
# 2 always edited (controls, soft hyphen). A table lookup beats a chain of
# comparisons in the per-character loop.
_WS_TABLE = np.zeros(256, np.uint8)
_WS_TABLE[[0x20, 0xA0]] = 1
_WS_TABLE[[0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0xAD]] = 3


@njit(cache=True)
def _ws_class(table: Any, c: int) -> int:
    """0: not whitespace; 1: a space (ASCII, NBSP, U+3000); 3: always edited."""
    if c < 256:
        return table[c]
    if c == 0x3000:
        return 1
    if c == 0x200B or c == 0x2060 or c == 0xFEFF:
        return 3
    return 0


@njit(cache=True)
def _interesting(cp: int, cc: int, cn: int) -> bool:
    """Part of a whitespace cluster (see ``normalize``), from the classes of the
    previous, current and next character: always for controls and invisibles; a
    space only next to other whitespace or at an edge of the text (edges count
    as whitespace)."""
    return ((cc >> 1) | (cc & (cp | cn))) != 0


def clusters(codes: np.ndarray) -> tuple[np.ndarray, ...]:
    """Whitespace clusters: (start, end, breaks, has_ascii_space, first_visible) arrays.

    Two passes: the positions that belong to a cluster (8 bytes at a time for
    ASCII text, 4 units at a time where UTF-16 text is ASCII), then runs of
    consecutive positions with their facts.
    """
    n = len(codes)
    codes = np.ascontiguousarray(codes)
    width = codes.dtype.itemsize
    if width < 4:  # ASCII bytes (8 a word) or UTF-16 units (4 a word)
        words = np.frombuffer(codes.data, dtype="<u8", count=n * width // 8)
    block = 1 << 20  # positions are found block by block: a bounded buffer
    buffer = np.empty(min(n, block), dtype=np.int64)
    parts = []
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        if width == 1:
            k = _cluster_positions_ascii(codes, words, _WS_TABLE, lo, hi, buffer)
        elif width == 2:
            k = _cluster_positions_utf16(codes, words, _WS_TABLE, lo, hi, buffer)
        else:
            k = _cluster_positions(codes, _WS_TABLE, lo, hi, buffer)
        parts.append(buffer[:k].copy())
    positions = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return _runs(codes, positions)


@njit(cache=True)
def _cluster_positions(codes: Any, table: Any, lo: int, hi: int, out: Any) -> int:
    """Positions in ``[lo, hi)`` that belong to a whitespace cluster, into ``out``."""
    n = len(codes)
    k = 0
    cp = 1 if lo == 0 else _ws_class(table, codes[lo - 1])
    cc = _ws_class(table, codes[lo]) if lo < n else 0
    for i in range(lo, hi):
        cn = _ws_class(table, codes[i + 1]) if i + 1 < n else 1
        out[k] = i
        k += _interesting(cp, cc, cn)
        cp = cc
        cc = cn
    return k


_L = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_BELOW_9 = np.uint64(0x0909090909090909)
_BELOW_14 = np.uint64(0x0E0E0E0E0E0E0E0E)
_SPACES = np.uint64(0x2020202020202020)
_ONE = np.uint64(1)
_SEVEN = np.uint64(7)
_EIGHT = np.uint64(8)
_FIFTY_SIX = np.uint64(56)
_ZERO = np.uint64(0)


@njit(cache=True)
def _word_masks(x: Any) -> Any:
    """High bit of each byte of 8 ASCII bytes that is a control (9..13) / any whitespace.

    Exact byte-parallel tests: below 0x80 no carry crosses a byte.
    """
    below_9 = ~((x | _HIGH) - _BELOW_9) & _HIGH
    below_14 = ~((x | _HIGH) - _BELOW_14) & _HIGH
    ctrl = below_14 & ~below_9
    y = x ^ _SPACES
    space = ~(((y & _LOW7) + _LOW7) | y | _LOW7)
    return ctrl, ctrl | space


@njit(cache=True)
def _cluster_positions_ascii(codes: Any, words: Any, table: Any, lo: int, hi: int, out: Any) -> int:
    """``_cluster_positions`` for ASCII text, reading 8 bytes at a time.

    A byte belongs to a cluster when it is a control, or whitespace next to
    whitespace: the neighbours' bits come from shifting the word's whitespace
    mask, and across word edges from the words before and after.
    """
    w_lo = max(lo >> 3, 1)
    w_hi = min(hi >> 3, len(words) - 1)  # words[w + 1] exists, so w never holds n - 1
    if w_lo >= w_hi:
        return _cluster_positions(codes, table, lo, hi, out)
    k = _cluster_positions(codes, table, lo, w_lo * 8, out)
    _, prev_ws = _word_masks(words[w_lo - 1])
    ctrl, ws = _word_masks(words[w_lo])
    for w in range(w_lo, w_hi):
        next_ctrl, next_ws = _word_masks(words[w + 1])
        near = (ws << _EIGHT) | (ws >> _EIGHT) | (prev_ws >> _FIFTY_SIX) | (next_ws << _FIFTY_SIX)
        bits = (ctrl | (ws & near)) >> _SEVEN
        i = w * 8
        while bits != _ZERO:
            if bits & _ONE != _ZERO:
                out[k] = i
                k += 1
            bits >>= _EIGHT
            i += 1
        prev_ws = ws
        ctrl = next_ctrl
        ws = next_ws
    k += _cluster_positions(codes, table, w_hi * 8, hi, out[k:])
    return k


_L16_HIGH = np.uint64(0x8000800080008000)
_L16_LOW15 = np.uint64(0x7FFF7FFF7FFF7FFF)
_L16_NOT_ASCII = np.uint64(0xFF80FF80FF80FF80)
_L16_BELOW_9 = np.uint64(0x0009000900090009)
_L16_BELOW_14 = np.uint64(0x000E000E000E000E)
_L16_SPACES = np.uint64(0x0020002000200020)
_L16_FIRST = np.uint64(0x8000)
_L16_LAST = np.uint64(0x8000000000000000)
_SIXTEEN = np.uint64(16)
_FIFTEEN = np.uint64(15)


@njit(cache=True)
def _cluster_positions_utf16(codes: Any, words: Any, table: Any, lo: int, hi: int, out: Any) -> int:
    """``_cluster_positions`` for UTF-16 units, 4 at a time where all 4 are ASCII.

    Mostly-English text with curly quotes and dashes is mostly such words; the
    others (and CJK text) go character by character. The classes of the units
    around a word come from the table, so non-ASCII whitespace next to it counts.
    """
    n = len(codes)
    w_lo = max(lo >> 2, 1)
    w_hi = min(hi >> 2, (n - 1) >> 2)  # 4w + 4 < n: the unit after the word exists
    if w_lo >= w_hi:
        return _cluster_positions(codes, table, lo, hi, out)
    k = _cluster_positions(codes, table, lo, w_lo * 4, out)
    for w in range(w_lo, w_hi):
        x = words[w]
        i = w * 4
        if x & _L16_NOT_ASCII != _ZERO:
            k += _cluster_positions(codes, table, i, i + 4, out[k:])
            continue
        below_9 = ~((x | _L16_HIGH) - _L16_BELOW_9) & _L16_HIGH
        below_14 = ~((x | _L16_HIGH) - _L16_BELOW_14) & _L16_HIGH
        ctrl = below_14 & ~below_9
        y = x ^ _L16_SPACES
        space = ~(((y & _L16_LOW15) + _L16_LOW15) | y | _L16_LOW15)
        ws = ctrl | space
        near = (ws << _SIXTEEN) | (ws >> _SIXTEEN)
        if _ws_class(table, codes[i - 1]) != 0:
            near |= _L16_FIRST
        if _ws_class(table, codes[i + 4]) != 0:
            near |= _L16_LAST
        bits = (ctrl | (ws & near)) >> _FIFTEEN
        while bits != _ZERO:
            if bits & _ONE != _ZERO:
                out[k] = i
                k += 1
            bits >>= _SIXTEEN
            i += 1
    k += _cluster_positions(codes, table, w_hi * 4, hi, out[k:])
    return k


@njit(cache=True)
def _runs(codes: Any, positions: Any) -> Any:
    """Runs of consecutive cluster positions, with each run's facts."""
    count = len(positions)
    start = np.empty(count, np.int64)
    end = np.empty(count, np.int64)
    breaks = np.empty(count, np.int64)
    has_sp = np.empty(count, np.bool_)
    first_vis = np.empty(count, np.int64)
    k = 0
    p = 0
    while p < count:
        s = positions[p]
        q = p + 1
        while q < count and positions[q] == positions[q - 1] + 1:
            q += 1
        e = positions[q - 1] + 1
        prev = codes[s - 1] if s > 0 else 0
        nb = 0
        sp = False
        fv = 0
        for j in range(s, e):
            c = codes[j]
            # A line break is a CR, or an LF not preceded by CR.
            if c == 13 or (c == 10 and prev != 13):
                nb += 1
            if c == 32 or c == 9 or c == 11 or c == 12:
                sp = True
            if fv == 0 and not (
                c == 13 or c == 10 or c == 0xAD or c == 0x200B or c == 0x2060 or c == 0xFEFF
            ):
                fv = c
            prev = c
        start[k] = s
        end[k] = e
        breaks[k] = nb
        has_sp[k] = sp
        first_vis[k] = fv
        k += 1
        p = q
    return (
        start[:k].copy(),
        end[:k].copy(),
        breaks[:k].copy(),
        has_sp[:k].copy(),
        first_vis[:k].copy(),
    )


@njit(cache=True)
def _is_cjk(c: int) -> bool:
    """``normalize._is_cjk`` for one code point."""
    return (
        (c >= 0x2E80 and c <= 0x9FFF)
        or (c >= 0xAC00 and c <= 0xD7AF)
        or (c >= 0xF900 and c <= 0xFAFF)
        or (c >= 0xFE30 and c <= 0xFE4F)
        or (c >= 0xFF00 and c <= 0xFFEF)
        or (c >= 0x20000 and c <= 0x3FFFF)
    )


@njit(cache=True)
def cluster_outputs(
    codes: Any, start: Any, end: Any, breaks: Any, has_sp: Any, first_vis: Any, unwrap: bool
) -> Any:
    """What each cluster becomes (see ``normalize.normalize``): (out_len, out_char).

    Edges of the text vanish; two or more line breaks (or one, without
    unwrapping) make a paragraph break ``"\\n\\n"``; one line break joins lines
    with a space (nothing between two CJK characters); a run inside a line
    becomes one space if it holds an ASCII space or tab, else its first wide
    space, else nothing (invisibles only).
    """
    n = len(codes)
    k_max = len(start)
    out_len = np.zeros(k_max, np.int64)
    out_char = np.zeros(k_max, np.int64)
    for k in range(k_max):
        if start[k] == 0 or end[k] == n:
            continue
        nb = breaks[k]
        if nb >= 2 or (nb > 0 and not unwrap):
            out_len[k] = 2
            out_char[k] = 10
        elif nb > 0:
            out_char[k] = 0x20
            if not (_is_cjk(codes[start[k] - 1]) and _is_cjk(codes[end[k]])):
                out_len[k] = 1
        elif has_sp[k]:
            out_len[k] = 1
            out_char[k] = 0x20
        elif first_vis[k] != 0:
            out_len[k] = 1
            out_char[k] = first_vis[k]
    return out_len, out_char


@njit(cache=True)
def assemble(codes: Any, start: Any, end: Any, out_len: Any, out_char: Any) -> Any:
    """Copy the text between clusters; each cluster becomes its 0, 1 or 2 output characters.

    Returns the output codes and each cluster's normalized position (the ``a``
    of its edit run).
    """
    total = len(codes)
    for k in range(len(start)):
        total += out_len[k] - (end[k] - start[k])
    out = np.empty(total, codes.dtype)
    norm_at = np.empty(len(start), np.int64)
    o = 0
    p = 0
    for k in range(len(start)):
        s = start[k]
        gap = s - p
        out[o : o + gap] = codes[p:s]
        o += gap
        norm_at[k] = o
        ol = out_len[k]
        if ol == 2:
            out[o] = 10
            out[o + 1] = 10
            o += 2
        elif ol == 1:
            out[o] = out_char[k]
            o += 1
        p = end[k]
    gap = len(codes) - p
    out[o : o + gap] = codes[p:]
    return out, norm_at


@njit(cache=True)
def map_error(a: Any, n: Any, b: Any, m: Any, norm_len: int, source_len: int) -> Any:
    """First broken invariant of an offset map's edit runs, as (kind, index); kind 0: none.

    Kinds: 1 a negative length; 2 an empty edit; 3 an edit that goes backwards
    or past the end; 4 a copy gap whose normalized and source lengths differ.
    """
    pn = 0
    ps = 0
    for k in range(len(a) + 1):
        if k < len(a):
            if n[k] < 0 or m[k] < 0:
                return 1, k
            if n[k] == 0 and m[k] == 0:
                return 2, k
            na = a[k]
            sb = b[k]
        else:
            na = norm_len
            sb = source_len
        gap_n = na - pn
        gap_s = sb - ps
        if gap_n < 0 or gap_s < 0:
            return 3, k
        if gap_n != gap_s:
            return 4, k
        if k < len(a):
            pn = a[k] + n[k]
            ps = b[k] + m[k]
    return 0, 0


# ------------------------------------------------------------ window chunker
@njit(cache=True)
def _chunk_ws(c: int) -> bool:
    """``windows._WS``: characters a chunk never starts or ends with."""
    return c == 32 or (c >= 9 and c <= 13) or c == 0x3000 or c == 0xA0


@njit(cache=True)
def _simple(c: int) -> bool:
    """Same ranges as ``windows._simple``: never joins a grapheme cluster."""
    return (
        c < 0x300
        or (c >= 0x370 and c <= 0x482)
        or (c >= 0x1E00 and c <= 0x1EFF)
        or (c >= 0x2010 and c <= 0x2027)
        or (c >= 0x2030 and c <= 0x205E)
        or (c >= 0x4E00 and c <= 0x9FFF)
        or (c >= 0x3400 and c <= 0x4DBF)
        or (c >= 0x3001 and c <= 0x3029)
        or (c >= 0x3041 and c <= 0x3096)
        or (c >= 0x30A1 and c <= 0x30FA)
        or (c >= 0xFF01 and c <= 0xFF5E)
    )


@njit(cache=True)
def _boundary_fast(codes: Any, p: int, n: int) -> int:
    """1/0 when cheap to tell whether ``p`` is a grapheme boundary, -1 when not."""
    if p <= 0 or p >= n:
        return 1
    a = codes[p - 1]
    b = codes[p]
    if _simple(a) and _simple(b):
        return 0 if (a == 13 and b == 10) else 1
    return -1


@njit(cache=True)
def _latin_closer(c: int) -> bool:
    return c == 0x22 or c == 0x27 or c == 0x29 or c == 0x201D or c == 0x2019


@njit(cache=True)
def _cjk_ender(c: int) -> bool:
    return (
        c == 0x3002
        or c == 0xFF01
        or c == 0xFF1F
        or c == 0xFF1B
        or c == 0x2026
        or c == 0xFF0E
        or c == 0x21
        or c == 0x3F
    )


@njit(cache=True)
def _cjk_closer(c: int) -> bool:
    return (
        c == 0x300D
        or c == 0x300F
        or c == 0x201D
        or c == 0x2019
        or c == 0xFF09
        or c == 0x300B
        or c == 0x3009
        or c == 0x3011
        or c == 0x3015
        or c == 0x22
        or c == 0x27
    )


@njit(cache=True)
def _sentence_cut(codes: Any, lo: int, hi: int, ascii_only: bool) -> int:
    """``windows._sentence_cut`` without the regex engine: the greedy ``.*``
    backtracks from the end, so the answer is the last ender whose match fits."""
    n = len(codes)
    endpos = hi + 1
    while True:
        e = min(endpos, n)
        m_end = -1
        p = e - 1
        while p >= lo:
            c = codes[p]
            if c == 0x2E or c == 0x21 or c == 0x3F:
                k = p + 1
                while k < e and _latin_closer(codes[k]):
                    k += 1
                if k < e and codes[k] == 32:
                    m_end = k
                    break
            if not ascii_only and _cjk_ender(c):
                k = p + 1
                while k < e and _cjk_closer(codes[k]):
                    k += 1
                m_end = k
                break
            p -= 1
        if m_end < 0 or m_end <= lo:
            return -1
        if m_end <= hi:
            return m_end
        endpos = m_end - 1


@njit(cache=True)
def _rfind1(codes: Any, c: int, lo: int, hi: int) -> int:
    j = hi - 1
    while j >= lo:
        if codes[j] == c:
            return j
        j -= 1
    return -1


_BAIL = -2


@njit(cache=True)
def _cut(codes: Any, s: int, hard_end: int, ascii_only: bool) -> int:
    """``windows._cut``; ``_BAIL`` where the answer needs full grapheme segmentation."""
    n = len(codes)
    lo = s + (hard_end - s) // 2
    # The last paragraph break, else the last line break: one backward scan.
    line = -1
    j = hard_end - 1
    while j >= lo:
        if codes[j] == 10:
            if line < 0:
                line = j
            if j + 1 < hard_end and codes[j + 1] == 10:
                if j > s:
                    return j
                break
        j -= 1
    if line > s:
        return line
    j = _sentence_cut(codes, lo, hard_end, ascii_only)
    if j > s:
        if ascii_only or _boundary_fast(codes, j, n) == 1:
            return j
        return _BAIL
    j = max(_rfind1(codes, 32, lo, hard_end), _rfind1(codes, 0x3000, lo, hard_end))
    if j > s:
        return j
    if ascii_only:
        if codes[hard_end - 1] == 13 and codes[hard_end] == 10:
            return hard_end - 1
        return hard_end
    if _boundary_fast(codes, hard_end, n) == 1:
        return hard_end
    return _BAIL


@njit(cache=True)
def window_run(
    codes: Any,
    s: int,
    size: int,
    overlap: int,
    ascii_only: bool,
    starts: Any,
    ends: Any,
    count: int,
) -> Any:
    """Run the window chunker from ``s`` (see ``windows.window_spans``).

    Appends spans to ``starts``/``ends`` from ``count`` on. Returns
    ``(count, s, status)``: status 0 done; 1 the step at ``s`` needs full
    grapheme segmentation (the caller does it in Python, then calls again);
    2 the output arrays are full.
    """
    n = len(codes)
    while s < n:
        if count == len(starts):
            return count, s, 2
        hard_end = s + size
        if hard_end >= n:
            e = n
        else:
            e = _cut(codes, s, hard_end, ascii_only)
            if e == _BAIL:
                return count, s, 1
        end = e
        while end > s and _chunk_ws(codes[end - 1]):
            end -= 1
        last_start = starts[count - 1] if count > 0 else -1
        if end > s:
            last_start = s
        if e >= n:
            if end > s:
                starts[count] = s
                ends[count] = end
                count += 1
            return count, n, 0
        ns = max(e - overlap, s + 1)
        if overlap:
            lim = min(e, ns + overlap // 2)
            j = ns
            while j < lim and codes[j] != 32:
                j += 1
            if j < lim:
                ns = j + 1
            elif not ascii_only and _boundary_fast(codes, ns, n) != 1:
                return count, s, 1
        else:
            ns = e
        while ns < n and _chunk_ws(codes[ns]):
            ns += 1
        if ns < n and not ascii_only and _boundary_fast(codes, ns, n) != 1:
            return count, s, 1
        if ns < n and last_start >= 0 and ns < last_start + 1:
            ns = last_start + 1
        if end > s:
            starts[count] = s
            ends[count] = end
            count += 1
        s = ns
    return count, s, 0


@njit(cache=True)
def line_lengths(start: Any, end: Any, breaks: Any, n: int) -> Any:
    """For ``normalize._hard_wrapped``: the clusters inside the text that hold line
    breaks (how many hold exactly one) and the lengths of the lines between them."""
    inner = 0
    single = 0
    lengths = np.empty(len(start), np.int64)
    last_end = -1
    for k in range(len(start)):
        if start[k] > 0 and end[k] < n and breaks[k] > 0:
            inner += 1
            if breaks[k] == 1:
                single += 1
            if last_end >= 0:
                lengths[inner - 2] = start[k] - last_end
            last_end = end[k]
    return inner, single, lengths[: max(inner - 1, 0)].copy()


@njit(cache=True)
def source_positions(a: Any, n: Any, b: Any, m: Any, positions: Any, ends: bool) -> Any:
    """``OffsetMap.source_starts`` (``ends`` False) / ``source_ends`` (True), fused.

    Binary search for the last edit at or before each position; inside an edit
    a start maps to the edit's source start and an end to its source end.
    """
    out = np.empty(len(positions), np.int64)
    for i in range(len(positions)):
        p = positions[i] - 1 if ends else positions[i]
        lo = 0
        hi = len(a)
        while lo < hi:
            mid = (lo + hi) >> 1
            if a[mid] <= p:
                lo = mid + 1
            else:
                hi = mid
        k = lo - 1
        after = 1 if ends else 0
        if k < 0:
            out[i] = p + after
        elif p < a[k] + n[k]:
            out[i] = b[k] + m[k] if ends else b[k]
        else:
            out[i] = b[k] + m[k] + (p - a[k] - n[k]) + after
    return out
