"""Readium glue (docs/readium.md): a book as a Readium Web Publication Manifest, its
positions list, and a Readium position or progression as a place in the book.

The numbering is :mod:`mindory.reading.readium`'s; its inputs — each resource's position
count (from the ZIP central directory) and source length — are read from the same stored
section places (:mod:`mindory.store.places`) that give every mindory Locator its
``locations.position``, so the positions list and the Locators cannot disagree.
"""

from __future__ import annotations

import bisect
import contextlib
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from mindory.errors import MindoryError
from mindory.importers.cfi import EPUBJS, SPEC
from mindory.library import catalogue
from mindory.library.state import State
from mindory.reading.locate import SectionPlace
from mindory.reading.readium import (
    FILE_HREF,
    POSITION_LIST_TYPE,
    WEBPUB_TYPE,
    PositionList,
    ReadingItem,
    is_file_href,
    readium_href,
    zip_path_of_href,
)
from mindory.store.models import BookRow, SectionRow
from mindory.store.places import Places, place_of
from mindory.store.queries import resolve_book
from mindory.store.records import BookInfo, TocNode

__all__ = [
    "ReadiumManifest",
    "ReadiumPositions",
    "manifest",
    "positions",
    "resolve_position",
    "resolve_progression",
]

WEBPUB_CONTEXT = "https://readium.org/webpub-manifest/context.jsonld"
SCHEMA_BOOK = "http://schema.org/Book"
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")
_LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")


@dataclass(frozen=True)
class ReadiumManifest:
    """A book's Readium Web Publication Manifest (``application/webpub+json``)."""

    book: str
    data: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class ReadiumPositions:
    """A book's positions list (``application/vnd.readium.position-list+json``)."""

    book: str
    positions: tuple[Mapping[str, Any], ...]

    @property
    def total(self) -> int:
        return len(self.positions)

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "positions": [dict(p) for p in self.positions]}


# --------------------------------------------------------------------------- reading order


@dataclass(frozen=True)
class _Publication:
    row_format: str
    title: str
    plist: PositionList
    # EPUB: (ordinal, ZIP path, served media type, title, linear) of every spine section
    spine: tuple[tuple[int, str | None, str, str, bool], ...]


def _served_type(media_type: str, parser: str) -> str:
    # What the resource route serves (library/resources.py): the parser's view of it.
    if parser == "html":
        return "text/html"
    return media_type or "application/xhtml+xml"


def _publication(places: Places, s: Session, row: BookRow) -> _Publication:
    """The book's reading order with Readium's position counts (from the stored places)."""
    first = place_of(places, s, row, 0)
    counts = first.resource_positions
    if counts is None:
        raise MindoryError(
            f"the file of {row.title!r} cannot be read, so its Readium positions (sizes of "
            "its ZIP entries) are unknown"
        )
    lengths = first.resource_source_lengths
    if row.format == "txt":
        item = ReadingItem(0, FILE_HREF, "text/plain", counts[0], lengths[0], row.title)
        return _Publication(row.format, row.title, PositionList([item]), ())
    spine = tuple(
        (int(o), href, _served_type(mt, parser), title or "", bool(linear))
        for o, href, mt, parser, title, linear in s.execute(
            select(
                SectionRow.ordinal,
                SectionRow.href,
                SectionRow.media_type,
                SectionRow.parser,
                SectionRow.title,
                SectionRow.linear,
            )
            .where(SectionRow.book_id == row.id)
            .order_by(SectionRow.ordinal)
        )
    )
    items = [
        ReadingItem(o, href, mt, counts[o], lengths[o], title)
        for o, href, mt, title, _linear in spine
        if href is not None and counts[o] > 0
    ]
    return _Publication(row.format, row.title, PositionList(items), spine)


# --------------------------------------------------------------------------- positions


class _Sections:
    """The places of one book's sections for one call, each looked up once."""

    def __init__(self, places: Places, s: Session, row: BookRow) -> None:
        self.places, self.s, self.row = places, s, row
        self._by_ordinal: dict[int, SectionPlace] = {}
        self._starts: list[tuple[int, int]] | None = None

    def get(self, ordinal: int) -> SectionPlace:
        found = self._by_ordinal.get(ordinal)
        if found is None:
            found = self._by_ordinal[ordinal] = place_of(self.places, self.s, self.row, ordinal)
        return found

    def holding(self, point: int) -> SectionPlace:
        """The section of a plain-text book holding file position ``point``."""
        if self._starts is None:
            self._starts = [
                (int(a), int(o))
                for o, a in self.s.execute(
                    select(SectionRow.ordinal, SectionRow.source_start)
                    .where(SectionRow.book_id == self.row.id)
                    .order_by(SectionRow.ordinal)
                )
            ]
        k = bisect.bisect_right(self._starts, (point, sys.maxsize)) - 1
        return self.get(self._starts[max(k, 0)][1])


def _place_of_position(
    sections: _Sections, pub: _Publication, position: int
) -> tuple[SectionPlace, int]:
    """(place, point in book source coordinates) of Readium position ``position``."""
    try:
        r = pub.plist.resolve(position)
    except ValueError as exc:
        raise MindoryError(f"{pub.title!r}: {exc}") from exc
    if pub.row_format == "txt":
        return sections.holding(r.offset), r.offset
    return sections.get(r.section), r.offset


def _position_locator(
    pub: _Publication, item: ReadingItem, place: SectionPlace, point: int, position: int
) -> dict[str, Any]:
    r = pub.plist.resolve(position)
    local = point - place.source_start
    locations: dict[str, Any] = {
        "progression": r.progression,
        "position": position,
        "totalProgression": r.total_progression,
    }
    if place.cfi is not None:
        locations["partialCfi"] = place.cfi.partial(local)
        locations["cfi"] = place.cfi.point(local, SPEC)
        locations["cfi_epubjs"] = place.cfi.point(local, EPUBJS)
    elif pub.row_format == "txt":
        locations["fragments"] = [f"char={point}"]
    out: dict[str, Any] = {
        "href": readium_href(item.href) if pub.row_format == "epub" else FILE_HREF,
        "type": item.media_type,
    }
    title = place.title or item.title or pub.title
    if title:
        out["title"] = title
    out["locations"] = locations
    out["section"] = place.ordinal
    out["source"] = {"start": point, "utf16Start": place.to_utf16(point)}
    return out


def positions(st: State, ref: str, *, text_type: str | None = None) -> ReadiumPositions:
    """Every Readium position of the book, each a Locator with mindory's exact place."""
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, ref)
        places = st.places_for(conn)
        pub = _publication(places, s, row)
        sections = _Sections(places, s, row)
        out: list[dict[str, Any]] = []
        for n in range(1, pub.plist.total + 1):
            place, point = _place_of_position(sections, pub, n)
            item = pub.plist.items[pub.plist.resolve(n).item]
            loc = _position_locator(pub, item, place, point, n)
            if pub.row_format == "txt" and text_type:
                loc["type"] = text_type
            out.append(loc)
        return ReadiumPositions(row.sha256, tuple(out))


def resolve_position(
    st: State, conn: Connection, s: Session, row: BookRow, position: int
) -> tuple[SectionPlace, int]:
    """Readium position N → the place a Readium app shows for it (book source
    coordinates); MindoryError when the book has no position N."""
    places = st.places_for(conn)
    pub = _publication(places, s, row)
    return _place_of_position(_Sections(places, s, row), pub, position)


def resolve_progression(
    st: State, conn: Connection, s: Session, row: BookRow, href: str, progression: float
) -> tuple[SectionPlace, int] | None:
    """A Readium progression in a resource named by a manifest href (``resources/…``,
    a URL of mindory's resource route, ``file`` for plain text) → its place, by
    Readium's rule; None when ``href`` is not such an href (the caller's rules apply)."""
    places = st.places_for(conn)
    if row.format == "txt":
        if not is_file_href(href):
            return None
        pub = _publication(places, s, row)
        point = pub.plist.offset_at(0, progression)
        return _Sections(places, s, row).holding(point), point
    member = zip_path_of_href(href)
    if member is None:
        return None
    pub = _publication(places, s, row)
    k = next((i for i, it in enumerate(pub.plist.items) if it.href == member), None)
    if k is not None:
        point = pub.plist.offset_at(k, progression)
        return place_of(places, s, row, pub.plist.items[k].section), point
    ordinal = s.scalar(
        select(SectionRow.ordinal).where(SectionRow.book_id == row.id, SectionRow.href == member)
    )
    if ordinal is None:
        return None  # not one of the manifest's documents: the caller's rules decide
    # outside the reading order (linear="no"): no Readium positions, mindory's own rule
    p = place_of(places, s, row, int(ordinal))
    return p, p.source_start + round(progression * len(p.source_text))


# --------------------------------------------------------------------------- manifest


def _identifier(info: BookInfo) -> str:
    found = next((i.strip() for i in info.identifiers if _URI_RE.match(i.strip())), None)
    return found or f"urn:sha256:{info.id}"


def _modified(info: BookInfo) -> str | None:
    if not info.imported_at:
        return None
    with contextlib.suppress(ValueError):
        moment = datetime.fromisoformat(info.imported_at)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return None


def _metadata(info: BookInfo) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "@type": SCHEMA_BOOK,
        "title": info.title or info.file_name,
        "identifier": _identifier(info),
    }
    if info.language and _LANGUAGE_RE.match(info.language.strip()):
        meta["language"] = info.language.strip()
    authors = [c.strip() for c in info.creators if c.strip()]
    if authors:
        meta["author"] = authors
    modified = _modified(info)
    if modified is not None:
        meta["modified"] = modified
    return meta


def _toc_href(node: TocNode, fmt: str) -> str | None:
    if fmt == "txt":
        return f"{FILE_HREF}#char={node.source_offset or 0}"
    path, _, fragment = node.href.partition("#")
    if not path:
        return None
    if node.section is None and _URI_RE.match(path):
        return node.href  # outside the book (a web link)
    return readium_href(path) + (f"#{quote(fragment, safe='')}" if fragment else "")


def _toc(nodes: Iterable[TocNode], fmt: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for node in nodes:
        href = _toc_href(node, fmt)
        children = _toc(node.children, fmt)
        if href is None:
            out.extend(children)  # an entry without a target: keep what is under it
            continue
        link: dict[str, Any] = {"href": href}
        if node.title:
            link["title"] = node.title
        if children:
            link["children"] = children
        out.append(link)
    return out


def _epub_links(
    st: State, info: BookInfo, pub: _Publication
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(readingOrder, resources) of an EPUB: the linear spine documents, then every
    other member the package lists, with its media type."""
    reading: list[dict[str, Any]] = []
    in_order: set[str] = set()
    for _o, href, media_type, title, linear in pub.spine:
        if href is None or not linear or href in in_order:
            continue
        in_order.add(href)
        link: dict[str, Any] = {"href": readium_href(href), "type": media_type}
        if title:
            link["title"] = title
        reading.append(link)
    item = st.resources.get(
        info, lambda: catalogue.book_file(st, info.id), lambda: catalogue.sections(st, info.id)
    )
    covers: set[str] = set()
    with contextlib.suppress(MindoryError):
        from mindory.importers.epub import read_package

        pkg = read_package(item.archive)
        covers = {e.path for e in pkg.manifest.values() if e.path and "cover-image" in e.properties}
    resources: list[dict[str, Any]] = []
    for name, media_type in item.media_types.items():
        if name in in_order or name not in item.archive.names:
            continue
        link = {"href": readium_href(name), "type": media_type}
        if name in covers:
            link["rel"] = "cover"
        resources.append(link)
    return reading, resources


def manifest(
    st: State, ref: str, *, self_url: str, text_type: str | None = None
) -> ReadiumManifest:
    """The book's Readium Web Publication Manifest. ``self_url``: its absolute URL (the
    toolkits resolve the positions link against it); ``text_type``: the media type the
    file route serves a plain-text book with (its charset)."""
    info = catalogue.book(st, ref)
    with st.engine.connect() as conn, Session(bind=conn) as s:
        row = resolve_book(s, info.id)
        pub = _publication(st.places_for(conn), s, row)
    if info.format == "txt":
        reading = [
            {
                "href": FILE_HREF,
                "type": text_type or "text/plain",
                "title": info.title or info.file_name,
            }
        ]
        resources: list[dict[str, Any]] = []
    else:
        reading, resources = _epub_links(st, info, pub)
    data: dict[str, Any] = {
        "@context": WEBPUB_CONTEXT,
        "metadata": _metadata(info),
        "links": [
            {"rel": "self", "href": self_url, "type": WEBPUB_TYPE},
            {"href": "positions", "type": POSITION_LIST_TYPE, "title": "Positions"},
        ],
        "readingOrder": reading,
    }
    if resources:
        data["resources"] = resources
    toc = _toc(catalogue.toc(st, info.id), info.format)
    if toc:
        data["toc"] = toc
    return ReadiumManifest(info.id, data)
