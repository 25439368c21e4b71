"""``mindory serve``: run the HTTP API (:mod:`mindory.server.app`) under uvicorn.

Binds to 127.0.0.1 by default. Binding to any other address needs a token in
``MINDORY_TOKEN`` (the server refuses to start without one); with a token set,
every API request must carry ``Authorization: Bearer <token>``.

``--workers N`` runs N uvicorn processes, each with its own app (engine, import worker
threads, import child); on a SQLite library more than one is refused, naming PostgreSQL
(:func:`check_workers`). Import jobs are database rows, so every process reports every
job (docs/deploy.md, "Workers").

Run it as ``mindory serve`` or ``python -m mindory.server.serve``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click
from sqlalchemy.engine import make_url

from mindory.errors import MindoryError
from mindory.library import resolve_url
from mindory.server.app import create_app
from mindory.server.guard import DEFAULT_MAX_UPLOAD_BYTES, is_loopback

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["app_from_env", "check_bind", "check_workers", "serve"]

APP_SETTINGS_ENV = "MINDORY_SERVE_APP"  # serve --workers N: the settings of every process

MIN_TOKEN_CHARS = 16


def check_bind(host: str, token: str | None) -> None:
    """Refuse (MindoryError) to bind a non-loopback host without a (long enough) token."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise MindoryError(
            f"MINDORY_TOKEN is too short ({len(token)} characters; use at least "
            f"{MIN_TOKEN_CHARS}, e.g. `python -c 'import secrets; print(secrets.token_urlsafe())'`)"
        )
    if not is_loopback(host) and not token:
        raise MindoryError(
            f"refusing to serve on {host}: binding to anything but loopback needs a token; "
            "set MINDORY_TOKEN (clients then send Authorization: Bearer <token>)"
        )


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--db",
    "db",
    metavar="PATH",
    help="The library (SQLite file or database URL); default: the one `mindory --db` names.",
)
@click.option(
    "--library-folder",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Allow importing files under this folder by path (POST /library-folder/import).",
)
@click.option(
    "--max-upload-mb",
    default=DEFAULT_MAX_UPLOAD_BYTES // (1024 * 1024),
    show_default=True,
    type=click.IntRange(1, 4096),
    help="Largest upload accepted (MiB).",
)
@click.option(
    "--import-isolation",
    type=click.Choice(["process", "thread"]),
    default=None,
    help="Run imports in a child process (default) or in a thread of the server.",
)
@click.option(
    "--upload-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where uploads wait for their import (default: the system's temporary folder); "
    "shared storage when `mindory worker`s on other machines run the jobs.",
)
@click.option(
    "--import-workers",
    default=1,
    show_default=True,
    type=click.IntRange(0, 64),
    help="Import jobs each server process runs at once (0: only `mindory worker`s run them).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="uvicorn worker processes (more than 1 needs a PostgreSQL library).",
)
@click.option(
    "--kosync-registration",
    is_flag=True,
    help="Let KOReader's progress sync register new readers at /kosync (off: refused).",
)
@click.option("--log-level", default="info", show_default=True, help="uvicorn log level.")
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    db: str | None,
    library_folder: Path | None,
    max_upload_mb: int,
    import_isolation: Literal["process", "thread"] | None,
    upload_dir: Path | None,
    import_workers: int,
    workers: int,
    kosync_registration: bool,
    log_level: str,
) -> None:
    """Serve the library over HTTP: the JSON API, its docs at /docs, a reader at /."""
    import uvicorn

    root = ctx.find_root()
    # `mindory --db X serve` (or MINDORY_DB, which the root option reads) names the
    # library; serve's own --db wins when given (it reads no environment variable, or
    # MINDORY_DB would override the root's --db).
    if db is None and isinstance(root.obj, dict):
        db = root.obj.get("db")
    if db is None:
        db = os.environ.get("MINDORY_DB") or None
    token = os.environ.get("MINDORY_TOKEN") or None
    try:
        check_bind(host, token)
        check_workers(db, workers)
        app = create_app(
            db,
            token=token,
            library_folder=library_folder,
            max_upload_bytes=max_upload_mb * 1024 * 1024,
            import_isolation=import_isolation,
            import_workers=import_workers,
            upload_dir=upload_dir,
            kosync_registration=kosync_registration,
        )
    except MindoryError as exc:
        click.echo(f"mindory: error: {exc}", err=True)
        sys.exit(1)
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"mindory: serving on http://{shown}:{port}/ (API docs at /docs)"
        + ("; bearer token required" if token else ""),
        err=True,
    )
    if workers == 1:
        uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False)
        return
    # N processes: each builds its own app (its own engine, job worker thread and import
    # child) from the same settings; the library was opened (and migrated) once above.
    app.state.library.close()
    os.environ[APP_SETTINGS_ENV] = json.dumps(
        {
            "db": db,
            "library_folder": str(library_folder) if library_folder is not None else None,
            "max_upload_bytes": max_upload_mb * 1024 * 1024,
            "import_isolation": import_isolation,
            "import_workers": import_workers,
            "upload_dir": str(upload_dir) if upload_dir is not None else None,
            "kosync_registration": kosync_registration,
        }
    )
    uvicorn.run(
        "mindory.server.serve:app_from_env",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level=log_level,
        proxy_headers=False,
    )


def check_workers(db: str | None, workers: int) -> None:
    """Refuse (MindoryError) several server processes over a SQLite library: SQLite has
    one writer and no row locks to share the import queue between servers well; serve
    it with one process (add ``mindory worker`` processes for parallel imports)."""
    if workers <= 1:
        return
    url, _path = resolve_url(db)
    if make_url(url).get_backend_name() != "postgresql":
        raise MindoryError(
            f"--workers {workers} needs a PostgreSQL library (a database URL "
            "postgresql://...); a SQLite library is served by one process "
            "(--workers 1; add `mindory worker` processes to run imports in parallel)"
        )


def app_from_env() -> FastAPI:
    """The app of one of ``serve --workers N``'s processes (uvicorn's factory)."""
    settings = json.loads(os.environ[APP_SETTINGS_ENV])
    folder = settings.get("library_folder")
    return create_app(
        settings.get("db"),
        token=os.environ.get("MINDORY_TOKEN") or None,
        library_folder=Path(folder) if folder else None,
        max_upload_bytes=int(settings["max_upload_bytes"]),
        import_isolation=settings.get("import_isolation"),
        import_workers=int(settings.get("import_workers", 1)),
        upload_dir=settings.get("upload_dir"),
        kosync_registration=bool(settings.get("kosync_registration", False)),
    )


if __name__ == "__main__":  # pragma: no cover
    serve()
