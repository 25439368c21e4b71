"""Import: a file into the library, or ``unchanged`` when the same bytes and settings are
already there (the file is read and hashed; nothing is parsed or written). A new file
goes on to :mod:`mindory.library.ingest`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from time import perf_counter

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from mindory.errors import MindoryError
from mindory.library.records import (
    ImportFailure,
    ImportResult,
    ProgressFn,
    no_progress,
)
from mindory.library.state import State
from mindory.store.models import BookRow, DerivationRow
from mindory.store.queries import count_blocks, make_current
from mindory.store.reads import read_file
from mindory.text.records import Settings

BOOK_SUFFIXES = frozenset({".txt", ".epub"})


BOOK_SUFFIXES = frozenset({".txt", ".epub"})


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


def import_book(
    st: State,
    path: str | os.PathLike[str],
    settings: Settings | None = None,
    *,
    copy: bool = True,
    progress: ProgressFn | None = None,
    replaces: str | None = None,
    embed: bool = True,
) -> ImportResult:
    """Import one file; see the module doc for what ``unchanged`` costs.

    ``embed`` (the default): the book's chunks that have no vector in the library's
    current embedding are embedded with it as the last phase (``embed`` progress),
    so hybrid search covers the book at once; ``embed=False`` leaves that to
    ``mindory embed`` (search then warns that chunks have no vectors). A library that
    was never embedded embeds nothing here. An unchanged re-import embeds nothing
    (and loads no embedder) unless it made another derivation current.

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
    old: str | None = None
    if replaces is not None:
        from mindory.library.highlights import replaced_book

        old = replaced_book(st, p, sha, replaces)

    fingerprint = settings.fingerprint
    found = unchanged(st, p, sha, fingerprint, timings, t_start)
    if found is not None:
        if old is not None:
            from mindory.library.highlights import reanchor_stored

            found = reanchor_stored(st, found, old)
        if embed and found.made_current:  # another derivation: its chunks may lack vectors
            found = _embedded(st, found, report)
        return found

    from mindory.library.ingest import ingest  # the pipeline: only for a new file

    made = ingest(
        st,
        p,
        data,
        sha,
        settings,
        copy=copy,
        report=report,
        old=old,
        timings=timings,
        t_start=t_start,
        stored=lambda: unchanged(st, p, sha, fingerprint, timings, t_start),
    )
    return _embedded(st, made, report) if embed else made


def _embedded(st: State, result: ImportResult, report: ProgressFn) -> ImportResult:
    from mindory.library.vectors import embed_imported  # numpy, embedders: only when new

    return embed_imported(st, result, report)


def import_many(
    st: State,
    paths: Iterable[str | os.PathLike[str]],
    settings: Settings | None = None,
    *,
    copy: bool = True,
    progress: Callable[[Path], ProgressFn | None] | None = None,
    replaces: str | None = None,
    embed: bool = True,
) -> Iterator[ImportResult | ImportFailure]:
    """Import files and folders (see :func:`book_files_in`), one transaction per
    book; a bad file yields an :class:`ImportFailure` and the batch goes on.
    ``replaces`` and ``embed`` are passed to every :meth:`import_book` (``replaces``
    is meant for one file)."""
    for p in book_files_in(paths):
        try:
            yield import_book(
                st,
                p,
                settings,
                copy=copy,
                progress=progress(p) if progress else None,
                replaces=replaces,
                embed=embed,
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
