"""The window chunker's spans, and the grapheme-cluster helpers every chunker uses.

The ``window`` chunker cuts windows of ``size`` characters. Within each window
it snaps the cut back to the last paragraph break in the window's second half,
else the last line break, else the last sentence end, else the last space, else
a hard cut — never inside a grapheme cluster. The next window starts
``overlap`` characters before the cut (moved forward to a word start when one is
near), so consecutive chunks share at most ``overlap`` characters. Chunks never
start or end with whitespace (except a whitespace character that begins a
grapheme cluster, such as a space followed by a combining mark). A tail shorter than ``min_size`` joins the
previous chunk, so no text is dropped.

This module owns the whitespace set chunks are trimmed of (``_WS``), the
grapheme boundary helpers (``grapheme_floor`` / ``grapheme_ceil``) and the
window loop (``window_spans`` / ``window_span_array``, with its pure-Python
reference ``_window_spans_py``). It imports no other chunking module:
:mod:`mindory.text.chunking` and :mod:`mindory.text.strategies` both build on it.
"""

from __future__ import annotations

import numpy as np
import regex

from mindory.text import kernels
from mindory.text.normalize import text_codes

__all__ = [
    "grapheme_ceil",
    "grapheme_floor",
    "is_grapheme_boundary",
    "window_span_array",
    "window_spans",
]


_WS = " \t\n\r\f\v\u3000\u00a0"
# The last sentence end in a window: a greedy ``.*`` backtracks from the window's
# end, so one match call finds it. Latin enders need a following space; CJK
# enders (and their closing quotes/brackets) do not.
_LAST_LATIN_END = regex.compile(r"(?s:.*)[.!?][\"')\u201d\u2019]*(?= )")
_LAST_ANY_END = regex.compile(
    r"(?s:.*)(?:[.!?][\"')\u201d\u2019]*(?= )|[。！？；…．!?][」』”’）》〉】〕\"']*)"
)
_GRAPHEME_RE = regex.compile(r"\X")


def _simple(ch: str) -> bool:
    """Characters that never join a grapheme cluster with a neighbour.

    Latin, Greek and Cyrillic letters before the combining marks (CR LF aside,
    handled by the caller), Latin Extended Additional, general punctuation
    (dashes, quotes, ellipsis; not the zero-width and joiner controls), common
    CJK ideographs, kana, CJK punctuation and full-width ASCII forms: no Extend,
    SpacingMark, Prepend, ZWJ, regional indicator or Hangul jamo among them.
    ``_kernels_jit._simple`` uses the same ranges.
    """
    o = ord(ch)
    return (
        o < 0x300
        or 0x370 <= o <= 0x482
        or 0x1E00 <= o <= 0x1EFF
        or 0x2010 <= o <= 0x2027
        or 0x2030 <= o <= 0x205E
        or 0x4E00 <= o <= 0x9FFF
        or 0x3400 <= o <= 0x4DBF
        or 0x3001 <= o <= 0x3029
        or 0x3041 <= o <= 0x3096
        or 0x30A1 <= o <= 0x30FA
        or 0xFF01 <= o <= 0xFF5E
    )


def _is_boundary_fast(text: str, p: int) -> bool | None:
    """True/False when cheap to tell whether ``p`` is a grapheme boundary, else None."""
    if p <= 0 or p >= len(text):
        return True
    a, b = text[p - 1], text[p]
    if _simple(a) and _simple(b):
        return not (a == "\r" and b == "\n")
    return None


def _boundaries_near(text: str, p: int) -> list[int]:
    """Grapheme boundaries in a window around ``p`` (exact for the window's middle)."""
    lo = max(0, p - 256)
    # Start segmenting at a certain boundary: after a line feed, or between two
    # simple characters.
    for q in range(p - 1, lo, -1):
        if text[q - 1] == "\n" or (_is_boundary_fast(text, q) is True):
            lo = q
            break
    hi = min(len(text), p + 64)
    out = [lo]
    for m in _GRAPHEME_RE.finditer(text, lo, hi):
        out.append(m.end())
    return out


def grapheme_floor(text: str, p: int) -> int:
    """Largest grapheme boundary ≤ ``p``."""
    fast = _is_boundary_fast(text, p)
    if fast:
        return p
    bounds = _boundaries_near(text, p)
    best = bounds[0]
    for b in bounds:
        if b <= p:
            best = b
        else:
            break
    return best


def grapheme_ceil(text: str, p: int) -> int:
    """Smallest grapheme boundary ≥ ``p``."""
    fast = _is_boundary_fast(text, p)
    if fast:
        return p
    for b in _boundaries_near(text, p):
        if b >= p:
            return b
    return len(text)


def _sentence_cut(text: str, lo: int, hi: int, ascii_only: bool) -> int:
    """Position just after the last sentence end in ``text[lo:hi]``, or -1."""
    pattern = _LAST_LATIN_END if ascii_only else _LAST_ANY_END
    endpos = hi + 1  # room for the space after a Latin ender at hi - 1
    while True:
        m = pattern.match(text, lo, endpos)
        if m is None or m.end() <= lo:
            return -1
        if m.end() <= hi:
            return m.end()
        endpos = m.end() - 1


def _cut(text: str, s: int, hard_end: int, ascii_only: bool) -> int:
    lo = s + (hard_end - s) // 2
    j = text.rfind("\n\n", lo, hard_end)
    if j > s:
        return j
    j = text.rfind("\n", lo, hard_end)
    if j > s:
        return j
    j = _sentence_cut(text, lo, hard_end, ascii_only)
    if j > s:
        return j if ascii_only else grapheme_floor(text, j)
    j = max(text.rfind(" ", lo, hard_end), text.rfind("\u3000", lo, hard_end))
    if j > s:
        return j
    if ascii_only:
        return hard_end - 1 if text[hard_end - 1] == "\r" and text[hard_end] == "\n" else hard_end
    e = grapheme_floor(text, hard_end)
    if e <= s:
        e = grapheme_ceil(text, hard_end)
    return e


def _skip_ws(text: str, p: int, end: int) -> int:
    while p < end and text[p] in _WS:
        p += 1
    return p


def _trim_back(text: str, s: int, e: int) -> int:
    while e > s and text[e - 1] in _WS:
        e -= 1
    return e


def _first_start(text: str, ascii_only: bool) -> int:
    n = len(text)
    s = _skip_ws(text, 0, n)
    if s < n and not ascii_only:
        s = grapheme_floor(text, s)
    return s


def _window_step(
    text: str, s: int, last_start: int, size: int, overlap: int, ascii_only: bool
) -> tuple[tuple[int, int] | None, int]:
    """One window from ``s``: its span (None when only whitespace) and the next start.

    ``last_start`` is the start of the last span so far (-1 for none). The next
    start is ``len(text)`` when the text is done.
    """
    n = len(text)
    hard_end = s + size
    e = n if hard_end >= n else _cut(text, s, hard_end, ascii_only)
    end = _trim_back(text, s, e)
    span = (s, end) if end > s else None
    if span is not None:
        last_start = s
    if e >= n:
        return span, n
    ns = max(e - overlap, s + 1)
    if overlap:
        # Prefer a word start near the overlap point.
        j = text.find(" ", ns, min(e, ns + overlap // 2))
        if j >= 0:
            ns = j + 1
        elif not ascii_only:
            ns = grapheme_ceil(text, ns)
    else:
        ns = e
    ns = _skip_ws(text, ns, n)
    # Whitespace followed by an extending mark (" \u0301") is one grapheme
    # cluster: start at the cluster, never inside it.
    if ns < n and not ascii_only:
        ns = grapheme_floor(text, ns)
    if ns < n and last_start >= 0 and ns < last_start + 1:
        ns = last_start + 1
    return span, ns


def window_spans(
    text: str, size: int = 800, overlap: int = 100, min_size: int = 50
) -> list[tuple[int, int]]:
    """Normalized ``[start, end)`` spans of the window chunker (see module doc)."""
    arr = window_span_array(text, size, overlap, min_size)
    return list(zip(arr[:, 0].tolist(), arr[:, 1].tolist()))


def window_span_array(
    text: str, size: int = 800, overlap: int = 100, min_size: int = 50
) -> np.ndarray:
    """``window_spans`` as an (k, 2) int64 array (the compiled loop's own output)."""
    # The compiled loop only when it is already loaded: the Python loop costs a
    # few microseconds a window, far less than loading numba for one text.
    if not kernels.loaded():
        spans = _window_spans_py(text, size, overlap, min_size)
        return np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    n = len(text)
    ascii_only = text.isascii()
    codes = text_codes(text)
    cap = n // max(1, size // 4) + 16
    starts = np.empty(cap, dtype=np.int64)
    ends = np.empty(cap, dtype=np.int64)
    count = 0
    s = _first_start(text, ascii_only)
    while s < n:
        count, s, status = kernels.jit().window_run(
            codes, s, size, overlap, ascii_only, starts, ends, count
        )
        if status == 0:
            break
        if status == 2:  # full: grow the output arrays
            starts = np.concatenate((starts, np.empty_like(starts)))
            ends = np.concatenate((ends, np.empty_like(ends)))
            continue
        # This step needs full grapheme segmentation: take it in Python.
        last_start = int(starts[count - 1]) if count else -1
        span, s = _window_step(text, s, last_start, size, overlap, ascii_only)
        if span is not None:
            if count == len(starts):
                starts = np.concatenate((starts, np.empty_like(starts)))
                ends = np.concatenate((ends, np.empty_like(ends)))
            starts[count], ends[count] = span
            count += 1
    out = np.stack((starts[:count], ends[:count]), axis=1)
    if count >= 2 and out[-1, 1] - out[-1, 0] < min_size:
        out[-2, 1] = out[-1, 1]
        out = out[:-1]
    return out


def _window_spans_py(
    text: str, size: int = 800, overlap: int = 100, min_size: int = 50
) -> list[tuple[int, int]]:
    """Reference implementation of the window chunker (used without numba)."""
    n = len(text)
    ascii_only = text.isascii()
    spans: list[tuple[int, int]] = []
    s = _first_start(text, ascii_only)
    while s < n:
        span, s = _window_step(text, s, spans[-1][0] if spans else -1, size, overlap, ascii_only)
        if span is not None:
            spans.append(span)
    if len(spans) >= 2 and spans[-1][1] - spans[-1][0] < min_size:
        last = spans.pop()
        spans[-1] = (spans[-1][0], last[1])
    return spans


def is_grapheme_boundary(text: str, p: int) -> bool:
    """Exact check (slow): ``p`` is a boundary of the full-text segmentation."""
    if p <= 0 or p >= len(text):
        return True
    pos = 0
    for m in _GRAPHEME_RE.finditer(text):
        if m.end() == p:
            return True
        if m.end() > p:
            return False
        pos = m.end()
    return pos == p
