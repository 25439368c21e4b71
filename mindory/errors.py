"""The one family of errors mindory raises for bad input.

Every error names the file (or request) and the problem in one line, so the
CLI can print it without a traceback and the API can turn it into a 4xx.
"""

from __future__ import annotations


class MindoryError(Exception):
    """Base class: a problem with input or state that a user can act on."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


class DecodeError(MindoryError):
    """A text file that cannot be read as text (empty, binary, ...)."""


class BookFormatError(MindoryError):
    """A book file that is broken, hostile or of an unsupported kind."""


class DrmError(BookFormatError):
    """An EPUB whose content is encrypted (DRM); refused by name."""


class LimitError(BookFormatError):
    """A file over a stated limit (size, member count, compression ratio, ...)."""


class NotFoundError(MindoryError):
    """A book, section, chunk or highlight that does not exist."""


class ConflictError(MindoryError):
    """A write that lost to a newer one (an older reading position): nothing was written.
    ``current`` is the JSON of what stands (the HTTP API answers it with 409)."""

    def __init__(self, message: str, *, current: object = None) -> None:
        super().__init__(message)
        self.current = current


class XPointerError(MindoryError):
    """A KOReader (crengine) xpointer that is malformed or names no place in the book."""
