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
import os
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

from fastapi import (
    APIRouter,
    Depends,
    FastAPI,
    Response,
)
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.security import HTTPBearer
from fastapi.staticfiles import StaticFiles

from mindory.errors import MindoryError
from mindory.library import Library, resolve_url
from mindory.server.guard import (
    DEFAULT_MAX_UPLOAD_BYTES,
    INDEX_CSP,
    LOOPBACK_HOSTS,
    MAX_JSON_BODY_BYTES,
    MULTIPART_SLACK_BYTES,
    STATIC_DIR,
    VERSION,
    BodyLimit,
    Guard,
    install_error_handlers,
)
from mindory.server.jobs import Isolation, JobManager
from mindory.server.params import ServerContext
from mindory.server.routes import annotations as annotation_routes
from mindory.server.routes import books, highlights, kosync, opds, positions, reading, readium
from mindory.server.routes import jobs as job_routes
from mindory.server.shapes import ERROR_RESPONSES


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
    kosync_registration: bool = False,
) -> FastAPI:
    """The mindory HTTP API over the library at ``library_path_or_url`` (see
    :func:`mindory.library.resolve_url`; None: the default library).

    ``token``: require ``Authorization: Bearer <token>``. ``allowed_hosts``: the
    ``Host`` names served; default: loopback names without a token, any with one.
    ``library_folder``: files under it may be imported by path. ``import_isolation``:
    where imports run (:mod:`mindory.server.jobs`); default: a child process.
    ``import_workers``: import jobs this process runs at once (0: none, the jobs wait for
    another server or a ``mindory worker``; jobs are database rows).
    ``kosync_registration``: KOReader's "register" creates readers (off: the protocol's
    refusal, 402 "User registration is disabled.").
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
    if allowed_hosts is not None:
        hosts: frozenset[str] | None = frozenset(h.lower() for h in allowed_hosts)
    else:
        hosts = None if token else LOOPBACK_HOSTS

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        jobs.start()  # the worker threads also run jobs queued elsewhere (another server)
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
    install_error_handlers(app)
    app.add_middleware(
        BodyLimit,
        upload_limit=max_upload_bytes + MULTIPART_SLACK_BYTES,
        other_limit=MAX_JSON_BODY_BYTES,
    )
    # outermost: runs first; finds the reader of every request (docs/reading-state.md)
    app.add_middleware(Guard, token=token, allowed_hosts=hosts, readers=lib)

    dependencies = [Depends(HTTPBearer(auto_error=False))] if token else []
    api = APIRouter(responses=ERROR_RESPONSES, dependencies=dependencies)

    ctx = ServerContext(lib, jobs, token, folder, uploads, max_upload_bytes, kosync_registration)
    for routes in (books, reading, highlights, annotation_routes, positions, job_routes):
        routes.add_routes(api, ctx)
    # reading apps (docs/apps.md): OPDS catalogues, Readium manifests, KOReader sync
    for routes in (opds, readium, kosync):
        routes.add_routes(api, ctx)
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
