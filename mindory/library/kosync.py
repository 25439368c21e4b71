"""KOReader's progress sync ("kosync", docs/apps.md): the library side of
``PUT /syncs/progress`` and ``GET /syncs/progress/{document}``.

KOReader names a book by a document key (:mod:`mindory.importers.document_keys`) and a
place by a crengine xpointer. A push becomes an ordinary reading position — source
coordinates + quote + Locator with both CFI flavours, like one the web reader saves —
with what KOReader sent kept beside it (``client``: the xpointer, its percentage, the
device id), never trusted over the place. A pull answers the reader's newest position,
whoever wrote it, as the xpointer of the same character; KOReader's own xpointer comes
back verbatim when KOReader wrote the newest position.

The newest write wins, as for positions everywhere; KOReader sends no time of its own
(the reference server stamps its arrival), so a push is stamped when it arrives — just
after the newest kept position if a device's clock ran ahead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from mindory.errors import MindoryError, NotFoundError
from mindory.library.state import State
from mindory.reading.positions import LOCAL_READER, PlaceIn
from mindory.store.annotations import utc
from mindory.store.document_keys import book_for_key, fill_missing_keys
from mindory.store.models import BookRow
from mindory.store.readers import latest_position

__all__ = ["SyncProgress", "SyncPushed", "book_sha_for_key", "pull_progress", "push_progress"]

MAX_FIELD = 4096  # an xpointer, a device name: longer is not KOReader's


@dataclass(frozen=True, slots=True)
class SyncPushed:
    """What a push answers: the document key and the time it was kept (Unix seconds)."""

    document: str
    timestamp: int
    book: str  # the book's SHA-256 (not part of the protocol's answer)

    def to_json(self) -> dict[str, Any]:
        return {"document": self.document, "timestamp": self.timestamp}


@dataclass(frozen=True, slots=True)
class SyncProgress:
    """The reader's newest position as KOReader reads it (empty: none yet)."""

    document: str
    progress: str | None = None
    percentage: float | None = None
    device: str | None = None
    device_id: str | None = None
    timestamp: int | None = None

    def to_json(self) -> dict[str, Any]:
        if self.progress is None:
            return {}  # the reference server answers 200 {} when it has nothing
        out: dict[str, Any] = {
            "document": self.document,
            "progress": self.progress,
            "percentage": self.percentage,
            "device": self.device,
        }
        if self.device_id is not None:
            out["device_id"] = self.device_id
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        return out


def _book(st: State, document: str) -> BookRow:
    key = document.strip().lower()
    with st.read() as s:
        row = book_for_key(s, key)
    if row is None:
        # books imported before revision 0009 get their keys on first need
        with st.write() as w:
            filled = fill_missing_keys(w)
        if filled:
            with st.read() as s:
                row = book_for_key(s, key)
    if row is None:
        raise NotFoundError(
            f"no book in this library has the KOReader document key {document!r} "
            "(import the same file into mindory)"
        )
    return row


def book_sha_for_key(st: State, document: str) -> str:
    return _book(st, document).sha256


def _check_text(name: str, value: object, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_FIELD:
        raise MindoryError(f"field {name!r} must be a non-empty string of at most {MAX_FIELD}")
    return value


def push_progress(
    st: State,
    *,
    document: str,
    progress: object,
    percentage: object,
    device: object,
    device_id: object = None,
    reader: str = LOCAL_READER,
) -> SyncPushed:
    """Keep KOReader's position: MindoryError (nothing written) for a malformed field or
    xpointer, NotFoundError for an unknown document key."""
    from mindory.library import positions
    from mindory.library.xpointers import place_of_xpointer

    xpointer = _check_text("progress", progress)
    device_name = _check_text("device", device)
    dev_id = _check_text("device_id", device_id, required=False)
    if isinstance(percentage, bool) or not isinstance(percentage, int | float | str):
        raise MindoryError("field 'percentage' must be a number")
    try:
        fraction = float(percentage)
    except ValueError as exc:
        raise MindoryError(f"field 'percentage' must be a number, not {percentage!r}") from exc
    if not math.isfinite(fraction):
        raise MindoryError("field 'percentage' must be a finite number")
    assert xpointer is not None and device_name is not None
    row = _book(st, document)
    section, offset = place_of_xpointer(st, row.sha256, xpointer)
    now = datetime.now(UTC)
    when = now.replace(microsecond=now.microsecond // 1000 * 1000)
    with st.read() as s:
        current = latest_position(s, reader, row.sha256)
        if current is not None and utc(current.modified) >= when:
            when = utc(current.modified) + timedelta(milliseconds=1)
    client = {
        "app": "koreader",
        "document": document,
        "progress": xpointer,
        "percentage": fraction,
        "device_id": dev_id,
    }
    kept = positions.set_position(
        st,
        row.sha256,
        PlaceIn(section=section, offset=offset),
        device=device_name[:128],
        modified=when,
        reader=reader,
        client=client,
    )
    return SyncPushed(document=document, timestamp=int(kept.modified.timestamp()), book=row.sha256)


def pull_progress(st: State, document: str, *, reader: str = LOCAL_READER) -> SyncProgress:
    """The reader's newest position in the book KOReader names, as an xpointer."""
    row = _book(st, document)
    with st.read() as s:
        current = latest_position(s, reader, row.sha256)
        if current is None or current.status != "anchored":
            return SyncProgress(document=document)
        client = dict(current.client or {})
        section, point = int(current.section), int(current.point)
        device = current.device
        stamp = int(utc(current.modified).timestamp())
        locator = current.locator or {}
    total = (locator.get("locations") or {}).get("totalProgression")
    if client.get("app") == "koreader" and isinstance(client.get("progress"), str):
        # KOReader wrote it: give its own xpointer back, unchanged
        xp = str(client["progress"])
        pct = client.get("percentage")
        percentage = float(pct) if isinstance(pct, int | float) else None
    else:
        from mindory.library.xpointers import xpointer_of

        xp = xpointer_of(st, row.sha256, section, point)
        percentage = None
    if percentage is None:
        percentage = round(float(total), 4) if isinstance(total, int | float) else 0.0
    dev_id = client.get("device_id")
    return SyncProgress(
        document=document,
        progress=xp,
        percentage=percentage,
        device=device,
        device_id=str(dev_id) if dev_id else None,
        timestamp=stamp,
    )
