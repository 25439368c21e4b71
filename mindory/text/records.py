"""Frozen records passed between the stages of the pipeline.

The offset convention, stated once for the whole package:

* Every range is half-open ``[start, end)``.
* ``start`` / ``end`` (no prefix) are code points in a section's **normalized
  text**.
* ``source_start`` / ``source_end`` are code points in the book's **source
  text**: for plain text the decoded file (file-global), for EPUB the section's
  own source text (the concatenated DOM text nodes of one content document). A
  section's ``source_start`` is where its source text begins in those
  coordinates (0 for every EPUB section), so ``local = global -
  section.source_start``.
* ``utf16_start`` / ``utf16_end`` are the same source positions in UTF-16 code
  units (what a JavaScript reader counts).
* ``byte_start`` / ``byte_end`` are positions in the original file's bytes
  (plain text only).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from mindory.text.offsets import OffsetMap, UnicodeForm


# Kinds of render block.
PARAGRAPH = "paragraph"
HEADING = "heading"
LIST_ITEM = "list_item"
PREFORMATTED = "preformatted"
QUOTE = "quote"
TABLE_ROW = "table_row"
CAPTION = "caption"
BLOCK_KINDS = (PARAGRAPH, HEADING, LIST_ITEM, PREFORMATTED, QUOTE, TABLE_ROW, CAPTION)


@dataclass(frozen=True, slots=True)
class NormalizeProfile:
    """How source text becomes normalized text; name + version enter the fingerprint."""

    name: str = "default"
    version: int = 1
    unicode_form: UnicodeForm | None = "NFC"  # "NFC", "NFKC" or None
    unwrap: str = "auto"  # plain text: "auto" | "always" | "never" (join hard-wrapped lines)

    def __post_init__(self) -> None:
        if self.unicode_form not in ("NFC", "NFKC", None):
            raise ValueError(f"unicode_form must be NFC, NFKC or None, not {self.unicode_form!r}")
        if self.unwrap not in ("auto", "always", "never"):
            raise ValueError(f"unwrap must be auto, always or never, not {self.unwrap!r}")


# Chunking strategies (``ChunkSettings.strategy``); see docs/chunking.md.
STRATEGIES = ("window", "paragraph", "structured", "parent-child", "dialogue")

# The ChunkSettings fields each strategy reads. ``Settings.to_dict`` (and so the
# fingerprint and every chunk id) keeps only these: settings that cannot change
# a strategy's chunks do not change its fingerprint, and ``window`` fingerprints
# are exactly what they were before the other strategies existed.
STRATEGY_FIELDS: dict[str, tuple[str, ...]] = {
    "window": ("strategy", "size", "overlap", "min_size"),
    "paragraph": ("strategy", "size", "min_size"),
    "structured": ("strategy", "size", "min_size"),
    "parent-child": ("strategy", "size", "min_size", "parent_size"),
    "dialogue": ("strategy", "size", "min_size", "max_turn"),
}


@dataclass(frozen=True, slots=True)
class ChunkSettings:
    """Chunker settings, in code points of normalized text.

    ``overlap`` is read (and checked against half the size) by ``window``
    only; ``parent_size`` (the parents of ``parent-child``, effectively
    ``max(parent_size, size)``) and ``max_turn`` (the longest ``dialogue`` turn
    kept whole, effectively ``max(max_turn, size)``) only by their strategies.
    """

    strategy: str = "window"
    size: int = 800
    overlap: int = 100
    min_size: int = 50
    parent_size: int = 1600
    max_turn: int = 1600

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(
                f"unknown chunking strategy {self.strategy!r} (one of {', '.join(STRATEGIES)})"
            )
        if self.size < 20:
            raise ValueError(f"chunk size must be at least 20 characters, not {self.size}")
        if not 0 <= self.overlap <= self.size // 2 and (
            self.strategy == "window" or self.overlap < 0
        ):
            raise ValueError(
                f"overlap must be between 0 and half the size ({self.size // 2}), not {self.overlap}"
            )
        if not 0 <= self.min_size < self.size:
            raise ValueError(f"min size must be between 0 and the size, not {self.min_size}")
        if self.parent_size < 20:
            raise ValueError(f"parent size must be at least 20 characters, not {self.parent_size}")
        if self.max_turn < 20:
            raise ValueError(f"max turn must be at least 20 characters, not {self.max_turn}")

    def to_dict(self) -> dict[str, Any]:
        """The fields this strategy reads (what enters the fingerprint)."""
        return {name: getattr(self, name) for name in STRATEGY_FIELDS[self.strategy]}


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything that decides derived data; one fingerprint for all of it."""

    profile: NormalizeProfile = field(default_factory=NormalizeProfile)
    chunking: ChunkSettings = field(default_factory=ChunkSettings)

    def to_dict(self) -> dict[str, Any]:
        return {"chunking": self.chunking.to_dict(), "profile": asdict(self.profile)}

    def canonical_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        return cls(
            profile=NormalizeProfile(**data.get("profile", {})),
            chunking=ChunkSettings(**data.get("chunking", {})),
        )


@dataclass(frozen=True, slots=True)
class Block:
    """A render block (paragraph, heading, ...): a reading unit of a section."""

    index: int
    kind: str
    start: int
    end: int
    source_start: int
    source_end: int
    level: int | None = None  # heading level 1-6


@dataclass(frozen=True, slots=True)
class TocEntry:
    """One table-of-contents entry, resolved to a section and a source position."""

    title: str
    href: str
    section: int | None
    source_offset: int | None  # book source coordinates (see module doc)
    children: tuple[TocEntry, ...] = ()


@dataclass(frozen=True)
class Section:
    """One section with its source text, normalized text and map.

    ``dom`` is importer-specific and not compared (EPUB keeps what CFI
    generation needs there).
    """

    ordinal: int
    title: str
    source_text: str
    normalized_text: str
    offset_map: OffsetMap
    blocks: Sequence[Block]
    source_start: int = 0
    href: str | None = None
    media_type: str = "text/plain"
    parser: str = "text"
    linear: bool = True
    dom: Any = field(default=None, compare=False, repr=False)

    @property
    def source_end(self) -> int:
        return self.source_start + len(self.source_text)


@dataclass(frozen=True)
class Book:
    """An imported book: identity, metadata, decoding facts and sections."""

    sha256: str
    title: str
    format: str  # "txt" | "epub"
    file_name: str
    sections: tuple[Section, ...]
    encoding: str | None = None
    lossy: bool = False
    bad_bytes: int = 0
    first_bad_byte: int | None = None
    creators: tuple[str, ...] = ()
    language: str | None = None
    identifiers: tuple[str, ...] = ()
    toc: tuple[TocEntry, ...] = ()
    warnings: tuple[str, ...] = ()
    source: Any = field(default=None, compare=False, repr=False)  # e.g. the decoded file text


@dataclass(frozen=True, slots=True)
class Chunk:
    """A chunk of one section. ``text == section.normalized_text[start:end]``."""

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
    # parent-child: the parent's normalized span (the reading context); its
    # source span comes from the offset map (``strategies.context_source_span``).
    context: tuple[int, int] | None = None


def chunk_id(book_sha256: str, section: int, fingerprint: str, start: int, end: int) -> str:
    """Stable chunk id: a function of the book bytes, section, settings and span only.

    ``sha256("{book}:{section}:{fingerprint}:{start}:{end}")``, first 32 hex digits.
    """
    return chunk_id_from(chunk_id_hasher(book_sha256, section, fingerprint), start, end)


def chunk_id_hasher(book_sha256: str, section: int, fingerprint: str) -> Any:
    """The hash state of an id's common prefix (copied per chunk: same ids, less work)."""
    return hashlib.sha256(f"{book_sha256}:{section}:{fingerprint}:".encode())


def chunk_id_from(prefix: Any, start: int, end: int) -> str:
    h = prefix.copy()
    h.update(b"%d:%d" % (start, end))
    return str(h.hexdigest()[:32])


R = TypeVar("R")


class RecordTable(Sequence[R]):
    """Records stored column-wise, made on access (``BlockTable``, ``ChunkTable``).

    Long books hold tens of thousands of blocks and chunks; most consumers read
    columns, and a frozen record each would cost more than the work that found
    them. Subclasses give ``__len__`` and ``_record(i)`` for ``0 <= i < len``.
    Equality is a list's: a table equals any sequence of the same records.
    """

    __slots__ = ()

    def _record(self, i: int) -> R:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> R: ...
    @overload
    def __getitem__(self, i: slice) -> list[R]: ...
    def __getitem__(self, i: int | slice) -> R | list[R]:
        if isinstance(i, slice):
            return [self._record(k) for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"record {i} outside [0, {len(self)})")
        return self._record(i)

    def __iter__(self) -> Iterator[R]:
        for i in range(len(self)):
            yield self._record(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} records)"


def profile_fingerprint(profile: NormalizeProfile) -> str:
    """Fingerprint of the normalization profile alone (rows that depend only on it)."""
    canonical = json.dumps(asdict(profile), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def walk_toc(entries: Sequence[TocEntry], depth: int = 0) -> Iterator[tuple[TocEntry, int]]:
    for entry in entries:
        yield entry, depth
        yield from walk_toc(entry.children, depth + 1)
