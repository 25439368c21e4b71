"""A span or position of a book → a place a reader can highlight and jump to (pure).

Everything here works on a :class:`SectionPlace` — what locating needs about
one section and its book — built from in-memory records
(:meth:`SectionPlace.from_book`) or by the library from stored rows (the plain
constructor). No database, no file access.

Coordinates (DESIGN §1, :mod:`mindory.text.records`): every range is half-open;
``source_*`` positions are code points of the book's source text (file-global
for plain text, section-local for EPUB, where a section's ``source_start`` is
0); ``utf16*`` are the same positions in UTF-16 code units, counted over the
same text (the whole decoded file for plain text, the section's DOM text for
EPUB); ``byte*`` (plain text only) are offsets in the original file, BOM
included; ``normalized`` positions are code points of the section's normalized
text.

Decisions where the specifications leave room:

* **href** — EPUB: the content document's path inside the ZIP (the section's
  ``href``). Plain text: the book's file name, because the whole file is the one
  resource a reader opens and ``char=`` fragments count from its start.
* **title** — the section title; when the section has none, the book title.
* **progression** — the span start within the *section's* source text (0–1).
  For EPUB the section is the resource, as Readium defines it; for plain text a
  section is a chapter of the one file, so ``progression`` is within the
  chapter while ``totalProgression``, ``position`` and the ``char=`` fragment
  are within the file.
* **totalProgression** — the span start among all source characters of the
  book (EPUB: the sections' source texts in spine order; plain text: the file).
* **position** (Readium) — given ``resource_positions`` (what the library gives every
  stored book), Readium's own numbering (:mod:`mindory.reading.readium`): positions from
  the ZIP entries' compressed sizes over the reading order, and a span gets the position
  a Readium navigator shows at its start. Without them (an in-memory book, a book file
  that cannot be read) the stand-in is one position per :data:`POSITION_CHARS` (1024)
  source code points of a resource (``max(1, ceil(length / 1024))`` each).
* **text.before / text.after** — :data:`CONTEXT_CHARS` (64) code points of raw
  source text on each side (Readium: DOM characters), clipped at the section
  edges; ``text.highlight`` is exactly the source slice.
* **TextQuoteSelector** — ``exact`` = the highlight, ``prefix`` / ``suffix`` =
  :data:`QUOTE_CHARS` (32) code points of source text, clipped at the section.
* **TextPositionSelector** — ``start`` / ``end`` in code points, as the W3C
  model counts them, over the resource's text (the section's body text for
  EPUB, the decoded file for plain text).
* **Plain-text fragment** — RFC 5147 ``char=start,end``, written in Readium's
  ``locations.fragments`` list and as a ``FragmentSelector``. RFC 5147 counts
  *characters* of the text; mindory writes code points of the decoded file (a
  BOM is not counted, CRLF is two, a character outside the BMP is one). A
  client counting UTF-16 units or bytes uses ``source.utf16Start`` /
  ``source.byteStart`` instead.
* **EPUB CFIs** — ``cfi`` is the specification's range CFI (foliate-js),
  ``cfi_epubjs`` the same place written for epub.js 0.3, ``partialCfi`` the
  part after ``!`` of the specification's point CFI at the span start. Without
  a CFI table (``cfi=None``) these keys and the ``FragmentSelector`` are left
  out. For plain text ``byteStart``/``byteEnd`` are left out when no byte
  function is given.
* **blocks** — ``first``/``last``: the render blocks whose source spans
  overlap the span; a span (or its start) in whitespace between blocks belongs
  to the next block, one past the last block to the last block. ``anchor`` is
  the block holding the span start (so ``anchor == first``), ``page =
  anchor // pageSize``. A section without blocks gives ``"blocks": null``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from mindory.importers.cfi import EPUBJS, SPEC, CfiDocument, CfiError, parse_cfi
from mindory.reading.readium import position_in_publication
from mindory.reading.units import (
    CFI_CONFORMS_TO,
    CONTEXT_CHARS,
    DEFAULT_PAGE_SIZE,
    POSITION_CHARS,
    QUOTE_CHARS,
    RFC5147_CONFORMS_TO,
)
from mindory.text.offsets import OffsetMap, Utf16Index
from mindory.text.records import Block, Book, Chunk

__all__ = [
    "CFI_CONFORMS_TO",
    "CONTEXT_CHARS",
    "POSITION_CHARS",
    "QUOTE_CHARS",
    "RFC5147_CONFORMS_TO",
    "BlockRange",
    "Locator",
    "SectionPlace",
    "SpanContext",
    "locate_chunk",
    "locate_position",
    "locate_span",
    "places_from_book",
    "resolve_cfi",
]


FORMATS = ("txt", "epub")


class Utf16Converter(Protocol):
    """Code point → UTF-16 position over the book's source coordinates."""

    def to_utf16(self, cp: int) -> int: ...


def _positions_of(length: int) -> int:
    """Readium positions of a resource of ``length`` characters (at least one)."""
    return max(1, -(-length // POSITION_CHARS))


# --------------------------------------------------------------------------- place


@dataclass(frozen=True, eq=False)
class SectionPlace:
    """What locating needs about one section and its book.

    ``resource_source_lengths`` are the lengths (code points) of the
    publication's resources in reading order — EPUB: every section's source
    text, in spine order; plain text: one entry, the decoded file — and
    ``resource_index`` says which one holds this section. They give
    ``totalProgression`` and Readium ``position``; a section's positions within
    its resource are its source positions (EPUB: section-local; plain text:
    file-global).

    ``utf16`` converts book source positions to UTF-16 (the whole file's
    :class:`~mindory.text.offsets.Utf16Index` for plain text). When omitted a
    section-local index is built and shifted by ``utf16_source_start`` (the
    UTF-16 position of the section start; required for a plain-text section
    that does not start at 0). ``byte_offset`` maps a file-global code point to
    a byte offset in the original file (plain text). ``cfi`` is the section's
    CFI table (EPUB).
    """

    book_format: str
    book_title: str
    ordinal: int
    href: str
    media_type: str
    title: str
    source_text: str
    normalized_text: str
    offset_map: OffsetMap
    blocks: Sequence[Block]
    resource_source_lengths: tuple[int, ...]
    resource_index: int = 0
    source_start: int = 0
    cfi: CfiDocument | None = None
    utf16: Utf16Converter | None = None
    utf16_source_start: int | None = None
    byte_offset: Callable[[int], int] | None = None
    # The blocks' section-local source starts and ends (int64 arrays), when the caller
    # has them without Block objects: a place read from the store for a search (its
    # ``blocks`` are then empty; a Locator needs only these positions).
    block_spans: tuple[np.ndarray, np.ndarray] | None = None
    # Readium position counts of the resources of ``resource_source_lengths`` (0: a
    # resource outside Readium's reading order); None: the per-1024-characters stand-in.
    resource_positions: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.book_format not in FORMATS:
            raise ValueError(f"book format must be 'txt' or 'epub', not {self.book_format!r}")
        n = len(self.source_text)
        if self.offset_map.source_length != n:
            raise ValueError(
                f"offset map covers {self.offset_map.source_length} source characters, "
                f"the section text has {n}"
            )
        if self.offset_map.normalized_length != len(self.normalized_text):
            raise ValueError("offset map and normalized text lengths differ")
        if self.book_format == "epub" and self.source_start != 0:
            raise ValueError("EPUB source positions are section-local: source_start must be 0")
        if self.source_start < 0:
            raise ValueError(f"negative source start {self.source_start}")
        lengths = self.resource_source_lengths
        if not lengths:
            raise ValueError("resource_source_lengths must list the book's resources")
        if not 0 <= self.resource_index < len(lengths):
            raise ValueError(
                f"resource index {self.resource_index} outside the {len(lengths)} resources"
            )
        if self.source_start + n > lengths[self.resource_index]:
            raise ValueError(
                f"section source [{self.source_start}, {self.source_start + n}) runs past its "
                f"resource ({lengths[self.resource_index]} characters)"
            )
        if self.resource_positions is not None and len(self.resource_positions) != len(lengths):
            raise ValueError("resource_positions must count every resource's positions")
        if self.utf16 is None and self.utf16_source_start is None and self.source_start:
            raise ValueError(
                "a section that does not start at source 0 needs `utf16` (the file-global "
                "index) or `utf16_source_start`"
            )
        if self.cfi is not None and self.cfi.source_text != self.source_text:
            raise ValueError(
                f"the CFI table of section {self.ordinal} belongs to a different source text"
            )

    # -- construction from records

    @classmethod
    def from_book(cls, book: Book, ordinal: int, *, cfi: CfiDocument | None = None) -> SectionPlace:
        """The place of section ``ordinal`` of an in-memory book.

        The CFI table is ``cfi`` if given, else ``section.dom.cfi`` when the
        importer put one there. To locate many sections, build them all at
        once with :func:`places_from_book`.
        """
        cfis = {ordinal: cfi} if cfi is not None else None
        return places_from_book(book, cfis, only=ordinal)[0]

    # -- derived (computed once per place)

    @property
    def source_end(self) -> int:
        return self.source_start + len(self.source_text)

    @cached_property
    def _local_utf16(self) -> Utf16Index:
        return Utf16Index(self.source_text)

    @cached_property
    def _block_source_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Section-local source starts and ends of the blocks (int64 arrays)."""
        if self.block_spans is not None:
            return self.block_spans
        blocks = self.blocks
        starts = np.fromiter((b.source_start for b in blocks), dtype=np.int64, count=len(blocks))
        ends = np.fromiter((b.source_end for b in blocks), dtype=np.int64, count=len(blocks))
        return starts, ends

    @cached_property
    def _resources_before(self) -> tuple[int, int, int]:
        """(characters before this resource, characters in all, positions before it)."""
        lengths = self.resource_source_lengths
        k = self.resource_index
        return (
            sum(lengths[:k]),
            sum(lengths),
            sum(_positions_of(x) for x in lengths[:k]),
        )

    # -- conversions (positions in book source coordinates)

    def check_source(self, source_pos: int) -> int:
        """``source_pos`` as section-local, or ValueError outside the section."""
        if not self.source_start <= source_pos <= self.source_end:
            raise ValueError(
                f"source position {source_pos} outside section {self.ordinal} "
                f"[{self.source_start}, {self.source_end}]"
            )
        return source_pos - self.source_start

    def to_utf16(self, source_pos: int) -> int:
        if self.utf16 is not None:
            return int(self.utf16.to_utf16(source_pos))
        local = self.check_source(source_pos)
        base = self.utf16_source_start if self.utf16_source_start is not None else 0
        return base + self._local_utf16.to_utf16(local)

    def to_byte(self, source_pos: int) -> int | None:
        if self.book_format != "txt" or self.byte_offset is None:
            return None
        return int(self.byte_offset(source_pos))

    def progression(self, source_pos: int) -> float:
        """Position within the section's source text, 0–1."""
        n = len(self.source_text)
        return (source_pos - self.source_start) / n if n else 0.0

    def total_progression(self, source_pos: int) -> float:
        before, total, _ = self._resources_before
        return (before + source_pos) / total if total else 0.0

    @cached_property
    def _readium_before(self) -> int:
        return sum((self.resource_positions or ())[: self.resource_index])

    def position(self, source_pos: int) -> int:
        """Readium position (from 1 across the publication) of ``source_pos``."""
        if self.resource_positions is not None:
            return position_in_publication(
                self.resource_positions,
                self.resource_index,
                source_pos,
                self.resource_source_lengths[self.resource_index],
                self._readium_before,
            )
        _, _, positions_before = self._resources_before
        own = _positions_of(self.resource_source_lengths[self.resource_index])
        return positions_before + min(source_pos // POSITION_CHARS, own - 1) + 1

    def block_at(self, source_pos: int) -> int | None:
        """Index of the block holding ``source_pos`` (whitespace → the next block)."""
        starts, ends = self._block_source_spans
        if not len(ends):
            return None
        local = self.check_source(source_pos)
        k = int(np.searchsorted(ends, local, side="right"))
        return min(k, len(ends) - 1)

    def block_span(self, source_start: int, source_end: int) -> tuple[int, int] | None:
        """(first, last) indices of the blocks a source span covers."""
        first = self.block_at(source_start)
        if first is None:
            return None
        starts, _ = self._block_source_spans
        local_end = self.check_source(source_end)
        last = first
        if source_end > source_start:
            last = int(np.searchsorted(starts, local_end, side="left")) - 1
        return first, min(max(last, first), len(starts) - 1)

    def normalized_span(self, source_start: int, source_end: int) -> tuple[int, int]:
        ls, le = self.check_source(source_start), self.check_source(source_end)
        return self.offset_map.normalized_span(ls, le)


def places_from_book(
    book: Book,
    cfis: Mapping[int, CfiDocument] | None = None,
    *,
    only: int | None = None,
    resource_positions: tuple[int, ...] | None = None,
) -> tuple[SectionPlace, ...]:
    """Places of every section of an in-memory book (or only of section ``only``).

    ``cfis`` overrides the CFI tables by ordinal; otherwise a section's table is
    ``section.dom.cfi`` when present. ``resource_positions``: Readium's position counts
    (:attr:`SectionPlace.resource_positions`), when the caller has the ZIP's sizes.
    """
    if book.format not in FORMATS:
        raise ValueError(f"book format must be 'txt' or 'epub', not {book.format!r}")
    sections = book.sections
    ordinals = [s.ordinal for s in sections]
    if only is not None and only not in ordinals:
        raise ValueError(f"{book.file_name}: no section {only}")
    utf16: Utf16Converter | None = None
    byte_offset: Callable[[int], int] | None = None
    if book.format == "txt":
        source = book.source
        text = getattr(source, "text", None)
        file_length = len(text) if isinstance(text, str) else max(s.source_end for s in sections)
        lengths: tuple[int, ...] = (file_length,)
        if isinstance(text, str):
            index = getattr(source, "utf16", None)
            utf16 = index if index is not None else Utf16Index(text)
            bytes_index = getattr(source, "bytes_index", None)
            if bytes_index is not None:
                byte_offset = bytes_index.byte_offset
    else:
        lengths = tuple(len(s.source_text) for s in sections)
    out: list[SectionPlace] = []
    astral_before = 0
    for k, section in enumerate(sections):
        u16_start: int | None = None
        if utf16 is None and book.format == "txt":
            # No file text: count the astral characters of the earlier sections (the
            # gaps between plain-text sections are whitespace, never outside the BMP).
            u16_start = section.source_start + astral_before
            astral_before += Utf16Index(section.source_text).utf16_length - len(section.source_text)
        if only is not None and section.ordinal != only:
            continue
        cfi = (cfis or {}).get(section.ordinal)
        if cfi is None and book.format == "epub":
            found = getattr(section.dom, "cfi", None)
            cfi = found if isinstance(found, CfiDocument) else None
        out.append(
            SectionPlace(
                book_format=book.format,
                book_title=book.title,
                ordinal=section.ordinal,
                href=(section.href or "") if book.format == "epub" else book.file_name,
                media_type=section.media_type if book.format == "epub" else "text/plain",
                title=section.title,
                source_text=section.source_text,
                normalized_text=section.normalized_text,
                offset_map=section.offset_map,
                blocks=section.blocks,
                source_start=section.source_start,
                resource_source_lengths=lengths,
                resource_index=k if book.format == "epub" else 0,
                cfi=cfi,
                utf16=utf16,
                utf16_source_start=u16_start,
                byte_offset=byte_offset,
                resource_positions=resource_positions,
            )
        )
    return tuple(out)


# --------------------------------------------------------------------------- locator


@dataclass(frozen=True, slots=True)
class BlockRange:
    """The render blocks a span covers and the page it falls on."""

    first: int
    last: int
    anchor: int
    page: int
    page_size: int

    def to_json(self) -> dict[str, int]:
        return {
            "first": self.first,
            "last": self.last,
            "anchor": self.anchor,
            "page": self.page,
            "pageSize": self.page_size,
        }


@dataclass(frozen=True, slots=True)
class SpanContext:
    """A parent span (e.g. of parent–child chunking) in the same coordinates."""

    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    normalized_start: int
    normalized_end: int
    byte_start: int | None = None
    byte_end: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": _source_json(
                self.source_start,
                self.source_end,
                self.utf16_start,
                self.utf16_end,
                self.byte_start,
                self.byte_end,
            ),
            "normalized": {"start": self.normalized_start, "end": self.normalized_end},
        }


def _source_json(
    start: int, end: int, u16_start: int, u16_end: int, b_start: int | None, b_end: int | None
) -> dict[str, int]:
    out = {"start": start, "end": end, "utf16Start": u16_start, "utf16End": u16_end}
    if b_start is not None and b_end is not None:
        out["byteStart"] = b_start
        out["byteEnd"] = b_end
    return out


@dataclass(frozen=True, slots=True)
class Locator:
    """A Readium-style Locator with W3C selectors (DESIGN §4); see the module doc.

    Positions: ``source_*`` code points and ``utf16_*`` UTF-16 units in book
    source coordinates, ``byte_*`` file bytes (plain text), ``normalized_*``
    code points of the section's normalized text.
    """

    href: str
    type: str
    title: str
    progression: float
    total_progression: float
    position: int
    text_before: str
    highlight: str
    text_after: str
    quote_prefix: str
    quote_suffix: str
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    normalized_start: int
    normalized_end: int
    section: int
    blocks: BlockRange | None
    partial_cfi: str | None = None
    cfi: str | None = None
    cfi_epubjs: str | None = None
    fragment: str | None = None  # plain text: RFC 5147 "char=start,end"
    byte_start: int | None = None
    byte_end: int | None = None
    chunk: str | None = None
    context: SpanContext | None = None

    def locations_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "progression": self.progression,
            "totalProgression": self.total_progression,
            "position": self.position,
        }
        if self.partial_cfi is not None:
            out["partialCfi"] = self.partial_cfi
        if self.cfi is not None:
            out["cfi"] = self.cfi
        if self.cfi_epubjs is not None:
            out["cfi_epubjs"] = self.cfi_epubjs
        if self.fragment is not None:
            out["fragments"] = [self.fragment]
        return out

    def selectors(self) -> list[dict[str, str | int]]:
        """W3C Web Annotation selectors: quote, position, fragment (CFI or RFC 5147)."""
        out: list[dict[str, str | int]] = [
            {
                "type": "TextQuoteSelector",
                "exact": self.highlight,
                "prefix": self.quote_prefix,
                "suffix": self.quote_suffix,
            },
            {"type": "TextPositionSelector", "start": self.source_start, "end": self.source_end},
        ]
        if self.cfi is not None:
            out.append(
                {"type": "FragmentSelector", "value": self.cfi, "conformsTo": CFI_CONFORMS_TO}
            )
        elif self.fragment is not None:
            out.append(
                {
                    "type": "FragmentSelector",
                    "value": self.fragment,
                    "conformsTo": RFC5147_CONFORMS_TO,
                }
            )
        return out

    def to_json(self) -> dict[str, Any]:
        """The Locator as plain JSON data, keys in a fixed order."""
        out: dict[str, Any] = {
            "href": self.href,
            "type": self.type,
            "title": self.title,
            "locations": self.locations_json(),
            "text": {
                "before": self.text_before,
                "highlight": self.highlight,
                "after": self.text_after,
            },
            "source": _source_json(
                self.source_start,
                self.source_end,
                self.utf16_start,
                self.utf16_end,
                self.byte_start,
                self.byte_end,
            ),
            "normalized": {"start": self.normalized_start, "end": self.normalized_end},
            "section": self.section,
            "blocks": self.blocks.to_json() if self.blocks is not None else None,
            "selectors": self.selectors(),
        }
        if self.chunk is not None:
            out["chunk"] = self.chunk
        if self.context is not None:
            out["context"] = self.context.to_json()
        return out


# --------------------------------------------------------------------------- locate


def _check_page_size(page_size: int) -> None:
    if page_size < 1:
        raise ValueError(f"page size must be at least 1, not {page_size}")


def _check_span(place: SectionPlace, source_start: int, source_end: int) -> tuple[int, int]:
    if source_start > source_end:
        raise ValueError(f"source span [{source_start}, {source_end}) ends before it starts")
    return place.check_source(source_start), place.check_source(source_end)


def _blocks(place: SectionPlace, start: int, end: int, page_size: int) -> BlockRange | None:
    span = place.block_span(start, end)
    if span is None:
        return None
    first, last = span
    return BlockRange(first, last, first, first // page_size, page_size)


def locate_span(
    place: SectionPlace,
    source_start: int,
    source_end: int,
    *,
    normalized: tuple[int, int] | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    chunk_id: str | None = None,
    context: tuple[int, int] | None = None,
) -> Locator:
    """The Locator of source ``[source_start, source_end)`` (book source coordinates).

    ``normalized`` is the span's normalized range when known (a chunk's own
    ``start``/``end``); otherwise the offset map gives it. ``context`` is a
    parent span in source coordinates.
    """
    _check_page_size(page_size)
    ls, le = _check_span(place, source_start, source_end)
    text = place.source_text
    if normalized is None:
        normalized = place.normalized_span(source_start, source_end)
    else:
        ns, ne = normalized
        if not 0 <= ns <= ne <= len(place.normalized_text):
            raise ValueError(
                f"normalized span [{ns}, {ne}) outside [0, {len(place.normalized_text)}]"
            )
    partial = cfi = cfi_epubjs = fragment = None
    if place.book_format == "epub":
        if place.cfi is not None:
            partial = place.cfi.partial(ls)
            cfi = place.cfi.range(ls, le, SPEC)
            cfi_epubjs = place.cfi.range(ls, le, EPUBJS)
    else:
        fragment = f"char={source_start},{source_end}"
    ctx: SpanContext | None = None
    if context is not None:
        cs, ce = context
        _check_span(place, cs, ce)
        cns, cne = place.normalized_span(cs, ce)
        ctx = SpanContext(
            cs,
            ce,
            place.to_utf16(cs),
            place.to_utf16(ce),
            cns,
            cne,
            place.to_byte(cs),
            place.to_byte(ce),
        )
    return Locator(
        href=place.href,
        type=place.media_type,
        title=place.title or place.book_title,
        progression=place.progression(source_start),
        total_progression=place.total_progression(source_start),
        position=place.position(source_start),
        text_before=text[max(0, ls - CONTEXT_CHARS) : ls],
        highlight=text[ls:le],
        text_after=text[le : le + CONTEXT_CHARS],
        quote_prefix=text[max(0, ls - QUOTE_CHARS) : ls],
        quote_suffix=text[le : le + QUOTE_CHARS],
        source_start=source_start,
        source_end=source_end,
        utf16_start=place.to_utf16(source_start),
        utf16_end=place.to_utf16(source_end),
        normalized_start=int(normalized[0]),
        normalized_end=int(normalized[1]),
        section=place.ordinal,
        blocks=_blocks(place, source_start, source_end, page_size),
        partial_cfi=partial,
        cfi=cfi,
        cfi_epubjs=cfi_epubjs,
        fragment=fragment,
        byte_start=place.to_byte(source_start),
        byte_end=place.to_byte(source_end),
        chunk=chunk_id,
        context=ctx,
    )


def locate_chunk(place: SectionPlace, chunk: Chunk, page_size: int = DEFAULT_PAGE_SIZE) -> Locator:
    """The Locator of a chunk (its own normalized span, its id)."""
    if chunk.section != place.ordinal:
        raise ValueError(f"chunk {chunk.id} is in section {chunk.section}, not {place.ordinal}")
    return locate_span(
        place,
        chunk.source_start,
        chunk.source_end,
        normalized=(chunk.start, chunk.end),
        page_size=page_size,
        chunk_id=chunk.id,
    )


def locate_position(
    place: SectionPlace, source_pos: int, *, page_size: int = DEFAULT_PAGE_SIZE
) -> dict[str, Any]:
    """A source position (book coordinates) → section, block, page, normalized position.

    ``source.position`` is code points, ``source.utf16Position`` UTF-16 units
    (and ``bytePosition`` bytes, plain text); ``normalized.position`` is where
    the position falls in the normalized text (inside whitespace that
    normalization collapsed: the start of what replaced it). ``locations``
    gives the same place as a reader addresses it: a point CFI (EPUB) or an
    RFC 5147 ``char=N`` position (plain text).
    """
    _check_page_size(page_size)
    local = place.check_source(source_pos)
    source: dict[str, int] = {"position": source_pos, "utf16Position": place.to_utf16(source_pos)}
    byte = place.to_byte(source_pos)
    if byte is not None:
        source["bytePosition"] = byte
    locations: dict[str, Any] = {
        "progression": place.progression(source_pos),
        "totalProgression": place.total_progression(source_pos),
        "position": place.position(source_pos),
    }
    if place.cfi is not None:
        locations["partialCfi"] = place.cfi.partial(local)
        locations["cfi"] = place.cfi.point(local, SPEC)
        locations["cfi_epubjs"] = place.cfi.point(local, EPUBJS)
    elif place.book_format == "txt":
        locations["fragments"] = [f"char={source_pos}"]
    block = place.block_at(source_pos)
    return {
        "href": place.href,
        "type": place.media_type,
        "title": place.title or place.book_title,
        "section": place.ordinal,
        "locations": locations,
        "source": source,
        "normalized": {"position": place.offset_map.to_normalized(local)},
        "block": block,
        "page": block // page_size if block is not None else None,
        "pageSize": page_size,
    }


def resolve_cfi(
    places_by_spine_index: Mapping[int, SectionPlace] | Sequence[SectionPlace],
    cfi: str,
    flavor: str = SPEC,
) -> tuple[int, int, int]:
    """An EPUB CFI (point or range) → ``(section ordinal, source_start, source_end)``.

    The spine step picks the section (an ID assertion on the itemref wins over
    its index, as in the specification); the section's CFI table resolves the
    rest (``flavor`` ``"spec"`` or ``"epubjs"``). A point gives ``start ==
    end``. Raises :class:`~mindory.importers.cfi.CfiError` when the CFI names
    no section here or does not resolve in it.
    """
    places: Iterable[SectionPlace] = (
        places_by_spine_index.values()
        if isinstance(places_by_spine_index, Mapping)
        else places_by_spine_index
    )
    tables = [(p, p.cfi) for p in places if p.cfi is not None]
    parsed = parse_cfi(cfi)
    steps = parsed.start_path().steps
    k = next((i for i, s in enumerate(steps) if s.indirect), None)
    if k != 2:
        raise CfiError(f"{cfi}: expected /spine/itemref!… (a step into a content document)")
    item = steps[1]
    chosen: SectionPlace | None = None
    if item.id is not None:
        chosen = next((p for p, t in tables if t.itemref_id == item.id), None)
    if chosen is None:
        if item.index % 2 or item.index < 2:
            raise CfiError(f"{cfi}: /{item.index} is not a spine item step")
        spine_index = item.index // 2 - 1
        chosen = next((p for p, t in tables if t.spine_index == spine_index), None)
        if chosen is None:
            raise CfiError(f"{cfi}: no section with a CFI table at spine index {spine_index}")
    assert chosen.cfi is not None
    start, end = chosen.cfi.resolve(parsed, flavor)
    return chosen.ordinal, chosen.source_start + start, chosen.source_start + end
