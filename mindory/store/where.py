"""Where a library lives when nothing names it, and which SQLite file a ``--db`` value
names: without SQLAlchemy, so ``mindory books`` can read a SQLite library with the
standard library alone (:mod:`mindory.store.sqlite_shelf`)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_BUSY_TIMEOUT_MS", "default_db_path", "sqlite_file"]

DEFAULT_BUSY_TIMEOUT_MS = 60_000


def default_db_path() -> Path:
    """The library used when no ``--db``/``MINDORY_DB``/``MINDORY_DATABASE_URL`` is given."""
    import platformdirs

    return Path(platformdirs.user_data_dir("mindory", appauthor=False)) / "library.sqlite"


def sqlite_file(path_or_url: str | os.PathLike[str] | None) -> Path | None:
    """The SQLite file a path names, as :func:`mindory.store.engine.resolve_url` reads it;
    None for a URL (any database: the caller opens it through SQLAlchemy)."""
    if path_or_url is None or os.fspath(path_or_url) == "":
        path_or_url = os.environ.get("MINDORY_DATABASE_URL") or default_db_path()
    text = os.fspath(path_or_url)
    if "://" in text:
        return None
    return Path(text).expanduser().resolve()
