"""Highlights and quote calibration: the shapes the library returns (pure).

A **highlight** is a reader's mark on a book, stored in **source coordinates** (the
book's source text: file-global code points for plain text, section-local for EPUB;
DESIGN §1) plus a W3C ``TextQuoteSelector`` (``exact`` and 32 code points of
``prefix`` / ``suffix``), the same span in UTF-16 units, and for EPUB the range CFI.
Re-chunking and re-normalizing never touch it. It belongs to a book by the book's
SHA-256, so importing the same file again (other chunk settings, say) changes nothing;
importing a changed file of the same book re-anchors it (``mindory.reading.anchoring.reanchor``,
see :class:`ReanchorReport`).

Every highlight is returned as a W3C Web Annotation (:meth:`Highlight.to_json`)::

    {"@context": "http://www.w3.org/ns/anno.jsonld", "type": "Annotation",
     "id": "urn:uuid:…", "motivation": "highlighting",
     "created": "…", "modified": "…",
     "body": [{"type": "TextualBody", "purpose": "highlighting", "value": "yellow"},
              {"type": "TextualBody", "purpose": "commenting", "format": "text/plain",
               "value": "the note"}],
     "target": {"source": "EPUB/ch1.xhtml",
                "selector": [TextQuoteSelector, TextPositionSelector, FragmentSelector]},
     "book": "<sha256>", "section": 3, "status": "anchored",
     "source": {"start": …, "end": …, "utf16Start": …, "utf16End": …},
     "reanchored": null | {…the last re-anchoring of it…}}

An **orphaned** highlight (a new edition where its text could not be placed with
confidence) keeps its old quote and its old place, which refers to the edition it was
made on (``edition``): it is listed with ``status: "orphaned"``, ``section`` and
``source`` ``null``, a target holding only the ``TextQuoteSelector``, and
``"orphanedFrom": {book, section, href, source}``.

No database here: :mod:`mindory.library` stores and loads these.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from mindory.errors import MindoryError
from mindory.reading.units import CFI_CONFORMS_TO, RFC5147_CONFORMS_TO

__all__ = [
    "ANNOTATION_CONTEXT",
    "COLORS",
    "DEFAULT_COLOR",
    "MAX_NOTE_CHARS",
    "MAX_QUOTE_CHARS",
    "Calibration",
    "Highlight",
    "HighlightStatus",
    "UNITS",
    "UNSET",
    "ReanchorReport",
    "Unset",
    "annotation_id",
    "check_color",
    "check_note",
    "mark_duplicates",
    "parse_highlight_id",
]

ANNOTATION_CONTEXT = "http://www.w3.org/ns/anno.jsonld"
# Named colours the reader page knows; any "#rrggbb" is accepted too.
COLORS = ("yellow", "green", "blue", "pink", "purple", "orange")
DEFAULT_COLOR = "yellow"
MAX_NOTE_CHARS = 10_000
MAX_QUOTE_CHARS = 10_000  # a quote to calibrate, code points
UNITS = ("codepoint", "utf16")  # what a highlight's start / end count
_HEX_COLOR = re.compile(r"#[0-9a-fA-F]{6}")

HighlightStatus = Literal["anchored", "orphaned"]


def annotation_id(uid: str) -> str:
    """The annotation IRI of a stored highlight id (32 hex digits)."""
    return f"urn:uuid:{uuid.UUID(hex=uid)}"


def parse_highlight_id(text: str) -> str | None:
    """A highlight id as stored (32 lowercase hex digits) from what a client sends:
    ``urn:uuid:…``, a UUID with or without hyphens. None if it is none of these."""
    raw = text.strip()
    if raw.lower().startswith("urn:uuid:"):
        raw = raw[9:]
    if not 32 <= len(raw) <= 36:
        return None
    try:
        return uuid.UUID(raw).hex
    except ValueError:
        return None


def check_color(color: str | None) -> str:
    """A colour to store: a name of :data:`COLORS` or ``#rrggbb`` (lowercased)."""
    if color is None:
        return DEFAULT_COLOR
    c = color.strip().lower()
    if c in COLORS or _HEX_COLOR.fullmatch(c):
        return c
    raise MindoryError(f"unknown colour {color!r}: use one of {', '.join(COLORS)} or #rrggbb")


def check_note(note: str | None) -> str | None:
    """A note to store (None or empty: no note)."""
    if note is None or not note.strip():
        return None
    if len(note) > MAX_NOTE_CHARS:
        raise MindoryError(f"the note has {len(note):,} characters; at most {MAX_NOTE_CHARS:,}")
    return note


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:  # SQLite hands back naive datetimes; they were UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat(timespec="milliseconds")


class Unset(enum.Enum):
    """The type of :data:`UNSET`: "leave this field as it is" in an update."""

    UNSET = "unset"


UNSET = Unset.UNSET


@dataclass(frozen=True, slots=True)
class Highlight:
    """One stored highlight (see the module doc for its JSON).

    ``source_start`` / ``source_end`` (code points) and ``utf16_start`` /
    ``utf16_end`` are book source coordinates of ``edition`` — the book itself
    for an anchored highlight, the edition it was last placed in for an orphan.
    ``target`` is the annotation's ``target.source``: the section's content
    document for EPUB, the file name for plain text.
    """

    id: str  # 32 hex digits
    book: str  # SHA-256 of the book it belongs to
    edition: str  # SHA-256 of the book its coordinates refer to
    format: str  # "epub" | "txt" (of the edition)
    status: HighlightStatus
    section: int
    href: str | None
    target: str
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    exact: str
    prefix: str
    suffix: str
    cfi: str | None
    note: str | None
    color: str
    created: datetime
    modified: datetime
    reanchored: Mapping[str, Any] | None = None
    duplicate_of: str | None = None  # the id of an earlier highlight of the same span

    @property
    def annotation_id(self) -> str:
        return annotation_id(self.id)

    def quote_selector(self) -> dict[str, Any]:
        return {
            "type": "TextQuoteSelector",
            "exact": self.exact,
            "prefix": self.prefix,
            "suffix": self.suffix,
        }

    def selectors(self) -> list[dict[str, Any]]:
        """W3C selectors: quote, position (code points), fragment (CFI or RFC 5147)."""
        out: list[dict[str, Any]] = [
            self.quote_selector(),
            {"type": "TextPositionSelector", "start": self.source_start, "end": self.source_end},
        ]
        if self.cfi is not None:
            out.append(
                {"type": "FragmentSelector", "value": self.cfi, "conformsTo": CFI_CONFORMS_TO}
            )
        elif self.format == "txt":
            out.append(
                {
                    "type": "FragmentSelector",
                    "value": f"char={self.source_start},{self.source_end}",
                    "conformsTo": RFC5147_CONFORMS_TO,
                }
            )
        return out

    def body(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {"type": "TextualBody", "purpose": "highlighting", "value": self.color}
        ]
        if self.note is not None:
            out.append(
                {
                    "type": "TextualBody",
                    "purpose": "commenting",
                    "format": "text/plain",
                    "value": self.note,
                }
            )
        return out

    def to_json(self) -> dict[str, Any]:
        anchored = self.status == "anchored"
        out: dict[str, Any] = {
            "@context": ANNOTATION_CONTEXT,
            "type": "Annotation",
            "id": self.annotation_id,
            "motivation": "commenting" if self.note is not None else "highlighting",
            "created": _iso(self.created),
            "modified": _iso(self.modified),
            "body": self.body(),
            "target": {
                "source": self.target,
                "selector": self.selectors() if anchored else [self.quote_selector()],
            },
            "book": self.book,
            "section": self.section if anchored else None,
            "status": self.status,
            "source": (
                {
                    "start": self.source_start,
                    "end": self.source_end,
                    "utf16Start": self.utf16_start,
                    "utf16End": self.utf16_end,
                }
                if anchored
                else None
            ),
            "note": self.note,
            "color": self.color,
        }
        if not anchored:
            out["orphanedFrom"] = {
                "book": self.edition,
                "section": self.section,
                "href": self.href,
                "source": {
                    "start": self.source_start,
                    "end": self.source_end,
                    "utf16Start": self.utf16_start,
                    "utf16End": self.utf16_end,
                },
            }
        out["reanchored"] = dict(self.reanchored) if self.reanchored is not None else None
        if self.duplicate_of is not None:  # the same span marked before: the app decides
            out["duplicate_of"] = annotation_id(self.duplicate_of)
        return out

    def same_span(self, other: Highlight) -> bool:
        """Both anchored on the same span of the same book."""
        return (
            self.status == other.status == "anchored"
            and self.book == other.book
            and self.section == other.section
            and self.source_start == other.source_start
            and self.source_end == other.source_end
        )


def mark_duplicates(found: list[Highlight]) -> list[Highlight]:
    """The highlights with ``duplicate_of`` set on each one whose span an earlier one
    (by creation time, then id) already marks; order kept."""
    from dataclasses import replace

    first: dict[tuple[str, int, int, int], Highlight] = {}
    for h in sorted(found, key=lambda x: (x.created, x.id)):
        if h.status == "anchored":
            first.setdefault((h.book, h.section, h.source_start, h.source_end), h)
    out: list[Highlight] = []
    for h in found:
        f = first.get((h.book, h.section, h.source_start, h.source_end))
        dup = f.id if h.status == "anchored" and f is not None and f.id != h.id else None
        out.append(h if dup == h.duplicate_of else replace(h, duplicate_of=dup))
    return out


@dataclass(frozen=True, slots=True)
class ReanchorReport:
    """What happened to one highlight (or reading position, or bookmark: ``kind``) when
    a new edition was imported.

    ``status`` is the re-anchoring step that placed it (``position``, ``exact``,
    ``normalized``, ``fuzzy``) or ``orphaned``; ``confidence`` the share of the
    stored quote and context found again (for an orphan: the best score a rejected
    candidate reached). ``old`` is where it was (book, section, span, quote);
    ``new`` where it is now (``None`` for an orphan, which keeps its old data).
    """

    id: str
    status: str
    confidence: float
    note: str
    old_book: str
    old_section: int
    old_source: tuple[int, int]
    old_exact: str
    new_book: str
    new_section: int | None = None
    new_source: tuple[int, int] | None = None
    new_utf16: tuple[int, int] | None = None
    new_exact: str | None = None
    changed: bool = False
    edits: int | None = None
    kind: str = "highlight"  # or "position", "bookmark" (docs/reading-state.md)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": annotation_id(self.id) if self.kind == "highlight" else self.id,
            "kind": self.kind,
            "status": self.status,
            "confidence": round(self.confidence, 4),
            "note": self.note,
            "changed": self.changed,
            "edits": self.edits,
            "old": {
                "book": self.old_book,
                "section": self.old_section,
                "source": {"start": self.old_source[0], "end": self.old_source[1]},
                "exact": self.old_exact,
            },
            "new": (
                None
                if self.new_source is None or self.new_utf16 is None
                else {
                    "book": self.new_book,
                    "section": self.new_section,
                    "source": {
                        "start": self.new_source[0],
                        "end": self.new_source[1],
                        "utf16Start": self.new_utf16[0],
                        "utf16End": self.new_utf16[1],
                    },
                    "exact": self.new_exact,
                }
            ),
        }

    def stored(self, when: datetime) -> dict[str, Any]:
        """The short form kept on the highlight (its ``reanchored`` field)."""
        return {
            "from": self.old_book,
            "status": self.status,
            "confidence": round(self.confidence, 4),
            "note": self.note,
            "at": _iso(when),
        }


@dataclass(frozen=True, slots=True)
class Calibration:
    """A quote calibrated against a book (``POST /books/{id}/anchors``).

    ``match`` is :class:`mindory.reading.anchoring.QuoteMatch` (method, raw quote, exact
    source span); ``locator`` the :class:`mindory.reading.locate.Locator` of the span
    (``None`` when rejected); ``scope`` says what was searched (``chunk``,
    ``section`` or ``book``) and ``min_prefix`` the shortest prefix that counted.
    """

    book: str
    match: Any  # mindory.reading.anchoring.QuoteMatch
    locator: Any  # mindory.reading.locate.Locator | None
    scope: str
    min_prefix: int
    chunk: str | None = None
    searched_section: int | None = None

    @property
    def method(self) -> str:
        return str(self.match.method)

    def to_json(self) -> dict[str, Any]:
        m = self.match.to_json()
        if self.locator is not None:
            m["source"] = {
                "start": self.locator.source_start,
                "end": self.locator.source_end,
                "utf16Start": self.locator.utf16_start,
                "utf16End": self.locator.utf16_end,
            }
        return {
            "book": self.book,
            **m,
            "scope": {"kind": self.scope, "section": self.searched_section, "chunk": self.chunk},
            "minPrefix": self.min_prefix,
            "locator": self.locator.to_json() if self.locator is not None else None,
        }
