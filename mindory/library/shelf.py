"""The shelf: the list of books, read without the ORM (:mod:`mindory.store.shelf`), so
``mindory books`` and ``GET /books`` load only SQLAlchemy Core."""

from __future__ import annotations

from mindory.library.state import State
from mindory.store.records import BookInfo
from mindory.store.shelf import list_books


def books(st: State) -> list[BookInfo]:
    """Every book, by title (then id)."""
    with st.engine.connect() as conn:
        return list_books(conn)
