"""Position → the chunks that contain it (pure): the reverse of locating.

Positions are code points of the book's source text, as a chunk's ``source_start`` /
``source_end`` (EPUB: section-local; plain text: file-global), half-open.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar

__all__ = ["ChunkSpans", "HasSourceSpan", "chunks_containing"]


class HasSourceSpan(Protocol):
    """Anything with a source span (a Chunk, a stored chunk row, ...)."""

    @property
    def source_start(self) -> int: ...

    @property
    def source_end(self) -> int: ...


S = TypeVar("S", bound=HasSourceSpan)


class ChunkSpans(Generic[S]):
    """Chunks sorted by source span, for "which chunks contain position p" by bisect.

    Feed the chunks of one section (EPUB positions are section-local) or of
    one plain-text book (file-global). Any overlap pattern is handled: the
    chunks are sorted by ``(source_start, source_end)`` and a running maximum of
    the ends bounds the search from the left.
    """

    __slots__ = ("_chunks", "_max_ends", "_starts")

    def __init__(self, chunks: Iterable[S]) -> None:
        items = sorted(chunks, key=lambda c: (c.source_start, c.source_end))
        self._chunks = items
        self._starts = [c.source_start for c in items]
        running = -1
        max_ends: list[int] = []
        for c in items:
            running = max(running, c.source_end)
            max_ends.append(running)
        self._max_ends = max_ends

    def __len__(self) -> int:
        return len(self._chunks)

    def containing(self, source_pos: int) -> list[S]:
        """Chunks with ``source_start <= source_pos < source_end``, in source order."""
        hi = bisect_right(self._starts, source_pos)
        lo = bisect_right(self._max_ends, source_pos, 0, hi)
        return [c for c in self._chunks[lo:hi] if c.source_end > source_pos]


def chunks_containing(chunks: Iterable[S], source_pos: int) -> list[S]:
    """Chunks whose source span contains ``source_pos`` (see :class:`ChunkSpans`)."""
    return ChunkSpans(chunks).containing(source_pos)
