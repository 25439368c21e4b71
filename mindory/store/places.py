"""Stored sections as :class:`~mindory.reading.locate.SectionPlace`: what locating a span
needs (texts, offset map, blocks, CFI table, byte offsets), loaded in few queries and
cached across calls by content keys (book SHA-256, ordinal, profile fingerprint)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError, NotFoundError
from mindory.reading.locate import SectionPlace, resolve_cfi
from mindory.store.tables import (
    block_table,
    book_table,
    chunk_table,
    derivation_table,
    normalization_table,
    section_table,
    section_text_table,
)
from mindory.text.byte_index import ByteIndex
from mindory.text.encoding import decode_bytes
from mindory.text.offsets import OffsetMap

# The reads here are Core statements on the tables: a search (mindory.search.hits)
# places its hits without importing the ORM (~0.2 s). The helpers at the end that take
# a Session are for callers that hold one already.
if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mindory.store.models import BookRow

# Section places (texts, offset map, blocks, CFI table) kept across searches: building
# one for a large EPUB section costs tens of milliseconds (mostly the CFI table).
# 1,024: the 183 reader questions over the corpus library rebuilt 362 places at 256
# (locate p50 15.4 → 9.6 ms without the entry limit); the character limit bounds memory.
PLACE_CACHE_ENTRIES = 1024


PLACE_CACHE_CHARS = 16_000_000


class ByteOffsets:
    """Code point → byte offset of a plain-text book: the stored chunk byte spans
    first; otherwise the book file is decoded once (exact ByteIndex)."""

    def __init__(self, read_book: Callable[[str], bytes], sha: str) -> None:
        self._read_book = read_book
        self._sha = sha
        self.known: dict[int, int] = {}
        self._index: ByteIndex | None = None
        self._tried = False
        # Shared across request threads: one decodes, the others wait for its index
        # (they must not see "tried, no index" while it is being built).
        self._lock = threading.Lock()

    def _load(self) -> ByteIndex | None:
        if self._tried:
            return self._index
        with self._lock:
            if not self._tried:
                try:
                    # Called while the caller holds a pooled connection: use the other pool.
                    data = self._read_book(self._sha)
                    self._index = ByteIndex(data, decode_bytes(data))
                except MindoryError:
                    self._index = None
                self._tried = True
        return self._index

    def can(self, positions: Iterable[int]) -> bool:
        return all(p in self.known for p in positions) or self._load() is not None

    def __call__(self, cp: int) -> int:
        found = self.known.get(cp)
        if found is not None:
            return found
        index = self._load()
        if index is None:
            raise MindoryError("the book file cannot be read: no byte offsets")
        return index.byte_offset(cp)


@dataclass
class BookFacts:
    sha: str
    title: str
    format: str
    file_name: str
    lengths: tuple[int, ...]
    bytes: ByteOffsets | None
    positions: tuple[int, ...] | None = None  # Readium position counts (reading/readium.py)


# Statements built once (building a select costs more than running it here).
_BOOKS_STMT = select(
    book_table.c.id,
    book_table.c.sha256,
    book_table.c.title,
    book_table.c.format,
    book_table.c.file_name,
    book_table.c.file_size,
).where(book_table.c.id.in_(bindparam("ids", expanding=True)))


_SPINE_STMT = (
    select(section_table.c.href, section_table.c.linear)
    .where(section_table.c.book_id == bindparam("id"))
    .order_by(section_table.c.ordinal)
)


_TXT_LENGTH_STMT = select(
    func.max(section_table.c.source_start + section_table.c.source_length)
).where(section_table.c.book_id == bindparam("id"))


_SPAN_LENGTHS_STMT = (
    select(section_table.c.source_length)
    .where(section_table.c.book_id == bindparam("id"))
    .order_by(section_table.c.ordinal)
)


_SECTIONS_STMT = (
    select(
        section_table.c.id,
        section_text_table.c.normalization_id,
        section_table.c.book_id,
        section_table.c.ordinal,
        section_table.c.title,
        section_table.c.href,
        section_table.c.media_type,
        section_table.c.source_start,
        section_table.c.utf16_start,
        section_table.c.source_text,
        section_table.c.cfi_table,
        section_text_table.c.id,
        section_text_table.c.normalized_text,
        section_text_table.c.offset_map,
    )
    .join(section_text_table, section_text_table.c.section_id == section_table.c.id)
    .where(
        section_table.c.id.in_(bindparam("sections", expanding=True)),
        section_text_table.c.normalization_id.in_(bindparam("normalizations", expanding=True)),
    )
)


_BLOCKS_STMT = (
    select(
        block_table.c.section_text_id,
        block_table.c.index,
        block_table.c.kind,
        block_table.c.level,
        block_table.c.start,
        block_table.c.end,
        block_table.c.source_start,
        block_table.c.source_end,
    )
    .where(block_table.c.section_text_id.in_(bindparam("ids", expanding=True)))
    .order_by(block_table.c.section_text_id, block_table.c.index)
)


HIT_ROWS_STMT = (
    select(
        chunk_table.c.id,
        chunk_table.c.chunk_id,
        chunk_table.c.section_id,
        chunk_table.c.start,
        chunk_table.c.end,
        chunk_table.c.source_start,
        chunk_table.c.source_end,
        chunk_table.c.byte_start,
        chunk_table.c.byte_end,
        chunk_table.c.context_start,
        chunk_table.c.context_end,
        derivation_table.c.normalization_id,
        derivation_table.c.book_id,
    )
    .join(derivation_table, derivation_table.c.id == chunk_table.c.derivation_id)
    .where(chunk_table.c.id.in_(bindparam("ids", expanding=True)))
)


_PLACE_KEYS_STMT = (
    select(
        section_table.c.id,
        section_text_table.c.normalization_id,
        book_table.c.sha256,
        section_table.c.ordinal,
        normalization_table.c.profile_fingerprint,
        section_table.c.book_id,
    )
    .join(section_text_table, section_text_table.c.section_id == section_table.c.id)
    .join(normalization_table, normalization_table.c.id == section_text_table.c.normalization_id)
    .join(book_table, book_table.c.id == section_table.c.book_id)
    .where(
        section_table.c.id.in_(bindparam("sections", expanding=True)),
        section_text_table.c.normalization_id.in_(bindparam("normalizations", expanding=True)),
    )
)


def block_spans(
    conn: Connection, text_ids: Sequence[int]
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per section text: its blocks' source starts and ends in block order (int64
    arrays, as stored: book coordinates). A large section has thousands of blocks: on
    SQLite the DB-API cursor reads them (SQLAlchemy's rows cost ~3 µs each)."""
    rows: Sequence[Any]
    if conn.dialect.name != "sqlite":
        rows = [(r[0], r[6], r[7]) for r in conn.execute(_BLOCKS_STMT, {"ids": list(text_ids)})]
    else:
        marks = ",".join("?" * len(text_ids))
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(
                "SELECT section_text_id, source_start, source_end FROM blocks "
                f'WHERE section_text_id IN ({marks}) ORDER BY section_text_id, "index"',
                list(text_ids),
            )
            rows = cursor.fetchall()
        finally:
            cursor.close()
    table = np.array(rows, dtype=np.int64).reshape(-1, 3)
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    cuts = np.flatnonzero(np.diff(table[:, 0])) + 1
    for part in np.split(table, cuts) if len(table) else []:
        out[int(part[0, 0])] = (part[:, 1].copy(), part[:, 2].copy())
    return out


class PlaceCache:
    """Section places across searches, keyed by what decides their content: the book's
    SHA-256, the section ordinal and the normalization profile's fingerprint (never by
    row ids, which SQLite may reuse). Bounded by entries and by characters held."""

    def __init__(self, max_entries: int = PLACE_CACHE_ENTRIES, max_chars: int = PLACE_CACHE_CHARS):
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._items: OrderedDict[tuple[str, int, str], SectionPlace] = OrderedDict()
        self._chars = 0
        self._bytes: dict[str, ByteOffsets] = {}
        self.book_lengths: dict[str, tuple[int, ...]] = {}  # book sha -> resource lengths
        # book sha -> Readium position counts per resource (None: the file is unreadable)
        self.book_positions: dict[str, tuple[int, ...] | None] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _size(place: SectionPlace) -> int:
        return len(place.source_text) + len(place.normalized_text)

    def get(self, key: tuple[str, int, str]) -> SectionPlace | None:
        with self._lock:
            place = self._items.get(key)
            if place is not None:
                self._items.move_to_end(key)
            return place

    def put(self, key: tuple[str, int, str], place: SectionPlace) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = place
            self._chars += self._size(place)
            while self._items and (
                len(self._items) > self.max_entries or self._chars > self.max_chars
            ):
                _, old = self._items.popitem(last=False)
                self._chars -= self._size(old)

    def byte_offsets(self, read_book: Callable[[str], bytes], sha: str) -> ByteOffsets:
        with self._lock:
            found = self._bytes.get(sha)
            if found is None:
                found = self._bytes[sha] = ByteOffsets(read_book, sha)
            return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes.clear()
            self.book_lengths.clear()
            self.book_positions.clear()
            self._chars = 0


class Places:
    """SectionPlaces from stored rows for one search or locate call.

    :meth:`prefetch` resolves many ``(section id, normalization id)`` pairs in one
    query of small columns, then loads (texts, map, blocks, CFI table) only the
    sections the library's :class:`PlaceCache` does not hold yet.
    """

    def __init__(
        self, cache: PlaceCache, conn: Connection, read_book: Callable[[str], bytes]
    ) -> None:
        self._cache = cache
        self._read_book = read_book
        self._conn = conn
        self._keys: dict[tuple[int, int], tuple[str, int, str, int]] = {}
        self._books: dict[int, BookFacts] = {}
        # This call's own references: a section larger than the shared cache's budget
        # is evicted at once, but must still serve the call that loaded it.
        self._local: dict[tuple[str, int, str], SectionPlace] = {}

    def _load_books(self, ids: Iterable[int]) -> None:
        wanted = sorted({int(i) for i in ids} - set(self._books))
        if not wanted:
            return
        cache = self._cache
        rows = self._conn.execute(_BOOKS_STMT, {"ids": wanted})
        for book_id, sha, title, fmt, file_name, file_size in rows:
            lengths = cache.book_lengths.get(sha)
            if lengths is None:
                if fmt == "txt":  # one resource: the file (its sections are contiguous)
                    end = self._conn.execute(_TXT_LENGTH_STMT, {"id": book_id}).scalar()
                    lengths = (int(end or 0),)
                else:  # one resource per spine document
                    lengths = tuple(
                        int(n)
                        for n in self._conn.execute(_SPAN_LENGTHS_STMT, {"id": book_id}).scalars()
                    )
                cache.book_lengths[sha] = lengths
            byte_offsets = cache.byte_offsets(self._read_book, sha) if fmt == "txt" else None
            if sha not in cache.book_positions:
                cache.book_positions[sha] = self._positions(int(book_id), sha, fmt, file_size)
            self._books[int(book_id)] = BookFacts(
                sha, title, fmt, file_name, lengths, byte_offsets, cache.book_positions[sha]
            )

    def _positions(self, book_id: int, sha: str, fmt: str, size: int) -> tuple[int, ...] | None:
        """Readium's position counts of the book's resources (plain text: the one file,
        by its size; EPUB: from its ZIP entries). None when the file cannot be read."""
        from mindory.reading.readium import epub_position_counts, position_count

        if fmt == "txt":
            return (position_count(int(size)),)
        from mindory.importers.epub_safety import open_checked

        spine = [(h, bool(lin)) for h, lin in self._conn.execute(_SPINE_STMT, {"id": book_id})]
        try:
            return epub_position_counts(open_checked(self._read_book(sha), sha), spine)
        except MindoryError:
            return None

    def book(self, book_id: int) -> BookFacts:
        if book_id not in self._books:
            self._load_books([book_id])
        return self._books[book_id]

    def prefetch(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Make the places of many ``(section id, normalization id)`` pairs ready."""
        wanted = {(int(a), int(b)) for a, b in pairs} - set(self._keys)
        if not wanted:
            return
        params = {
            "sections": sorted({a for a, _ in wanted}),
            "normalizations": sorted({b for _, b in wanted}),
        }
        for sid, nid, sha, ordinal, pfp, book_id in self._conn.execute(_PLACE_KEYS_STMT, params):
            if (int(sid), int(nid)) in wanted:
                self._keys[(int(sid), int(nid))] = (str(sha), int(ordinal), str(pfp), int(book_id))
        cache = self._cache
        missing = []
        for pair in wanted:
            key = self._keys.get(pair)
            if key is None:
                continue
            found = cache.get(key[:3])
            if found is None:
                missing.append(pair)
            else:
                self._local[key[:3]] = found
        if not missing:
            return
        params = {
            "sections": sorted({a for a, _ in missing}),
            "normalizations": sorted({b for _, b in missing}),
        }
        rows = [
            row
            for row in self._conn.execute(_SECTIONS_STMT, params)
            if (int(row[0]), int(row[1])) in missing
        ]
        self._load_books(int(r[2]) for r in rows)
        text_ids = [int(r[11]) for r in rows]
        shift_of = {int(r[11]): int(r[7]) for r in rows}
        spans = block_spans(self._conn, text_ids) if text_ids else {}
        none = np.zeros(0, dtype=np.int64)
        local = {
            t: (starts - shift_of[t], ends - shift_of[t]) for t, (starts, ends) in spans.items()
        }
        for row in rows:
            place = self._build(row, local.get(int(row[11]), (none, none)))
            key3 = self._keys[(int(row[0]), int(row[1]))][:3]
            self._local[key3] = place
            cache.put(key3, place)

    def _build(self, row: Any, blocks: tuple[np.ndarray, np.ndarray]) -> SectionPlace:
        (
            _sid,
            _nid,
            book_id,
            ordinal,
            title,
            href,
            media_type,
            ss,
            u16,
            source,
            table,
            _text_id,
            norm,
            omap,
        ) = row
        facts = self.book(int(book_id))
        cfi = None
        if table is not None:
            from mindory.importers.cfi import CfiDocument

            cfi = CfiDocument.from_json(str(table), source)
        is_txt = facts.format == "txt"
        return SectionPlace(
            book_format=facts.format,
            book_title=facts.title,
            ordinal=int(ordinal),
            href=facts.file_name if is_txt else (href or ""),
            media_type="text/plain" if is_txt else media_type,
            title=title,
            source_text=source,
            normalized_text=norm,
            offset_map=OffsetMap.from_bytes(omap),
            blocks=(),
            block_spans=blocks,
            resource_source_lengths=facts.lengths,
            resource_index=0 if is_txt else int(ordinal),
            source_start=int(ss),
            cfi=cfi,
            utf16_source_start=int(u16),
            byte_offset=facts.bytes,
            resource_positions=facts.positions,
        )

    def know_bytes(self, book_id: int, row: Any) -> None:
        """Record a stored chunk's byte span (plain text) for its book's byte lookup."""
        facts = self.book(int(book_id))
        if facts.bytes is not None and row.byte_start is not None and row.byte_end is not None:
            facts.bytes.known[int(row.source_start)] = int(row.byte_start)
            facts.bytes.known[int(row.source_end)] = int(row.byte_end)

    def get(self, section_id: int, normalization_id: int) -> SectionPlace:
        pair = (int(section_id), int(normalization_id))
        self.prefetch([pair])
        key = self._keys.get(pair)
        place = self._local.get(key[:3]) if key is not None else None
        if place is None:
            raise NotFoundError(
                f"no section row {section_id} under normalization {normalization_id}"
            )
        return place


def place_of(places: Places, s: Session, row: BookRow, ordinal: int) -> SectionPlace:
    """The place of a section under the book's current derivation."""
    from mindory.store.queries import get_derivation, get_section_id

    derivation = get_derivation(s, row, None)
    return places.get(get_section_id(s, row, ordinal), derivation.normalization_id)


def resolve_cfi_in(places: Places, s: Session, row: BookRow, cfi: str) -> tuple[int, int, int]:
    """An EPUB CFI of the book → (section ordinal, source start, source end)."""
    from mindory.importers.cfi import CfiError
    from mindory.store.queries import get_derivation

    derivation = get_derivation(s, row, None)
    with_tables = [
        places.get(i, derivation.normalization_id)
        for i in s.scalars(
            select(section_table.c.id).where(
                section_table.c.book_id == row.id, section_table.c.cfi_table.is_not(None)
            )
        )
    ]
    try:
        return resolve_cfi(with_tables, cfi)
    except CfiError as exc:
        raise MindoryError(f"{row.title!r}: {exc}") from exc
