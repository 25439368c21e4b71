"""The offset map between a section's normalized text and its source text.

Conventions (DESIGN §1): every range is half-open ``[start, end)``. Source and
normalized positions are code points (Python ``str`` indices); UTF-16 positions
are code units as a browser counts them.

The map is a monotone list of runs. A *copy* run says normalized ``[a, a+n)``
equals source ``[b, b+n)`` character for character; an *edit* run says
normalized ``[a, a+n)`` came from source ``[b, b+m)`` (``n == 0``: deleted
source, ``m == 0``: inserted text). Only edit runs are stored; copy runs are the
gaps between them, so storage grows with the number of edits, not the text.
"""

from __future__ import annotations

import json
import re
import struct
import unicodedata
import zlib
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mindory.text import kernels

__all__ = ["MapBuilder", "OffsetMap", "OffsetMapError", "UnicodeForm", "Utf16Index"]

UnicodeForm = Literal["NFC", "NFKC"]

SERIAL_VERSION = 1


class OffsetMapError(ValueError):
    """A map that breaks its own invariants (corrupt storage or a builder bug)."""


@dataclass(frozen=True, slots=True)
class Run:
    """One run of the map; ``copy`` runs have ``norm_len == source_len``."""

    norm_start: int
    norm_len: int
    source_start: int
    source_len: int
    copy: bool


class OffsetMap:
    """Normalized ↔ source positions, looked up by binary search over the edits.

    Internally four int64 arrays hold the edit runs ``(a, n, b, m)`` in order;
    the copy runs are the gaps between them.
    """

    __slots__ = ("_a", "_b", "_m", "_n", "normalized_length", "source_length")

    def __init__(
        self,
        edits: Sequence[tuple[int, int, int, int]] | np.ndarray,
        normalized_length: int,
        source_length: int,
    ) -> None:
        arr = np.asarray(edits, dtype=np.int64).reshape(-1, 4)
        self._set(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], normalized_length, source_length)

    @classmethod
    def from_columns(
        cls,
        a: np.ndarray,
        n: np.ndarray,
        b: np.ndarray,
        m: np.ndarray,
        normalized_length: int,
        source_length: int,
    ) -> OffsetMap:
        """A map from its edit runs as four parallel arrays (validated like ``__init__``)."""
        self = cls.__new__(cls)
        self._set(a, n, b, m, normalized_length, source_length)
        return self

    def _set(
        self,
        a: np.ndarray,
        n: np.ndarray,
        b: np.ndarray,
        m: np.ndarray,
        normalized_length: int,
        source_length: int,
    ) -> None:
        self._a = np.ascontiguousarray(a, dtype=np.int64)
        self._n = np.ascontiguousarray(n, dtype=np.int64)
        self._b = np.ascontiguousarray(b, dtype=np.int64)
        self._m = np.ascontiguousarray(m, dtype=np.int64)
        self.normalized_length = int(normalized_length)
        self.source_length = int(source_length)
        self._validate()

    def _validate(self) -> None:
        a, n, b, m = self._a, self._n, self._b, self._m
        kind = -1
        if kernels.loaded():  # never load numba just for this
            kind, k = kernels.jit().map_error(
                a, n, b, m, self.normalized_length, self.source_length
            )
            if kind == 0:
                return
            # Something is wrong: the checks below name it.
        if len(a) and (n.min() < 0 or m.min() < 0):
            raise OffsetMapError("negative run length")
        if len(a) and bool(((n == 0) & (m == 0)).any()):
            raise OffsetMapError("empty edit run")
        # Copy gaps: before each edit and after the last one.
        prev_n_end = np.concatenate(([0], a + n))
        prev_s_end = np.concatenate(([0], b + m))
        next_n = np.concatenate((a, [self.normalized_length]))
        next_s = np.concatenate((b, [self.source_length]))
        gap_n = next_n - prev_n_end
        gap_s = next_s - prev_s_end
        if bool((gap_n < 0).any()) or bool((gap_s < 0).any()):
            k = int(np.flatnonzero((gap_n < 0) | (gap_s < 0))[0])
            raise OffsetMapError(f"edit {k} goes backwards or runs past the end")
        if not np.array_equal(gap_n, gap_s):
            k = int(np.flatnonzero(gap_n != gap_s)[0])
            raise OffsetMapError(
                f"copy gap before edit {k} differs: {int(gap_n[k])} normalized vs "
                f"{int(gap_s[k])} source"
            )
        if kind > 0:
            raise OffsetMapError(f"edit run {k} breaks invariant {kind}")

    # ------------------------------------------------------------------ runs
    def edits(self) -> list[tuple[int, int, int, int]]:
        return list(zip(self._a.tolist(), self._n.tolist(), self._b.tolist(), self._m.tolist()))

    def edit_array(self) -> np.ndarray:
        """Edits as an (k, 4) int64 array of ``(a, n, b, m)``."""
        return np.stack([self._a, self._n, self._b, self._m], axis=1)

    @property
    def edit_count(self) -> int:
        return len(self._a)

    def runs(self) -> list[Run]:
        out: list[Run] = []
        pn = ps = 0
        for a, n, b, m in self.edits():
            if a > pn:
                out.append(Run(pn, a - pn, ps, b - ps, True))
            out.append(Run(a, n, b, m, False))
            pn, ps = a + n, b + m
        if self.normalized_length > pn:
            out.append(Run(pn, self.normalized_length - pn, ps, self.source_length - ps, True))
        return out

    # --------------------------------------------------------------- lookups
    def _check_norm(self, i: int) -> None:
        if not 0 <= i <= self.normalized_length:
            raise IndexError(f"normalized position {i} outside [0, {self.normalized_length}]")

    def _check_source(self, j: int) -> None:
        if not 0 <= j <= self.source_length:
            raise IndexError(f"source position {j} outside [0, {self.source_length}]")

    def to_source(self, i: int) -> int:
        """Source position where normalized character ``i`` begins.

        Inside a copy run exact; inside an edit run the start of its source.
        ``i == normalized_length`` maps to ``source_length``.
        """
        self._check_norm(i)
        if i == self.normalized_length:
            return self.source_length
        return int(self.source_starts(np.array([i], dtype=np.int64))[0])

    def to_source_end(self, i: int) -> int:
        """End of the source that produced normalized character ``i - 1`` (0 for 0)."""
        self._check_norm(i)
        if i == 0:
            return 0
        return int(self.source_ends(np.array([i], dtype=np.int64))[0])

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """Smallest source range that produced normalized ``[start, end)``.

        An empty normalized range maps to an empty source range at
        ``to_source(start)``.
        """
        if not 0 <= start <= end <= self.normalized_length:
            raise IndexError(
                f"normalized range [{start}, {end}) outside [0, {self.normalized_length}]"
            )
        s = self.to_source(start)
        if start == end:
            return s, s
        return s, self.to_source_end(end)

    def source_starts(self, starts: np.ndarray) -> np.ndarray:
        """Vectorized ``to_source`` for positions < normalized_length."""
        a, n, b, m = self._a, self._n, self._b, self._m
        starts = np.asarray(starts, dtype=np.int64)
        if kernels.loaded():
            return kernels.jit().source_positions(a, n, b, m, starts, False)
        k = np.searchsorted(a, starts, side="right") - 1
        out = starts.copy()  # no edit before: identity
        has = k >= 0
        kk = k[has]
        pos = starts[has]
        inside = pos < a[kk] + n[kk]
        out[has] = np.where(inside, b[kk], b[kk] + m[kk] + (pos - a[kk] - n[kk]))
        return out

    def source_ends(self, ends: np.ndarray) -> np.ndarray:
        """Vectorized ``to_source_end`` for positions > 0."""
        a, n, b, m = self._a, self._n, self._b, self._m
        if kernels.loaded():
            ends = np.asarray(ends, dtype=np.int64)
            return kernels.jit().source_positions(a, n, b, m, ends, True)
        last = np.asarray(ends, dtype=np.int64) - 1
        k = np.searchsorted(a, last, side="right") - 1
        out = last + 1
        has = k >= 0
        kk = k[has]
        pos = last[has]
        inside = pos < a[kk] + n[kk]
        out[has] = np.where(inside, b[kk] + m[kk], b[kk] + m[kk] + (pos - a[kk] - n[kk]) + 1)
        return out

    def source_spans(self, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectorized ``source_span`` for non-empty normalized ranges."""
        return self.source_starts(starts), self.source_ends(ends)

    def deletions(self, start: int, end: int) -> list[tuple[int, int]]:
        """Source spans of the deleting edit runs (``n == 0``) that overlap source
        ``[start, end)``, clipped to it, in order."""
        b, m, n = self._b, self._m, self._n
        lo = max(int(np.searchsorted(b + m, start, side="right")), 0)
        hi = int(np.searchsorted(b, end, side="left"))
        out: list[tuple[int, int]] = []
        for k in range(lo, hi):
            if n[k] == 0 and m[k] > 0:
                s, e = max(int(b[k]), start), min(int(b[k] + m[k]), end)
                if s < e:
                    out.append((s, e))
        return out

    def to_normalized(self, j: int) -> int:
        """Normalized position of source position ``j`` (a boundary).

        Inside a copy run the character's own position; inside an edit run the
        start of that run's normalized text (source deleted by normalization
        maps to the place where it was removed).
        """
        self._check_source(j)
        if j == self.source_length:
            return self.normalized_length
        a, n, b, m = self._a, self._n, self._b, self._m
        k = int(np.searchsorted(b, j, side="right")) - 1
        if k < 0:
            return j
        if j < b[k] + m[k]:
            return int(a[k])
        return int(a[k] + n[k] + (j - b[k] - m[k]))

    def normalized_span(self, source_start: int, source_end: int) -> tuple[int, int]:
        """Normalized range produced by source ``[source_start, source_end)``.

        The end maps to the end of the run holding the last source character,
        so a source span covering a whole edit gets all of its output.
        """
        if not 0 <= source_start <= source_end <= self.source_length:
            raise IndexError(
                f"source range [{source_start}, {source_end}) outside [0, {self.source_length}]"
            )
        start = self.to_normalized(source_start)
        if source_end == source_start:
            return start, start
        last = source_end - 1
        a, n, b, m = self._a, self._n, self._b, self._m
        k = int(np.searchsorted(b, last, side="right")) - 1
        if k < 0:
            end = source_end
        elif last < b[k] + m[k]:
            end = int(a[k] + n[k])
        else:
            end = int(a[k] + n[k] + (last - b[k] - m[k]) + 1)
        return start, max(start, end)

    # ---------------------------------------------------------- serialization
    def to_bytes(self) -> bytes:
        """Compact, deterministic binary form for storage (zlib of delta-coded edits)."""
        a, n, b, m = self._a, self._n, self._b, self._m
        # Delta-code the starts against the previous run's end: small numbers.
        da = a - np.concatenate(([0], a[:-1] + n[:-1])) if len(a) else a
        db = b - np.concatenate(([0], b[:-1] + m[:-1])) if len(b) else b
        body = np.stack([da, n, db, m], axis=1).astype("<i8").tobytes() if len(a) else b""
        header = struct.pack(
            "<BQQQ", SERIAL_VERSION, self.normalized_length, self.source_length, len(a)
        )
        return header + zlib.compress(body, 6)

    @classmethod
    def from_bytes(cls, data: bytes) -> OffsetMap:
        try:
            version, n_len, s_len, count = struct.unpack_from("<BQQQ", data)
            if version != SERIAL_VERSION:
                raise OffsetMapError(f"unknown offset map version {version}")
            body = zlib.decompress(data[struct.calcsize("<BQQQ") :])
            arr = np.frombuffer(body, dtype="<i8").reshape(-1, 4).astype(np.int64)
        except (struct.error, zlib.error, ValueError) as exc:
            raise OffsetMapError(f"unreadable offset map: {exc}") from exc
        if len(arr) != count:
            raise OffsetMapError(f"offset map holds {len(arr)} edits, header says {count}")
        if count:
            da, n, db, m = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
            # Undo the delta coding: a[k] = da[k] + a[k-1] + n[k-1].
            a = np.cumsum(da + np.concatenate(([0], n[:-1])))
            b = np.cumsum(db + np.concatenate(([0], m[:-1])))
            arr = np.stack([a, n, b, m], axis=1)
        return cls(arr, n_len, s_len)

    def to_json(self) -> str:
        """Readable form: totals plus a flat list of edits ``[a, n, b, m, ...]``."""
        flat = np.stack([self._a, self._n, self._b, self._m], axis=1).reshape(-1).tolist()
        return json.dumps(
            {"v": SERIAL_VERSION, "n": self.normalized_length, "s": self.source_length, "e": flat},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, data: str) -> OffsetMap:
        try:
            obj = json.loads(data)
            if obj.get("v") != SERIAL_VERSION:
                raise OffsetMapError(f"unknown offset map version {obj.get('v')!r}")
            flat = obj["e"]
            if len(flat) % 4:
                raise OffsetMapError("edit list length is not a multiple of 4")
            return cls(
                np.asarray(flat, dtype=np.int64).reshape(-1, 4), int(obj["n"]), int(obj["s"])
            )
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise OffsetMapError(f"unreadable offset map: {exc}") from exc

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, OffsetMap)
            and self.normalized_length == other.normalized_length
            and self.source_length == other.source_length
            and np.array_equal(self._a, other._a)
            and np.array_equal(self._n, other._n)
            and np.array_equal(self._b, other._b)
            and np.array_equal(self._m, other._m)
        )

    def __hash__(self) -> int:
        return hash(self.to_bytes())

    def __repr__(self) -> str:
        return (
            f"OffsetMap(normalized={self.normalized_length}, source={self.source_length}, "
            f"edits={self.edit_count})"
        )

    def check(self, source: str, normalized: str) -> None:
        """Raise OffsetMapError unless every copy run matches character for character."""
        if len(source) != self.source_length or len(normalized) != self.normalized_length:
            raise OffsetMapError(
                f"map lengths ({self.normalized_length}, {self.source_length}) do not match "
                f"texts ({len(normalized)}, {len(source)})"
            )
        for run in self.runs():
            if run.copy and (
                normalized[run.norm_start : run.norm_start + run.norm_len]
                != source[run.source_start : run.source_start + run.source_len]
            ):
                raise OffsetMapError(
                    f"copy run at normalized {run.norm_start} differs from source {run.source_start}"
                )


class MapBuilder:
    """Builds normalized text and its OffsetMap piece by piece, in source order.

    Callers walk the source once and say, for each source range, whether it is
    copied (``copy``), rewritten (``edit``) or dropped (``delete``); text can
    also be inserted (``insert``). ``copy`` applies Unicode normalization to the
    copied text when a form is set, splitting it into exact copy runs and small
    edit runs around the characters that change.
    """

    __slots__ = ("_edits", "_form", "_parts", "_pos_n", "_pos_s")

    def __init__(self, unicode_form: UnicodeForm | None = "NFC") -> None:
        self._parts: list[str] = []
        self._edits: list[tuple[int, int, int, int]] = []
        self._pos_n = 0
        self._pos_s = 0
        self._form = unicode_form

    @property
    def normalized_length(self) -> int:
        return self._pos_n

    @property
    def source_position(self) -> int:
        return self._pos_s

    def _advance_to(self, source_start: int) -> None:
        if source_start != self._pos_s:
            raise OffsetMapError(
                f"builder expected source position {self._pos_s}, got {source_start}"
            )

    def copy(self, source: str, start: int, end: int) -> None:
        """Copy ``source[start:end]`` (Unicode-normalized if a form is set)."""
        self._advance_to(start)
        if start == end:
            return
        text = source[start:end]
        if self._form is None or text.isascii() or unicodedata.is_normalized(self._form, text):
            self._parts.append(text)
            self._pos_n += end - start
            self._pos_s = end
            return
        self._copy_normalizing(text, start)

    def copy_raw(self, text: str, start: int) -> None:
        """Copy ``text`` found at source ``start`` without Unicode normalization."""
        self._advance_to(start)
        self._parts.append(text)
        self._pos_n += len(text)
        self._pos_s = start + len(text)

    def edit(self, replacement: str, start: int, end: int) -> None:
        """Source ``[start, end)`` becomes ``replacement`` (one edit run)."""
        self._advance_to(start)
        if replacement == "" and start == end:
            return
        self._edits.append((self._pos_n, len(replacement), start, end - start))
        self._parts.append(replacement)
        self._pos_n += len(replacement)
        self._pos_s = end

    def delete(self, start: int, end: int) -> None:
        self.edit("", start, end)

    def insert(self, text: str) -> None:
        self.edit(text, self._pos_s, self._pos_s)

    def _copy_normalizing(self, text: str, source_start: int) -> None:
        form = self._form
        assert form is not None
        for seg_start, seg_end in _norm_segments(text, form):
            seg = text[seg_start:seg_end]
            out = unicodedata.normalize(form, seg)
            if out == seg:
                self.copy_raw(seg, source_start + seg_start)
            else:
                self.edit(out, source_start + seg_start, source_start + seg_end)

    def build(self) -> tuple[str, OffsetMap]:
        text = "".join(self._parts)
        return text, OffsetMap(self._edits, self._pos_n, self._pos_s)


# A starter that never composes with what precedes it begins a new segment.
# Hangul vowel/trailing jamo and a few Indic/Brahmic vowel signs with combining
# class 0 compose with the starter before them, so they extend the segment.
_SEGMENT_RE = re.compile(r".[\u0300-\u036f\u1161-\u11c2]*", re.DOTALL)


def _norm_segments(text: str, form: UnicodeForm) -> list[tuple[int, int]]:
    """Split ``text`` into pieces that normalize independently.

    Pieces are runs of "a character plus everything that may combine with it"
    (combining class != 0, Hangul V/T jamo). The result is verified: if the
    pieces do not normalize to the same text as the whole, neighbouring pieces
    are merged word by word until they do.
    """
    bounds: list[int] = [0]
    n = len(text)
    i = 1
    while i < n:
        ch = text[i]
        if unicodedata.combining(ch) == 0 and not ("\u1161" <= ch <= "\u11c2"):
            bounds.append(i)
        i += 1
    bounds.append(n)
    segments = [(bounds[k], bounds[k + 1]) for k in range(len(bounds) - 1)]
    # Keep only changed segments individually; merge unchanged neighbours.
    out: list[tuple[int, int]] = []
    for s, e in segments:
        seg = text[s:e]
        if out and unicodedata.is_normalized(form, seg) and _is_plain(text, out[-1], form):
            ps, _ = out[-1]
            out[-1] = (ps, e)
        else:
            out.append((s, e))
    whole = unicodedata.normalize(form, text)
    if "".join(unicodedata.normalize(form, text[s:e]) for s, e in out) == whole:
        return out
    # Rare: composition across our boundaries. Fall back to whitespace-free words.
    words = [(m.start(), m.end()) for m in re.finditer(r"\s+|\S+", text)]
    if "".join(unicodedata.normalize(form, text[s:e]) for s, e in words) == whole:
        return words
    return [(0, n)]


def _is_plain(text: str, seg: tuple[int, int], form: UnicodeForm) -> bool:
    return unicodedata.is_normalized(form, text[seg[0] : seg[1]])


_ASTRAL_RE = re.compile("[\U00010000-\U0010ffff]")


class Utf16Index:
    """Code point ↔ UTF-16 code unit positions of one text."""

    __slots__ = ("_astral_cp", "_astral_u16", "length", "utf16_length")

    def __init__(self, text: str) -> None:
        if text.isascii() or len(text.encode("utf-16-le")) == 2 * len(text):
            astral: list[int] = []  # no surrogate pairs (the encode is cheaper than a scan)
        else:
            astral = [m.start() for m in _ASTRAL_RE.finditer(text)]
        self._astral_cp = astral
        # UTF-16 start of each astral character.
        self._astral_u16 = [cp + k for k, cp in enumerate(astral)]
        self.length = len(text)
        self.utf16_length = len(text) + len(astral)

    def to_utf16(self, cp: int) -> int:
        if not 0 <= cp <= self.length:
            raise IndexError(f"code point position {cp} outside [0, {self.length}]")
        return cp + bisect_left(self._astral_cp, cp)

    def to_utf16_array(self, cps: np.ndarray) -> np.ndarray:
        """Vectorized ``to_utf16`` (no range check)."""
        cps = np.asarray(cps, dtype=np.int64)
        if not self._astral_cp:
            return cps
        return cps + np.searchsorted(np.asarray(self._astral_cp, dtype=np.int64), cps, side="left")

    def from_utf16(self, u16: int) -> int:
        """Code point position of UTF-16 position ``u16``.

        A position between the two halves of a surrogate pair is refused.
        """
        if not 0 <= u16 <= self.utf16_length:
            raise IndexError(f"UTF-16 position {u16} outside [0, {self.utf16_length}]")
        k = bisect_left(self._astral_u16, u16)
        if k > 0 and self._astral_u16[k - 1] + 1 == u16:
            raise IndexError(f"UTF-16 position {u16} splits a surrogate pair")
        return u16 - k
