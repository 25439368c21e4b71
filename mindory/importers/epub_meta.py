"""What a catalogue shows of an EPUB beyond its title and authors, read from the OPF:
description, publisher, publication date, subjects and the cover image's ZIP member.

Pure: bytes in, a frozen record out. The container and the package document are read
by :mod:`mindory.importers.epub` (``read_package``) over an archive checked by
:mod:`mindory.importers.epub_safety`, so a hostile file costs here what it costs an
import; the only extra member read is a cover *page* (EPUB 2 ``<guide>``), parsed with
the same safe XML parser.

Where the specifications leave room (decisions):

* The cover, first match wins: the EPUB 3 manifest item with
  ``properties="cover-image"``; the EPUB 2 ``<meta name="cover" content="ID">`` (an
  item id; some books put the image's href there, which is accepted too); the
  ``<guide>`` reference ``type="cover"`` (an image, or an XHTML page whose first
  ``<img src>`` / SVG ``<image href>`` is taken); last, a manifest image whose id is
  ``cover`` / ``cover-image`` / ``coverimage``. Only a member present in the archive
  with an ``image/*`` media type counts.
* The date: the ``dc:date`` with ``opf:event="publication"`` (EPUB 2), else the first
  ``dc:date``; kept as written (W3CDTF: ``2008``, ``2008-05``, ``2008-05-20`` or a
  date-time), at most 64 characters.
* The description: ``dc:description`` as plain text — publishers often put escaped
  HTML there; its markup is dropped (block ends become line breaks), whitespace runs
  collapse, at most ``MAX_DESCRIPTION_CHARS`` characters.
* Subjects: every non-empty ``dc:subject``, in order, duplicates dropped.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from lxml import etree, html

from mindory.errors import BookFormatError
from mindory.importers.epub import (
    OPF_NS,
    ManifestItem,
    Package,
    read_package,
    resolve_href,
)
from mindory.importers.epub_safety import open_checked, read_member
from mindory.importers.xhtml import parse_package_xml

__all__ = [
    "MAX_COVER_PAGE_BYTES",
    "MAX_DESCRIPTION_CHARS",
    "EpubDetails",
    "details_from_package",
    "read_epub_details",
]

DC_NS = "http://purl.org/dc/elements/1.1/"
MAX_DESCRIPTION_CHARS = 20_000
MAX_FIELD_CHARS = 2_000
MAX_DATE_CHARS = 64
MAX_COVER_PAGE_BYTES = 2 * 1024 * 1024  # a cover page is a few hundred bytes; refuse more
MAX_SUBJECTS = 100
_COVER_IDS = ("cover", "cover-image", "coverimage", "cover_image")
_WS_RE = re.compile(r"[ \t\r\f\v]+")
_LINES_RE = re.compile(r"\s*\n\s*")
_TAG_RE = re.compile(r"<[A-Za-z!/?]")
_XLINK_NS = "http://www.w3.org/1999/xlink"


@dataclass(frozen=True, slots=True)
class EpubDetails:
    """An EPUB's catalogue details (every field may be missing)."""

    description: str | None = None
    publisher: str | None = None
    published: str | None = None  # as written in the OPF (W3CDTF)
    subjects: tuple[str, ...] = field(default_factory=tuple)
    cover_href: str | None = None  # the cover image's ZIP member
    cover_type: str | None = None  # its manifest media type (image/...)


def read_epub_details(data: bytes, path: str) -> EpubDetails:
    """The catalogue details of the EPUB ``data`` (``path`` names it in errors).

    Raises what opening an EPUB raises (BookFormatError, LimitError, DrmError)."""
    archive = open_checked(data, path)
    pkg = read_package(archive)

    def read_page(name: str) -> bytes | None:
        if not archive.has(name):
            return None
        if archive.zip.getinfo(name).file_size > MAX_COVER_PAGE_BYTES:
            return None
        return read_member(archive, name)

    return details_from_package(pkg, read_page, path)


def details_from_package(pkg: Package, read_page: Any = None, path: str = "", /) -> EpubDetails:
    """The details of an already read package; ``read_page(zip_name) -> bytes | None``
    reads a cover page (EPUB 2 guide) when given."""
    metadata = _first_child(pkg.opf_root, "metadata")
    values: dict[str, list[Any]] = {}
    if metadata is not None:
        for el in metadata.iter(f"{{{DC_NS}}}*"):
            values.setdefault(_local(el), []).append(el)
    description = _description(values.get("description", []))
    publisher = _first_text(values.get("publisher", []), MAX_FIELD_CHARS)
    published = _date(values.get("date", []))
    subjects: list[str] = []
    for el in values.get("subject", []):
        text = _clean("".join(el.itertext()))[:MAX_FIELD_CHARS]
        if text and text not in subjects:
            subjects.append(text)
    cover = _cover(pkg, metadata, read_page, path)
    return EpubDetails(
        description=description,
        publisher=publisher,
        published=published,
        subjects=tuple(subjects[:MAX_SUBJECTS]),
        cover_href=cover.path if cover is not None else None,
        cover_type=cover.media_type if cover is not None else None,
    )


# --------------------------------------------------------------------------- fields


def _local(el: Any) -> str:
    tag = el.tag
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _first_child(el: Any, name: str) -> Any:
    return next((c for c in el if _local(c) == name), None)


def _clean(text: str) -> str:
    return " ".join(text.split())


def _first_text(elements: list[Any], limit: int) -> str | None:
    for el in elements:
        text = _clean("".join(el.itertext()))
        if text:
            return text[:limit]
    return None


def _date(elements: list[Any]) -> str | None:
    event = f"{{{OPF_NS}}}event"
    preferred = [el for el in elements if (el.get(event) or "").strip().lower() == "publication"]
    found = _first_text(preferred + elements, MAX_DATE_CHARS)
    return found


def _description(elements: list[Any]) -> str | None:
    for el in elements:
        raw = "".join(el.itertext()).strip()
        if not raw:
            continue
        text = _plain(raw) if _TAG_RE.search(raw) else raw
        text = _LINES_RE.sub("\n", _WS_RE.sub(" ", text)).strip()
        if text:
            return text[:MAX_DESCRIPTION_CHARS]
    return None


_BLOCKS = frozenset({"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote"})


def _plain(markup: str) -> str:
    """The text of an HTML fragment (escaped HTML in ``dc:description``): lxml's HTML
    parser builds a tree (no entities, no network), scripts and styles are dropped and a
    block's end becomes a line break."""
    try:
        root = html.fragment_fromstring(markup, create_parent="div")
    except (etree.ParserError, ValueError):
        return _TAG_RE.sub(" <", markup)
    for bad in root.xpath("//script|//style"):
        bad.drop_tree()
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.lower() in _BLOCKS:
            el.tail = "\n" + (el.tail or "")
    return str(root.text_content())


# --------------------------------------------------------------------------- cover


def _image(item: ManifestItem | None) -> ManifestItem | None:
    if item is None or not item.present or not item.path:
        return None
    return item if item.media_type.startswith("image/") else None


def _cover(pkg: Package, metadata: Any, read_page: Any, path: str) -> ManifestItem | None:
    items = list(pkg.manifest.values())
    # EPUB 3: properties="cover-image"
    for item in items:
        if "cover-image" in item.properties and _image(item):
            return item
    # EPUB 2: <meta name="cover" content="item id"> (or, in some books, an href)
    if metadata is not None:
        for meta in metadata:
            if _local(meta) == "meta" and (meta.get("name") or "").strip().lower() == "cover":
                ref = (meta.get("content") or "").strip()
                found = _image(pkg.manifest.get(ref)) or _by_path(pkg, pkg.opf_dir, ref)
                if found is not None:
                    return found
    # EPUB 2: <guide><reference type="cover" href="..."/>
    guide = _first_child(pkg.opf_root, "guide")
    if guide is not None:
        for ref in guide:
            if _local(ref) != "reference" or (ref.get("type") or "").lower() != "cover":
                continue
            href = ref.get("href") or ""
            found = _by_path(pkg, pkg.opf_dir, href)
            if found is not None:
                return found
            if read_page is not None:
                found = _from_cover_page(pkg, href, read_page, path)
                if found is not None:
                    return found
    for item in items:
        if item.id.lower() in _COVER_IDS and _image(item):
            return item
    return None


def _by_path(pkg: Package, base_dir: str, href: str) -> ManifestItem | None:
    """The manifest image ``href`` (relative to ``base_dir``) names, if any."""
    if not href:
        return None
    zip_path, _ = resolve_href(base_dir, href)
    if not zip_path:
        return None
    for item in pkg.manifest.values():
        if item.path == zip_path or (item.path and item.path.lower() == zip_path.lower()):
            return _image(item)
    return None


def _from_cover_page(pkg: Package, href: str, read_page: Any, path: str) -> ManifestItem | None:
    page_path, _ = resolve_href(pkg.opf_dir, href)
    if not page_path:
        return None
    item = next((i for i in pkg.manifest.values() if i.path == page_path), None)
    name = item.path if item is not None and item.present and item.path else page_path
    data = read_page(name)
    if not data:
        return None
    try:
        root, _ = parse_package_xml(data, name, path)
    except BookFormatError:
        return None
    base = posixpath.dirname(name)
    for el in root.iter():
        local = _local(el)
        if local == "img":
            ref = el.get("src")
        elif local == "image":
            ref = el.get(f"{{{_XLINK_NS}}}href") or el.get("href")
        else:
            continue
        found = _by_path(pkg, base, ref or "")
        if found is not None:
            return found
    return None
