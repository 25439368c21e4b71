"""Ingest: a new file through the pipeline (importers → normalize → chunking) into the
store in one transaction.

Parsing, normalizing and chunking happen before any write; the write is one
transaction (``BEGIN IMMEDIATE`` on SQLite, so two writers queue), so a killed import
leaves no trace. Imported by :mod:`mindory.library.importing` only when a file is new:
an unchanged re-import never loads the importers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter
from typing import Any, TypeVar

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from mindory.errors import MindoryError
from mindory.importers import load_book
from mindory.library.highlights import new_edition, reanchor_stored
from mindory.library.records import (
    ImportResult,
    ImportStatus,
    ProgressFn,
)
from mindory.library.state import State
from mindory.store.models import BookRow, DerivationRow
from mindory.store.queries import count_blocks, make_current
from mindory.store.writes import (
    PreparedBook,
    check_sections,
    chunk_row,
    insert_book,
    insert_chunks,
    insert_normalization,
    insert_terms,
    note_analysis,
)
from mindory.text.chunking import chunk_book
from mindory.text.records import Book, Chunk, Settings, walk_toc

T = TypeVar("T")


# The importers normalize while they parse (EPUB text is normalized while the
# DOM is walked), so "normalize" time is measured by timing their
# normalization entry points while an import runs in this context.
_PHASE_TIMES: ContextVar[dict[str, float] | None] = ContextVar("mindory_phase_times", default=None)


def _timed(fn: Callable[..., T], phase: str) -> Callable[..., T]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        acc = _PHASE_TIMES.get()
        if acc is None:
            return fn(*args, **kwargs)
        t = perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[phase] = acc.get(phase, 0.0) + perf_counter() - t

    wrapper.__mindory_timed__ = True  # type: ignore[attr-defined]
    return wrapper


def _install_phase_timers() -> None:
    from mindory.importers import epub, text

    for module, name in ((text, "normalize"), (epub, "extract_text")):
        fn = getattr(module, name, None)
        if callable(fn) and not getattr(fn, "__mindory_timed__", False):
            setattr(module, name, _timed(fn, "normalize"))


_install_phase_timers()


def ingest(
    st: State,
    p: Path,
    data: bytes,
    sha: str,
    settings: Settings,
    *,
    copy: bool,
    report: ProgressFn,
    old: str | None,
    timings: dict[str, float],
    t_start: float,
    stored: Callable[[], ImportResult | None],
) -> ImportResult:
    """Parse, normalize and chunk a file that is not stored with these settings yet,
    then write it in one transaction (:func:`store_prepared`). ``stored`` looks for the
    book again (another writer may store it first)."""
    report("parse", 0, 1)
    t = perf_counter()
    phase_times: dict[str, float] = {}
    token = _PHASE_TIMES.set(phase_times)
    try:
        book = load_book(p, settings.profile)
    finally:
        _PHASE_TIMES.reset(token)
    if book.sha256 != sha:
        raise MindoryError("the file changed while it was being imported", path=str(p))
    # CFI tables are built here, not inside the write transaction.
    cfi_tables, cfi_warnings = _cfi_tables(book)
    elapsed = perf_counter() - t
    timings["normalize"] = min(phase_times.get("normalize", 0.0), elapsed)
    timings["parse"] = elapsed - timings["normalize"]
    report("parse", 1, 1)

    report("chunk", 0, 1)
    t = perf_counter()
    chunks = chunk_book(book, settings)
    prepared = PreparedBook(
        path=p,
        book=book,
        data=data,
        copy=copy,
        settings=settings,
        chunks=chunks,
        byte_spans=_byte_spans(book, chunks),
        cfi_tables=cfi_tables,
        warnings=(*book.warnings, *cfi_warnings),
    )
    timings["chunk"] = perf_counter() - t
    report("chunk", 1, 1)
    t = perf_counter()
    prepared = replace(prepared, **book_terms(book, chunks))
    timings["terms"] = perf_counter() - t

    t = perf_counter()
    try:
        result = store_prepared(st, prepared, report, old)
    except IntegrityError:
        # Another writer stored the same book first (possible without
        # SQLite's BEGIN IMMEDIATE, e.g. on PostgreSQL): look again.
        found = stored()
        if found is None:
            result = store_prepared(st, prepared, report, old)
        else:
            return reanchor_stored(st, found, old) if old is not None else found
    timings["write"] = perf_counter() - t
    timings["total"] = perf_counter() - t_start
    return _with_timings(result, timings)


def book_terms(book: Book, chunks: Sequence[Chunk]) -> dict[str, Any]:
    """The word index of a book's chunks: ``terms`` (one string per chunk) and the
    ``analysis`` fingerprint (:mod:`mindory.search.words`)."""
    from mindory.search import words

    language = words.language_of(book.language, book.sections[0].normalized_text[:20_000])
    return {
        "terms": [" ".join(words.text_terms(c.text, language)) for c in chunks],
        "analysis": words.fingerprint(),
    }


def _with_timings(result: ImportResult, timings: dict[str, float]) -> ImportResult:
    return replace(result, timings=dict(timings))


def _result(
    prepared: PreparedBook,
    status: ImportStatus,
    chunks: int,
    blocks: int,
    toc_entries: int,
    made_current: bool,
) -> ImportResult:
    book = prepared.book
    return ImportResult(
        path=str(prepared.path),
        book=book.sha256,
        title=book.title,
        format=book.format,
        status=status,
        fingerprint=prepared.settings.fingerprint,
        sections=len(book.sections),
        chunks=chunks,
        blocks=blocks,
        toc_entries=toc_entries,
        warnings=prepared.warnings,
        made_current=made_current,
    )


def _byte_spans(book: Book, chunks: Sequence[Chunk]) -> list[tuple[int, int]] | None:
    index = getattr(book.source, "bytes_index", None) if book.format == "txt" else None
    if index is None:
        return None
    return [(index.byte_offset(c.source_start), index.byte_offset(c.source_end)) for c in chunks]


def _cfi_tables(book: Book) -> tuple[list[str | None], list[str]]:
    """Per section, the serialized CFI table (EPUB content documents), and warnings.

    Stored without the text (the section's source text is stored beside it).
    """
    tables: list[str | None] = []
    warnings: list[str] = []
    for sec in book.sections:
        table: str | None = None
        if book.format == "epub" and sec.parser != "none" and sec.dom is not None:
            try:
                cfi = getattr(sec.dom, "cfi", None)
                if cfi is not None:
                    table = str(cfi.to_json(include_text=False))
            except MindoryError as exc:
                warnings.append(f"section {sec.ordinal} ({sec.href}): no CFI table: {exc}")
        tables.append(table)
    return tables, warnings


def store_prepared(
    st: State, prepared: PreparedBook, report: ProgressFn, replaces: str | None = None
) -> ImportResult:
    book, settings = prepared.book, prepared.settings
    chunks, byte_spans = prepared.chunks, prepared.byte_spans
    now = datetime.now(UTC)
    fingerprint = settings.fingerprint
    total_rows = len(chunks)
    report("write", 0, total_rows)
    with st.write() as s:
        book_row = s.scalar(select(BookRow).where(BookRow.sha256 == book.sha256))
        status: ImportStatus
        if book_row is None:
            status = "created"
            book_id, section_ids = insert_book(s, prepared, now)
            toc_count = sum(1 for _ in walk_toc(book.toc))
        else:
            book_id = book_row.id
            toc_count = book_row.toc_count
            existing = s.scalar(
                select(DerivationRow).where(
                    DerivationRow.book_id == book_id, DerivationRow.fingerprint == fingerprint
                )
            )
            if existing is not None:
                # Stored by another writer meanwhile: nothing to do.
                made_current = not existing.is_current
                if made_current:
                    make_current(s, book_id, existing.id)
                blocks = count_blocks(s, existing.normalization_id)
                moved = new_edition(st, s, prepared.book, "unchanged", replaces)
                return replace(
                    _result(
                        prepared,
                        "unchanged",
                        existing.chunk_count,
                        blocks,
                        toc_count,
                        made_current,
                    ),
                    **moved,
                )
            status = "rederived"
            section_ids = check_sections(s, book_id, book)
        normalization_id, block_total = insert_normalization(
            s, book_id, book, settings, section_ids
        )
        s.execute(
            update(DerivationRow)
            .where(DerivationRow.book_id == book_id, DerivationRow.is_current.is_(True))
            .values(is_current=False)
        )
        conn = s.connection()
        derivation_id = conn.execute(
            insert(DerivationRow).returning(DerivationRow.id),
            {
                "book_id": book_id,
                "normalization_id": normalization_id,
                "settings": settings.to_dict(),
                "fingerprint": fingerprint,
                "is_current": True,
                "chunk_count": len(chunks),
                "created_at": now,
            },
        ).scalar_one()
        step = max(1, st.write_batch)
        for lo in range(0, total_rows, step):
            batch = chunks[lo : lo + step]
            rows = [
                chunk_row(c, derivation_id, section_ids[c.section], byte_spans, lo + k)
                for k, c in enumerate(batch)
            ]
            insert_chunks(conn, rows)
            report("write", min(lo + step, total_rows), total_rows)
        if prepared.terms is not None and prepared.analysis is not None:
            insert_terms(conn, derivation_id, section_ids, chunks, prepared.terms)
            note_analysis(s, prepared.analysis)
        moved = new_edition(st, s, book, status, replaces)
    report("write", total_rows, total_rows)
    return replace(_result(prepared, status, len(chunks), block_total, toc_count, False), **moved)
