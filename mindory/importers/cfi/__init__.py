"""EPUB CFI: parse, generate and resolve Canonical Fragment Identifiers.

A section's **source text** is the concatenation of every text node under
``<body>`` in document order (DESIGN §1). This module maps positions in that
text (code points) to CFIs and back, in two flavors:

``spec`` (the ``cfi`` field)
    The EPUB CFI 1.1 specification, as foliate-js reads it. Below an element,
    even steps count element children (``/2`` is the first), odd steps are the
    *chunks* of character data between them: ``/1`` before the first element,
    ``/3`` between the first and the second, ... — every gap counts, empty or
    not, and text split only by a comment or processing instruction is one
    chunk (``:N`` continues across the comment).

``epubjs`` (the ``cfi_epubjs`` field)
    The same place written for epub.js 0.3. epub.js numbers only the text
    nodes that exist in its DOM (futurepress/epub.js#470): the k-th text node
    child of an element (0-based) is ``/2k+1``, whatever the elements between
    them, and two text nodes split by a comment are two steps. It resolves
    element steps with XPath ``*[position()=N and @id='x']`` and parses the
    string by plain ``split`` on ``/ , : !`` without ``^`` unescaping, so id
    assertions that need escaping or contain those characters are omitted.

``:N`` offsets are UTF-16 code units in both flavors.

Where a position falls on the boundary between two text nodes the choice is
deterministic: a point and a range start go to the non-empty text piece that
holds the character *at* the position (the start of the later piece), a range
end to the non-empty piece holding the character *before* it (the end of the
earlier piece). So a highlight's start and end always land inside text that is
highlighted, and no generated CFI ever names an empty chunk (which foliate-js
and epub.js cannot resolve). A document with no text at all gets the body
element itself (``…!/4``), which every reader maps to the start of the body.

Everything here is pure: :class:`CfiDocument` holds a compact table (one row
per text piece, one per element) built once from the lxml tree, and generation
is a bisect per position.

The package: ``parse`` (the CFI grammar: parse, escape, print), ``tree`` (the
compact table of one document's elements and text pieces, built by a walk of
the lxml tree) and ``document`` (:class:`CfiDocument`: generate and resolve).
"""

from __future__ import annotations

from mindory.importers.cfi.document import CfiDocument
from mindory.importers.cfi.parse import (
    EPUBJS,
    SPEC,
    CfiError,
    CfiPath,
    CfiStep,
    ParsedCfi,
    escape_cfi,
    parse_cfi,
)
from mindory.importers.cfi.tree import CfiColumns, cfi_start_columns, spine_step_of

__all__ = [
    "EPUBJS",
    "SPEC",
    "CfiColumns",
    "CfiDocument",
    "CfiError",
    "CfiPath",
    "CfiStep",
    "ParsedCfi",
    "escape_cfi",
    "parse_cfi",
    "cfi_start_columns",
    "spine_step_of",
]
