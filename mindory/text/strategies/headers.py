"""Context headers: a chunk's place in the book as ``"Book › Part › Chapter"``.

:func:`toc_path` finds the TOC titles above a source position;
:func:`context_header` joins them; the header is for embedding only, never
part of a chunk's spans.
"""

from __future__ import annotations

from collections.abc import Sequence

from mindory.text.records import Book, Chunk, TocEntry


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
