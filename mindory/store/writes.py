"""The rows an import writes, inside the caller's transaction: the book, its file,
sections, TOC, a normalization (texts, maps, blocks) and the chunks of a derivation.
Bulk chunk inserts are dialect-specific (SQLite: multi-row VALUES through the cursor)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from mindory.errors import MindoryError
from mindory.store.models import (
    BlockRow,
    BookFileRow,
    BookRow,
    ChunkRow,
    ChunkTermsRow,
    LibraryFactRow,
    NormalizationRow,
    SectionRow,
    SectionTextRow,
    TocEntryRow,
)
from mindory.store.queries import count_blocks
from mindory.text.records import Book, Chunk, Settings, profile_fingerprint, walk_toc


@dataclass(frozen=True)
class PreparedBook:
    """Everything an import writes, computed before the write transaction starts."""

    path: Path
    book: Book
    data: bytes
    copy: bool
    settings: Settings
    chunks: Sequence[Chunk]
    byte_spans: Sequence[tuple[int, int]] | None
    cfi_tables: Sequence[str | None]
    warnings: tuple[str, ...]
    terms: Sequence[str] | None = None  # per chunk: its analysed terms, space separated
    analysis: str | None = None  # the fingerprint of the analysis that made them


_SQLITE_MAX_VARIABLES = 32766  # SQLite >= 3.32


def insert_chunks(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert chunk rows. On SQLite as multi-row ``INSERT … VALUES`` statements through
    the DB-API cursor (inside the same transaction): the FTS5 trigger then indexes a
    whole batch at once — row by row (executemany), FTS5 flushes its buffer at every
    statement and the corpus import took 3.4x as long; SQLAlchemy's compiler is slow for
    such statements, so the SQL is written here."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(insert(ChunkRow), list(rows))
        return
    cols = list(rows[0])
    per = max(1, _SQLITE_MAX_VARIABLES // len(cols))
    head = f"INSERT INTO chunks ({', '.join(chr(34) + c + chr(34) for c in cols)}) VALUES "
    one = "(" + ",".join("?" * len(cols)) + ")"
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for lo in range(0, len(rows), per):
            part = rows[lo : lo + per]
            cursor.execute(head + ",".join([one] * len(part)), [r[c] for r in part for c in cols])
    finally:
        cursor.close()


def chunk_row(
    c: Chunk,
    derivation_id: int,
    section_id: int,
    byte_spans: Sequence[tuple[int, int]] | None,
    k: int,
) -> dict[str, Any]:
    context = getattr(c, "context", None)  # parent-child chunking: the parent's span
    return {
        "chunk_id": c.id,
        "derivation_id": derivation_id,
        "section_id": section_id,
        "index": c.index,
        "start": c.start,
        "end": c.end,
        "source_start": c.source_start,
        "source_end": c.source_end,
        "utf16_start": c.utf16_start,
        "utf16_end": c.utf16_end,
        "byte_start": byte_spans[k][0] if byte_spans else None,
        "byte_end": byte_spans[k][1] if byte_spans else None,
        "context_start": context[0] if context else None,
        "context_end": context[1] if context else None,
        "text": c.text,
    }


def insert_book(s: Session, prepared: PreparedBook, now: datetime) -> tuple[int, dict[int, int]]:
    book, data, copy, p = prepared.book, prepared.data, prepared.copy, prepared.path
    conn = s.connection()
    book_id = conn.execute(
        insert(BookRow).returning(BookRow.id),
        {
            "sha256": book.sha256,
            "title": book.title,
            "format": book.format,
            "file_name": book.file_name,
            "file_size": len(data),
            "encoding": book.encoding,
            "lossy": book.lossy,
            "bad_bytes": book.bad_bytes,
            "first_bad_byte": book.first_bad_byte,
            "creators": list(book.creators),
            "language": book.language,
            "identifiers": list(book.identifiers),
            "warnings": list(prepared.warnings),
            "section_count": len(book.sections),
            "toc_count": sum(1 for _ in walk_toc(book.toc)),
            "imported_at": now,
        },
    ).scalar_one()
    conn.execute(
        insert(BookFileRow),
        {
            "book_id": book_id,
            "data": data if copy else None,
            "path": None if copy else str(p.resolve()),
            "size": len(data),
        },
    )
    # KOReader's names for this file (its progress sync finds the book by them)
    from mindory.store.document_keys import insert_keys

    insert_keys(s, book.sha256, data, book.file_name)
    utf16 = getattr(book.source, "utf16", None) if book.format == "txt" else None
    section_rows = [
        {
            "book_id": book_id,
            "ordinal": sec.ordinal,
            "title": sec.title,
            "href": sec.href,
            "media_type": sec.media_type,
            "parser": sec.parser,
            "linear": sec.linear,
            "source_start": sec.source_start,
            "utf16_start": utf16.to_utf16(sec.source_start) if utf16 else sec.source_start,
            "source_length": len(sec.source_text),
            "source_text": sec.source_text,
            "cfi_table": table,
        }
        for sec, table in zip(book.sections, prepared.cfi_tables)
    ]
    # Many rows per statement (executemany), then read the new ids back by key.
    conn.execute(insert(SectionRow), section_rows)
    section_ids = {
        int(o): int(i)
        for i, o in conn.execute(
            select(SectionRow.id, SectionRow.ordinal).where(SectionRow.book_id == book_id)
        )
    }
    # TOC: insert flat (depth-first order), then link each entry to its parent.
    walk = list(walk_toc(book.toc))
    if not walk:
        return book_id, section_ids
    conn.execute(
        insert(TocEntryRow),
        [
            {
                "book_id": book_id,
                "parent_id": None,
                "position": position,
                "depth": depth,
                "title": entry.title,
                "href": entry.href,
                "section_ordinal": entry.section,
                "source_offset": entry.source_offset,
            }
            for position, (entry, depth) in enumerate(walk)
        ],
    )
    id_at = dict(
        conn.execute(
            select(TocEntryRow.position, TocEntryRow.id).where(TocEntryRow.book_id == book_id)
        ).all()
    )
    toc_ids = [int(id_at[position]) for position in range(len(walk))]
    links: list[dict[str, int]] = []
    parents: list[int] = []  # the id of the last entry at each depth
    for entry_id, (_, depth) in zip(toc_ids, walk):
        del parents[depth:]
        if parents:
            links.append({"entry": entry_id, "parent": parents[-1]})
        parents.append(entry_id)
    if links:
        conn.execute(
            update(TocEntryRow)
            .where(TocEntryRow.id == bindparam("entry"))
            .values(parent_id=bindparam("parent")),
            links,
        )
    return book_id, section_ids


def check_sections(s: Session, book_id: int, book: Book) -> dict[int, int]:
    """Section ids of a stored book, after checking the new parse has the same sections.

    Sections hold only what does not depend on the settings; a profile that
    changed them would need a new model, so it is refused instead of stored
    inconsistently.
    """
    stored = s.execute(
        select(SectionRow.id, SectionRow.ordinal, SectionRow.source_start, SectionRow.source_text)
        .where(SectionRow.book_id == book_id)
        .order_by(SectionRow.ordinal)
    ).all()
    same = len(stored) == len(book.sections) and all(
        (o, ss, st) == (sec.ordinal, sec.source_start, sec.source_text)
        for (_, o, ss, st), sec in zip(stored, book.sections)
    )
    if not same:
        raise MindoryError(
            "these settings split the book into different sections than the stored import; "
            "delete the book and import it again",
            path=book.file_name,
        )
    return {int(o): int(sid) for sid, o, _, _ in stored}


def insert_normalization(
    s: Session, book_id: int, book: Book, settings: Settings, section_ids: dict[int, int]
) -> tuple[int, int]:
    """The normalization row for the settings' profile (created with its section
    texts and blocks when new); returns (id, number of blocks)."""
    pfp = profile_fingerprint(settings.profile)
    found = s.execute(
        select(NormalizationRow.id).where(
            NormalizationRow.book_id == book_id, NormalizationRow.profile_fingerprint == pfp
        )
    ).scalar()
    if found is not None:
        return int(found), count_blocks(s, found)
    conn = s.connection()
    normalization_id = conn.execute(
        insert(NormalizationRow).returning(NormalizationRow.id),
        {"book_id": book_id, "profile": asdict(settings.profile), "profile_fingerprint": pfp},
    ).scalar_one()
    conn.execute(
        insert(SectionTextRow),
        [
            {
                "normalization_id": normalization_id,
                "section_id": section_ids[sec.ordinal],
                "normalized_text": sec.normalized_text,
                "offset_map": sec.offset_map.to_bytes(),
                "edit_count": sec.offset_map.edit_count,
                "block_count": len(sec.blocks),
            }
            for sec in book.sections
        ],
    )
    text_id_of = dict(
        conn.execute(
            select(SectionTextRow.section_id, SectionTextRow.id).where(
                SectionTextRow.normalization_id == normalization_id
            )
        ).all()
    )
    block_rows: list[dict[str, Any]] = []
    for sec in book.sections:
        text_id = text_id_of[section_ids[sec.ordinal]]
        shift = sec.source_start
        block_rows.extend(
            {
                "section_text_id": text_id,
                "index": k,
                "kind": b.kind,
                "level": b.level,
                "start": b.start,
                "end": b.end,
                "source_start": b.source_start + shift,
                "source_end": b.source_end + shift,
            }
            for k, b in enumerate(sec.blocks)
        )
    if block_rows:
        conn.execute(insert(BlockRow), block_rows)
    return int(normalization_id), len(block_rows)


def insert_terms(
    conn: Connection,
    derivation_id: int,
    section_ids: dict[int, int],
    chunks: Sequence[Chunk],
    terms: Sequence[str],
) -> None:
    """The word index rows of a derivation's chunks (``terms[k]`` is ``chunks[k]``'s)."""
    row_of = {
        (int(sid), int(index)): int(rid)
        for rid, sid, index in conn.execute(
            select(ChunkRow.id, ChunkRow.section_id, ChunkRow.index).where(
                ChunkRow.derivation_id == derivation_id
            )
        )
    }
    rows = [
        {"chunk_id": row_of[(section_ids[c.section], c.index)], "terms": t}
        for c, t in zip(chunks, terms, strict=True)
    ]
    if rows:
        conn.execute(insert(ChunkTermsRow), rows)


def set_fact(s: Session, key: str, value: str) -> None:
    """Store a library fact (insert or replace)."""
    found = s.get(LibraryFactRow, key)
    if found is None:
        s.add(LibraryFactRow(key=key, value=value))
    elif found.value != value:
        found.value = value
    s.flush()


WORD_ANALYSIS = "word_analysis"  # library_facts key: the analysis of the whole word index


def note_analysis(s: Session, analysis: str) -> None:
    """Record that terms made by ``analysis`` were written: the word index's fact becomes
    ``analysis`` when it had none, and ``mixed`` when it held another (a rebuild mends it)."""
    found = s.get(LibraryFactRow, WORD_ANALYSIS)
    if found is None:
        set_fact(s, WORD_ANALYSIS, analysis)
    elif found.value != analysis:
        set_fact(s, WORD_ANALYSIS, "mixed")
