"""Where a library lives and how it is opened: URL resolution, the engine (SQLite in WAL
mode with foreign keys, BEGIN IMMEDIATE for writers), and the Alembic migrations that
create and upgrade the schema (shipped inside the package as ``mindory.migrations``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import SQLAlchemyError

from mindory.errors import MindoryError
from mindory.store.revisions import MIGRATIONS, _known_revisions, _script_heads
from mindory.store.where import DEFAULT_BUSY_TIMEOUT_MS, default_db_path


def resolve_url(path_or_url: str | os.PathLike[str] | None) -> tuple[str, Path | None]:
    """``(SQLAlchemy URL, SQLite file or None)`` for a path, a URL or nothing.

    Nothing means ``MINDORY_DATABASE_URL`` if set, else :func:`default_db_path`.
    Anything with ``://`` is a URL; everything else is a SQLite file path.
    """
    if path_or_url is None or os.fspath(path_or_url) == "":
        path_or_url = os.environ.get("MINDORY_DATABASE_URL") or default_db_path()
    text = os.fspath(path_or_url)
    if "://" in text:
        url = make_url(text)
        path: Path | None = None
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            path = Path(str(url.database)).expanduser().resolve()
        return text, path
    path = Path(text).expanduser().resolve()
    return f"sqlite:///{path}", path


def make_engine(url: str, busy_timeout_ms: int) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    engine = create_engine(parsed, connect_args={"timeout": busy_timeout_ms / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy (not the sqlite3 module) issue BEGIN: see _on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock up front: a deferred transaction that
        # reads first and upgrades later can fail with SQLITE_BUSY at once
        # (busy_timeout does not help), BEGIN IMMEDIATE waits its turn instead.
        immediate = conn.get_execution_options().get("mindory_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _alembic_config(connection: Connection | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _current_heads(conn: Connection) -> tuple[str, ...]:
    """The revisions the database is at (none for a new database)."""
    if not inspect(conn).has_table("alembic_version"):
        return ()
    return tuple(
        str(r) for r in conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars()
    )


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default: the newest) in one transaction."""

    def check(conn: Connection) -> bool:
        """True when the schema is already at ``revision`` (only "head" is checked)."""
        current = _current_heads(conn)
        unknown = [rev for rev in current if rev not in _known_revisions()]
        if unknown:
            raise MindoryError(
                f"the library's schema ({', '.join(unknown)}) is newer than this mindory; "
                "upgrade mindory"
            )
        return revision == "head" and sorted(current) == sorted(_script_heads())

    # Look first without the write lock: opening a library must not wait for
    # an import that another process is writing.
    with engine.connect() as conn:
        if check(conn):
            return
    from alembic import command

    with engine.execution_options(mindory_write=True).begin() as conn:
        if not check(conn):  # another process may have upgraded meanwhile
            command.upgrade(_alembic_config(conn), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Take the schema back to ``revision`` (tests and emergencies)."""
    from alembic import command

    with engine.execution_options(mindory_write=True).begin() as conn:
        command.downgrade(_alembic_config(conn), revision)


def first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def open_engine(
    path_or_url: str | os.PathLike[str] | None, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
) -> tuple[Engine, str, Path | None]:
    """Open (creating the folder and upgrading the schema) the library's database:
    ``(engine, URL, SQLite file or None)``; a clear MindoryError when it cannot."""
    url, path = resolve_url(path_or_url)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MindoryError(
                f"cannot create the library folder: {exc.strerror or exc}",
                path=str(path.parent),
            ) from exc
    engine = make_engine(url, busy_timeout_ms)
    try:
        upgrade(engine)
    except SQLAlchemyError as exc:
        engine.dispose()
        where = str(path) if path is not None else make_url(url).render_as_string()
        raise MindoryError(f"cannot open the library: {first_line(exc)}", path=where) from exc
    except BaseException:
        engine.dispose()
        raise
    return engine, url, path
