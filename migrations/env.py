"""Alembic environment for mindory's library schema.

mindory runs migrations programmatically (``mindory.library.upgrade``), handing
over an open connection in ``config.attributes["connection"]``. Run from the
command line (``alembic -c alembic.ini ...`` at the top of the repository), the
database is ``-x url=...``, else ``sqlalchemy.url`` of the ini file, else
``MINDORY_DATABASE_URL``. SQLite tables are altered in batch mode (copy and
move), the only way SQLite can change most of a table. The FTS5 index (revision
0002, SQLite only) is not a model: the comparison skips its tables
(``include_name``), so autogenerate neither drops nor recreates it.
"""

from __future__ import annotations

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection

from mindory.store.models import Base, is_model_name

config = context.config
target_metadata = Base.metadata

# Log like the alembic command line when run from it (not when mindory migrates).
if config.config_file_name is not None and "connection" not in config.attributes:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url")
    url = url or config.get_main_option("sqlalchemy.url") or os.environ.get("MINDORY_DATABASE_URL")
    if not url:
        raise SystemExit(
            "mindory migrations: no database; pass -x url=..., set sqlalchemy.url "
            "or MINDORY_DATABASE_URL"
        )
    return url


def include_name(name: str | None, type_: str, _parent_names: object) -> bool:
    """Leave the FTS5 virtual table and its shadow tables out of the comparison."""
    return type_ != "table" or is_model_name(name)


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=include_name,
        render_as_batch=True,
        compare_type=True,
        compare_server_default=True,
    )


def run_migrations_offline() -> None:
    """Emit SQL to stdout instead of running it (``alembic upgrade head --sql``)."""
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        # The caller owns the connection and its transaction.
        _configure(connection)
        context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
