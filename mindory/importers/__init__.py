"""Files → Book records. ``load_book`` picks the importer by content, not by name."""

from __future__ import annotations

import os
from pathlib import Path

from mindory.errors import MindoryError
from mindory.text.records import Book, NormalizeProfile

__all__ = ["load_book", "sniff_format"]


def sniff_format(path: Path) -> str:
    """ "epub" for a ZIP file (or a .epub name), else "txt"."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise MindoryError(f"cannot read file: {exc.strerror or exc}", path=str(path)) from exc
    if head.startswith(b"PK") or path.suffix.lower() == ".epub":
        return "epub"
    return "txt"


def load_book(path: str | os.PathLike[str], profile: NormalizeProfile | None = None) -> Book:
    """Import one file (EPUB or plain text) into a Book, or raise a MindoryError."""
    p = Path(path)
    if not p.is_file():
        raise MindoryError("no such file", path=str(p))
    profile = profile or NormalizeProfile()
    if sniff_format(p) == "epub":
        from mindory.importers.epub import read_epub

        return read_epub(p, profile)
    from mindory.importers.text import read_text

    return read_text(p, profile)
