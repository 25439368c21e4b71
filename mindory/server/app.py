"""The HTTP door: a FastAPI application over :class:`mindory.library.Library`.

``create_app(library)`` builds the app; ``mindory serve`` (:mod:`mindory.server.serve`)
runs it under uvicorn. Every route is a thin door onto one Library method and
returns the same JSON shape as the CLI's ``--json`` (the ``to_json()`` of the
library's frozen results); the pydantic models below only *declare* those
shapes for the OpenAPI document (they allow extra keys, so a field the library
adds is passed through, and keys the library leaves out stay out).

Safety (see docs/api.md):

* Loopback by default. Without a token only requests whose ``Host`` is a
  loopback name are served (a DNS-rebinding page cannot read the library).
  With a token (``MINDORY_TOKEN``; required to bind elsewhere) every request
  but the static reader files and the API documentation needs
  ``Authorization: Bearer <token>`` (or the ``mindory_token`` cookie the reader
  page sets, so its iframe and images can load), compared in constant time.
* A state-changing request that carries an ``Origin`` other than its own host
  is refused (403): another web page cannot make the browser upload or delete.
* Uploads are limited (``max_upload_bytes``, 256 MiB by default), enforced while
  the body streams in (413), and saved to a private temporary folder that is
  deleted when the import job ends. The server imports only what it is sent or
  files under the configured library folder (``library_folder``).
* EPUB resources are looked up by ZIP member name: absolute names, ``..``,
  backslashes and NUL are refused (400), anything else not in the archive is
  404. They are served with a sandboxing Content-Security-Policy (no scripts).
* Bad requests get a 4xx with ``{"error": "...", "detail": ...}``, never a 500:
  ``NotFoundError`` 404, ``LimitError`` 413, ``BookFormatError``/``DrmError``/
  ``DecodeError`` 422, any other ``MindoryError`` 400, invalid parameters 422,
  a locked or unreachable database 503.
"""

import contextlib
import hmac
import importlib.metadata
import mimetypes
import os
import re
import shutil
import tempfile
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlsplit

from fastapi import (
    APIRouter,
    Depends,
    FastAPI,
    File,
    Form,
    Query,
    Request,
    Response,
    UploadFile,
)
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.security import HTTPBearer
from fastapi.sse import EventSourceResponse, ServerSentEvent
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mindory.errors import BookFormatError, DecodeError, LimitError, MindoryError, NotFoundError
from mindory.importers.epub import read_package
from mindory.importers.epub_safety import ZIP_READ_ERRORS, CheckedArchive, open_checked, read_member
from mindory.library import BOOK_SUFFIXES, Library, book_files_in, resolve_url
from mindory.reading.highlights import MAX_NOTE_CHARS, MAX_QUOTE_CHARS, UNSET, Unset
from mindory.server.jobs import Isolation, JobManager, ShuttingDown
from mindory.text.records import ChunkSettings, NormalizeProfile, Settings

__all__ = [
    "DEFAULT_MAX_UPLOAD_BYTES",
    "LOOPBACK_HOSTS",
    "MAX_JSON_BODY_BYTES",
    "PUBLIC_PATHS",
    "create_app",
    "is_loopback",
]

MiB = 1024 * 1024
DEFAULT_MAX_UPLOAD_BYTES = 256 * MiB
MULTIPART_SLACK_BYTES = 1 * MiB  # the multipart envelope around the file
MAX_JSON_BODY_BYTES = 1 * MiB
MAX_FOLDER_LISTING = 10_000
ARCHIVE_CACHE_BOOKS = 8
ARCHIVE_CACHE_BYTES = 512 * MiB
TOKEN_COOKIE = "mindory_token"

STATIC_DIR = Path(__file__).resolve().parent / "static"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
# Served without a token: the reader page's own files and the API description
# hold no library data (the page asks for the token and sends it).
PUBLIC_PATHS = frozenset({"/", "/favicon.ico", "/openapi.json", "/docs", "/docs/oauth2-redirect"})
PUBLIC_PREFIXES = ("/static/", "/docs-assets/")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

INDEX_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; frame-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'"
)
# EPUB content is untrusted: no scripts, no plugins, no navigation of the reader
# (``sandbox`` without allow-scripts), yet same-origin so the reader can walk its DOM.
RESOURCE_CSP = (
    "sandbox allow-same-origin; default-src 'self' data: blob:; script-src 'none'; "
    "style-src 'self' 'unsafe-inline' data:; object-src 'none'; base-uri 'self'; "
    "form-action 'none'; frame-ancestors 'self'"
)

try:
    VERSION = importlib.metadata.version("mindory")
except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from a bare tree
    VERSION = "0.0.0"


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost (what `mindory serve` binds without a token)."""
    import ipaddress

    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


# --------------------------------------------------------------------------- shapes


class _Shape(BaseModel):
    """A declared JSON shape: extra keys pass through, absent optional keys stay absent."""

    model_config = ConfigDict(extra="allow")


class ErrorOut(_Shape):
    error: str = Field(description="One line: what went wrong, naming the file or request.")
    detail: Any = Field(default=None, description="Machine-readable particulars (kind, ...).")


class DerivationOut(_Shape):
    fingerprint: str
    current: bool
    chunk_count: int
    settings: dict[str, Any]
    created_at: str | None


class BookOut(_Shape):
    id: str = Field(description="SHA-256 of the file's bytes.")
    title: str
    format: str = Field(description='"epub" or "txt".')
    file_name: str
    file_size: int
    encoding: str | None
    lossy: bool
    bad_bytes: int
    first_bad_byte: int | None
    creators: list[str]
    language: str | None
    identifiers: list[str]
    section_count: int
    toc_count: int
    chunk_count: int
    fingerprint: str | None
    stored: str
    imported_at: str | None
    warnings: list[str]
    derivations: list[DerivationOut]


class SectionOut(_Shape):
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


class TocNodeOut(_Shape):
    title: str
    href: str
    section: int | None = Field(description="Section ordinal the entry jumps to (None: outside).")
    source_offset: int | None = Field(description="Source position (code points) of the target.")
    children: list["TocNodeOut"]


class BookDetailOut(BookOut):
    sections: list[SectionOut]
    toc: list[TocNodeOut]


class OffsetMapOut(_Shape):
    v: int
    n: int = Field(description="Normalized length.")
    s: int = Field(description="Source length.")
    e: list[int] = Field(description="Edit runs, flat: [a, n, b, m, ...].")


class SectionDetailOut(SectionOut):
    book: str
    source_text: str
    normalized_text: str
    offset_map: OffsetMapOut


class BlockOut(_Shape):
    index: int
    kind: str
    level: int | None
    start: int
    end: int
    source_start: int
    source_end: int
    text: str


class BlockPageOut(_Shape):
    book: str
    section: int
    page: int
    page_size: int
    pages: int
    total: int
    blocks: list[BlockOut]


class ChunkOut(_Shape):
    id: str
    section: int
    index: int
    start: int
    end: int
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    byte_start: int | None = Field(default=None, description="Plain text only.")
    byte_end: int | None = Field(default=None, description="Plain text only.")
    cfi: str | None = Field(default=None, description="EPUB only: the specification's range CFI.")
    cfi_epubjs: str | None = Field(default=None, description="EPUB only: the same for epub.js.")
    context_start: int | None = None
    context_end: int | None = None
    text: str


class ChunkPageOut(_Shape):
    book: str
    fingerprint: str | None
    chunks: list[ChunkOut]


class ImportResultOut(_Shape):
    path: str
    status: str
    book: str
    title: str
    format: str
    fingerprint: str
    sections: int
    chunks: int
    blocks: int
    toc_entries: int
    made_current: bool
    warnings: list[str]
    timings: dict[str, float]


class JobOut(_Shape):
    id: str
    kind: str = Field(description='"upload" or "folder".')
    state: str = Field(description="queued, running, succeeded or failed.")
    file_name: str
    phase: str | None
    done: int
    total: int
    progress: float
    fingerprint: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    result: ImportResultOut | None
    error: ErrorOut | None


class HealthOut(_Shape):
    status: str
    version: str
    books: int
    jobs_active: int
    auth: bool
    max_upload_bytes: int
    library_folder: bool


class FolderListingOut(_Shape):
    folder: str
    files: list[str]
    truncated: bool


class FolderImportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    replaces: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        description="A book this file is a new edition of: its highlights are re-anchored.",
    )
    path: str = Field(min_length=1, max_length=4096, description="Relative to the library folder.")
    size: int = Field(default=800, ge=20, le=100_000)
    overlap: int = Field(default=100, ge=0, le=50_000)
    min_size: int = Field(default=50, ge=0, le=100_000)
    nfkc: bool = False
    copy_file: bool = Field(
        default=True, alias="copy", description="Store the bytes (true) or only the path."
    )


class LocatorOut(_Shape):
    """A Readium-style Locator with W3C selectors (docs/coordinates.md, DESIGN §4)."""

    href: str
    type: str
    title: str
    locations: dict[str, Any] = Field(
        description="progression, totalProgression, position; EPUB: partialCfi, cfi, "
        'cfi_epubjs; plain text: fragments (["char=start,end"]).'
    )
    text: dict[str, str] = Field(description="before / highlight / after: raw source text.")
    source: dict[str, int] = Field(
        description="start, end (code points), utf16Start, utf16End (UTF-16 units); "
        "plain text: byteStart, byteEnd."
    )
    normalized: dict[str, int]
    section: int
    blocks: dict[str, int] | None
    selectors: list[dict[str, Any]]


class HitOut(_Shape):
    rank: int
    score: float
    scores: dict[str, Any]
    chunk: str
    book: dict[str, str]
    section: dict[str, Any]
    locator: LocatorOut
    matches: list[dict[str, Any]]


class SearchOut(_Shape):
    query: str
    mode: str
    k: int
    filters: dict[str, Any]
    terms: dict[str, Any]
    embedding: dict[str, Any] | None
    hits: list[HitOut]
    warnings: list[str]
    timings: dict[str, float]


class LocateChunkOut(_Shape):
    """A chunk of the place's section (without its text)."""

    id: str
    section: int
    index: int
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int


class LocateOut(_Shape):
    """A position → where it is: section, block, page, and the chunks containing it."""

    book: str
    bookTitle: str  # noqa: N815 - the JSON key
    href: str
    type: str
    title: str
    section: int
    locations: dict[str, Any]
    source: dict[str, int] = Field(description="position (code points), utf16Position, ...")
    normalized: dict[str, int]
    block: int | None
    page: int | None
    pageSize: int  # noqa: N815 - the JSON key
    rangeEnd: int | None = Field(  # noqa: N815 - the JSON key
        default=None, description="A range CFI: where the range ends (source code points)."
    )
    chunks: list[LocateChunkOut]


class AnchorIn(BaseModel):
    """A quote to calibrate, and where the assistant read it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    quote: str = Field(min_length=1, max_length=MAX_QUOTE_CHARS)
    section: int | None = Field(
        default=None, ge=0, le=1_000_000, description="Search this section."
    )
    chunk: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="The chunk the quote came from (id or unique prefix): searched first, "
        "then its section.",
    )
    min_prefix: int | None = Field(
        default=None,
        ge=1,
        le=MAX_QUOTE_CHARS,
        description="Shortest prefix (folded code points) that counts; default 16, 5 for CJK.",
    )


class CalibrationOut(_Shape):
    book: str
    method: str = Field(description="exact, normalized, prefix or rejected.")
    quote: str = Field(description="The raw quote, as sent.")
    exact: str | None = Field(description="The source text found (a slice of the book).")
    section: int | None
    source: dict[str, int] | None
    quoteLength: int  # noqa: N815 - the JSON key
    matchedLength: int  # noqa: N815 - the JSON key
    caseInsensitive: bool  # noqa: N815 - the JSON key
    occurrences: int
    note: str
    scope: dict[str, Any]
    minPrefix: int  # noqa: N815 - the JSON key
    locator: LocatorOut | None


class AnnotationOut(_Shape):
    """A highlight as a W3C Web Annotation, plus mindory's fields."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    context: str = Field(alias="@context")
    type: str
    id: str = Field(description="urn:uuid:…; the routes take it or the bare UUID.")
    motivation: str
    created: str
    modified: str
    body: list[dict[str, Any]]
    target: dict[str, Any]
    book: str
    section: int | None
    status: str = Field(description="anchored or orphaned.")
    source: dict[str, int] | None
    note: str | None
    color: str
    reanchored: dict[str, Any] | None


class HighlightIn(BaseModel):
    """Where to highlight: a section and a span, a range CFI, or a Locator."""

    model_config = ConfigDict(extra="forbid", strict=True)

    section: int | None = Field(default=None, ge=0, le=1_000_000)
    start: int | None = Field(
        default=None,
        ge=0,
        le=10**12,
        description="Book source coordinates (as chunks' source_start / utf16_start).",
    )
    end: int | None = Field(default=None, ge=0, le=10**12)
    unit: Literal["codepoint", "utf16"] = "codepoint"
    cfi: str | None = Field(default=None, min_length=1, max_length=8192)
    locator: dict[str, Any] | None = Field(
        default=None, description="A Locator (section, source.start/end; text.highlight checked)."
    )
    exact: str | None = Field(
        default=None, max_length=MAX_JSON_BODY_BYTES, description="Must equal the text there."
    )
    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    color: str | None = Field(default=None, min_length=1, max_length=32)


class HighlightPatch(BaseModel):
    """Fields to change; absent fields stay, a null note removes the note."""

    model_config = ConfigDict(extra="forbid", strict=True)

    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    color: str | None = Field(default=None, min_length=1, max_length=32)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Bad request (a MindoryError)."},
    401: {"model": ErrorOut, "description": "Missing or wrong bearer token."},
    403: {"model": ErrorOut, "description": "Refused (cross-origin write, no library folder)."},
    404: {"model": ErrorOut, "description": "No such book, section, resource or job."},
    413: {"model": ErrorOut, "description": "Over a stated limit."},
    422: {"model": ErrorOut, "description": "Invalid parameters, or a book file mindory refuses."},
    503: {"model": ErrorOut, "description": "The database is busy or unreachable."},
}


# Error responses of a route whose success is not JSON (server-sent events): FastAPI
# would document its errors with the success media type; they are JSON.
JSON_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {
        "description": spec["description"],
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
    }
    for status, spec in ERROR_RESPONSES.items()
}


# --------------------------------------------------------------------------- errors


def _status_of(exc: MindoryError) -> int:
    if isinstance(exc, ShuttingDown):
        return 503
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, LimitError):
        return 413
    if isinstance(exc, BookFormatError | DecodeError):
        return 422
    return 400


def _error(
    status: int, message: str, detail: Any = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": message, "detail": detail}, status_code=status, headers=headers)


class _HTTPError(StarletteHTTPException):
    """An HTTP error with a one-line message and structured detail."""

    def __init__(self, status: int, message: str, detail: Any = None) -> None:
        super().__init__(status_code=status, detail=message)
        self.extra = detail


def _allowed_methods(request: Request) -> list[str]:
    from starlette.routing import Match

    methods: set[str] = set()
    routes = getattr(request.app.state, "method_routes", None) or request.app.router.routes
    for route in routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(MindoryError)
    async def _mindory(_request: Request, exc: MindoryError) -> JSONResponse:
        text = str(exc).strip().splitlines()
        return _error(
            _status_of(exc),
            text[0] if text else type(exc).__name__,
            {"kind": type(exc).__name__},
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {
                "loc": [str(part) for part in e.get("loc", ())],
                "msg": str(e.get("msg", "")),
                "type": str(e.get("type", "")),
            }
            for e in exc.errors()
        ]
        first = problems[0] if problems else None
        where = ".".join(first["loc"]) if first else "request"
        message = f"invalid {where}: {first['msg']}" if first else "invalid request"
        return _error(422, message, problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route with this path only.
            headers["Allow"] = ", ".join(_allowed_methods(request))
        detail = getattr(exc, "extra", None)
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 413 and message == "Content Too Large":
            message = "the request body is over the size limit"
        return _error(exc.status_code, message, detail, headers or None)

    @app.exception_handler(SQLAlchemyError)
    async def _database(_request: Request, exc: SQLAlchemyError) -> JSONResponse:
        busy = isinstance(exc, OperationalError) and "locked" in str(exc).lower()
        message = "the library is busy; try again" if busy else "the library database failed"
        return _error(503, message, {"kind": type(exc).__name__}, {"Retry-After": "2"})


# --------------------------------------------------------------------------- guard


def _host_name(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class _Guard:
    """Host check (loopback without a token), cross-origin write check, bearer token,
    and a few security headers on every response."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: frozenset[str] | None,
    ) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                out.setdefault("X-Content-Type-Options", "nosniff")
                out.setdefault("Referrer-Policy", "no-referrer")
                out.setdefault("X-Frame-Options", "SAMEORIGIN")
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope, headers: Headers) -> Response | None:
        host = headers.get("host", "")
        if self.allowed_hosts is not None and _host_name(host) not in self.allowed_hosts:
            return _error(
                400,
                f"host {host!r} is not served: this server answers loopback names only "
                "(set MINDORY_TOKEN to serve other hosts)",
            )
        method = scope.get("method", "GET")
        origin = headers.get("origin")
        if method not in SAFE_METHODS and origin:
            if origin == "null":
                return _error(403, f"{method} from an opaque origin refused")
            if urlsplit(origin).netloc.lower() != host.lower():
                return _error(403, f"cross-origin {method} from {origin!r} refused")
        if self.token is None:
            return None
        path: str = scope.get("path", "/")
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            return None
        if self._authorized(headers):
            return None
        return _error(
            401,
            "missing or wrong bearer token (send Authorization: Bearer <MINDORY_TOKEN>)",
            headers={"WWW-Authenticate": 'Bearer realm="mindory"'},
        )

    def _authorized(self, headers: Headers) -> bool:
        assert self.token is not None
        given: list[bytes] = []
        auth = headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            given.append(value.strip().encode("utf-8", "surrogateescape"))
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == TOKEN_COOKIE and value:
                given.append(value.encode("utf-8", "surrogateescape"))
        ok = False
        for candidate in given:
            ok |= hmac.compare_digest(candidate, self.token)
        return ok


class _BodyTooLarge(StarletteHTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(
            status_code=413, detail=f"the request body is over the limit of {limit:,} bytes"
        )
        self.extra = {"kind": "LimitError", "limit": limit}


class _BodyLimit:
    """Refuse request bodies over a limit while they stream in (413): the upload route
    gets ``upload_limit``, every other route ``other_limit``. A declared Content-Length
    over the limit is refused before a byte is read."""

    def __init__(self, app: ASGIApp, *, upload_limit: int, other_limit: int) -> None:
        self.app = app
        self.upload_limit = upload_limit
        self.other_limit = other_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = scope.get("method") == "POST" and scope.get("path", "").rstrip("/") == "/books"
        limit = self.upload_limit if upload else self.other_limit
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._refuse(limit)(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if started:
                raise
            await self._refuse(limit)(scope, receive, send)

    @staticmethod
    def _refuse(limit: int) -> Response:
        return _error(
            413,
            f"the request body is over the limit of {limit:,} bytes",
            {"kind": "LimitError", "limit": limit},
            {"Connection": "close"},
        )


# --------------------------------------------------------------------------- EPUB resources


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
_DRIVE_RE = re.compile(r"^[A-Za-z]:")


def _guess_type(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return _EXTRA_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def _member_name(href: str) -> str:
    """The ZIP member an href names, or a 400 for names that could escape the book."""
    if not href:
        raise _HTTPError(400, "empty resource href")
    if (
        "\x00" in href
        or "\\" in href
        or href.startswith("/")
        or _DRIVE_RE.match(href)
        or any(ord(ch) < 0x20 for ch in href)
    ):
        raise _HTTPError(400, f"resource href {href!r} is not a path inside the book")
    parts = href.split("/")
    if ".." in parts:
        raise _HTTPError(400, f"resource href {href!r} leaves the book ('..')")
    return "/".join(p for p in parts if p != ".")


class _Archives:
    """A small LRU of opened EPUB archives (by book id), bounded in count and bytes."""

    def __init__(
        self, max_books: int = ARCHIVE_CACHE_BOOKS, max_bytes: int = ARCHIVE_CACHE_BYTES
    ) -> None:
        self.max_books = max_books
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[str, _Archive] = OrderedDict()

    def get(self, lib: Library, ref: str) -> _Archive:
        info = lib.book(ref)
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
        data = lib.book_file(info.id)
        archive = open_checked(data, info.file_name)
        types: dict[str, str] = {}
        with contextlib.suppress(MindoryError):
            pkg = read_package(archive)
            for entry in pkg.manifest.values():
                if entry.path and entry.media_type:
                    types[entry.path] = entry.media_type
        for sec in lib.sections(info.id):
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


def _read_resource(item: _Archive, href: str) -> tuple[bytes, str, str]:
    """(bytes, content type, etag) of one member."""
    name = _member_name(href)
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
    return data, media_type, etag


def _is_utf8(data: bytes) -> bool:
    head = data[:4096].lower()
    if b"charset" in head or data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False  # the document says it (or has a BOM): let the browser read it
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _not_modified(request: Request, etag: str) -> bool:
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


def _file_type(book_format: str, encoding: str | None) -> str:
    if book_format == "epub":
        return "application/epub+zip"
    charset = _CHARSETS.get((encoding or "").lower().replace("_", "-")) or _CHARSETS.get(
        (encoding or "").lower()
    )
    return f"text/plain; charset={charset}" if charset else "text/plain"


def _safe_file_name(raw: str | None) -> str:
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


def _settings(size: int, overlap: int, min_size: int, nfkc: bool) -> Settings:
    try:
        return Settings(
            profile=NormalizeProfile(unicode_form="NFKC" if nfkc else "NFC"),
            chunking=ChunkSettings(size=size, overlap=overlap, min_size=min_size),
        )
    except ValueError as exc:
        raise _HTTPError(422, f"invalid chunk settings: {exc}", {"kind": "ValueError"}) from exc


def _content_disposition(file_name: str) -> str:
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


def _locator_span(locator: dict[str, Any]) -> tuple[int, int, int, str | None]:
    """(section, source start, source end, text.highlight) of a Locator sent by a client."""
    try:
        section = locator["section"]
        source = locator["source"]
        start, end = source["start"], source["end"]
    except (KeyError, TypeError) as exc:
        raise _HTTPError(
            422, "a locator needs section and source.start / source.end (code points)"
        ) from exc
    numbers = (section, start, end)
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in numbers):
        raise _HTTPError(422, "a locator's section and source.start / source.end are integers")
    text = locator.get("text")
    quoted = text.get("highlight") if isinstance(text, dict) else None
    return section, start, end, quoted if isinstance(quoted, str) else None


Fingerprint = Annotated[
    str | None,
    Query(min_length=1, max_length=64, description="A derivation other than the current one."),
]


# --------------------------------------------------------------------------- the app


def create_app(
    library_path_or_url: str | os.PathLike[str] | None,
    *,
    token: str | None = None,
    library_folder: str | os.PathLike[str] | None = None,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
    allowed_hosts: Iterable[str] | None = None,
    upload_dir: str | os.PathLike[str] | None = None,
    import_workers: int = 1,
    import_isolation: Isolation | None = None,
) -> FastAPI:
    """The mindory HTTP API over the library at ``library_path_or_url`` (see
    :func:`mindory.library.resolve_url`; None: the default library).

    ``token``: require ``Authorization: Bearer <token>``. ``allowed_hosts``: the
    ``Host`` names served; default: loopback names without a token, any with one.
    ``library_folder``: files under it may be imported by path. ``import_isolation``:
    where imports run (:mod:`mindory.server.jobs`); default: a child process.
    """
    if max_upload_bytes < 1:
        raise ValueError("max_upload_bytes must be positive")
    url, db_file = resolve_url(library_path_or_url)
    if db_file is None and url.startswith("sqlite"):
        # Every pooled connection would see its own empty database.
        raise MindoryError("an in-memory SQLite library cannot be served; give a file or URL")
    lib = Library.open(url)
    folder = Path(library_folder).expanduser().resolve() if library_folder is not None else None
    if folder is not None and not folder.is_dir():
        lib.close()
        raise MindoryError("the library folder is not a folder", path=str(folder))
    uploads = Path(upload_dir) if upload_dir is not None else None
    isolation: Isolation = import_isolation or "process"
    jobs = JobManager(url, workers=import_workers, isolation=isolation)
    archives = _Archives()
    if allowed_hosts is not None:
        hosts: frozenset[str] | None = frozenset(h.lower() for h in allowed_hosts)
    else:
        hosts = None if token else LOOPBACK_HOSTS

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            jobs.close(wait=True)
            lib.close()

    docs_assets = _docs_assets()
    app = FastAPI(
        title="mindory",
        version=VERSION,
        summary="Exact places for every search hit in your books.",
        description=(
            "Thin HTTP door over mindory's Library: every route returns the same JSON as "
            "`mindory ... --json`. Positions: `source_*` code points of the source text, "
            "`utf16_*` the same places in UTF-16 units (what a browser counts), `start`/`end` "
            'code points of the normalized text. Errors: `{"error": ..., "detail": ...}`.'
        ),
        lifespan=lifespan,
        docs_url=None if docs_assets else "/docs",
        redoc_url=None,
    )
    app.state.library = lib
    app.state.jobs = jobs
    app.state.max_upload_bytes = max_upload_bytes
    _install_error_handlers(app)
    app.add_middleware(
        _BodyLimit,
        upload_limit=max_upload_bytes + MULTIPART_SLACK_BYTES,
        other_limit=MAX_JSON_BODY_BYTES,
    )
    app.add_middleware(_Guard, token=token, allowed_hosts=hosts)  # outermost: runs first

    dependencies = [Depends(HTTPBearer(auto_error=False))] if token else []
    api = APIRouter(responses=ERROR_RESPONSES, dependencies=dependencies)

    # ------------------------------------------------------------------ health

    @api.get("/health", response_model=HealthOut, tags=["server"])
    def health() -> dict[str, Any]:
        """Liveness and a few facts (also checks the database answers)."""
        return {
            "status": "ok",
            "version": VERSION,
            "books": len(lib.books()),
            "jobs_active": jobs.active(),
            "auth": token is not None,
            "max_upload_bytes": max_upload_bytes,
            "library_folder": folder is not None,
        }

    # ------------------------------------------------------------------ books

    @api.get(
        "/books", response_model=list[BookOut], response_model_exclude_unset=True, tags=["books"]
    )
    def list_books() -> list[dict[str, Any]]:
        """Every book, by title (`mindory books --json`)."""
        return [b.to_json() for b in lib.books()]

    @api.post(
        "/books",
        status_code=202,
        response_model=JobOut,
        tags=["books"],
        openapi_extra={"x-max-upload-bytes": max_upload_bytes},
    )
    def upload_book(
        response: Response,
        file: Annotated[UploadFile, File(description="An .epub or a plain-text file.")],
        size: Annotated[int, Query(ge=20, le=100_000, description="Window size.")] = 800,
        overlap: Annotated[int, Query(ge=0, le=50_000)] = 100,
        min_size: Annotated[int, Query(ge=0, le=100_000, description="Shortest tail.")] = 50,
        nfkc: Annotated[bool, Query(description="Normalize with NFKC, not NFC.")] = False,
        replaces: Annotated[
            str | None,
            Form(
                min_length=1,
                max_length=512,
                description="A book (ref) this file is a new edition of: every highlight "
                "of that book is re-anchored onto the new one (the job's result reports "
                "each under `reanchored`).",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Upload a book and import it in the background.

        Returns 202 and the job (`Location: /jobs/{id}`); follow it with
        `GET /jobs/{id}` or `GET /jobs/{id}/events`. A file mindory refuses
        ends the job `failed`, naming the file; nothing is written then.
        """
        settings = _settings(size, overlap, min_size, nfkc)
        old = lib.book(replaces).id if replaces is not None else None
        name = _safe_file_name(file.filename)
        if uploads is not None:
            uploads.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="mindory-upload-", dir=uploads))
        try:
            dest = tmp / name
            written = 0
            with dest.open("wb") as out:
                while block := file.file.read(1 * MiB):
                    written += len(block)
                    if written > max_upload_bytes:
                        raise LimitError(
                            f"the upload is over the limit of {max_upload_bytes:,} bytes",
                            path=name,
                        )
                    out.write(block)
            job = jobs.submit(
                dest,
                file_name=name,
                kind="upload",
                settings=settings,
                copy=True,
                cleanup=tmp,
                replaces=old,
            )
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        response.headers["Location"] = f"/jobs/{job['id']}"
        return job

    @api.get(
        "/books/{book}",
        response_model=BookDetailOut,
        response_model_exclude_unset=True,
        tags=["books"],
    )
    def get_book(book: BookRef) -> dict[str, Any]:
        """Metadata, sections and the nested table of contents with jump positions
        (`mindory show BOOK --toc --json`)."""
        info = lib.book(book)
        sections = lib.sections(info.id)
        toc = lib.toc(info.id)
        return {
            **info.to_json(),
            "sections": [s.to_json() for s in sections],
            "toc": [n.to_json() for n in toc],
        }

    @api.delete(
        "/books/{book}", response_model=BookOut, response_model_exclude_unset=True, tags=["books"]
    )
    def delete_book(book: BookRef) -> dict[str, Any]:
        """Delete a book and everything derived from it; returns what was deleted."""
        info = lib.delete_book(book)
        archives.forget(info.id)
        return info.to_json()

    @api.get(
        "/books/{book}/file",
        tags=["books"],
        response_class=Response,
        responses={
            200: {
                "description": "The original file's bytes.",
                "content": {
                    "application/epub+zip": {"schema": {"type": "string", "format": "binary"}},
                    "text/plain": {"schema": {"type": "string", "format": "binary"}},
                },
            },
            304: {"description": "Not modified (If-None-Match)."},
        },
    )
    def book_file(book: BookRef, request: Request) -> Response:
        """The original file, byte for byte (EPUB, or the text in its own encoding)."""
        info = lib.book(book)
        etag = f'"{info.id}"'
        headers = {"ETag": etag, "Cache-Control": "private, no-cache"}
        if _not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        data = lib.book_file(info.id)
        headers["Content-Disposition"] = _content_disposition(info.file_name)
        return Response(data, media_type=_file_type(info.format, info.encoding), headers=headers)

    @api.get(
        "/books/{book}/resources/{href:path}",
        tags=["books"],
        response_class=Response,
        responses={
            200: {
                "description": "The member's bytes, with its manifest media type.",
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            },
            304: {"description": "Not modified (If-None-Match)."},
        },
    )
    def book_resource(
        book: BookRef,
        href: Annotated[str, PathParam(description="ZIP path inside the EPUB.")],
        request: Request,
    ) -> Response:
        """Any file inside an EPUB by its ZIP path (XHTML, CSS, images, fonts).

        Paths that would leave the book (`..`, absolute, backslashes) are 400;
        names not in the archive are 404. Served with a sandboxing CSP.
        """
        _member_name(href)  # refuse escaping names before looking the book up
        item = archives.get(lib, book)
        data, media_type, etag = _read_resource(item, href)
        headers = {
            "ETag": etag,
            "Cache-Control": "private, no-cache",
            "Content-Security-Policy": RESOURCE_CSP,
        }
        if _not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        return Response(data, media_type=media_type, headers=headers)

    # ------------------------------------------------------------------ reading

    @api.get("/books/{book}/sections", response_model=list[SectionOut], tags=["reading"])
    def list_sections(book: BookRef, fingerprint: Fingerprint = None) -> list[dict[str, Any]]:
        """The book's sections (spine items / chapters) without their texts."""
        return [s.to_json() for s in lib.sections(book, fingerprint=fingerprint)]

    @api.get("/books/{book}/sections/{n}", response_model=SectionDetailOut, tags=["reading"])
    def get_section(book: BookRef, n: SectionNo, fingerprint: Fingerprint = None) -> dict[str, Any]:
        """One section: source text (exactly what a DOM holds / the decoded file slice),
        normalized text, offset map, href and title."""
        return lib.section(book, n, fingerprint=fingerprint).to_json()

    @api.get("/books/{book}/sections/{n}/blocks", response_model=BlockPageOut, tags=["reading"])
    def get_blocks(
        book: BookRef,
        n: SectionNo,
        page: Annotated[int, Query(ge=1, le=1_000_000, description="From 1.")] = 1,
        page_size: Annotated[int, Query(ge=1, le=1000)] = 50,
        fingerprint: Fingerprint = None,
    ) -> dict[str, Any]:
        """One page of a section's render blocks (`mindory blocks --json`)."""
        return lib.blocks(book, n, page, page_size, fingerprint=fingerprint).to_json()

    @api.get(
        "/books/{book}/chunks",
        response_model=ChunkPageOut,
        response_model_exclude_unset=True,
        tags=["reading"],
    )
    def get_chunks(
        book: BookRef,
        section: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
        offset: Annotated[int, Query(ge=0, le=1_000_000_000, description="Skip this many.")] = 0,
        limit: Annotated[int, Query(ge=1, le=5000)] = 200,
        fingerprint: Fingerprint = None,
    ) -> dict[str, Any]:
        """Chunks in reading order with exact spans, and CFIs for EPUB
        (`mindory chunks --json`)."""
        info = lib.book(book)
        items = lib.chunks(
            info.id,
            section=section,
            fingerprint=fingerprint,
            offset=offset,
            limit=limit,
            with_cfi=True,
        )
        current = info.current
        return {
            "book": info.id,
            "fingerprint": fingerprint or (current.fingerprint if current else None),
            "chunks": [c.to_json() for c in items],
        }

    # ------------------------------------------------------------------ search, locate

    @api.get("/search", response_model=SearchOut, tags=["search"])
    def search(
        q: Annotated[str, Query(min_length=1, max_length=2000, description="The query.")],
        book: Annotated[
            str | None, Query(min_length=1, max_length=512, description="Only this book.")
        ] = None,
        section: Annotated[
            int | None, Query(ge=0, le=1_000_000, description="Only this section (needs book).")
        ] = None,
        k: Annotated[int, Query(ge=1, le=MAX_SEARCH_K, description="Number of hits.")] = 10,
        mode: Annotated[
            Literal["hybrid", "lexical", "vector"],
            Query(description="Fused ranks (default), full-text alone, or vectors alone."),
        ] = "hybrid",
        page_size: Annotated[int, Query(ge=1, le=1000, description="Blocks per page.")] = 20,
    ) -> dict[str, Any]:
        """Search the library; every hit is a chunk with its Locator and the source spans
        of the query's words in it (`mindory search --json`)."""
        return lib.search(
            q, k=k, mode=mode, book=book, section=section, page_size=page_size
        ).to_json()

    @api.get(
        "/books/{book}/locate",
        response_model=LocateOut | LocatorOut,
        response_model_exclude_unset=True,
        tags=["search"],
    )
    def locate(
        book: BookRef,
        cfi: Annotated[
            str | None, Query(min_length=1, max_length=8192, description="An EPUB CFI.")
        ] = None,
        section: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
        offset: Annotated[
            int | None,
            Query(ge=0, le=10**12, description="From the start of the section's source text."),
        ] = None,
        unit: Annotated[
            Literal["codepoint", "utf16"], Query(description="What `offset` counts.")
        ] = "codepoint",
        chunk: Annotated[
            str | None, Query(min_length=1, max_length=64, description="A chunk id or prefix.")
        ] = None,
        page_size: Annotated[int, Query(ge=1, le=1000, description="Blocks per page.")] = 20,
    ) -> dict[str, Any]:
        """Where a place is (`mindory locate --json`): a CFI, or a section and an offset
        in its source text → section, block, page, both CFIs or the `char=` fragment, and
        the chunks containing it. With `chunk`: that chunk's Locator instead."""
        if chunk is not None:
            if cfi is not None or section is not None or offset is not None:
                raise _HTTPError(422, "give a chunk, or a CFI, or a section and an offset")
            return lib.locate_chunk(book, chunk, page_size=page_size).to_json()
        if (cfi is None) == (section is None or offset is None) or (
            cfi is not None and (section is not None or offset is not None)
        ):
            raise _HTTPError(422, "give a CFI, or a section and an offset (or a chunk)")
        return lib.locate(
            book,
            cfi=cfi,
            section=section,
            offset=offset,
            utf16=unit == "utf16",
            page_size=page_size,
        ).to_json()

    # ------------------------------------------------------------------ anchors, highlights

    @api.post("/books/{book}/anchors", response_model=CalibrationOut, tags=["highlights"])
    def calibrate(book: BookRef, body: AnchorIn) -> dict[str, Any]:
        """Quote calibration: where in the book a quote (an assistant's citation) is.

        `method`: `exact` (it occurs literally), `normalized` (it occurs once whitespace,
        line breaks, full/half width, quote marks, dashes and then case are folded),
        `prefix` (only its longest prefix of at least `minPrefix` folded code points
        occurs — 16, or 5 for mostly-CJK quotes), `rejected` (`exact`, `source` and
        `locator` null). `exact` is always text of the book, never the quote; `quote` is
        the quote as sent. A `chunk` is searched first, then its section; a `section`
        alone; else the whole book.
        """
        return lib.calibrate_quote(
            book, body.quote, section=body.section, chunk=body.chunk, min_prefix=body.min_prefix
        ).to_json()

    @api.get("/books/{book}/highlights", response_model=list[AnnotationOut], tags=["highlights"])
    def list_highlights(
        book: BookRef,
        section: Annotated[
            int | None, Query(ge=0, le=1_000_000, description="Anchored ones in this section.")
        ] = None,
        status: Annotated[Literal["anchored", "orphaned"] | None, Query()] = None,
    ) -> list[dict[str, Any]]:
        """The book's highlights as W3C Web Annotations, in reading order (orphans last)."""
        return [h.to_json() for h in lib.highlights(book, section=section, status=status)]

    @api.post(
        "/books/{book}/highlights",
        status_code=201,
        response_model=AnnotationOut,
        tags=["highlights"],
    )
    def create_highlight(book: BookRef, body: HighlightIn, response: Response) -> dict[str, Any]:
        """Store a highlight: `section` + `start`/`end` (book source coordinates in `unit`
        code points or UTF-16 units — as a chunk's `source_start` / `utf16_start`), or a
        range `cfi` (EPUB), or a `locator`. `exact`, if sent, must be the text there.
        Returns 201, the annotation and `Location`."""
        section, start, end, exact = body.section, body.start, body.end, body.exact
        unit = body.unit
        if body.locator is not None:
            if start is not None or end is not None or body.cfi is not None:
                raise _HTTPError(422, "give a locator, or a span, or a CFI — one of them")
            section, start, end, quoted = _locator_span(body.locator)
            unit = "codepoint"
            exact = exact if exact is not None else quoted
        made = lib.add_highlight(
            book,
            section=section,
            start=start,
            end=end,
            unit=unit,
            cfi=body.cfi,
            exact=exact,
            note=body.note,
            color=body.color,
        )
        response.headers["Location"] = f"/books/{made.book}/highlights/{made.id}"
        return made.to_json()

    @api.get(
        "/books/{book}/highlights/{highlight}",
        response_model=AnnotationOut,
        tags=["highlights"],
    )
    def get_highlight(book: BookRef, highlight: HighlightRef) -> dict[str, Any]:
        """One highlight."""
        return lib.highlight(book, highlight).to_json()

    @api.patch(
        "/books/{book}/highlights/{highlight}",
        response_model=AnnotationOut,
        tags=["highlights"],
    )
    def update_highlight(
        book: BookRef, highlight: HighlightRef, body: HighlightPatch
    ) -> dict[str, Any]:
        """Change the note and/or colour (absent: unchanged; `"note": null`: no note)."""
        given = body.model_fields_set
        if "color" in given and body.color is None:
            raise _HTTPError(422, "a highlight always has a colour; send one, or leave it out")
        note: str | None | Unset = body.note if "note" in given else UNSET
        color: str | Unset = body.color if body.color is not None else UNSET
        return lib.update_highlight(book, highlight, note=note, color=color).to_json()

    @api.delete(
        "/books/{book}/highlights/{highlight}",
        response_model=AnnotationOut,
        tags=["highlights"],
    )
    def delete_highlight(book: BookRef, highlight: HighlightRef) -> dict[str, Any]:
        """Delete a highlight; returns it as it was."""
        return lib.delete_highlight(book, highlight).to_json()

    # ------------------------------------------------------------------ jobs

    def existing_job(job_id: Annotated[str, PathParam(min_length=1, max_length=64)]) -> str:
        if not jobs.exists(job_id):
            raise NotFoundError(f"no import job {job_id!r} (jobs are kept in memory only)")
        return job_id

    @api.get("/jobs", response_model=list[JobOut], tags=["jobs"])
    def list_jobs() -> list[dict[str, Any]]:
        """Import jobs this server remembers, newest first."""
        return jobs.all_jobs()

    @api.get("/jobs/{job_id}", response_model=JobOut, tags=["jobs"])
    def get_job(job_id: Annotated[str, Depends(existing_job)]) -> dict[str, Any]:
        """One import job: state, phase, progress, and the result or the error."""
        return jobs.get(job_id)

    @api.get(
        "/jobs/{job_id}/events",
        response_class=EventSourceResponse,
        tags=["jobs"],
        responses={
            **JSON_ERROR_RESPONSES,
            200: {
                "description": "Server-sent events: `progress` (the job's JSON) on every "
                "change, then one `done` with the finished job, then the stream ends.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
        },
    )
    async def job_events(
        job_id: Annotated[str, Depends(existing_job)],
    ) -> AsyncIterator[ServerSentEvent]:
        """Follow a job as server-sent events until it has finished."""
        async for snapshot in jobs.follow(job_id):
            finished = snapshot["state"] in ("succeeded", "failed")
            yield ServerSentEvent(
                data=snapshot,
                event="done" if finished else "progress",
                id=str(snapshot["id"]),
            )

    # ------------------------------------------------------------------ library folder

    def require_folder() -> Path:
        if folder is None:
            raise _HTTPError(
                403, "this server has no library folder (start it with --library-folder)"
            )
        return folder

    @api.get("/library-folder", response_model=FolderListingOut, tags=["library folder"])
    def list_folder(root: Annotated[Path, Depends(require_folder)]) -> dict[str, Any]:
        """Importable files (.epub, .txt) under the configured library folder."""
        found: list[str] = []
        truncated = False
        for f in book_files_in([root]):
            if len(found) >= MAX_FOLDER_LISTING:
                truncated = True
                break
            found.append(f.relative_to(root).as_posix())
        return {"folder": str(root), "files": found, "truncated": truncated}

    @api.post(
        "/library-folder/import", status_code=202, response_model=JobOut, tags=["library folder"]
    )
    def import_from_folder(
        body: FolderImportIn,
        response: Response,
        root: Annotated[Path, Depends(require_folder)],
    ) -> dict[str, Any]:
        """Import a file under the library folder (path relative to it) in the background."""
        rel = body.path.replace("\\", "/")
        if "\x00" in rel or rel.startswith("/") or _DRIVE_RE.match(rel):
            raise _HTTPError(400, f"{body.path!r} is not a path relative to the library folder")
        target = (root / rel).resolve()
        if not target.is_relative_to(root):
            raise _HTTPError(400, f"{body.path!r} is outside the library folder")
        if not target.is_file():
            raise NotFoundError(f"no file {body.path!r} in the library folder")
        if target.suffix.lower() not in BOOK_SUFFIXES:
            raise _HTTPError(400, f"{body.path!r} is not an .epub or .txt file")
        settings = _settings(body.size, body.overlap, body.min_size, body.nfkc)
        old = lib.book(body.replaces).id if body.replaces is not None else None
        job = jobs.submit(
            target,
            file_name=target.relative_to(root).as_posix(),
            kind="folder",
            settings=settings,
            copy=body.copy_file,
            replaces=old,
        )
        response.headers["Location"] = f"/jobs/{job['id']}"
        return job

    app.include_router(api)

    # ------------------------------------------------------------------ reader page, docs

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(
            STATIC_DIR / "index.html",
            media_type="text/html; charset=utf-8",
            headers={"Content-Security-Policy": INDEX_CSP, "Cache-Control": "no-cache"},
        )

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    if docs_assets is not None:
        app.mount("/docs-assets", StaticFiles(directory=docs_assets), name="docs-assets")

        @app.get("/docs", include_in_schema=False)
        def docs() -> HTMLResponse:
            return get_swagger_ui_html(
                openapi_url="/openapi.json",
                title="mindory API",
                oauth2_redirect_url="/docs/oauth2-redirect",
                swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                swagger_css_url="/docs-assets/swagger-ui.css",
                swagger_favicon_url="/docs-assets/favicon.png",
            )

        @app.get("/docs/oauth2-redirect", include_in_schema=False)
        def docs_redirect() -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()

    # Every route with methods (the included router's too), to answer 405 with a true Allow.
    app.state.method_routes = [
        r for r in (*api.routes, *app.router.routes) if getattr(r, "methods", None)
    ]
    return app


def _docs_assets() -> Path | None:
    """Swagger UI files shipped by the fastapi-offline package (no CDN), if installed."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    path = Path(fastapi_offline.__file__).resolve().parent / "static"
    return path if (path / "swagger-ui-bundle.js").is_file() else None
