"""EPUB resources by ZIP path, for a reader that renders the book itself: the archive
of each recently used book stays open (a small LRU, bounded in books and bytes), member
names that could leave the book are refused, and each member gets its manifest media
type and an ETag."""

from __future__ import annotations

import contextlib
import mimetypes
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mindory.errors import BookFormatError, MindoryError, NotFoundError
from mindory.importers.epub import read_package
from mindory.importers.epub_safety import ZIP_READ_ERRORS, CheckedArchive, open_checked, read_member

if TYPE_CHECKING:
    from mindory.store.records import BookInfo, SectionInfo

__all__ = ["Resource", "Resources", "member_name", "read_resource"]

MiB = 1024 * 1024
ARCHIVE_CACHE_BOOKS = 8
ARCHIVE_CACHE_BYTES = 512 * MiB


class ResourceNameError(MindoryError):
    """An href that is not a path inside the book (absolute, ``..``, backslash, NUL)."""


@dataclass(frozen=True, slots=True)
class Resource:
    """One member of an EPUB: its bytes, the content type to serve and an ETag."""

    data: bytes
    media_type: str
    etag: str


@dataclass
class _Archive:
    book: str
    title: str
    size: int
    archive: CheckedArchive
    media_types: dict[str, str]  # ZIP path -> content type to serve
    lower: dict[str, str]  # lowercased ZIP path -> ZIP path (unique ones only)
    lock: threading.Lock


_EXTRA_TYPES = {
    ".xhtml": "application/xhtml+xml",
    ".opf": "application/oebps-package+xml",
    ".ncx": "application/x-dtbncx+xml",
    ".otf": "font/otf",
    ".ttf": "font/ttf",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".svg": "image/svg+xml",
    ".css": "text/css",
    ".smil": "application/smil+xml",
}
DRIVE_RE = re.compile(r"^[A-Za-z]:")


def _guess_type(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return _EXTRA_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def member_name(href: str) -> str:
    """The ZIP member an href names, or a 400 for names that could escape the book."""
    if not href:
        raise ResourceNameError("empty resource href")
    if (
        "\x00" in href
        or "\\" in href
        or href.startswith("/")
        or DRIVE_RE.match(href)
        or any(ord(ch) < 0x20 for ch in href)
    ):
        raise ResourceNameError(f"resource href {href!r} is not a path inside the book")
    parts = href.split("/")
    if ".." in parts:
        raise ResourceNameError(f"resource href {href!r} leaves the book ('..')")
    return "/".join(p for p in parts if p != ".")


class Resources:
    """A small LRU of opened EPUB archives (by book id), bounded in count and bytes."""

    def __init__(
        self, max_books: int = ARCHIVE_CACHE_BOOKS, max_bytes: int = ARCHIVE_CACHE_BYTES
    ) -> None:
        self.max_books = max_books
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[str, _Archive] = OrderedDict()

    def get(
        self,
        info: BookInfo,
        read_file: Callable[[], bytes],
        sections: Callable[[], Sequence[SectionInfo]],
    ) -> _Archive:
        """The open archive of the book ``info`` (read with ``read_file`` when not open)."""
        if info.format != "epub":
            raise NotFoundError(
                f"{info.title!r} is a plain-text book and has no resources; "
                f"GET /books/{info.id}/file returns its text"
            )
        with self._lock:
            found = self._items.get(info.id)
            if found is not None:
                self._items.move_to_end(info.id)
                return found
        data = read_file()
        archive = open_checked(data, info.file_name)
        types: dict[str, str] = {}
        with contextlib.suppress(MindoryError):
            pkg = read_package(archive)
            for entry in pkg.manifest.values():
                if entry.path and entry.media_type:
                    types[entry.path] = entry.media_type
        for sec in sections():
            if sec.href and sec.parser == "html":
                types[sec.href] = "text/html"  # served as the browser parsed it on import
            elif sec.href and sec.parser == "xml" and types.get(sec.href) == "text/html":
                types[sec.href] = "application/xhtml+xml"
        lower: dict[str, str] = {}
        clashes: set[str] = set()
        for name in archive.names:
            key = name.lower()
            if key in lower:
                clashes.add(key)
            lower[key] = name
        for key in clashes:
            del lower[key]
        item = _Archive(info.id, info.title, len(data), archive, types, lower, threading.Lock())
        with self._lock:
            self._items[info.id] = item
            self._items.move_to_end(info.id)
            while len(self._items) > self.max_books or (
                len(self._items) > 1 and sum(a.size for a in self._items.values()) > self.max_bytes
            ):
                self._items.popitem(last=False)
        return item

    def forget(self, book: str) -> None:
        with self._lock:
            self._items.pop(book, None)


def read_resource(item: _Archive, href: str) -> Resource:
    """(bytes, content type, etag) of one member."""
    name = member_name(href)
    names = item.archive.names
    if name not in names:
        name = item.lower.get(name.lower(), name)
    if name not in names or name.endswith("/"):
        raise NotFoundError(f"{item.title!r} has no resource {href!r}")
    with item.lock:
        info = item.archive.zip.getinfo(name)
        try:
            data = read_member(item.archive, name)
        except ZIP_READ_ERRORS as exc:  # pragma: no cover - read_member wraps these
            raise BookFormatError(f"cannot read {name!r}: {exc}") from exc
    media_type = item.media_types.get(name) or _guess_type(name)
    if media_type == "text/html":
        media_type = "text/html; charset=utf-8" if _is_utf8(data) else media_type
    elif media_type in ("text/css", "text/plain"):
        media_type += "; charset=utf-8"
    etag = f'"{item.book[:16]}-{info.CRC:08x}-{info.file_size:x}"'
    return Resource(data, media_type, etag)


def _is_utf8(data: bytes) -> bool:
    head = data[:4096].lower()
    if b"charset" in head or data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False  # the document says it (or has a BOM): let the browser read it
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
