"""Import: a file through the pipeline (importers → normalize → chunking) into the store
in one transaction, or ``unchanged`` when the same bytes and settings are already there.

Parsing, normalizing and chunking happen before any write; the write is one transaction
(``BEGIN IMMEDIATE`` on SQLite, so two writers queue), so a killed import leaves no trace."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter
from typing import Any, TypeVar

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from mindory.errors import MindoryError
from mindory.importers import load_book
from mindory.library.highlights import new_edition, reanchor_stored, replaced_book
from mindory.library.records import (
    ImportFailure,
    ImportResult,
    ImportStatus,
    ProgressFn,
    no_progress,
)
from mindory.library.state import State
from mindory.store.models import BookRow, DerivationRow
from mindory.store.queries import count_blocks, make_current, read_file
from mindory.store.writes import (
    PreparedBook,
    check_sections,
    chunk_row,
    insert_book,
    insert_chunks,
    insert_normalization,
)
from mindory.text.chunking import chunk_book
from mindory.text.records import Book, Chunk, Settings, walk_toc

BOOK_SUFFIXES = frozenset({".txt", ".epub"})


WRITE_BATCH = 1000  # chunk rows per INSERT batch (one progress report each)


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


def book_files_in(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files to import: named files as given, folders searched recursively for
    ``.txt``/``.epub`` (hidden entries skipped), in a stable order, no duplicates."""
    out: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and f.suffix.lower() in BOOK_SUFFIXES
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
        else:
            found = [p]
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


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


def import_book(
    st: State,
    path: str | os.PathLike[str],
    settings: Settings | None = None,
    *,
    copy: bool = True,
    progress: ProgressFn | None = None,
    replaces: str | None = None,
) -> ImportResult:
    """Import one file; see the module doc for what ``unchanged`` costs.

    ``copy=False`` stores the file's path instead of its bytes. Raises a
    MindoryError (naming the file) for bad input; nothing is written then.

    A new edition: ``replaces`` names a book (any ref) this file is a changed
    version of; every highlight of that book is re-anchored onto this one in the
    same transaction, and the result reports each (``reanchored``). Without it, a
    file that is a new book takes over the highlights of the other books sharing a
    package identifier with it (EPUB ``dc:identifier``). The old book is kept.
    """
    settings = settings or Settings()
    report = progress or no_progress
    p = Path(path)
    timings: dict[str, float] = {}
    t_start = perf_counter()

    report("read", 0, 1)
    data = read_file(p)
    sha = hashlib.sha256(data).hexdigest()
    timings["read"] = perf_counter() - t_start
    report("read", 1, 1)
    old = replaced_book(st, p, sha, replaces) if replaces is not None else None

    fingerprint = settings.fingerprint
    found = unchanged(st, p, sha, fingerprint, timings, t_start)
    if found is not None:
        return reanchor_stored(st, found, old) if old is not None else found

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
    try:
        result = store_prepared(st, prepared, report, old)
    except IntegrityError:
        # Another writer stored the same book first (possible without
        # SQLite's BEGIN IMMEDIATE, e.g. on PostgreSQL): look again.
        found = unchanged(st, p, sha, fingerprint, timings, t_start)
        if found is None:
            result = store_prepared(st, prepared, report, old)
        else:
            return reanchor_stored(st, found, old) if old is not None else found
    timings["write"] = perf_counter() - t
    timings["total"] = perf_counter() - t_start
    return _with_timings(result, timings)


def import_many(
    st: State,
    paths: Iterable[str | os.PathLike[str]],
    settings: Settings | None = None,
    *,
    copy: bool = True,
    progress: Callable[[Path], ProgressFn | None] | None = None,
    replaces: str | None = None,
) -> Iterator[ImportResult | ImportFailure]:
    """Import files and folders (see :func:`book_files_in`), one transaction per
    book; a bad file yields an :class:`ImportFailure` and the batch goes on.
    ``replaces`` is passed to every :meth:`import_book` (meant for one file)."""
    for p in book_files_in(paths):
        try:
            yield import_book(
                st,
                p,
                settings,
                copy=copy,
                progress=progress(p) if progress else None,
                replaces=replaces,
            )
        except SQLAlchemyError:
            raise  # the database, not the file: stop
        except MindoryError as exc:
            yield ImportFailure(str(p), str(exc), type(exc).__name__)
        except Exception as exc:  # noqa: BLE001 - one bad book must not stop the batch
            yield ImportFailure(str(p), f"{p}: {type(exc).__name__}: {exc}", type(exc).__name__)


def unchanged(
    st: State, p: Path, sha: str, fingerprint: str, timings: dict[str, float], t_start: float
) -> ImportResult | None:
    """The result for an already imported (book, settings), or None."""
    with st.read() as s:
        row = s.execute(
            select(BookRow, DerivationRow)
            .join(DerivationRow, DerivationRow.book_id == BookRow.id)
            .where(BookRow.sha256 == sha, DerivationRow.fingerprint == fingerprint)
        ).first()
        if row is None:
            return None
        book_row, derivation = row
        blocks = count_blocks(s, derivation.normalization_id)
    made_current = False
    if not derivation.is_current:
        with st.write() as w:
            make_current(w, book_row.id, derivation.id)
        made_current = True
    timings["total"] = perf_counter() - t_start
    return ImportResult(
        path=str(p),
        book=sha,
        title=book_row.title,
        format=book_row.format,
        status="unchanged",
        fingerprint=fingerprint,
        sections=book_row.section_count,
        chunks=derivation.chunk_count,
        blocks=blocks,
        toc_entries=book_row.toc_count,
        warnings=tuple(book_row.warnings),
        timings=dict(timings),
        made_current=made_current,
    )


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
        moved = new_edition(st, s, book, status, replaces)
    report("write", total_rows, total_rows)
    return replace(_result(prepared, status, len(chunks), block_total, toc_count, False), **moved)
