"""JSON shapes that cross the doors (CLI ``--json`` and, later, HTTP).

Pure functions from records to plain dicts, so every door returns the same
shape. Key order is fixed, so ``json.dumps`` output is byte-identical across
runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mindory.text.records import Book, Chunk, Section, Settings

__all__ = ["book_json", "chunk_json", "chunks_document", "section_json"]


def book_json(book: Book) -> dict[str, Any]:
    return {
        "title": book.title,
        "format": book.format,
        "encoding": book.encoding,
        "lossy": book.lossy,
        "sha256": book.sha256,
    }


def section_json(book: Book, section: Section, *, with_text: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ordinal": section.ordinal,
        "title": section.title,
        "source_start": section.source_start,
        "source_end": section.source_end,
        "normalized_length": len(section.normalized_text),
    }
    if book.format == "epub":
        out["href"] = section.href
        out["media_type"] = section.media_type
        out["parser"] = section.parser
    if with_text:
        out["source_text"] = section.source_text
        out["normalized_text"] = section.normalized_text
    return out


def chunk_json(book: Book, chunk: Chunk) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": chunk.id,
        "section": chunk.section,
        "index": chunk.index,
        "start": chunk.start,
        "end": chunk.end,
        "source_start": chunk.source_start,
        "source_end": chunk.source_end,
        "utf16_start": chunk.utf16_start,
        "utf16_end": chunk.utf16_end,
    }
    if book.format == "txt":
        index = getattr(book.source, "bytes_index", None)
        if index is not None:
            out["byte_start"] = index.byte_offset(chunk.source_start)
            out["byte_end"] = index.byte_offset(chunk.source_end)
    else:
        cfi_doc = getattr(book.sections[chunk.section].dom, "cfi", None)
        if cfi_doc is not None:
            out["cfi"] = cfi_doc.range(chunk.source_start, chunk.source_end)
            out["cfi_epubjs"] = cfi_doc.range(chunk.source_start, chunk.source_end, "epubjs")
    out["text"] = chunk.text
    return out


def chunks_document(
    book: Book, settings: Settings, chunks: Sequence[Chunk], *, with_text: bool = False
) -> dict[str, Any]:
    """The ``mindory chunk --json`` document."""
    return {
        "book": book_json(book),
        "settings": settings.to_dict(),
        "fingerprint": settings.fingerprint,
        "sections": [section_json(book, s, with_text=with_text) for s in book.sections],
        "chunks": [chunk_json(book, c) for c in chunks],
    }
