"""``mindory serve``: run the HTTP API (:mod:`mindory.server.app`) under uvicorn.

Binds to 127.0.0.1 by default. Binding to any other address needs a token in
``MINDORY_TOKEN`` (the server refuses to start without one); with a token set,
every API request must carry ``Authorization: Bearer <token>``.

Run it as ``mindory serve`` or ``python -m mindory.server.serve``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

import click

from mindory.errors import MindoryError
from mindory.server.app import create_app
from mindory.server.guard import DEFAULT_MAX_UPLOAD_BYTES, is_loopback

__all__ = ["serve", "check_bind"]

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
    envvar="MINDORY_DB",
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
    log_level: str,
) -> None:
    """Serve the library over HTTP: the JSON API, its docs at /docs, a reader at /."""
    import uvicorn

    root = ctx.find_root()
    if db is None and isinstance(root.obj, dict):
        db = root.obj.get("db")
    token = os.environ.get("MINDORY_TOKEN") or None
    try:
        check_bind(host, token)
        app = create_app(
            db,
            token=token,
            library_folder=library_folder,
            max_upload_bytes=max_upload_mb * 1024 * 1024,
            import_isolation=import_isolation,
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
    uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False)


if __name__ == "__main__":  # pragma: no cover
    serve()
