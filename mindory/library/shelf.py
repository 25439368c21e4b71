"""The shelf: the list of books, read without the ORM (:mod:`mindory.store.shelf`), so
``mindory books`` and ``GET /books`` load only SQLAlchemy Core; a SQLite library at the
newest schema is read with the standard library alone (:func:`books_of_file`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mindory.store.records import BookInfo

if TYPE_CHECKING:
    from mindory.library.state import State


def books(st: State) -> list[BookInfo]:
    """Every book, by title (then id)."""
    from mindory.store.shelf import list_books

    with st.engine.connect() as conn:
        return list_books(conn)


def books_of_file(path_or_url: str | os.PathLike[str] | None) -> list[BookInfo] | None:
    """:func:`books` of the SQLite library ``path_or_url`` names, without opening it
    through SQLAlchemy (its import is most of a cold ``mindory books``); None where the
    library must be opened as usual: a URL, no file yet, an older or newer schema."""
    from mindory.store.sqlite_shelf import list_books_sqlite

    return list_books_sqlite(path_or_url)
