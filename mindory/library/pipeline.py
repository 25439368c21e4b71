"""The pipeline on one file, without a library: importers → normalize → chunking.

What ``mindory chunk`` prints; nothing is written anywhere.
"""

from __future__ import annotations

import os

from mindory.importers import load_book
from mindory.text.chunking import chunk_book
from mindory.text.records import Book, Chunk, Settings

__all__ = ["chunk_file"]


def chunk_file(path: str | os.PathLike[str], settings: Settings) -> tuple[Book, list[Chunk]]:
    """The book read from ``path`` and its chunks under ``settings``."""
    book = load_book(path, settings.profile)
    return book, chunk_book(book, settings)
