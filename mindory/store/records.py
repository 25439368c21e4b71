"""What the store hands back about books: frozen records with a ``to_json()`` giving the
shape every door prints (the CLI's ``--json`` and the HTTP API)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mindory.text.offsets import OffsetMap


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:  # SQLite hands back naive datetimes; they were UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class DerivationInfo:
    fingerprint: str
    settings: Mapping[str, Any]
    current: bool
    chunk_count: int
    created_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "current": self.current,
            "chunk_count": self.chunk_count,
            "settings": dict(self.settings),
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class BookInfo:
    """A stored book (no texts). ``id`` is the SHA-256 of the file."""

    id: str
    title: str
    format: str
    file_name: str
    file_size: int
    encoding: str | None
    lossy: bool
    bad_bytes: int
    first_bad_byte: int | None
    creators: tuple[str, ...]
    language: str | None
    identifiers: tuple[str, ...]
    warnings: tuple[str, ...]
    section_count: int
    toc_count: int
    stored: Literal["copy", "path"]
    imported_at: str | None
    derivations: tuple[DerivationInfo, ...] = ()

    @property
    def current(self) -> DerivationInfo | None:
        return next((d for d in self.derivations if d.current), None)

    def to_json(self) -> dict[str, Any]:
        current = self.current
        return {
            "id": self.id,
            "title": self.title,
            "format": self.format,
            "file_name": self.file_name,
            "file_size": self.file_size,
            "encoding": self.encoding,
            "lossy": self.lossy,
            "bad_bytes": self.bad_bytes,
            "first_bad_byte": self.first_bad_byte,
            "creators": list(self.creators),
            "language": self.language,
            "identifiers": list(self.identifiers),
            "section_count": self.section_count,
            "toc_count": self.toc_count,
            "chunk_count": current.chunk_count if current else 0,
            "fingerprint": current.fingerprint if current else None,
            "stored": self.stored,
            "imported_at": self.imported_at,
            "warnings": list(self.warnings),
            "derivations": [d.to_json() for d in self.derivations],
        }


@dataclass(frozen=True, slots=True)
class SectionInfo:
    """A section under the book's current (or a chosen) derivation."""

    ordinal: int
    title: str
    href: str | None
    media_type: str
    parser: str
    linear: bool
    source_start: int
    source_end: int
    utf16_start: int
    normalized_length: int
    block_count: int
    chunk_count: int

    def to_json(self) -> dict[str, Any]:
        return {
            "ordinal": self.ordinal,
            "title": self.title,
            "href": self.href,
            "media_type": self.media_type,
            "parser": self.parser,
            "linear": self.linear,
            "source_start": self.source_start,
            "source_end": self.source_end,
            "utf16_start": self.utf16_start,
            "normalized_length": self.normalized_length,
            "block_count": self.block_count,
            "chunk_count": self.chunk_count,
        }


@dataclass(frozen=True)
class SectionDetail:
    """One section with its texts and offset map."""

    book: str
    info: SectionInfo
    source_text: str
    normalized_text: str
    offset_map: OffsetMap
    cfi_table: str | None = field(default=None, repr=False)

    def cfi_document(self) -> Any:
        """The section's :class:`~mindory.importers.cfi.CfiDocument`, or None (plain text)."""
        if self.cfi_table is None:
            return None
        from mindory.importers.cfi import CfiDocument

        return CfiDocument.from_json(self.cfi_table, self.source_text)

    def to_json(self, *, with_text: bool = True) -> dict[str, Any]:
        out = {"book": self.book, **self.info.to_json()}
        if with_text:
            out["source_text"] = self.source_text
            out["normalized_text"] = self.normalized_text
            out["offset_map"] = json.loads(self.offset_map.to_json())
        return out


@dataclass(frozen=True, slots=True)
class TocNode:
    title: str
    href: str
    section: int | None
    source_offset: int | None
    children: tuple[TocNode, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "href": self.href,
            "section": self.section,
            "source_offset": self.source_offset,
            "children": [c.to_json() for c in self.children],
        }


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """A stored chunk. ``row_id`` is the library-local integer id (vector indexes)."""

    id: str
    section: int
    index: int
    start: int
    end: int
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    text: str
    byte_start: int | None = None
    byte_end: int | None = None
    cfi: str | None = None
    cfi_epubjs: str | None = None
    row_id: int | None = None
    context_start: int | None = None  # parent-child: the normalized span to read it in
    context_end: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The same shape as :func:`mindory.text.shapes.chunk_json` (no row id: it is local)."""
        out: dict[str, Any] = {
            "id": self.id,
            "section": self.section,
            "index": self.index,
            "start": self.start,
            "end": self.end,
            "source_start": self.source_start,
            "source_end": self.source_end,
            "utf16_start": self.utf16_start,
            "utf16_end": self.utf16_end,
        }
        if self.byte_start is not None:
            out["byte_start"] = self.byte_start
            out["byte_end"] = self.byte_end
        if self.cfi is not None:
            out["cfi"] = self.cfi
            out["cfi_epubjs"] = self.cfi_epubjs
        if self.context_start is not None:
            out["context_start"] = self.context_start
            out["context_end"] = self.context_end
        out["text"] = self.text
        return out


@dataclass(frozen=True, slots=True)
class BlockInfo:
    index: int
    kind: str
    level: int | None
    start: int
    end: int
    source_start: int
    source_end: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "level": self.level,
            "start": self.start,
            "end": self.end,
            "source_start": self.source_start,
            "source_end": self.source_end,
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class BlockPage:
    book: str
    section: int
    page: int  # counted from 1
    page_size: int
    total: int  # blocks in the section
    blocks: tuple[BlockInfo, ...]

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))

    def to_json(self) -> dict[str, Any]:
        return {
            "book": self.book,
            "section": self.section,
            "page": self.page,
            "page_size": self.page_size,
            "pages": self.pages,
            "total": self.total,
            "blocks": [b.to_json() for b in self.blocks],
        }


@dataclass(frozen=True, slots=True)
class EmbeddingInfo:
    """An embedding space: which embedder (and header flag), and how many vectors."""

    fingerprint: str
    embedder_id: str
    spec: str
    dim: int
    context_header: bool
    current: bool
    vectors: int
    created_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "embedder": self.embedder_id,
            "spec": self.spec,
            "dim": self.dim,
            "context_header": self.context_header,
            "current": self.current,
            "vectors": self.vectors,
            "created_at": self.created_at,
        }
