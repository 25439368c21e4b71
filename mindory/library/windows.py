"""Sentence windows for the second stage, embedded once (``mindory embed --windows``), and
the cross-language reading of Latin-script chunks (``--cross-language``).

The rerank mode re-reads a question's first hits one sentence window at a time
(:mod:`mindory.search.rerank`). Embedding those windows when the question comes costs
~0.9 s (English) to ~10 s (Chinese) on two cores; embedded here once per chunk, the stage
reads them back in milliseconds. A Chinese or Japanese question about a Latin-script book
meets e5's reading of its chunks, made here too (:mod:`mindory.search.across`). A library
that keeps either keeps it up to date: every later ``embed`` (and so every import) adds
them for the chunks it adds.
"""

from __future__ import annotations

from collections.abc import Collection
from time import perf_counter
from typing import Any

from sqlalchemy import select

from mindory.errors import MindoryError
from mindory.library.records import ProgressFn, WindowsResult, no_progress
from mindory.library.state import State
from mindory.search.across import ACROSS_RULE, across_reader
from mindory.search.rerank import (
    CJK_WINDOW_CHARS,
    WINDOW_CHARS,
    WindowReader,
    window_readers,
    window_vectors,
)
from mindory.store.models import BookRow
from mindory.store.vectors import current_embedding_state
from mindory.store.windows import (
    chunks_without_windows,
    count_chunks_without_windows,
    has_windows,
    store_windows,
)

__all__ = ["ACROSS", "RERANK", "WINDOWS_BATCH", "embed_windows", "keeps_windows", "reader_across"]

WINDOWS_BATCH = 64  # chunks (~450 windows) per embed call and per transaction
RERANK_RULES = (f"windows-{WINDOW_CHARS}", f"cjk-windows-{CJK_WINDOW_CHARS}")


# What a library can keep: the second stage's sentence windows (``--windows``: one
# reader per script) and the cross-language reading (``--cross-language``).
RERANK = "rerank"
ACROSS = "across"


def _readers(st: State, kinds: Collection[str]) -> list[WindowReader]:
    with st.engine.connect() as conn:
        current = current_embedding_state(conn)
    if current is None:
        raise MindoryError("no vectors yet: run mindory embed first")
    model = st.embedder(current.spec)
    out: list[WindowReader] = []
    if RERANK in kinds:
        readers = window_readers(model)
        out += [readers[name] for name in sorted(readers)]
    if ACROSS in kinds:
        out.append(reader_across(model, current.spec))
    return out


def reader_across(model: Any, spec: str) -> WindowReader:
    """The model's cross-language reader, or an error that names the embedder (asked
    before anything is embedded, so a refused ``--cross-language`` writes nothing)."""
    across = across_reader(model)
    if across is None:
        raise MindoryError(
            f"the embedder {spec!r} has no multilingual model to read books across "
            "languages (the default minilm+e5 has): nothing was embedded"
        )
    return across


def keeps_windows(st: State) -> frozenset[str]:
    """What the library keeps (``mindory embed --windows``, ``--cross-language`` were
    run): every later embedding adds the same for the chunks it adds. Asked of the
    table alone, so an embedding that needs none loads no model for them."""
    with st.engine.connect() as conn:
        if not has_windows(conn):
            return frozenset()
        across = has_windows(conn, rule=ACROSS_RULE)
        rerank = any(has_windows(conn, rule=r) for r in RERANK_RULES)
    return frozenset(k for k, kept in ((RERANK, rerank), (ACROSS, across)) if kept)


def embed_windows(
    st: State,
    *,
    progress: ProgressFn | None = None,
    book: str | None = None,
    kinds: Collection[str] = (RERANK,),
) -> WindowsResult:
    """Embed the windows of every current chunk that has none yet, with each reader of
    ``kinds`` the current embedding's model offers (:data:`RERANK`: sentence windows for
    Latin script, and for Chinese and Japanese; :data:`ACROSS`: e5's reading of each
    Latin-script chunk). ``book`` (a SHA-256): only that book's; a batch per
    transaction, so an interrupted run keeps what it finished. A chunk another reader
    reads is stored with no windows (and costs that reader no model run)."""
    report = progress or no_progress
    t0 = perf_counter()
    readers = _readers(st, kinds)
    book_id: int | None = None
    if book is not None:
        with st.read() as s:
            found = s.scalar(select(BookRow.id).where(BookRow.sha256 == book))
        if found is None:
            raise MindoryError(f"no book {book[:12]} to embed")
        book_id = int(found)
    with st.engine.connect() as conn:
        total = sum(count_chunks_without_windows(conn, r.key, book_id) for r in readers)
    chunks = windows = 0
    report("windows", 0, total)
    for reader in readers:
        after = 0
        while True:
            with st.engine.connect() as conn:
                rows = chunks_without_windows(
                    conn, reader.key, after=after, limit=WINDOWS_BATCH, book_id=book_id
                )
            if not rows:
                break
            per_chunk = window_vectors(
                [t for _, t in rows], reader.embed, cjk=reader.cjk, whole=reader.whole
            )
            made = {i: v for (i, _), v in zip(rows, per_chunk, strict=True)}
            with st.writer.begin() as conn:
                store_windows(conn, reader.key, made)
            chunks += len(rows)
            windows += sum(int(v.shape[0]) for v in per_chunk)
            after = rows[-1][0]
            report("windows", chunks, total)
    return WindowsResult(
        windows_keys=tuple(r.key for r in readers),
        chunks=chunks,
        windows=windows,
        seconds=perf_counter() - t0,
    )
