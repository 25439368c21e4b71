"""Deterministic chunkers over a section's normalized text.

Every chunk carries its normalized span and, through the section's offset map,
its exact source span (code points and UTF-16). Spans come from tracking
positions, never from searching for the chunk's text.

The ``window`` chunker cuts windows of ``size`` characters. Within each window
it snaps the cut back to the last paragraph break in the window's second half,
else the last line break, else the last sentence end, else the last space, else
a hard cut — never inside a grapheme cluster. The next window starts
``overlap`` characters before the cut (moved forward to a word start when one is
near), so consecutive chunks share at most ``overlap`` characters. Chunks never
start or end with whitespace (except a whitespace character that begins a
grapheme cluster, such as a space followed by a combining mark). A tail shorter than ``min_size`` joins the
previous chunk, so no text is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import regex

from .offsets import Utf16Index
from .records import (
    Book,
    Chunk,
    ChunkSettings,
    Section,
    Settings,
    chunk_id_from,
    chunk_id_hasher,
)

__all__ = ["chunk_book", "chunk_section", "grapheme_ceil", "grapheme_floor", "window_spans"]

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

    ASCII (CR LF aside, handled by the caller), common CJK ideographs, kana,
    CJK punctuation and full-width ASCII forms: no Extend, SpacingMark, Prepend,
    ZWJ or Hangul jamo among them.
    """
    o = ord(ch)
    return (
        o < 0x80
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


def window_spans(
    text: str, size: int = 800, overlap: int = 100, min_size: int = 50
) -> list[tuple[int, int]]:
    """Normalized ``[start, end)`` spans of the window chunker (see module doc)."""
    n = len(text)
    ascii_only = text.isascii()
    spans: list[tuple[int, int]] = []
    s = _skip_ws(text, 0, n)
    if s < n and not ascii_only:
        s = grapheme_floor(text, s)
    while s < n:
        hard_end = s + size
        e = n if hard_end >= n else _cut(text, s, hard_end, ascii_only)
        end = _trim_back(text, s, e)
        if end > s:
            spans.append((s, end))
        if e >= n:
            break
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
        if ns < n and spans and ns < spans[-1][0] + 1:
            ns = spans[-1][0] + 1
        s = ns
    if len(spans) >= 2 and spans[-1][1] - spans[-1][0] < min_size:
        last = spans.pop()
        spans[-1] = (spans[-1][0], last[1])
    return spans


def chunk_section(
    section: Section,
    settings: ChunkSettings,
    *,
    book_sha256: str,
    fingerprint: str,
    utf16: Utf16Index | None = None,
) -> list[Chunk]:
    """Chunks of one section, with spans in book source coordinates.

    ``utf16`` indexes the book's source coordinates (the whole decoded file for
    plain text, the section's source text for EPUB); built here if omitted.
    """
    text = section.normalized_text
    if settings.strategy == "window":
        spans = window_spans(text, settings.size, settings.overlap, settings.min_size)
        return make_chunks(
            section, spans, book_sha256=book_sha256, fingerprint=fingerprint, utf16=utf16
        )
    # The other strategies (paragraph, structured, parent-child, dialogue).
    from .strategies import plan_section

    plan = plan_section(text, section.blocks, settings)
    return make_chunks(
        section,
        plan.spans,
        book_sha256=book_sha256,
        fingerprint=fingerprint,
        utf16=utf16,
        contexts=plan.contexts,
    )


def make_chunks(
    section: Section,
    spans: Sequence[tuple[int, int]],
    *,
    book_sha256: str,
    fingerprint: str,
    utf16: Utf16Index | None = None,
    contexts: Sequence[tuple[int, int] | None] | None = None,
) -> list[Chunk]:
    """Turn normalized spans into Chunk records (vectorized span mapping).

    ``contexts`` (parent-child) gives each chunk's ``context``: the normalized
    span of the text it should be read in.
    """
    if not spans:
        return []
    if contexts is not None and len(contexts) != len(spans):
        raise ValueError(f"{len(contexts)} contexts for {len(spans)} spans")
    text = section.normalized_text
    arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    src_s, src_e = section.offset_map.source_spans(arr[:, 0], arr[:, 1])
    src_s = src_s + section.source_start
    src_e = src_e + section.source_start
    if utf16 is None:
        # A section-local index is only right when the section starts the source
        # (EPUB): astral characters before a plain-text section shift UTF-16.
        if section.source_start:
            raise ValueError(
                "a section that does not start at source position 0 needs the book's "
                "Utf16Index (utf16=...)"
            )
        local = Utf16Index(section.source_text)
        u_s = local.to_utf16_array(src_s)
        u_e = local.to_utf16_array(src_e)
    else:
        u_s = utf16.to_utf16_array(src_s)
        u_e = utf16.to_utf16_array(src_e)
    ordinal = section.ordinal
    id_prefix = chunk_id_hasher(book_sha256, ordinal, fingerprint)
    out: list[Chunk] = []
    for i, (s, e, ss, se, us, ue) in enumerate(
        zip(
            arr[:, 0].tolist(),
            arr[:, 1].tolist(),
            src_s.tolist(),
            src_e.tolist(),
            u_s.tolist(),
            u_e.tolist(),
        )
    ):
        out.append(
            Chunk(
                chunk_id_from(id_prefix, s, e),
                ordinal,
                i,
                s,
                e,
                ss,
                se,
                us,
                ue,
                text[s:e],
                None if contexts is None else contexts[i],
            )
        )
    return out


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


def chunk_book(book: Book, settings: Settings) -> list[Chunk]:
    """All chunks of a book, section by section (chunks never cross sections)."""
    fingerprint = settings.fingerprint
    utf16: Utf16Index | None = None
    if book.format == "txt" and isinstance(getattr(book.source, "text", None), str):
        utf16 = Utf16Index(book.source.text)  # plain text positions are file-global
    out: list[Chunk] = []
    for section in book.sections:
        out.extend(
            chunk_section(
                section,
                settings.chunking,
                book_sha256=book.sha256,
                fingerprint=fingerprint,
                utf16=utf16,
            )
        )
    return out
