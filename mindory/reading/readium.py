"""Readium positions, computed as Readium's toolkits compute them (pure; docs/readium.md).

A Readium app (Thorium, the Kotlin and Swift toolkits) numbers places in a publication
with ``locations.position``, counted from 1 over its **reading order**. This module owns
that numbering and its mapping to mindory's coordinates: position N ⇄ (resource,
Readium progression) ⇄ (section, source offset in code points). No database, no files:
it works on the ZIP central directory's numbers and on section lengths.

The rules, checked in the toolkits' source (readium/kotlin-toolkit @ e5f5ad1c,
``EpubPositionsService.kt``; readium/swift-toolkit @ f7d10d2b,
``EPUBPositionsService.swift``; both ``ReflowableStrategy.recommended``):

* Only the reading order counts: the spine's **linear** itemrefs (both parsers put
  ``linear="no"`` items in ``resources``). A reading-order resource missing from the
  container gets no position.
* A fixed-layout resource has one position. A reflowable one has
  ``max(1, ceil(entry length / 1024))``, where the entry length is the ZIP entry's
  **compressed** size when it is deflated and its length when it is stored (the two are
  the same number in the central directory: ``ZipInfo.compress_size``).
* Position k (1-based within the resource, n positions) has ``progression = (k-1)/n``;
  positions run on across resources from 1; ``totalProgression = (position-1)/total``.
* What an app *shows*: its navigator turns the progression p it scrolled to into the
  position at index ``ceil(p * (n-1))`` of the resource's positions (Kotlin
  ``EpubNavigatorFragment``; Swift ``EPUBNavigatorViewController``).

mindory's stand-in for "scrolled to progression p" is the same fraction of the section's
source characters: a source offset ``o`` of a resource of ``L`` characters has
progression ``o / L`` (as :meth:`~mindory.reading.locate.SectionPlace.progression`), and
so the position at index ``ceil(o * (n-1) / L)`` (:func:`index_at_offset`). The other
way, position k goes to the first character at or after its progression,
``ceil((k-1) * L / n)``, kept inside the offsets that give k back
(:func:`offset_of_index`), so **N → place → N holds exactly** whenever the resource has
at least ``n - 1`` characters (every linear resource of the corpus has; with fewer, some
positions must share a character and the next one wins).

A place in a section outside the reading order (a non-linear spine item) gets the first
position after the reading-order resources before it (clamped to the last position).
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:
    from mindory.importers.epub_safety import CheckedArchive

__all__ = [
    "POSITION_BYTES",
    "POSITION_LIST_TYPE",
    "WEBPUB_TYPE",
    "PositionList",
    "ReadingItem",
    "ResolvedPosition",
    "FILE_HREF",
    "epub_position_counts",
    "fixed_layout_spine",
    "index_at_offset",
    "is_file_href",
    "index_at_progression",
    "offset_at_progression",
    "offset_of_index",
    "offset_range",
    "position_count",
    "position_in_publication",
    "readium_href",
    "zip_path_of_href",
]

POSITION_BYTES = 1024  # ReflowableStrategy.recommended: ArchiveEntryLength(pageLength = 1024)
POSITION_LIST_TYPE = "application/vnd.readium.position-list+json"
WEBPUB_TYPE = "application/webpub+json"
RESOURCE_PREFIX = "resources/"  # the manifest's hrefs, relative to /books/{id}/manifest.json
EPSILON = 1e-9  # a progression sent as a JSON float: (k-1)/n rounded, never a boundary


def position_count(entry_bytes: int, *, fixed: bool = False) -> int:
    """Positions of one reading-order resource (Readium's recommended strategy)."""
    if entry_bytes < 0:
        raise ValueError(f"a ZIP entry length is never negative ({entry_bytes})")
    if fixed:
        return 1
    return max(1, -(-entry_bytes // POSITION_BYTES))


# --------------------------------------------------------------------------- in a resource


def index_at_offset(count: int, length: int, offset: int) -> int:
    """The 0-based position index in a resource of ``count`` positions and ``length``
    source characters that a reader at ``offset`` sees (the navigator's rule on the
    progression ``offset / length``)."""
    if count < 1:
        raise ValueError(f"a resource in the reading order has positions ({count})")
    if not 0 <= offset <= length:
        raise ValueError(f"offset {offset} outside the resource [0, {length}]")
    if count == 1 or length == 0:
        return 0
    return min(count - 1, -(-(offset * (count - 1)) // length))


def offset_range(count: int, length: int, index: int) -> tuple[int, int]:
    """The offsets (inclusive; empty when ``lo > hi``) that :func:`index_at_offset` sends
    to ``index``."""
    if not 0 <= index < count:
        raise ValueError(f"position index {index} outside the resource's {count}")
    if count == 1:
        return 0, length
    if index == 0:
        return 0, 0
    return (length * (index - 1)) // (count - 1) + 1, (length * index) // (count - 1)


def _clamp(value: int, lo: int, hi: int) -> int:
    return min(max(value, lo), hi)


def offset_of_index(count: int, length: int, index: int) -> int:
    """The source offset of position ``index`` (0-based) of a resource: the first
    character at or after its progression ``index / count``, kept inside the offsets
    that give ``index`` back when there are any."""
    target = -(-(length * index) // count)
    lo, hi = offset_range(count, length, index)
    return _clamp(target, lo, hi) if lo <= hi else _clamp(target, 0, length)


def index_at_progression(count: int, progression: float) -> int:
    """The 0-based position index a Readium navigator shows at ``progression``."""
    if count == 1:
        return 0
    return _clamp(math.ceil(progression * (count - 1) - EPSILON), 0, count - 1)


def offset_at_progression(count: int, length: int, progression: float) -> int:
    """The source offset mindory takes for a Readium ``progression`` in a resource: the
    first character at or after that fraction of its source text, inside the offsets of
    the position the navigator shows there (so the answer's position is the app's)."""
    if not 0.0 <= progression <= 1.0 or math.isnan(progression):
        raise ValueError(f"a progression is in [0, 1], not {progression!r}")
    target = _clamp(math.ceil(progression * length - EPSILON), 0, length)
    lo, hi = offset_range(count, length, index_at_progression(count, progression))
    return _clamp(target, lo, hi) if lo <= hi else target


def position_in_publication(
    counts: Sequence[int], index: int, offset: int, length: int, before: int | None = None
) -> int:
    """Readium position (from 1) of ``offset`` in resource ``index`` of a publication
    whose resources have ``counts`` positions (0: outside the reading order).
    ``before``: ``sum(counts[:index])`` when the caller has it."""
    if before is None:
        before = sum(counts[:index])
    n = counts[index]
    if n == 0:  # not in the reading order: the next position the reading order has
        return max(1, min(before + 1, sum(counts)))
    return before + index_at_offset(n, length, offset) + 1


# --------------------------------------------------------------------------- a publication


@dataclass(frozen=True, slots=True)
class ReadingItem:
    """One reading-order resource with positions: the section it is, its href, its
    position ``count`` (:func:`position_count`) and ``source_length``, its source text in
    code points (plain text: the whole decoded file; its ``section`` is then 0)."""

    section: int
    href: str
    media_type: str
    count: int
    source_length: int
    title: str = ""


@dataclass(frozen=True, slots=True)
class ResolvedPosition:
    """A position resolved: its resource (index in the reading order), Readium's
    progression for it, and mindory's place (resource-local source offset)."""

    position: int
    item: int
    section: int
    progression: float
    total_progression: float
    offset: int


class PositionList:
    """The positions of a reading order (:class:`ReadingItem` s in order)."""

    def __init__(self, items: Sequence[ReadingItem]) -> None:
        if any(item.count < 1 for item in items):
            raise ValueError("every item of a position list has at least one position")
        self.items = tuple(items)
        self.counts = tuple(item.count for item in self.items)
        firsts: list[int] = []
        running = 0
        for n in self.counts:
            firsts.append(running + 1)
            running += n
        self.firsts = tuple(firsts)
        self.total = running

    def _item_of(self, position: int) -> tuple[int, int]:
        """(item index, 0-based index inside it) of ``position``; ValueError outside."""
        if isinstance(position, bool) or not isinstance(position, int):
            raise ValueError(f"a Readium position is a whole number, not {position!r}")
        if not 1 <= position <= self.total:
            raise ValueError(
                f"position {position} is outside the publication (positions 1–{self.total})"
            )
        lo, hi = 0, len(self.firsts) - 1
        while lo < hi:  # the last item whose first position is <= position
            mid = (lo + hi + 1) // 2
            if self.firsts[mid] <= position:
                lo = mid
            else:
                hi = mid - 1
        return lo, position - self.firsts[lo]

    def resolve(self, position: int) -> ResolvedPosition:
        """Position N → its resource, Readium progression and mindory source offset."""
        k, j = self._item_of(position)
        item, n = self.items[k], self.counts[k]
        return ResolvedPosition(
            position=position,
            item=k,
            section=item.section,
            progression=j / n,
            total_progression=(position - 1) / self.total,
            offset=offset_of_index(n, item.source_length, j),
        )

    def item_of_section(self, section: int) -> int | None:
        return next((k for k, it in enumerate(self.items) if it.section == section), None)

    def position_at(self, item: int, offset: int) -> int:
        """The position a reader at ``offset`` of reading-order item ``item`` sees."""
        it = self.items[item]
        return self.firsts[item] + index_at_offset(self.counts[item], it.source_length, offset)

    def offset_at(self, item: int, progression: float) -> int:
        """mindory's source offset for a Readium progression in item ``item``."""
        return offset_at_progression(self.counts[item], self.items[item].source_length, progression)


# --------------------------------------------------------------------------- EPUB files


def fixed_layout_spine(archive: CheckedArchive) -> tuple[bool, ...]:
    """Per spine itemref: is it fixed layout (``rendition:layout`` pre-paginated, for the
    package or overridden on the itemref, as Readium's ``layoutOf(link)`` reads it)?"""
    from mindory.importers.epub import read_package

    pkg = read_package(archive)
    default = False
    for el in pkg.opf_root.iter():
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag.rpartition("}")[2] == "meta" and el.get("property") == "rendition:layout":
            default = (el.text or "").strip() == "pre-paginated"
    out: list[bool] = []
    for el in pkg.opf_root.iter():
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag.rpartition("}")[2] != "itemref":
            continue
        props = (el.get("properties") or "").split()
        if "rendition:layout-pre-paginated" in props:
            out.append(True)
        elif "rendition:layout-reflowable" in props:
            out.append(False)
        else:
            out.append(default)
    return tuple(out)


def epub_position_counts(
    archive: CheckedArchive, sections: Sequence[tuple[str | None, bool]]
) -> tuple[int, ...]:
    """Readium position counts of an EPUB's sections (``(href, linear)`` in spine order;
    0 for a section outside the reading order or missing from the ZIP)."""
    fixed = fixed_layout_spine(archive)
    out: list[int] = []
    for k, (href, linear) in enumerate(sections):
        if not linear or href is None or href not in archive.names:
            out.append(0)
            continue
        size = archive.zip.getinfo(href).compress_size
        out.append(position_count(size, fixed=k < len(fixed) and fixed[k]))
    return tuple(out)


# --------------------------------------------------------------------------- hrefs


def readium_href(zip_path: str) -> str:
    """The manifest's href of an EPUB member: mindory's resource route, relative to
    the manifest (``/books/{id}/manifest.json`` → ``/books/{id}/resources/…``)."""
    return RESOURCE_PREFIX + quote(zip_path, safe="/")


def zip_path_of_href(href: str) -> str | None:
    """The ZIP path an href from a Readium app names — ``resources/<path>`` relative to
    the manifest, or an absolute URL or path ending in ``/books/<id>/resources/<path>``
    — percent-decoded, without its fragment; None for any other href."""
    parts = urlsplit(href.strip())
    path = parts.path
    local = not parts.scheme and not parts.netloc
    steps = path.split("/")
    k = steps.index("books") if "books" in steps else -1
    if path.startswith(RESOURCE_PREFIX) and local:
        member = path[len(RESOURCE_PREFIX) :]
    elif k >= 0 and len(steps) >= k + 4 and steps[k + 2] == "resources":
        member = "/".join(steps[k + 3 :])
    elif path.startswith("/") and local:  # Readium 2 toolkits: the ZIP path with a "/"
        member = path[1:]
    else:
        return None
    member = unquote(member)
    if not member or member.startswith("/") or ".." in member.split("/"):
        return None
    return posixpath.normpath(member)


FILE_HREF = "file"  # a plain-text book's one resource: /books/{id}/file


def is_file_href(href: str) -> bool:
    """True for the href a manifest gives a plain-text book's file (``file``, or a URL
    or path ending in ``/books/<id>/file``)."""
    parts = urlsplit(href.strip())
    if parts.path == FILE_HREF and not parts.scheme and not parts.netloc:
        return True
    steps = parts.path.split("/")
    return len(steps) >= 3 and steps[-1] == FILE_HREF and steps[-3] == "books"
