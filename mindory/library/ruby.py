"""Ruby layouts of stored EPUB sections, for quote calibration.

The database keeps a section's source text, not its DOM; where a ``<ruby>``
element starts and which characters are its ``<rt>`` / ``<rp>`` annotations is
read again from the stored book file: the section's content document is parsed
the way the importer parsed it and walked by
:func:`mindory.importers.xhtml.ruby.ruby_layout`. The layout carries the source
text that walk produced; :attr:`mindory.reading.anchoring.SectionText.ruby_layout`
uses it only if it is the stored source text, character for character (so a
layout is never applied to a text it does not describe). Loaded on first use,
once per cached section text.
"""

from __future__ import annotations

from collections.abc import Callable

from mindory.errors import MindoryError
from mindory.importers.xhtml import parse_content
from mindory.importers.xhtml.ruby import RubyLayout, ruby_layout
from mindory.library.state import State

__all__ = ["ruby_loader"]

_MARKS = (b"ruby", "ruby".encode("utf-16-le"), "ruby".encode("utf-16-be"))


def ruby_loader(st: State, sha: str, href: str | None) -> Callable[[], RubyLayout | None] | None:
    """A function that reads the ruby layout of the EPUB section ``href`` of book
    ``sha`` (None for a plain-text section)."""
    if not href:
        return None

    def load() -> RubyLayout | None:
        from mindory.library.catalogue import resource

        try:
            data = resource(st, sha, href).data
        except MindoryError:
            return None  # the file is gone or unreadable: calibrate on the source text
        lowered = data.lower()
        if not any(mark in lowered for mark in _MARKS):
            return None  # no ruby element: nothing to load
        try:
            _, body, _, _ = parse_content(data, href, sha)
        except MindoryError:
            return None
        return ruby_layout(body)

    return load
