"""KOReader (crengine) xpointers ⇄ mindory positions (pure).

KOReader's progress sync sends an EPUB position as a crengine xpointer,
``/body/DocFragment[12]/body/div[2]/p[5]/text().17``. This package owns:

* :mod:`.parse` — the string: :func:`parse_xpointer`, :class:`XPointer`;
* :mod:`.rules` — crengine's per-element facts (text allowed, display, PRE);
* :mod:`.view` — :class:`CreView`, crengine's text nodes of one content document
  with the source offset (section-local code points) of every character;
* :mod:`.txt` — :class:`TxtView`, the ``<pre>`` lines crengine makes of a plain-text
  file when KOReader opens it pre-formatted (its default);
* here — the spine (which DocFragment a section is) and the two translations,
  :func:`xpointer_of_offset` and :func:`offset_of_xpointer`.

Every rule and the crengine function it comes from: docs/koreader.md.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence

from mindory.errors import XPointerError
from mindory.importers.xhtml.parse import SVG_NS, parse_content
from mindory.reading.xpointer.parse import XPointer, format_steps, parse_xpointer
from mindory.reading.xpointer.txt import TxtView
from mindory.reading.xpointer.view import DOM_20240114, DOM_20260812, CrePoint, CreView

__all__ = [
    "DOM_20240114",
    "DOM_20260812",
    "XHTML_TYPE",
    "CrePoint",
    "CreView",
    "TxtView",
    "XPointer",
    "fragment_count",
    "fragment_of_section",
    "offset_of_xpointer",
    "parse_xpointer",
    "section_of_fragment",
    "view_of_document",
    "xpointer_of_offset",
]

XHTML_TYPE = "application/xhtml+xml"


def _has_fragment(media_type: str | None, dom_version: int) -> bool:
    # epubfmt.cpp ImportEpubDocument: from DOM 20240114 every spine item gets a
    # DocFragment (a placeholder one when crengine cannot parse it); before, only
    # items whose manifest media-type is application/xhtml+xml.
    return dom_version >= DOM_20240114 or (media_type or "").strip().lower() == XHTML_TYPE


def fragment_of_section(
    ordinal: int, media_types: Sequence[str | None], dom_version: int = DOM_20240114
) -> int:
    """The 1-based DocFragment index crengine gives spine item ``ordinal``.

    ``media_types``: the manifest media type of every spine itemref, in spine order
    (mindory makes one section per itemref, so section ordinal = spine position).
    """
    if not 0 <= ordinal < len(media_types):
        raise XPointerError(f"section {ordinal} is outside the spine (0–{len(media_types) - 1})")
    if not _has_fragment(media_types[ordinal], dom_version):
        raise XPointerError(
            f"section {ordinal} ({media_types[ordinal]}) has no DocFragment before DOM "
            f"version {DOM_20240114}"
        )
    return sum(1 for t in media_types[: ordinal + 1] if _has_fragment(t, dom_version))


def fragment_count(media_types: Sequence[str | None], dom_version: int = DOM_20240114) -> int:
    return sum(1 for t in media_types if _has_fragment(t, dom_version))


def section_of_fragment(
    fragment: int, media_types: Sequence[str | None], dom_version: int = DOM_20240114
) -> int:
    """The section ordinal of DocFragment ``fragment`` (1-based)."""
    seen = 0
    for ordinal, media_type in enumerate(media_types):
        if _has_fragment(media_type, dom_version):
            seen += 1
            if seen == fragment:
                return ordinal
    raise XPointerError(
        f"DocFragment[{fragment}] is outside the spine: the book has "
        f"{fragment_count(media_types, dom_version)} DocFragment(s)"
    )


def view_of_document(data: bytes | None, where: str = "", path: str = "") -> CreView:
    """crengine's view of one content document from its bytes (None: no document —
    crengine's placeholder fragment for an item it cannot read holds no mindory text)."""
    if data is None:
        return CreView(None)
    _root, body, _parser, _warnings = parse_content(data, where, path)
    svg_root = body is not None and body.getparent() is None and _is_svg(body.tag)
    utf16 = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
    return CreView(body, svg_root=svg_root, raw=None if utf16 else data)


def _is_svg(tag: object) -> bool:
    return isinstance(tag, str) and (tag == f"{{{SVG_NS}}}svg" or tag == "svg")


def _fragment_prefix(fragment: int, fragments: int, explicit_first: bool) -> str:
    return format_steps(
        [("body", 1, 1), ("DocFragment", fragment, fragments)], explicit_first=explicit_first
    )


def xpointer_of_offset(
    view: CreView,
    source_offset: int,
    *,
    fragment: int,
    fragments: int,
    dom_version: int = DOM_20240114,
) -> str:
    """The xpointer KOReader writes for the character at ``source_offset`` (section-local
    code points) of the section whose view is ``view`` and whose DocFragment is
    ``fragment`` of ``fragments``. A point in whitespace crengine collapses or drops maps
    forward to the next character it keeps (:meth:`CreView.point_at`)."""
    explicit = dom_version >= DOM_20260812
    point = view.point_at(source_offset)
    return _fragment_prefix(fragment, fragments, explicit) + view.path_of(
        point, explicit_first=explicit
    )


def offset_of_xpointer(view: CreView, xp: XPointer) -> int:
    """The section-local source offset an xpointer names in ``view`` (its DocFragment
    already chosen by the caller). Raises :class:`XPointerError` when the path names no
    node or the offset is past the node's text."""
    if xp.prefix and [n for n, _ in xp.prefix] != ["body"]:
        raise XPointerError(
            f"an EPUB xpointer starts /body/DocFragment, not /{'/'.join(n for n, _ in xp.prefix)}"
        )
    return view.resolve(xp)
