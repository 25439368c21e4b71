"""Reading positions and bookmarks: what a client sends, what the library returns (pure).

A **place** a reader keeps (where they are, what they bookmarked) arrives as a Locator in
one of five forms (:class:`PlaceIn`): an EPUB ``cfi`` (a point, or a range's start), a
``section`` + ``offset`` in book source coordinates (``unit`` ``codepoint`` or
``utf16``: plain text counts from the file's start, EPUB from the section's — as a
chunk's ``source_start`` / ``utf16_start``), a ``progression`` (0–1) in a section (named
by ``section`` or ``href``), a ``totalProgression`` (0–1) in the book, or a Readium
``position`` (from 1, over the positions list: :mod:`mindory.reading.readium`). The
library resolves it into the full :class:`~mindory.reading.locate.Locator` and keeps it like a
highlight: book source coordinates of an edition plus a text quote (``exact``: up to
:data:`PLACE_QUOTE_CHARS` code points after the place — before it at a section's end —
with 32 code points of ``prefix`` / ``suffix``), so a new edition re-anchors it.

:class:`Position` and :class:`Bookmark` are the stored records; their ``to_json()`` is
the shape both doors print (docs/reading-state.md).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from mindory.errors import MindoryError

__all__ = [
    "LOCAL_READER",
    "MAX_DEVICE_CHARS",
    "MAX_TITLE_CHARS",
    "PLACE_QUOTE_CHARS",
    "Bookmark",
    "PlaceIn",
    "PlaceStatus",
    "Position",
    "bookmark_id",
    "check_device",
    "check_title",
    "parse_time",
    "position_id",
    "quote_span",
]

# The reader of a library without readers, of the CLI without --user and of the server's
# own token (it has no row in the readers table).
LOCAL_READER = "local"
PLACE_QUOTE_CHARS = 32  # the text kept at a place, code points
MAX_DEVICE_CHARS = 128
MAX_TITLE_CHARS = 500
UNITS = ("codepoint", "utf16")

PlaceStatus = Literal["anchored", "orphaned"]


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MindoryError(f"a locator's {what} must be a whole number ≥ 0, not {value!r}")
    return value


def _fraction(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MindoryError(f"a locator's {what} must be a number in [0, 1], not {value!r}")
    f = float(value)
    if not math.isfinite(f) or not 0.0 <= f <= 1.0:
        raise MindoryError(f"a locator's {what} must be in [0, 1], not {value!r}")
    return f


def _position(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MindoryError(f"a locator's position must be a whole number ≥ 1, not {value!r}")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 4096:
        raise MindoryError(f"a locator's {what} must be a non-empty string")
    return value.strip()


@dataclass(frozen=True, slots=True)
class PlaceIn:
    """A place as a client names it (see the module doc); exactly one form."""

    cfi: str | None = None
    section: int | None = None
    offset: int | None = None
    unit: str = "codepoint"
    progression: float | None = None
    total_progression: float | None = None
    href: str | None = None
    position: int | None = None  # Readium's, from 1 (mindory.reading.readium)

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise MindoryError(f"unknown unit {self.unit!r}: use codepoint or utf16")
        forms = [
            self.cfi is not None,
            self.offset is not None,
            self.progression is not None,
            self.total_progression is not None,
            self.position is not None,
        ]
        if sum(forms) != 1:
            if sum(forms) == 0 and (self.section is not None or self.href is not None):
                return  # a section (or href) alone: its start
            raise MindoryError(
                "a locator names its place one way: a cfi, or section + offset, or "
                "progression (with section or href), or totalProgression, or a Readium "
                "position"
            )
        if self.cfi is not None and (self.section is not None or self.href is not None):
            raise MindoryError("give either a CFI or a section / href, not both")
        if self.offset is not None and self.section is None:
            raise MindoryError("an offset needs its section")
        if self.progression is not None and self.section is None and self.href is None:
            raise MindoryError("a progression needs its section or href")
        if self.total_progression is not None and (
            self.section is not None or self.href is not None
        ):
            raise MindoryError("totalProgression counts in the whole book: give no section")
        if self.position is not None and (self.section is not None or self.href is not None):
            raise MindoryError("a Readium position counts in the whole book: give no section")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlaceIn:
        """From the flat form (``cfi``, ``section``, ``offset``, ``unit``, ``progression``,
        ``totalProgression``, ``href``, ``position``) or a Readium / mindory Locator
        (``href``, ``section``, ``locations.cfi`` / ``progression`` / ``position`` /
        ``totalProgression``, ``source.start`` or ``source.utf16Start``). MindoryError if
        malformed."""
        if not isinstance(data, Mapping):
            raise MindoryError("a locator must be a JSON object")
        section, href, unit = data.get("section"), data.get("href"), data.get("unit", "codepoint")
        cfi, offset = data.get("cfi"), data.get("offset")
        progression, total = data.get("progression"), data.get("totalProgression")
        position = data.get("position")
        flat = any(v is not None for v in (cfi, offset, progression, total, position))
        if not flat and ("locations" in data or "source" in data):
            # A Locator (Readium's, or one mindory returned): its most exact form wins.
            locations, source = data.get("locations") or {}, data.get("source") or {}
            if not isinstance(locations, Mapping) or not isinstance(source, Mapping):
                raise MindoryError("a locator's locations and source must be objects")
            if section is not None and "start" in source:
                offset, unit = source["start"], "codepoint"
            elif section is not None and "utf16Start" in source:
                offset, unit = source["utf16Start"], "utf16"
            elif locations.get("cfi") is not None:
                cfi, section, href = locations["cfi"], None, None
            elif locations.get("progression") is not None and (section, href) != (None, None):
                progression = locations["progression"]
            elif locations.get("position") is not None:
                position, section, href = locations["position"], None, None
            elif locations.get("totalProgression") is not None:
                total, section, href = locations["totalProgression"], None, None
        if not isinstance(unit, str):
            raise MindoryError("a locator's unit must be codepoint or utf16")
        return cls(
            cfi=_str(cfi, "cfi") if cfi is not None else None,
            section=_int(section, "section") if section is not None else None,
            offset=_int(offset, "offset") if offset is not None else None,
            unit=unit,
            progression=_fraction(progression, "progression") if progression is not None else None,
            total_progression=_fraction(total, "totalProgression") if total is not None else None,
            href=_str(href, "href") if href is not None else None,
            position=_position(position) if position is not None else None,
        )


def quote_span(length: int, local: int, n: int = PLACE_QUOTE_CHARS) -> tuple[int, int]:
    """The section-local text quoted at a place ``local`` of a section of ``length``
    code points: the ``n`` after it, or at the very end the ``n`` before it."""
    if local < length:
        return local, min(length, local + n)
    return max(0, local - n), local


def _hash(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:32]


def bookmark_id(reader: str, book: str, section: int, point: int) -> str:
    """A bookmark's id: derived from (reader, book, place), never from insertion order."""
    return _hash("bookmark", reader, book, str(section), str(point))


def position_id(reader: str, book: str, device: str, modified: datetime) -> str:
    return _hash("position", reader, book, device, _iso(modified))


def check_device(device: str | None) -> str:
    d = (device or "").strip()
    if not d:
        raise MindoryError("a position needs the device it was read on (device)")
    if len(d) > MAX_DEVICE_CHARS or any(ord(c) < 32 for c in d):
        raise MindoryError(f"a device name has at most {MAX_DEVICE_CHARS} printable characters")
    return d


def check_title(title: str | None) -> str | None:
    if title is None or not title.strip():
        return None
    if len(title) > MAX_TITLE_CHARS:
        raise MindoryError(f"a bookmark title has at most {MAX_TITLE_CHARS} characters")
    return title.strip()


def parse_time(value: str | datetime) -> datetime:
    """An ISO 8601 time (a naive one is UTC) → an aware UTC datetime."""
    if isinstance(value, datetime):
        moment = value
    else:
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError as exc:
            raise MindoryError(f"modified must be an ISO 8601 time, not {value!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class _Kept:
    """What positions and bookmarks share: the place, its quote, its Locator."""

    id: str
    book: str
    edition: str
    status: PlaceStatus
    section: int
    href: str | None
    point: int
    source_start: int
    source_end: int
    exact: str
    prefix: str
    suffix: str
    locator: Mapping[str, Any]
    reanchored: Mapping[str, Any] | None

    def _place_json(self) -> dict[str, Any]:
        anchored = self.status == "anchored"
        out: dict[str, Any] = {
            "id": self.id,
            "book": self.book,
            "status": self.status,
            "locator": dict(self.locator) if anchored else None,
            "quote": {"exact": self.exact, "prefix": self.prefix, "suffix": self.suffix},
        }
        if not anchored:
            out["orphanedFrom"] = {
                "book": self.edition,
                "section": self.section,
                "href": self.href,
                "source": {"position": self.point},
            }
        out["reanchored"] = dict(self.reanchored) if self.reanchored is not None else None
        return out


@dataclass(frozen=True, slots=True)
class Position(_Kept):
    """A reading position as one device sent it; ``modified`` is the client's time."""

    device: str = ""
    modified: datetime = datetime.min.replace(tzinfo=UTC)
    received: datetime = datetime.min.replace(tzinfo=UTC)

    def to_json(self) -> dict[str, Any]:
        out = self._place_json()
        out["device"] = self.device
        out["modified"] = _iso(self.modified)
        out["received"] = _iso(self.received)
        return out


@dataclass(frozen=True, slots=True)
class Bookmark(_Kept):
    """A bookmark (``id``: see :func:`bookmark_id`)."""

    title: str | None = None
    created: datetime = datetime.min.replace(tzinfo=UTC)
    new: bool = False  # made by this call (not in the JSON: HTTP says 201)

    def to_json(self) -> dict[str, Any]:
        out = self._place_json()
        out["title"] = self.title
        out["created"] = _iso(self.created)
        return out
