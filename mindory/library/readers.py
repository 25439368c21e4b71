"""Readers: several readers share one library (docs/reading-state.md).

The books are shared; what a reader makes (highlights, positions, bookmarks) is theirs.
A reader has a name, an id derived from it (:func:`reader_id_of`), and a token that is
shown once when the reader is added and stored only as its SHA-256. The implicit local
reader (:data:`LOCAL_READER`) is the reader of a library without readers, of the CLI
without ``--user`` and of the server's own token; it has no row and cannot be removed.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from mindory.errors import MindoryError, NotFoundError
from mindory.library.passwords import Checked, hash_sync_key, is_sync_key, sync_key
from mindory.library.state import State
from mindory.store.annotations import utc
from mindory.store.models import LOCAL_READER, ReaderRow
from mindory.store.readers import (
    count_readers,
    delete_reader_data,
    reader_by_name,
    reader_by_token_hash,
)

__all__ = [
    "LOCAL_READER",
    "NewReader",
    "Reader",
    "RemovedReader",
    "add_reader",
    "has_readers",
    "reader_for_token",
    "reader_id_of",
    "reader_named",
    "reader_for_password",
    "reader_for_sync_key",
    "readers",
    "register_sync_reader",
    "remove_reader",
    "set_password",
    "token_hash",
]

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
TOKEN_BYTES = 32
MAX_PASSWORD = 1024


def reader_id_of(name: str) -> str:
    """A reader's id: derived from the name, so the same name gives the same id."""
    return hashlib.sha256(f"mindory-reader\x00{name}".encode()).hexdigest()[:32]


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def _check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise MindoryError(
            f"a reader's name is 1–64 letters, digits or . _ @ - (starting with a letter or "
            f"digit), not {name!r}"
        )
    if name == LOCAL_READER:
        raise MindoryError(f"{LOCAL_READER!r} is the implicit local reader; choose another name")
    return name


@dataclass(frozen=True, slots=True)
class Reader:
    id: str
    name: str
    created: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "created": self.created.isoformat(timespec="seconds"),
        }


@dataclass(frozen=True, slots=True)
class NewReader:
    """A reader just added, with the token (shown this once, never stored)."""

    reader: Reader
    token: str

    def to_json(self) -> dict[str, Any]:
        return {**self.reader.to_json(), "token": self.token}


@dataclass(frozen=True, slots=True)
class RemovedReader:
    """A reader removed, with how many of their highlights, positions, bookmarks went."""

    reader: Reader
    highlights: int
    positions: int
    bookmarks: int

    def to_json(self) -> dict[str, Any]:
        return {
            **self.reader.to_json(),
            "removed": {
                "highlights": self.highlights,
                "positions": self.positions,
                "bookmarks": self.bookmarks,
            },
        }


def _reader(row: ReaderRow) -> Reader:
    return Reader(id=row.id, name=row.name, created=utc(row.created_at))


def add_reader(st: State, name: str) -> NewReader:
    name = _check_name(name)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    row = ReaderRow(
        id=reader_id_of(name),
        name=name,
        token_hash=token_hash(token),
        created_at=datetime.now(UTC),
    )
    try:
        with st.write() as w:
            if reader_by_name(w, name) is not None:
                raise MindoryError(f"there is a reader named {name!r} already")
            w.add(row)
    except IntegrityError as exc:
        raise MindoryError(f"there is a reader named {name!r} already") from exc
    return NewReader(_reader(row), token)


def readers(st: State) -> list[Reader]:
    with st.read() as s:
        return [_reader(r) for r in s.scalars(select(ReaderRow).order_by(ReaderRow.name))]


def reader_named(st: State, name: str | None) -> str:
    """The id of the reader ``name`` (None: the local reader)."""
    if name is None or name == LOCAL_READER:
        return LOCAL_READER
    with st.read() as s:
        row = reader_by_name(s, name)
    if row is None:
        raise NotFoundError(f"no reader named {name!r} (see `mindory users list`)")
    return row.id


def remove_reader(st: State, name: str) -> RemovedReader:
    """Remove a reader and everything they made (highlights, positions, bookmarks)."""
    if name == LOCAL_READER:
        raise MindoryError(f"{LOCAL_READER!r} is the implicit local reader; it cannot be removed")
    with st.write() as w:
        row = reader_by_name(w, name)
        if row is None:
            raise NotFoundError(f"no reader named {name!r} (see `mindory users list`)")
        gone = _reader(row)
        counts = delete_reader_data(w, row.id)
        w.delete(row)
    return RemovedReader(gone, *counts)


def reader_for_token(st: State, token: str) -> str | None:
    """The id of the reader whose token this is, or None."""
    if not token:
        return None
    with st.read() as s:
        row = reader_by_token_hash(s, token_hash(token))
    return row.id if row is not None else None


def has_readers(st: State) -> bool:
    with st.read() as s:
        return count_readers(s) > 0


# --------------------------------------------------------------------------- passwords

_checked = Checked()


def set_password(st: State, name: str, password: str) -> Reader:
    """Give a reader a password (for HTTP Basic and KOReader's sync); only a salted
    scrypt of its MD5 is stored (:mod:`mindory.library.passwords`)."""
    if not password:
        raise MindoryError("a password cannot be empty")
    if len(password) > MAX_PASSWORD:
        raise MindoryError(f"a password is at most {MAX_PASSWORD} characters")
    return _set_sync_key(st, name, sync_key(password))


def _set_sync_key(st: State, name: str, key: str) -> Reader:
    stored = hash_sync_key(key)
    with st.write() as w:
        row = reader_by_name(w, name)
        if row is None:
            raise NotFoundError(f"no reader named {name!r} (see `mindory users list`)")
        row.password_hash = stored
        return _reader(row)


def register_sync_reader(st: State, name: str, key: str) -> Reader:
    """KOReader's registration: a new reader whose password's MD5 is ``key`` (their
    token is made and never shown: they sign in with the password)."""
    if not is_sync_key(key):
        raise MindoryError("the sync key must be the MD5 hex digest KOReader sends")
    add_reader(st, name)
    return _set_sync_key(st, name, key.lower())


def reader_for_sync_key(st: State, name: str, key: str) -> str | None:
    """The id of reader ``name`` if ``key`` is their password's MD5, else None."""
    if not name or not key or not is_sync_key(key):
        return None
    with st.read() as s:
        row = reader_by_name(s, name)
        stored = row.password_hash if row is not None else None
        rid = row.id if row is not None else None
    if stored is None or rid is None:
        return None
    return rid if _checked.verify(name, key, stored) else None


def reader_for_password(st: State, name: str, password: str) -> str | None:
    """The id of reader ``name`` if ``password`` is theirs (HTTP Basic), else None."""
    if not password or len(password) > MAX_PASSWORD:
        return None
    return reader_for_sync_key(st, name, sync_key(password))
