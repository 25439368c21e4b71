"""Deterministic chunkers over a section's normalized text.

Every chunk carries its normalized span and, through the section's offset map,
its exact source span (code points and UTF-16). Spans come from tracking
positions, never from searching for the chunk's text.

The ``window`` chunker's spans come from :mod:`mindory.text.windows`, the
other strategies' from :mod:`mindory.text.strategies`; this module turns spans
into chunks (:func:`make_chunks`, column-wise in a :class:`ChunkTable`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from mindory.text.offsets import Utf16Index
from mindory.text.records import (
    Book,
    Chunk,
    ChunkSettings,
    RecordTable,
    Section,
    Settings,
    chunk_id_from,
    chunk_id_hasher,
)
from mindory.text.strategies import plan_section

# Re-exported: callers and tests import these from here (they live in windows).
from mindory.text.windows import _simple as _simple
from mindory.text.windows import _window_spans_py as _window_spans_py
from mindory.text.windows import grapheme_ceil, grapheme_floor, window_span_array, window_spans

__all__ = [
    "ChunkTable",
    "chunk_book",
    "chunk_section",
    "grapheme_ceil",
    "grapheme_floor",
    "window_spans",
]


def chunk_section(
    section: Section,
    settings: ChunkSettings,
    *,
    book_sha256: str,
    fingerprint: str,
    utf16: Utf16Index | None = None,
) -> ChunkTable:
    """Chunks of one section, with spans in book source coordinates.

    ``utf16`` indexes the book's source coordinates (the whole decoded file for
    plain text, the section's source text for EPUB); built here if omitted.
    """
    text = section.normalized_text
    if settings.strategy == "window":
        spans = window_span_array(text, settings.size, settings.overlap, settings.min_size)
        return make_chunks(
            section, spans, book_sha256=book_sha256, fingerprint=fingerprint, utf16=utf16
        )
    # The other strategies (paragraph, structured, parent-child, dialogue).
    plan = plan_section(text, section.blocks, settings)
    return make_chunks(
        section,
        plan.spans,
        book_sha256=book_sha256,
        fingerprint=fingerprint,
        utf16=utf16,
        contexts=plan.contexts,
    )


class ChunkTable(RecordTable[Chunk]):
    """The chunks of one section, stored column-wise; Chunk records are made on access.

    Spans (normalized, source, UTF-16) are int64 arrays and the texts a list,
    all computed up front. Ids are a pure function of the span (see
    ``records.chunk_id``): each record computes its own, and ``ids`` computes
    them all once.
    """

    __slots__ = ("_contexts", "_ids", "_prefix", "columns", "ordinal", "texts")

    def __init__(
        self,
        ordinal: int,
        id_prefix: Any,
        columns: np.ndarray,
        texts: list[str],
        contexts: Sequence[tuple[int, int] | None] | None = None,
    ) -> None:
        # columns: (k, 6) int64: start, end, source_start, source_end, utf16_start, utf16_end
        self.ordinal = ordinal
        self._prefix = id_prefix
        self.columns = columns
        self.texts = texts
        self._contexts = contexts
        self._ids: list[str] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def _record(self, i: int) -> Chunk:
        return self._make(i, *self.columns[i].tolist())

    def _make(self, i: int, s: int, e: int, ss: int, se: int, us: int, ue: int) -> Chunk:
        chunk_id = self._ids[i] if self._ids is not None else chunk_id_from(self._prefix, s, e)
        context = None if self._contexts is None else self._contexts[i]
        return Chunk(chunk_id, self.ordinal, i, s, e, ss, se, us, ue, self.texts[i], context)

    def __iter__(self) -> Iterator[Chunk]:
        for i, row in enumerate(self.columns.tolist()):  # one conversion for all rows
            yield self._make(i, *row)

    @property
    def ids(self) -> list[str]:
        """Every chunk's id, in order (computed once)."""
        if self._ids is None:
            prefix = self._prefix
            self._ids = [chunk_id_from(prefix, s, e) for s, e in self.columns[:, :2].tolist()]
        return self._ids

    def __repr__(self) -> str:
        return f"ChunkTable(section {self.ordinal}, {len(self)} chunks)"


def make_chunks(
    section: Section,
    spans: Sequence[tuple[int, int]] | np.ndarray,
    *,
    book_sha256: str,
    fingerprint: str,
    utf16: Utf16Index | None = None,
    contexts: Sequence[tuple[int, int] | None] | None = None,
) -> ChunkTable:
    """Turn normalized spans into the section's chunks (vectorized span mapping).

    ``contexts`` (parent-child) gives each chunk's ``context``: the normalized
    span of the text it should be read in.
    """
    arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    if contexts is not None and len(contexts) != len(arr):
        raise ValueError(f"{len(contexts)} contexts for {len(arr)} spans")
    ordinal = section.ordinal
    id_prefix = chunk_id_hasher(book_sha256, ordinal, fingerprint)
    columns = np.empty((len(arr), 6), dtype=np.int64)
    if not len(arr):
        return ChunkTable(ordinal, id_prefix, columns, [], contexts)
    text = section.normalized_text
    columns[:, :2] = arr
    src_s, src_e = section.offset_map.source_spans(arr[:, 0], arr[:, 1])
    columns[:, 2] = src_s + section.source_start
    columns[:, 3] = src_e + section.source_start
    if utf16 is None:
        # A section-local index is only right when the section starts the source
        # (EPUB): astral characters before a plain-text section shift UTF-16.
        if section.source_start:
            raise ValueError(
                "a section that does not start at source position 0 needs the book's "
                "Utf16Index (utf16=...)"
            )
        utf16 = Utf16Index(section.source_text)
    columns[:, 4] = utf16.to_utf16_array(columns[:, 2])
    columns[:, 5] = utf16.to_utf16_array(columns[:, 3])
    texts = [text[s:e] for s, e in arr.tolist()]
    return ChunkTable(ordinal, id_prefix, columns, texts, contexts)


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
