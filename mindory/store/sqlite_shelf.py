"""The shelf of a SQLite library read with the standard library's ``sqlite3``: what
``mindory books`` prints, without importing SQLAlchemy (~0.2 s, most of the command).

The same records as :func:`mindory.store.shelf.list_books`, from the same statements,
with SQLAlchemy's conversions done here (JSON text → values, SQLite's naive
``DATETIME`` text → ISO 8601 in UTC, 0/1 → bool). It answers only a library that is
already at the newest schema revision; anything else (no file yet, an older or newer
schema, an unreadable file) gives None, and the caller opens the library as usual
(which creates or upgrades it, or says what is wrong).
"""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime
from typing import Any

from mindory.store.records import BookInfo, DerivationInfo, iso
from mindory.store.revisions import _script_heads
from mindory.store.where import DEFAULT_BUSY_TIMEOUT_MS, sqlite_file

__all__ = ["list_books_sqlite"]

_BOOKS_SQL = (
    "SELECT books.*, book_files.data IS NULL AS by_path FROM books "
    "JOIN book_files ON book_files.book_id = books.id ORDER BY books.title, books.sha256"
)
_DERIVATIONS_SQL = (
    "SELECT book_id, fingerprint, settings, is_current, chunk_count, created_at "
    "FROM derivations ORDER BY book_id, created_at, id"
)


def _time(value: str | None) -> str | None:
    return iso(datetime.fromisoformat(value)) if value is not None else None


def _json(value: Any) -> Any:
    return json.loads(value) if value is not None else None


def list_books_sqlite(path_or_url: str | os.PathLike[str] | None) -> list[BookInfo] | None:
    """Every book of the SQLite library ``path_or_url`` names (as ``--db`` does), by
    title (then id); None for a URL, a missing file or a schema that is not the newest
    (see the module doc)."""
    path = sqlite_file(path_or_url)
    if path is None or not path.is_file():
        return None
    try:
        # Read-only: listing never creates, upgrades or locks the library for writing.
        conn = sqlite3.connect(
            f"{path.as_uri()}?mode=ro", uri=True, timeout=DEFAULT_BUSY_TIMEOUT_MS / 1000
        )
    except sqlite3.Error:
        return None
    try:
        conn.isolation_level = None  # (BEGIN below is ours)
        conn.row_factory = sqlite3.Row
        conn.execute("BEGIN")  # one read transaction: the books and their derivations agree
        heads = sorted(r[0] for r in conn.execute("SELECT version_num FROM alembic_version"))
        if heads != sorted(_script_heads()):
            return None
        rows = conn.execute(_BOOKS_SQL).fetchall()
        derivations: dict[int, list[DerivationInfo]] = {}
        for d in conn.execute(_DERIVATIONS_SQL):
            derivations.setdefault(d["book_id"], []).append(
                DerivationInfo(
                    fingerprint=d["fingerprint"],
                    settings=_json(d["settings"]),
                    current=bool(d["is_current"]),
                    chunk_count=d["chunk_count"],
                    created_at=_time(d["created_at"]),
                )
            )
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return [
        BookInfo(
            id=r["sha256"],
            title=r["title"],
            format=r["format"],
            file_name=r["file_name"],
            file_size=r["file_size"],
            encoding=r["encoding"],
            lossy=bool(r["lossy"]),
            bad_bytes=r["bad_bytes"],
            first_bad_byte=r["first_bad_byte"],
            creators=tuple(_json(r["creators"])),
            language=r["language"],
            identifiers=tuple(_json(r["identifiers"])),
            warnings=tuple(_json(r["warnings"])),
            section_count=r["section_count"],
            toc_count=r["toc_count"],
            stored="path" if r["by_path"] else "copy",
            imported_at=_time(r["imported_at"]),
            derivations=tuple(derivations.get(r["id"], ())),
        )
        for r in rows
    ]
