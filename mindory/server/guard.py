"""What every request passes before a route runs, and how errors leave: the host and
origin checks, the bearer token, the body limits, and the one JSON error shape
(``{"error": ..., "detail": ...}``) with its status per mindory error."""

import hmac
import importlib.metadata
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from fastapi import (
    FastAPI,
    Request,
    Response,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mindory.errors import (
    BookFormatError,
    ConflictError,
    DecodeError,
    LimitError,
    MindoryError,
    NotFoundError,
)
from mindory.reading.positions import LOCAL_READER
from mindory.server.jobs import ShuttingDown

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
PUBLIC_PATHS = frozenset(
    {"/", "/favicon.ico", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/opds/v2/auth.json"}
)
# KOReader's sync routes check its own headers (x-auth-user, x-auth-key) and answer the
# protocol's errors themselves (mindory/server/routes/kosync.py).
PUBLIC_PREFIXES = ("/static/", "/docs-assets/", "/kosync/")
OPDS_PREFIX = "/opds"
OPDS2_PREFIX = "/opds/v2"
BASIC_REALM = 'Basic realm="mindory", charset="UTF-8"'
OPDS_AUTH_TYPE = "application/opds-authentication+json"
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


# --------------------------------------------------------------------------- errors


def status_of(exc: MindoryError) -> int:
    if isinstance(exc, ShuttingDown):
        return 503
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, LimitError):
        return 413
    if isinstance(exc, BookFormatError | DecodeError):
        return 422
    return 400


def error_response(
    status: int, message: str, detail: Any = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": message, "detail": detail}, status_code=status, headers=headers)


class HTTPError(StarletteHTTPException):
    """An HTTP error with a one-line message and structured detail."""

    def __init__(self, status: int, message: str, detail: Any = None) -> None:
        super().__init__(status_code=status, detail=message)
        self.extra = detail


def allowed_methods(request: Request) -> list[str]:
    from starlette.routing import Match

    methods: set[str] = set()
    routes = getattr(request.app.state, "method_routes", None) or request.app.router.routes
    for route in routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(MindoryError)
    async def _mindory(_request: Request, exc: MindoryError) -> JSONResponse:
        text = str(exc).strip().splitlines()
        detail: dict[str, Any] = {"kind": type(exc).__name__}
        if isinstance(exc, ConflictError):
            detail["current"] = exc.current
        return error_response(
            status_of(exc),
            text[0] if text else type(exc).__name__,
            detail,
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
        raw = exc.errors()[0] if problems else {}
        if raw.get("type") == "json_invalid":
            # FastAPI puts the decode error's position in loc ("body", 26): say it.
            loc = raw.get("loc", ())
            reason = str((raw.get("ctx") or {}).get("error") or "JSON decode error")
            at = f" at character {loc[1]}" if len(loc) > 1 and isinstance(loc[1], int) else ""
            message = f"the body is not valid JSON: {reason}{at}"
        return error_response(422, message, problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route with this path only.
            headers["Allow"] = ", ".join(allowed_methods(request))
        detail = getattr(exc, "extra", None)
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 413 and message == "Content Too Large":
            message = "the request body is over the size limit"
        return error_response(exc.status_code, message, detail, headers or None)

    @app.exception_handler(SQLAlchemyError)
    async def _database(_request: Request, exc: SQLAlchemyError) -> JSONResponse:
        busy = isinstance(exc, OperationalError) and "locked" in str(exc).lower()
        message = "the library is busy; try again" if busy else "the library database failed"
        return error_response(503, message, {"kind": type(exc).__name__}, {"Retry-After": "2"})


# --------------------------------------------------------------------------- guard


def host_name(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Readers(Protocol):
    """Who a token belongs to (the library's readers; docs/reading-state.md)."""

    def has_readers(self) -> bool: ...

    def reader_for_token(self, token: str) -> str | None: ...

    def reader_for_password(self, name: str, password: str) -> str | None: ...


def reader_of(scope: Scope) -> str:
    """The reader the guard found for this request (the local reader without readers)."""
    state = scope.get("state") or {}
    return str(state.get("reader", LOCAL_READER))


class Guard:
    """Host check (loopback without a token), cross-origin write check, bearer token —
    the server's own (the local reader) or a reader's — and a few security headers on
    every response. The reader is put in ``scope["state"]["reader"]``.

    Without a server token and without readers everything is the local reader's and no
    token is needed (as on a single-user loopback server). Once readers exist, every API
    request needs a token; an unknown one is refused (401) before any route runs."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: frozenset[str] | None,
        readers: Readers | None = None,
    ) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.allowed_hosts = allowed_hosts
        self.readers = readers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is None:
            refusal = await self._reader(scope, headers)
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
        if self.allowed_hosts is not None and host_name(host) not in self.allowed_hosts:
            return error_response(
                400,
                f"host {host!r} is not served: this server answers loopback names only "
                "(set MINDORY_TOKEN to serve other hosts)",
            )
        method = scope.get("method", "GET")
        origin = headers.get("origin")
        if method not in SAFE_METHODS and origin:
            if origin == "null":
                return error_response(403, f"{method} from an opaque origin refused")
            if urlsplit(origin).netloc.lower() != host.lower():
                return error_response(403, f"cross-origin {method} from {origin!r} refused")
        return None

    async def _reader(self, scope: Scope, headers: Headers) -> Response | None:
        """Find the request's reader (or refuse it: 401)."""
        state = scope.setdefault("state", {})
        state["reader"] = LOCAL_READER
        path: str = scope.get("path", "/")
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            return None
        if scope.get("method") == "OPTIONS" and "access-control-request-method" in headers:
            return None  # a CORS preflight carries no credentials (Fetch spec); it reads nothing
        given = self._given(headers)
        basic = basic_credentials(headers.get("authorization", ""))
        if self.token is not None and self._authorized(given):
            return None
        readers = self.readers
        if readers is not None:
            for candidate in given:
                found = await run_in_threadpool(
                    readers.reader_for_token, candidate.decode("utf-8", "surrogateescape")
                )
                if found is not None:
                    state["reader"] = found
                    return None
            if basic is not None:
                found = await run_in_threadpool(readers.reader_for_password, *basic)
                if found is not None:
                    state["reader"] = found
                    return None
        sent = bool(given) or basic is not None
        if self.token is None:
            has = readers is not None and await run_in_threadpool(readers.has_readers)
            if not has:
                return None  # one implicit local reader, no credentials needed (as today)
            if basic is not None:
                message = "wrong user name or password (HTTP Basic)"
            elif sent:
                message = "unknown bearer token: it is no reader's (see `mindory users list`)"
            else:
                message = (
                    "this library has readers: send your token (Authorization: Bearer "
                    "<token>, from `mindory users add`) or your user name and password "
                    "(HTTP Basic, set with `mindory users passwd`)"
                )
        else:
            if basic is not None:
                message = "wrong user name or password (HTTP Basic)"
            elif sent:
                message = "unknown bearer token: neither MINDORY_TOKEN nor a reader's"
            else:
                message = (
                    "missing credentials (send Authorization: Bearer <MINDORY_TOKEN or a "
                    "reader's token>, or a reader's user name and password as HTTP Basic)"
                )
        return unauthorized(path, message)

    @staticmethod
    def _given(headers: Headers) -> list[bytes]:
        given: list[bytes] = []
        auth = headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            given.append(value.strip().encode("utf-8", "surrogateescape"))
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == TOKEN_COOKIE and value:
                given.append(value.encode("utf-8", "surrogateescape"))
        return given

    def _authorized(self, given: list[bytes]) -> bool:
        assert self.token is not None
        ok = False
        for candidate in given:
            ok |= hmac.compare_digest(candidate, self.token)
        return ok


def basic_credentials(authorization: str) -> tuple[str, str] | None:
    """(user name, password) of an ``Authorization: Basic`` header, or None."""
    import base64
    import binascii

    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    name, colon, password = decoded.partition(":")
    if not colon or not name:
        return None
    return name, password


def unauthorized(path: str, message: str) -> Response:
    """401 with the challenge the client at ``path`` understands: HTTP Basic for the OPDS
    catalogue (e-ink apps send nothing else; OPDS 2 also gets its authentication
    document as the body), Bearer for the API."""
    if path == OPDS2_PREFIX or path.startswith(OPDS2_PREFIX + "/"):
        from mindory.server.opds.auth import authentication_document

        return JSONResponse(
            authentication_document(""),
            status_code=401,
            media_type=OPDS_AUTH_TYPE,
            headers={"WWW-Authenticate": BASIC_REALM},
        )
    if path == OPDS_PREFIX or path.startswith(OPDS_PREFIX + "/"):
        return error_response(
            401, message, {"kind": "Unauthorized"}, headers={"WWW-Authenticate": BASIC_REALM}
        )
    return error_response(
        401,
        message,
        {"kind": "Unauthorized"},
        headers={"WWW-Authenticate": 'Bearer realm="mindory"'},
    )


class BodyTooLarge(StarletteHTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(
            status_code=413, detail=f"the request body is over the limit of {limit:,} bytes"
        )
        self.extra = {"kind": "LimitError", "limit": limit}


class BodyLimit:
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
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(limit)(scope, receive, send)

    @staticmethod
    def _refuse(limit: int) -> Response:
        return error_response(
            413,
            f"the request body is over the limit of {limit:,} bytes",
            {"kind": "LimitError", "limit": limit},
            {"Connection": "close"},
        )
