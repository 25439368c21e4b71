"""Schema and migrations: models and Alembic revisions agree, both directions work,
SQLite runs with WAL and foreign keys, and the types stay portable (PostgreSQL)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from mindory.errors import MindoryError
from mindory.library import Library
from mindory.store.engine import (
    _alembic_config,
    _script_heads,
    downgrade,
    make_engine,
    resolve_url,
    upgrade,
)
from mindory.store.models import Base, is_model_name

TABLES = {
    "books",
    "book_files",
    "sections",
    "toc_entries",
    "normalizations",
    "section_texts",
    "blocks",
    "derivations",
    "chunks",
    "embeddings",
    "chunk_vectors",
    "highlights",
    "readers",
    "positions",
    "bookmarks",
    "chunk_terms",
    "library_facts",
    "jobs",
}


def _engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    return make_engine(f"sqlite:///{tmp_path / 'lib.sqlite'}", 5000)


def test_models_and_migrations_agree(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    upgrade(engine)
    # The FTS5 index (SQLite only, revision 0002) is no model: leave its tables out,
    # as migrations/env.py does.
    opts = {"include_name": lambda name, type_, _p: type_ != "table" or is_model_name(name)}
    with engine.connect() as conn:
        names = set(inspect(conn).get_table_names())
        diff = compare_metadata(MigrationContext.configure(conn, opts=opts), Base.metadata)
    engine.dispose()
    assert "chunks_fts" in names  # the filter hides something that is there
    assert diff == [], f"models differ from migrations/ — write a revision: {diff}"


def test_upgrade_downgrade_upgrade(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= TABLES
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_heads() == _script_heads()
    downgrade(engine, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= TABLES
    engine.dispose()


def test_open_upgrades_and_reopens(tmp_path: Path) -> None:
    db = tmp_path / "sub" / "lib.sqlite"
    with Library.open(db) as lib:
        assert lib.path == db.resolve()
        assert lib.books() == []
    with Library.open(db) as lib:  # already at head: nothing to do
        assert lib.books() == []


def test_sqlite_pragmas(tmp_path: Path) -> None:
    with Library.open(tmp_path / "lib.sqlite") as lib, lib.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() > 0


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    Library.open(db).close()
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'from_the_future'"))
    engine.dispose()
    with pytest.raises(MindoryError, match="newer than this mindory"):
        Library.open(db)


def test_urls_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, path = resolve_url(tmp_path / "a.sqlite")
    assert url == f"sqlite:///{tmp_path / 'a.sqlite'}" and path == tmp_path / "a.sqlite"
    url, path = resolve_url("postgresql://me@db.example/books")
    assert url.startswith("postgresql://") and path is None
    monkeypatch.setenv("MINDORY_DATABASE_URL", f"sqlite:///{tmp_path / 'env.sqlite'}")
    assert resolve_url(None)[1] == tmp_path / "env.sqlite"
    with Library.open() as lib:
        assert lib.path == tmp_path / "env.sqlite"


def test_schema_is_portable_to_postgresql() -> None:
    # Every table and index compiles for PostgreSQL (no SQLite-only types) ...
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    for table in Base.metadata.sorted_tables:
        ddl = str(CreateTable(table).compile(dialect=dialect))
        assert "BYTEA" in ddl or "offset_map" not in ddl
        for index in table.indexes:
            str(CreateIndex(index).compile(dialect=dialect))
    # ... and so do the migrations (offline mode renders their SQL).
    cfg = _alembic_config()
    cfg.set_main_option("sqlalchemy.url", "postgresql://mindory@localhost/mindory")
    out = io.StringIO()
    cfg.stdout = out
    with redirect_stdout(out):
        command.upgrade(cfg, "head", sql=True)
    sql = out.getvalue()
    assert "CREATE TABLE chunks" in sql and "BIGSERIAL" in sql and "BYTEA" in sql
    assert "JSON" in sql
