"""Request parameters shared by the routes (book and section references, fingerprints),
small response helpers (ETags, file types, file names) and the context every router
gets."""

import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import (
    Depends,
    Query,
    Request,
)
from fastapi import Path as PathParam

from mindory.library import Library
from mindory.server.guard import HTTPError, reader_of
from mindory.server.jobs import JobManager
from mindory.text.records import ChunkSettings, NormalizeProfile, Settings


def not_modified(request: Request, etag: str) -> bool:
    given = request.headers.get("if-none-match")
    if not given:
        return False
    return given.strip() == "*" or etag in [t.strip() for t in given.split(",")]


# --------------------------------------------------------------------------- helpers

_CHARSETS = {
    "utf-8": "utf-8",
    "utf-8-sig": "utf-8",
    "utf_8": "utf-8",
    "utf-16": "utf-16",
    "utf-16-le": "utf-16le",
    "utf-16-be": "utf-16be",
    "gb18030": "gb18030",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "big5": "big5",
    "cp950": "big5",
    "big5hkscs": "big5-hkscs",
    "cp1252": "windows-1252",
    "latin-1": "iso-8859-1",
    "latin_1": "iso-8859-1",
    "iso8859-1": "iso-8859-1",
    "shift_jis": "shift_jis",
    "cp932": "shift_jis",
    "euc_jp": "euc-jp",
    "euc-jp": "euc-jp",
    "ascii": "us-ascii",
}


def file_type(book_format: str, encoding: str | None) -> str:
    if book_format == "epub":
        return "application/epub+zip"
    charset = _CHARSETS.get((encoding or "").lower().replace("_", "-")) or _CHARSETS.get(
        (encoding or "").lower()
    )
    return f"text/plain; charset={charset}" if charset else "text/plain"


def safe_file_name(raw: str | None) -> str:
    """The client's file name, reduced to a harmless single path component."""
    name = (raw or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    name = name.lstrip(".") or "upload"
    if len(name) > 150:
        stem, dot, suffix = name.rpartition(".")
        name = (
            (stem[: 140 - len(suffix)] + dot + suffix) if dot and len(suffix) <= 10 else name[:150]
        )
    return name


Strategy = Literal["window", "paragraph", "structured", "parent-child", "dialogue"]


def chunk_settings(
    size: int,
    overlap: int,
    min_size: int,
    nfkc: bool,
    strategy: str = "window",
    parent_size: int = 1600,
) -> Settings:
    try:
        return Settings(
            profile=NormalizeProfile(unicode_form="NFKC" if nfkc else "NFC"),
            chunking=ChunkSettings(
                strategy=strategy,
                size=size,
                overlap=overlap,
                min_size=min_size,
                parent_size=parent_size,
            ),
        )
    except ValueError as exc:
        raise HTTPError(422, f"invalid chunk settings: {exc}", {"kind": "ValueError"}) from exc


def content_disposition(file_name: str) -> str:
    ascii_name = file_name.encode("ascii", "replace").decode().replace('"', "_").replace("?", "_")
    return f"inline; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(file_name)}"


BookRef = Annotated[
    str,
    PathParam(
        min_length=1,
        max_length=512,
        description="Book id (SHA-256 or a prefix of 4+ hex digits) or a unique title prefix.",
    ),
]
SectionNo = Annotated[int, PathParam(ge=0, le=1_000_000, description="Section ordinal.")]
HighlightRef = Annotated[
    str,
    PathParam(min_length=1, max_length=64, description="urn:uuid:… or the bare UUID."),
]
MAX_SEARCH_K = 100


def current_reader(request: Request) -> str:
    """The id of the request's reader, as the guard found it from the bearer token."""
    return reader_of(request.scope)


# The reader a route acts for: every highlight, position and bookmark route scopes by it.
ReaderId = Annotated[str, Depends(current_reader)]
BookmarkRef = Annotated[
    str, PathParam(min_length=1, max_length=64, description="A bookmark id (32 hex digits).")
]


def locator_span(locator: dict[str, Any]) -> tuple[int, int, int, str | None]:
    """(section, source start, source end, text.highlight) of a Locator sent by a client."""
    try:
        section = locator["section"]
        source = locator["source"]
        start, end = source["start"], source["end"]
    except (KeyError, TypeError) as exc:
        raise HTTPError(
            422, "a locator needs section and source.start / source.end (code points)"
        ) from exc
    numbers = (section, start, end)
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in numbers):
        raise HTTPError(422, "a locator's section and source.start / source.end are integers")
    text = locator.get("text")
    quoted = text.get("highlight") if isinstance(text, dict) else None
    return section, start, end, quoted if isinstance(quoted, str) else None


Fingerprint = Annotated[
    str | None,
    Query(min_length=1, max_length=64, description="A derivation other than the current one."),
]


@dataclass(frozen=True)
class ServerContext:
    """What the routes share: the library, the import jobs and the server's settings."""

    lib: Library
    jobs: JobManager
    token: str | None
    folder: Path | None
    uploads: Path | None
    max_upload_bytes: int
    kosync_registration: bool = False  # KOReader may create readers (serve --kosync-registration)
