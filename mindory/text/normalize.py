"""Plain source text → normalized text + OffsetMap + render blocks.

The default profile (``NormalizeProfile()``):

* line endings (CRLF, lone CR, LF) unified; paragraphs separated by exactly
  ``"\\n\\n"``; no other newline survives in plain text;
* trailing spaces dropped, paragraph indents (ASCII spaces, tabs, U+3000,
  NBSP) dropped, runs of spaces/tabs collapsed to one space;
* hard-wrapped prose (single newlines inside paragraphs, blank lines between)
  unwrapped: the line break becomes a space, or nothing between two CJK
  characters; texts without that shape keep each line as a paragraph;
* soft hyphens, zero-width spaces, word joiners and stray BOMs deleted
  (ZWJ/ZWNJ are kept: they change how emoji and scripts render);
* Unicode NFC (NFKC only when asked: it rewrites vertical presentation forms
  and full-width punctuation).

The work is vectorized: numpy finds the *whitespace clusters* — maximal runs
of whitespace/invisible characters that need an edit — and each cluster
becomes exactly one edit run of the map. Everything between clusters is copied,
so copy runs hold exactly the characters that were kept.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mindory.text import kernels
from mindory.text.offsets import MapBuilder, OffsetMap, UnicodeForm
from mindory.text.records import HEADING, PARAGRAPH, Block, NormalizeProfile, RecordTable

__all__ = [
    "BlockTable",
    "codes_text",
    "text_codes",
    "NormalizedText",
    "detect_hard_wrap",
    "is_heading_line",
    "normalize",
]

_INVISIBLE = (0x00AD, 0x200B, 0x2060, 0xFEFF)
_ASCII_SPACES = (0x20, 0x09, 0x0B, 0x0C)  # collapse to one space
_WIDE_SPACES = (0x3000, 0x00A0)  # dropped at line edges, kept alone inside a line

# A conservative chapter heading: 第…回/章/節 in Chinese and Japanese, or an
# English "CHAPTER XII" / "Chapter 12" / "BOOK II" line.
HEADING_RE = re.compile(
    r"(?:第[0-9０-９一二三四五六七八九十百千零〇两兩]+[回章節节卷部篇集](?:\s|　|$|[^\w]|\w)"
    r"|(?:CHAPTER|Chapter|BOOK|Book|PART|Part)\s+(?:[0-9]+|[IVXLCDM]+|[A-Z][a-z]+(?:-[a-z]+)?)\b"
    r"|(?:CHAPTER|Chapter)\s*$)"
)
_HEADING_MAX = 80


def is_heading_line(line: str) -> bool:
    """A short line that reads like a chapter heading."""
    return len(line) <= _HEADING_MAX and HEADING_RE.match(line) is not None


def _is_cjk(codes: np.ndarray) -> np.ndarray:
    """Han, kana, Hangul, CJK punctuation and full-width forms (vectorized)."""
    return (
        ((codes >= 0x2E80) & (codes <= 0x9FFF))
        | ((codes >= 0xAC00) & (codes <= 0xD7AF))
        | ((codes >= 0xF900) & (codes <= 0xFAFF))
        | ((codes >= 0xFE30) & (codes <= 0xFE4F))
        | ((codes >= 0xFF00) & (codes <= 0xFFEF))
        | ((codes >= 0x20000) & (codes <= 0x3FFFF))
    )


def text_codes(text: str) -> np.ndarray:
    """Code points of ``text``: uint8 for ASCII, uint16 without astral characters, else uint32.

    The narrowest array halves or quarters the memory every pass reads; most
    non-ASCII books (curly quotes, Chinese) have no character above U+FFFF.
    """
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    utf16 = text.encode("utf-16-le")
    if len(utf16) == 2 * len(text):  # no surrogate pairs: every unit is a code point
        return np.frombuffer(utf16, dtype="<u2")
    return np.frombuffer(text.encode("utf-32-le"), dtype="<u4")


def codes_text(codes: np.ndarray) -> str:
    """The text of a ``text_codes`` array (inverse of ``text_codes``)."""
    if codes.dtype == np.uint8:
        return codecs.ascii_decode(codes.data)[0]
    if codes.dtype == np.uint16:
        return codecs.utf_16_le_decode(np.ascontiguousarray(codes, dtype="<u2").data)[0]
    return codecs.utf_32_le_decode(np.ascontiguousarray(codes, dtype="<u4").data)[0]


@dataclass(frozen=True, slots=True)
class _Clusters:
    """Whitespace clusters of a text (parallel arrays, one entry per cluster)."""

    start: np.ndarray  # source start
    end: np.ndarray  # source end
    breaks: np.ndarray  # line breaks inside (CRLF counts once)
    has_ascii_space: np.ndarray  # holds a space/tab/VT/FF
    first_visible: np.ndarray  # code of the first non-invisible character, or 0


def _whitespace_masks(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ws, special): every whitespace/invisible char, and those always edited."""
    if codes.dtype == np.uint8:
        # ASCII: space and 9..13 (tab, LF, VT, FF, CR).
        ctrl = (codes - np.uint8(9)) <= 4
        ws = ctrl | (codes == 0x20)
        return ws, ctrl
    ctrl = (codes - np.uint32(9)) <= 4
    wide = (codes == 0x3000) | (codes == 0x00A0)
    invisible = (codes == 0x00AD) | (codes == 0x200B) | (codes == 0x2060) | (codes == 0xFEFF)
    special = ctrl | invisible
    return special | wide | (codes == 0x20), special


def _clusters(codes: np.ndarray, compiled: bool) -> _Clusters:
    if compiled:
        return _Clusters(*kernels.jit().clusters(codes))
    return _clusters_numpy(codes)


def _clusters_numpy(codes: np.ndarray) -> _Clusters:
    """Reference implementation of ``_kernels_jit.clusters`` (the path without numba)."""
    n = len(codes)
    ws, special = _whitespace_masks(codes)
    # Always edited: line breaks, invisibles, tabs/VT/FF. Spaces (ASCII or wide)
    # only when they touch other whitespace or the ends of the text.
    near = np.empty(n, dtype=bool)
    if n:
        near[0] = True
        near[1:] = ws[:-1]
        near[:-1] |= ws[1:]
        near[-1] = True
    interesting = special | (ws & near)
    pos = np.flatnonzero(interesting)
    if len(pos) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return _Clusters(empty, empty, empty, np.zeros(0, dtype=bool), empty)
    c = codes[pos].astype(np.int64)
    prev = codes[np.maximum(pos - 1, 0)].astype(np.int64)
    prev[pos == 0] = 0
    gaps = np.flatnonzero(np.diff(pos) != 1)
    starts = np.concatenate(([pos[0]], pos[gaps + 1])).astype(np.int64)
    ends = np.concatenate((pos[gaps] + 1, [pos[-1] + 1])).astype(np.int64)
    first_idx = np.concatenate(([0], gaps + 1))
    last_idx = np.concatenate((gaps + 1, [len(pos)]))
    # Line breaks per cluster: a CR, or an LF not preceded by CR.
    brk = (c == 13) | ((c == 10) & (prev != 13))
    csum = np.concatenate(([0], np.cumsum(brk)))
    breaks = csum[last_idx] - csum[first_idx]
    ascii_sp = (c == 0x20) | (c == 0x09) | (c == 0x0B) | (c == 0x0C)
    ssum = np.concatenate(([0], np.cumsum(ascii_sp)))
    has_sp = (ssum[last_idx] - ssum[first_idx]) > 0
    # First visible (not invisible, not a line break) character of each cluster.
    vis_at = ~((c == 13) | (c == 10) | (c == 0xAD) | (c == 0x200B) | (c == 0x2060) | (c == 0xFEFF))
    vis_pos = np.flatnonzero(vis_at)
    k = np.searchsorted(vis_pos, first_idx)
    first_visible = np.zeros(len(starts), dtype=np.int64)
    ok = k < len(vis_pos)
    ok[ok] = vis_pos[k[ok]] < last_idx[ok]
    first_visible[ok] = c[vis_pos[k[ok]]]
    return _Clusters(starts, ends, breaks, has_sp, first_visible)


def detect_hard_wrap(text: str) -> bool:
    """True for Gutenberg-style text: lines wrapped inside blank-line paragraphs.

    Most line breaks sit inside paragraphs (a single newline), some blank lines
    exist, and lines are short (90th percentile of line length ≤ 100 code
    points). One-line-per-paragraph texts (most Chinese novels) fail the line
    length or the blank-line test and keep each line as a paragraph.
    """
    compiled = kernels.loaded()
    return _hard_wrapped(_clusters(text_codes(text), compiled), len(text), compiled)


def _hard_wrapped(cl: _Clusters, n: int, compiled: bool) -> bool:
    if compiled:
        inner, single, line_lengths = kernels.jit().line_lengths(cl.start, cl.end, cl.breaks, n)
    else:
        at = np.flatnonzero((cl.start > 0) & (cl.end < n) & (cl.breaks > 0))
        inner = len(at)
        single = int(np.count_nonzero(cl.breaks[at] == 1))
        # Line contents lie between consecutive clusters holding line breaks.
        line_lengths = cl.start[at[1:]] - cl.end[at[:-1]]
    if inner < 4 or single < 0.5 * inner or single == inner:
        return False
    return _percentile_90_at_most(line_lengths, 100)


def _percentile_90_at_most(values: np.ndarray, limit: int) -> bool:
    """``np.percentile(values, 90) <= limit``, mostly by counting (no sort)."""
    rank = int(0.9 * (len(values) - 1))  # the interpolation lies between ranks rank, rank + 1
    at_most = int(np.count_nonzero(values <= limit))
    if at_most >= rank + 2:
        return True
    if at_most <= rank:
        return False
    return float(np.percentile(values, 90)) <= limit


class BlockTable(RecordTable[Block]):
    """Render blocks of a section, stored column-wise (cheap for long books)."""

    __slots__ = ("_cols",)

    def __init__(
        self,
        kinds: Sequence[str],
        levels: Sequence[int | None],
        starts: Sequence[int] | np.ndarray,
        ends: Sequence[int] | np.ndarray,
        source_starts: Sequence[int] | np.ndarray,
        source_ends: Sequence[int] | np.ndarray,
    ) -> None:
        self._cols = (
            list(kinds),
            list(levels),
            np.asarray(starts, dtype=np.int64),
            np.asarray(ends, dtype=np.int64),
            np.asarray(source_starts, dtype=np.int64),
            np.asarray(source_ends, dtype=np.int64),
        )

    @classmethod
    def from_blocks(cls, blocks: Sequence[Block]) -> BlockTable:
        return cls(
            [b.kind for b in blocks],
            [b.level for b in blocks],
            [b.start for b in blocks],
            [b.end for b in blocks],
            [b.source_start for b in blocks],
            [b.source_end for b in blocks],
        )

    def __len__(self) -> int:
        return len(self._cols[0])

    def _record(self, i: int) -> Block:
        kinds, levels, starts, ends, sstarts, sends = self._cols
        return Block(
            i, kinds[i], int(starts[i]), int(ends[i]), int(sstarts[i]), int(sends[i]), levels[i]
        )

    @property
    def starts(self) -> np.ndarray:
        """Normalized starts of all blocks (int64 array)."""
        return self._cols[2]

    @property
    def ends(self) -> np.ndarray:
        return self._cols[3]

    @property
    def kinds(self) -> list[str]:
        """Kinds of all blocks (the stored list itself: do not modify)."""
        return self._cols[0]

    def __repr__(self) -> str:
        return f"BlockTable({len(self)} blocks)"


@dataclass(frozen=True)
class NormalizedText:
    text: str
    offset_map: OffsetMap
    blocks: BlockTable


def normalize(
    source: str, profile: NormalizeProfile | None = None, *, unwrap: bool | None = None
) -> NormalizedText:
    """Normalize plain ``source`` text; ``unwrap`` overrides the profile's choice.

    With ``profile.unwrap == "auto"`` and no ``unwrap`` given, hard wrapping is
    detected on ``source`` itself (importers decide once per file instead).
    """
    profile = profile or NormalizeProfile()
    codes = text_codes(source)
    n = len(codes)
    compiled = kernels.use(n)  # the same path for every step of this text
    cl = _clusters(codes, compiled)
    if unwrap is None:
        unwrap = profile.unwrap == "always" or (
            profile.unwrap == "auto" and _hard_wrapped(cl, n, compiled)
        )
    if compiled:
        out_len, out_char = kernels.jit().cluster_outputs(
            codes, cl.start, cl.end, cl.breaks, cl.has_ascii_space, cl.first_visible, unwrap
        )
    else:
        out_len, out_char = _cluster_outputs_numpy(codes, cl, unwrap)
    form = profile.unicode_form
    if form is not None and not source.isascii() and not unicodedata.is_normalized(form, source):
        text, omap = _assemble_slow(source, cl, out_len, out_char, form)
        return NormalizedText(text, omap, _blocks(text, omap, None))
    kept, norm_at = _assemble(codes, cl, out_len, out_char, compiled)
    text = codes_text(kept)
    # One edit run per cluster.
    omap = OffsetMap.from_columns(norm_at, out_len, cl.start, cl.end - cl.start, len(text), n)
    # Paragraph separators are exactly the clusters that became "\n\n". A
    # paragraph's source runs from the end of the cluster before it to the start
    # of the one after it (clusters at the edges of the text are deleted).
    sep = np.flatnonzero(out_len == 2)
    first = int(cl.end[0]) if len(cl.start) and cl.start[0] == 0 else 0
    last = int(cl.start[-1]) if len(cl.start) and cl.end[-1] == n else n
    source_spans = (
        np.concatenate(([first], cl.end[sep])),
        np.concatenate((cl.start[sep], [last])),
    )
    return NormalizedText(text, omap, _blocks(text, omap, norm_at[sep], kept, source_spans))


def _cluster_outputs_numpy(
    codes: np.ndarray, cl: _Clusters, unwrap: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Reference implementation of ``_kernels_jit.cluster_outputs`` (the path without numba)."""
    n = len(codes)
    at_start = cl.start == 0
    at_end = cl.end == n
    has_break = cl.breaks > 0
    out_len = np.zeros(len(cl.start), dtype=np.int64)
    out_char = np.zeros(len(cl.start), dtype=np.int64)  # 10 = "\n\n", else the char
    edge = at_start | at_end
    para = ~edge & ((cl.breaks >= 2) | (has_break & (not unwrap)))
    join = ~edge & has_break & ~para
    inline = ~edge & ~has_break
    out_len[para] = 2
    out_char[para] = 10
    if join.any():
        before = codes[np.maximum(cl.start[join] - 1, 0)].astype(np.int64)
        after = codes[np.minimum(cl.end[join], n - 1)].astype(np.int64)
        cjk_join = _is_cjk(before) & _is_cjk(after)
        out_len[join] = np.where(cjk_join, 0, 1)
        out_char[join] = 0x20
    if inline.any():
        fv = cl.first_visible[inline]
        # A run holding an ASCII space/tab becomes one space; a run of wide
        # spaces keeps its first one; invisible-only runs vanish.
        use_space = cl.has_ascii_space[inline]
        out_char[inline] = np.where(use_space, 0x20, fv)
        out_len[inline] = np.where(use_space | (fv != 0), 1, 0)
    return out_len, out_char


def _assemble(
    codes: np.ndarray,
    cl: _Clusters,
    out_len: np.ndarray,
    out_char: np.ndarray,
    compiled: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Output codes, and the normalized position of each cluster's output."""
    if compiled:
        kept, norm_at = kernels.jit().assemble(codes, cl.start, cl.end, out_len, out_char)
        return kept, norm_at
    kept = _assemble_numpy(codes, cl, out_len, out_char)
    src_len = cl.end - cl.start
    shrink = np.cumsum(src_len - out_len)
    norm_at = cl.start - np.concatenate(([0], shrink[:-1])) if len(cl.start) else cl.start
    return kept, norm_at


def _assemble_numpy(
    codes: np.ndarray, cl: _Clusters, out_len: np.ndarray, out_char: np.ndarray
) -> np.ndarray:
    """Reference implementation of ``_kernels_jit.assemble`` (the path without numba)."""
    n = len(codes)
    # Delete cluster characters, write each cluster's output into its first one
    # or two characters (a cluster turning into "\n\n" from a single LF gets
    # one inserted character).
    keep = np.ones(n, dtype=bool)
    out = codes.copy()
    if len(cl.start):
        lengths = cl.end - cl.start
        # Mark every cluster position as dropped (vectorized ranges).
        idx = np.repeat(cl.start - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        idx += np.arange(int(lengths.sum()))
        keep[idx] = False
        first = cl.start
        put1 = out_len >= 1
        keep[first[put1]] = True
        out[first[put1]] = out_char[put1].astype(out.dtype)
        put2 = (out_len == 2) & (lengths >= 2)
        keep[first[put2] + 1] = True
        out[first[put2] + 1] = 10
        short = (out_len == 2) & (lengths < 2)
        kept = out[keep]
        if short.any():
            # Insert the second "\n" after the first one for those clusters.
            kept_index = np.cumsum(keep) - 1
            kept = np.insert(kept, kept_index[first[short]] + 1, 10)
    else:
        kept = out
    return kept


def _assemble_slow(
    source: str, cl: _Clusters, out_len: np.ndarray, out_char: np.ndarray, form: UnicodeForm
) -> tuple[str, OffsetMap]:
    """Same layout, but copied text goes through Unicode normalization."""
    builder = MapBuilder(form)
    pos = 0
    for s, e, k, c in zip(cl.start.tolist(), cl.end.tolist(), out_len.tolist(), out_char.tolist()):
        builder.copy(source, pos, s)
        repl = "\n\n" if k == 2 else (chr(c) if k == 1 else "")
        builder.edit(repl, s, e)
        pos = e
    builder.copy(source, pos, len(source))
    return builder.build()


_PARA_RE = re.compile(r"[^\n]+(?:\n[^\n]+)*")


# Every heading starts with one of these (see HEADING_RE).
_HEADING_FIRST = np.array([ord(c) for c in "第CBP"], dtype=np.uint32)


def _blocks(
    text: str,
    omap: OffsetMap,
    separators: np.ndarray | None,
    codes: np.ndarray | None = None,
    source_spans: tuple[np.ndarray, np.ndarray] | None = None,
) -> BlockTable:
    """Paragraph blocks between ``"\\n\\n"`` separators; short chapter-like lines are headings.

    ``separators`` are the normalized positions of the separators when known
    (fast path), else the text is scanned. ``codes`` (the text's code points)
    lets the heading test skip paragraphs that cannot start a heading;
    ``source_spans`` are the blocks' source spans when the caller knows them.
    """
    if not text:
        return BlockTable([], [], [], [], [], [])
    if separators is not None:
        starts = np.concatenate(([0], separators + 2)).astype(np.int64)
        ends = np.concatenate((separators, [len(text)])).astype(np.int64)
    else:
        spans = [(m.start(), m.end()) for m in _PARA_RE.finditer(text)]
        arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        starts, ends = arr[:, 0], arr[:, 1]
    if source_spans is None:
        source_spans = omap.source_spans(starts, ends)
    src_starts, src_ends = source_spans
    lengths = ends - starts
    kinds = [PARAGRAPH] * len(starts)
    levels: list[int | None] = [None] * len(starts)
    short = (lengths <= _HEADING_MAX) & (lengths > 0)
    if codes is not None:
        short[short] = np.isin(codes[starts[short]], _HEADING_FIRST)
    for k in np.flatnonzero(short).tolist():
        if HEADING_RE.match(text, int(starts[k]), int(ends[k])):
            kinds[k] = HEADING
            levels[k] = 1
    return BlockTable(kinds, levels, starts, ends, src_starts, src_ends)
