"""EPUB importer: an .epub file -> :class:`mindory.text.records.Book`.

Pipeline: read the file (hashing the exact bytes imported), check the ZIP
central directory (:mod:`.epub_safety`), read ``container.xml`` and the OPF
package document ourselves with the safe XML parser (manifest and spine),
take metadata and the table of contents from ebooklib, parse every spine
document ourselves (:mod:`.xhtml`) and resolve the TOC to section offsets.

Decisions where the specification is silent:

* Manifest and spine come from our own OPF reading: ebooklib needs every
  manifest file to exist (a missing audio file kills the book), mislabels
  ``properties="cover"`` documents, treats ``text/html`` documents as opaque
  items and does not percent-decode the nav href. ebooklib still reads the
  metadata and the TOC (nav, else NCX) - through a reader subclass that only
  opens the container, OPF, nav and NCX (so it never inflates images or
  audio, and a missing media file is harmless). If ebooklib fails in any way,
  metadata and TOC are read directly from the same files, with a warning.
* Every spine item becomes a section, so ``ordinal`` is the spine position
  (DESIGN §3). A spine item that is not a content document (and has no
  content-document fallback) becomes an empty section with ``parser="none"``
  and a warning. Linear and non-linear items are kept (``linear`` flag).
* A spine itemref naming an id that is not in the manifest, or a spine
  document missing from the ZIP, is a BookFormatError; a missing manifest
  item that is not a spine document (audio, stylesheet, font) is a warning.
  A name that matches a ZIP member only case-insensitively is used, with a
  warning (books made on case-insensitive file systems).
* A TOC entry's ``source_offset`` is the source position of the first text
  at or after the element its fragment names; no fragment means 0; a
  fragment that names no element gives 0 and a warning; a target outside the
  spine gives ``section=None``, ``source_offset=None`` and a warning.
* A section's title is the first TOC entry (depth first) pointing into it,
  else its first heading block, else "". The book title is ``dc:title``, else
  the file name without extension.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import warnings as pywarnings
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from io import BytesIO
from typing import Any
from urllib.parse import unquote

from lxml import etree

from mindory.errors import BookFormatError, LimitError, MindoryError
from mindory.importers.epub_safety import (
    CONTAINER_PATH,
    MAX_FILE_BYTES,
    CheckedArchive,
    open_checked,
    read_member,
)
from mindory.importers.xhtml import ParsedDocument, extract_text, parse_content, parse_package_xml
from mindory.text.records import HEADING, Book, NormalizeProfile, Section, TocEntry

__all__ = ["read_epub"]

OPF_NS = "http://www.idpf.org/2007/opf"
DC_NS = "http://purl.org/dc/elements/1.1/"
CONTAINER_NS = "urn:oasis:names:tc:opendocument:xmlns:container"
NCX_NS = "http://www.daisy.org/z3986/2005/ncx/"
OPS_NS = "http://www.idpf.org/2007/ops"
PACKAGE_MEDIA_TYPE = "application/oebps-package+xml"
NCX_MEDIA_TYPE = "application/x-dtbncx+xml"
SVG_MEDIA_TYPE = "image/svg+xml"
DOCUMENT_MEDIA_TYPES = frozenset(
    {"application/xhtml+xml", "text/html", "application/xml", "text/xml", SVG_MEDIA_TYPE}
)
_DOCUMENT_NAME_RE = re.compile(r"\.(x?html?|xml)$", re.IGNORECASE)
_HTML_NAME_RE = re.compile(r"\.html?$", re.IGNORECASE)
_WS_RE = re.compile(r"\s+")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
MAX_FALLBACK_HOPS = 10
DEFAULT_PROFILE = NormalizeProfile()

# Everything a broken file can make the parsing libraries raise.
_LIBRARY_ERRORS: tuple[type[BaseException], ...] = (
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
    ValueError,
    zipfile.BadZipFile,
    zlib.error,
    etree.LxmlError,
    UnicodeError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    RecursionError,
)


# ------------------------------------------------------------------ package


@dataclass(frozen=True)
class ManifestItem:
    id: str
    href: str  # as written in the OPF
    path: str | None  # ZIP member it names (resolved, percent-decoded); None: outside the ZIP
    media_type: str
    properties: frozenset[str]
    fallback: str | None
    present: bool


@dataclass(frozen=True)
class Itemref:
    idref: str
    linear: bool
    id: str | None


@dataclass(frozen=True)
class Metadata:
    title: str = ""
    creators: tuple[str, ...] = ()
    language: str | None = None
    identifiers: tuple[str, ...] = ()


@dataclass
class Package:
    opf_path: str
    opf_root: Any
    manifest: dict[str, ManifestItem]
    spine: list[Itemref]
    nav: ManifestItem | None
    ncx: ManifestItem | None
    warnings: list[str] = field(default_factory=list)

    @property
    def opf_dir(self) -> str:
        return posixpath.dirname(self.opf_path)

    @property
    def spine_step(self) -> int:
        """Even CFI step of <spine> among the package element's children (usually 6)."""
        k = 0
        for child in self.opf_root:
            if isinstance(child.tag, str):
                k += 1
                if _local(child) == "spine":
                    return 2 * k
        return 6


@dataclass(frozen=True)
class RawToc:
    """A TOC entry before resolution: ZIP path + fragment of its target."""

    title: str
    path: str | None
    fragment: str | None
    href: str  # as written
    children: tuple[RawToc, ...] = ()


def _local(el: Any) -> str:
    tag = el.tag
    if not isinstance(tag, str):
        return ""  # comment / PI
    return tag.rpartition("}")[2]


def _children(el: Any, name: str) -> Iterator[Any]:
    for child in el:
        if _local(child) == name:
            yield child


def _first(el: Any, name: str) -> Any:
    return next(_children(el, name), None)


def _clean(text: str | None) -> str:
    return _WS_RE.sub(" ", text or "").strip()


def _element_text(el: Any) -> str:
    return _clean("".join(el.itertext()))


def resolve_href(base_dir: str, href: str) -> tuple[str | None, str | None]:
    """``href`` relative to ``base_dir`` -> (ZIP path, fragment), both percent-decoded.

    The path is None for external links (a URL scheme) and for paths that
    leave the container.
    """
    raw_path, _, fragment = href.strip().partition("#")
    frag = unquote(fragment) if fragment else None
    if _SCHEME_RE.match(raw_path):
        return None, frag
    path = unquote(raw_path)
    if path.startswith("/"):
        joined = path.lstrip("/")
    elif path:
        joined = posixpath.join(base_dir, path)
    else:
        joined = ""
    if not joined:
        return "", frag  # same document
    norm = posixpath.normpath(joined)
    if norm == ".." or norm.startswith("../") or norm == ".":
        return None, frag
    return norm, frag


class _Locator:
    """Finds ZIP members by exact name, else by a unique case-insensitive match."""

    def __init__(self, archive: CheckedArchive) -> None:
        self.archive = archive
        lower: dict[str, list[str]] = {}
        for name in archive.names:
            lower.setdefault(name.lower(), []).append(name)
        self._lower = lower

    def find(self, path: str, warnings: list[str]) -> str | None:
        if path in self.archive.names:
            return path
        matches = self._lower.get(path.lower(), [])
        if len(matches) == 1:
            warnings.append(f"{path!r} found only as {matches[0]!r} (letter case differs)")
            return matches[0]
        return None


def _read_container(archive: CheckedArchive, locator: _Locator, warnings: list[str]) -> str:
    root, w = parse_package_xml(read_member(archive, CONTAINER_PATH), CONTAINER_PATH, archive.path)
    warnings.extend(w)
    rootfiles = [el for el in root.iter() if _local(el) == "rootfile" and el.get("full-path")]
    if not rootfiles:
        raise BookFormatError(f"{CONTAINER_PATH} names no package document", path=archive.path)
    chosen = next(
        (el for el in rootfiles if (el.get("media-type") or "").strip() == PACKAGE_MEDIA_TYPE),
        rootfiles[0],
    )
    full_path = str(chosen.get("full-path")).strip()
    for candidate in (full_path, unquote(full_path), full_path.lstrip("/")):
        found = locator.find(candidate, warnings)
        if found is not None:
            return found
    raise BookFormatError(
        f"package document {full_path!r} (named in {CONTAINER_PATH}) is missing from the archive",
        path=archive.path,
    )


def read_package(archive: CheckedArchive) -> Package:
    """container.xml + OPF -> manifest, spine, nav and NCX items (our own reading)."""
    warnings: list[str] = []
    locator = _Locator(archive)
    opf_path = _read_container(archive, locator, warnings)
    root, w = parse_package_xml(read_member(archive, opf_path), opf_path, archive.path)
    warnings.extend(w)
    if _local(root) != "package":
        raise BookFormatError(
            f"{opf_path} is not an OPF package document (root element <{_local(root)}>)",
            path=archive.path,
        )
    opf_dir = posixpath.dirname(opf_path)
    manifest_el = _first(root, "manifest")
    if manifest_el is None:
        raise BookFormatError(f"{opf_path} has no <manifest>", path=archive.path)
    manifest = _read_manifest(manifest_el, opf_dir, locator, warnings)
    spine_el = _first(root, "spine")
    if spine_el is None:
        raise BookFormatError(f"{opf_path} has no <spine>", path=archive.path)
    spine = [
        Itemref(
            idref=(ref.get("idref") or "").strip(),
            linear=(ref.get("linear") or "yes").strip().lower() != "no",
            id=ref.get("id"),
        )
        for ref in _children(spine_el, "itemref")
    ]
    if not spine:
        raise BookFormatError("the spine lists no documents; nothing to import", path=archive.path)
    nav = next((item for item in manifest.values() if "nav" in item.properties), None)
    toc_id = spine_el.get("toc")
    ncx = manifest.get(toc_id) if toc_id else None
    if ncx is None:
        ncx = next((i for i in manifest.values() if i.media_type == NCX_MEDIA_TYPE), None)
    return Package(opf_path, root, manifest, spine, nav, ncx, warnings)


def _read_manifest(
    manifest_el: Any, opf_dir: str, locator: _Locator, warnings: list[str]
) -> dict[str, ManifestItem]:
    manifest: dict[str, ManifestItem] = {}
    for el in _children(manifest_el, "item"):
        item_id = (el.get("id") or "").strip()
        href = el.get("href") or ""
        if not item_id or not href:
            warnings.append(f"manifest item without id or href ignored ({item_id or href!r})")
            continue
        if item_id in manifest:
            warnings.append(f"manifest id {item_id!r} appears twice; the first is used")
            continue
        resolved, _ = resolve_href(opf_dir, href)
        found = locator.find(resolved, warnings) if resolved else None
        media_type = (el.get("media-type") or "").strip().lower()
        manifest[item_id] = ManifestItem(
            id=item_id,
            href=href,
            path=found or resolved,
            media_type=media_type,
            properties=frozenset((el.get("properties") or "").split()),
            fallback=el.get("fallback"),
            present=found is not None,
        )
    return manifest


def _is_document(item: ManifestItem) -> bool:
    if item.media_type in DOCUMENT_MEDIA_TYPES:
        return True
    return not item.media_type and bool(item.path and _DOCUMENT_NAME_RE.search(item.path))


# ------------------------------------------------------- metadata and TOC


class _MetadataOnlyReader:
    """Runs ebooklib's EpubReader but lets it open only the files we name.

    ebooklib reads every manifest item up front and dies on a missing one;
    here every other name reads as empty bytes, so nothing else is inflated.
    """

    def __init__(self, data: bytes, wanted: Iterable[str]) -> None:
        from ebooklib import epub

        wanted_set = frozenset(wanted)

        class Reader(epub.EpubReader):
            def read_file(self, name: str) -> bytes:
                norm = posixpath.normpath(name)
                for candidate in (norm, unquote(norm)):
                    if candidate in wanted_set:
                        return bytes(self.zf.read(candidate))
                return b""

        self.reader = Reader(BytesIO(data), {"ignore_ncx": True})

    def load(self) -> Any:
        with pywarnings.catch_warnings():
            pywarnings.simplefilter("ignore")
            return self.reader.load()


def metadata_and_toc_via_ebooklib(data: bytes, pkg: Package) -> tuple[Metadata, tuple[RawToc, ...]]:
    """ebooklib's reading of metadata and TOC; raises whatever ebooklib raises."""
    from ebooklib import epub

    wanted = {CONTAINER_PATH, pkg.opf_path}
    for item in (pkg.nav, pkg.ncx):
        if item is not None and item.present and item.path:
            wanted.add(item.path)
    book = _MetadataOnlyReader(data, wanted).load()

    def dc(name: str) -> list[str]:
        values = (_clean(value) for value, _ in book.get_metadata("DC", name))
        return [v for v in values if v]

    titles, languages = dc("title"), dc("language")
    meta = Metadata(
        title=titles[0] if titles else "",
        creators=tuple(dc("creator")),
        language=languages[0] if languages else None,
        identifiers=tuple(dc("identifier")),
    )
    nav_item = next((i for i in book.items if isinstance(i, epub.EpubNav)), None)
    if nav_item is not None:
        # ebooklib joins nav hrefs to the nav's folder, relative to the OPF folder.
        nav_path = posixpath.normpath(posixpath.join(pkg.opf_dir, unquote(nav_item.file_name)))
        base, self_path = pkg.opf_dir, nav_path
    elif pkg.ncx is not None and pkg.ncx.path:
        base, self_path = posixpath.dirname(pkg.ncx.path), pkg.ncx.path
    else:
        return meta, ()
    toc = book.toc if isinstance(book.toc, (list, tuple)) else []
    return meta, tuple(_convert_ebooklib_toc(toc, base, self_path))


def _convert_ebooklib_toc(nodes: Iterable[Any], base: str, self_path: str) -> Iterator[RawToc]:
    from ebooklib import epub

    for node in nodes:
        children: tuple[RawToc, ...] = ()
        if isinstance(node, tuple):
            head, subs = node
            children = tuple(_convert_ebooklib_toc(subs, base, self_path))
        else:
            head = node
        if isinstance(head, (epub.Link, epub.Section)):
            yield _raw_entry(head.title, head.href or "", base, self_path, children)


def _raw_entry(
    title: str | None, href: str, base: str, self_path: str, children: tuple[RawToc, ...]
) -> RawToc:
    path, fragment = resolve_href(base, href) if href else (None, None)
    if path == "" or (href and href.split("#")[0].endswith("/")):
        path = self_path  # "#frag" alone points into the TOC document itself
    return RawToc(_clean(title), path, fragment, href, children)


def read_metadata(opf_root: Any) -> Metadata:
    """Metadata straight from the OPF (the fallback when ebooklib fails)."""
    metadata = _first(opf_root, "metadata")
    if metadata is None:
        return Metadata()
    values: dict[str, list[str]] = {}
    for el in metadata.iter(f"{{{DC_NS}}}*"):
        text = _element_text(el)
        if text:
            values.setdefault(_local(el), []).append(text)
    titles, languages = values.get("title", []), values.get("language", [])
    return Metadata(
        title=titles[0] if titles else "",
        creators=tuple(values.get("creator", [])),
        language=languages[0] if languages else None,
        identifiers=tuple(values.get("identifier", [])),
    )


def read_toc(archive: CheckedArchive, pkg: Package) -> tuple[tuple[RawToc, ...], list[str]]:
    """TOC straight from the nav document (EPUB 3), else the NCX (EPUB 2)."""
    warnings: list[str] = []
    nav = pkg.nav
    if nav is not None and nav.present and nav.path:
        root, _, _, w = parse_content(read_member(archive, nav.path), nav.path, archive.path)
        warnings.extend(w)
        entries = _nav_toc(root, nav.path) if root is not None else None
        if entries is not None:
            return entries, warnings
    ncx = pkg.ncx
    if ncx is not None and ncx.present and ncx.path:
        root, w = parse_package_xml(read_member(archive, ncx.path), ncx.path, archive.path)
        warnings.extend(w)
        nav_map = next((el for el in root.iter() if _local(el) == "navMap"), None)
        if nav_map is not None:
            base = posixpath.dirname(ncx.path)
            return tuple(_ncx_points(nav_map, base, ncx.path)), warnings
    return (), warnings


def _epub_types(el: Any) -> list[str]:
    value = el.get(f"{{{OPS_NS}}}type") or el.get("epub:type") or ""
    return value.split()


def _nav_toc(root: Any, nav_path: str) -> tuple[RawToc, ...] | None:
    for el in root.iter():
        if _local(el) == "nav" and "toc" in _epub_types(el):
            ol = _first(el, "ol")
            if ol is None:
                ol = next((d for d in el.iter() if _local(d) == "ol"), None)
            if ol is None:
                return ()
            return tuple(_nav_list(ol, posixpath.dirname(nav_path), nav_path))
    return None


def _nav_list(ol: Any, base: str, nav_path: str) -> Iterator[RawToc]:
    for li in _children(ol, "li"):
        label = next((c for c in li if _local(c) in ("a", "span")), None)
        sub = _first(li, "ol")
        children = tuple(_nav_list(sub, base, nav_path)) if sub is not None else ()
        href = label.get("href") if label is not None and _local(label) == "a" else None
        if not href and not children:
            continue
        title = _element_text(label) if label is not None else ""
        yield _raw_entry(title, href or "", base, nav_path, children)


def _ncx_points(parent: Any, base: str, ncx_path: str) -> Iterator[RawToc]:
    for point in _children(parent, "navPoint"):
        label_el = _first(point, "navLabel")
        text_el = _first(label_el, "text") if label_el is not None else None
        title = _element_text(text_el) if text_el is not None else ""
        content = _first(point, "content")
        src = (content.get("src") if content is not None else None) or ""
        children = tuple(_ncx_points(point, base, ncx_path))
        yield _raw_entry(title, src, base, ncx_path, children)


# ------------------------------------------------------------------ sections


def _document_item(pkg: Package, item: ManifestItem, warnings: list[str]) -> ManifestItem | None:
    """The item itself if it is a content document, else its fallback chain's first."""
    current: ManifestItem | None = item
    for _ in range(MAX_FALLBACK_HOPS):
        if current is None:
            break
        if _is_document(current):
            return current
        current = pkg.manifest.get(current.fallback or "")
    warnings.append(
        f"spine item {item.id!r} ({item.media_type or 'no media type'}) is not a content "
        "document; kept as an empty section"
    )
    return None


def _build_section(
    archive: CheckedArchive,
    pkg: Package,
    index: int,
    ref: Itemref,
    profile: NormalizeProfile,
    warnings: list[str],
) -> Section:
    item = pkg.manifest.get(ref.idref)
    if item is None:
        raise BookFormatError(
            f"spine itemref #{index} refers to {ref.idref!r}, which is not in the manifest",
            path=archive.path,
        )
    doc = _document_item(pkg, item, warnings)
    if doc is None:
        return _empty_section(index, ref, item, pkg)
    if not doc.present or not doc.path:
        raise BookFormatError(
            f"spine document {doc.href!r} (manifest id {doc.id!r}) is missing from the archive",
            path=archive.path,
        )
    raw = read_member(archive, doc.path)
    root, body, parser, w = parse_content(raw, doc.path, archive.path)
    warnings.extend(w)
    text = extract_text(body, profile.unicode_form, doc.path, archive.path, root=root)
    dom = ParsedDocument(
        root,
        body,
        parser,
        index,
        ref.idref,
        ref.id,
        doc.path,
        text.id_offsets,
        spine_step=pkg.spine_step,
        # epub.js parses .html/.htm through the HTML parser: keep the bytes
        # so the CFI table can be computed on that tree too.
        raw_bytes=raw if _HTML_NAME_RE.search(doc.path) else None,
        cfi_columns=text.cfi_columns,
        source_text=text.source_text,
    )
    return Section(
        ordinal=index,
        title="",
        source_text=text.source_text,
        normalized_text=text.normalized_text,
        offset_map=text.offset_map,
        blocks=text.blocks,
        source_start=0,
        href=doc.path,
        media_type=doc.media_type or "application/xhtml+xml",
        parser=parser,
        linear=ref.linear,
        dom=dom,
    )


def _empty_section(index: int, ref: Itemref, item: ManifestItem, pkg: Package) -> Section:
    text = extract_text(None, None)
    dom = ParsedDocument(
        None, None, "none", index, ref.idref, ref.id, item.path or item.href, {}, pkg.spine_step
    )
    return Section(
        ordinal=index,
        title="",
        source_text="",
        normalized_text="",
        offset_map=text.offset_map,
        blocks=(),
        href=item.path or item.href,
        media_type=item.media_type,
        parser="none",
        linear=ref.linear,
        dom=dom,
    )


def _missing_item_warnings(pkg: Package, spine_docs: set[str]) -> list[str]:
    return [
        f"manifest item {item.id!r} ({item.media_type or 'no media type'}) is missing from "
        f"the archive: {item.path or item.href}"
        for item in pkg.manifest.values()
        if not item.present and item.path is not None and item.id not in spine_docs
    ]


# ---------------------------------------------------------------- TOC resolve


def _resolve_toc(
    raw: Iterable[RawToc], sections: list[Section], warnings: list[str]
) -> tuple[TocEntry, ...]:
    by_path: dict[str, int] = {}
    for section in sections:
        if section.href is not None:
            by_path.setdefault(section.href, section.ordinal)
    return tuple(_resolve_entry(entry, by_path, sections, warnings) for entry in raw)


def _resolve_entry(
    entry: RawToc, by_path: dict[str, int], sections: list[Section], warnings: list[str]
) -> TocEntry:
    children = tuple(_resolve_entry(c, by_path, sections, warnings) for c in entry.children)
    href = (entry.path or entry.href) + (f"#{entry.fragment}" if entry.fragment else "")
    ordinal = by_path.get(entry.path) if entry.path else None
    if ordinal is None:
        if entry.path:
            warnings.append(f"TOC entry {entry.title!r} points outside the spine: {entry.href!r}")
        return TocEntry(entry.title, href, None, None, children)
    offset = 0
    if entry.fragment:
        dom = sections[ordinal].dom
        ids = dom.id_offsets if isinstance(dom, ParsedDocument) else {}
        found = ids.get(entry.fragment)
        if found is None:
            warnings.append(
                f"TOC entry {entry.title!r}: no element with id {entry.fragment!r} in "
                f"{entry.path}; pointing at its start"
            )
        else:
            offset = found
    return TocEntry(entry.title, href, ordinal, offset, children)


def _walk_toc(entries: Iterable[TocEntry]) -> Iterator[TocEntry]:
    for entry in entries:
        yield entry
        yield from _walk_toc(entry.children)


def _titled(sections: list[Section], toc: tuple[TocEntry, ...]) -> list[Section]:
    titles: dict[int, str] = {}
    for entry in _walk_toc(toc):
        if entry.section is not None and entry.title:
            titles.setdefault(entry.section, entry.title)
    out = []
    for section in sections:
        title = titles.get(section.ordinal)
        if title is None:
            heading = next((b for b in section.blocks if b.kind == HEADING), None)
            title = _clean(section.normalized_text[heading.start : heading.end]) if heading else ""
        out.append(replace(section, title=title))
    return out


# ------------------------------------------------------------------- public


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise LimitError(
                    f"file is {size:,} bytes, over the limit of {MAX_FILE_BYTES:,} bytes",
                    path=path,
                )
            # Exactly the stated size (+1 to notice growth): read(n) allocates n
            # bytes up front, so never ask for the limit itself. Special files
            # (pipes, /dev/zero) report size 0 and read as empty.
            data = fh.read(size + 1) if size else b""
    except OSError as exc:
        raise BookFormatError(f"cannot read the file: {exc.strerror or exc}", path=path) from exc
    if len(data) != size:
        raise BookFormatError("the file changed while it was being read", path=path)
    return data


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def read_epub(path: str | os.PathLike[str], profile: NormalizeProfile = DEFAULT_PROFILE) -> Book:
    """Import an EPUB file. Raises only MindoryError subclasses for bad input."""
    path_str = os.fspath(path)
    data = _read_file(path_str)
    try:
        return _import(data, path_str, profile)
    except MindoryError:
        raise
    except _LIBRARY_ERRORS as exc:
        raise BookFormatError(
            f"unreadable EPUB ({type(exc).__name__}: {exc})", path=path_str
        ) from exc


def _import(data: bytes, path: str, profile: NormalizeProfile) -> Book:
    archive = open_checked(data, path)
    pkg = read_package(archive)
    warnings: list[str] = [*archive.warnings, *pkg.warnings]
    try:
        meta, raw_toc = metadata_and_toc_via_ebooklib(data, pkg)
    except Exception as exc:  # noqa: BLE001 - any ebooklib failure: read the files ourselves
        warnings.append(
            f"ebooklib could not read the package ({type(exc).__name__}: {exc}); "
            "metadata and table of contents read directly"
        )
        meta = read_metadata(pkg.opf_root)
        raw_toc, toc_warnings = read_toc(archive, pkg)
        warnings.extend(toc_warnings)
    sections: list[Section] = []
    for index, ref in enumerate(pkg.spine):
        sections.append(_build_section(archive, pkg, index, ref, profile, warnings))
    if not any(section.normalized_text for section in sections):
        raise BookFormatError(
            "no text in any spine document (images only?); nothing to import", path=path
        )
    warnings.extend(_missing_item_warnings(pkg, {ref.idref for ref in pkg.spine}))
    toc = _resolve_toc(raw_toc, sections, warnings)
    sections = _titled(sections, toc)
    file_name = os.path.basename(path)
    return Book(
        sha256=hashlib.sha256(data).hexdigest(),
        title=meta.title or os.path.splitext(file_name)[0],
        format="epub",
        file_name=file_name,
        sections=tuple(sections),
        creators=meta.creators,
        language=meta.language,
        identifiers=meta.identifiers,
        toc=toc,
        warnings=_unique(warnings),
    )
