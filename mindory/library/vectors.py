"""Embedding: vectors for the chunks of current derivations (in SQLite, per embedding
space), and keeping the vector index up to date."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime
from time import perf_counter

import numpy as np
from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError
from mindory.library.records import (
    EMBED_BATCH,
    EmbedResult,
    ImportResult,
    ProgressFn,
    WindowsResult,
    default_embedder,
    no_progress,
)
from mindory.library.state import State
from mindory.library.windows import ACROSS, RERANK, embed_windows, keeps_windows, reader_across
from mindory.search.embedders import (
    Embedder,
    HashedNgramEmbedder,
    embed_text_for_chunk,
)
from mindory.search.vectors import IndexInfo
from mindory.store.models import (
    BookRow,
    ChunkRow,
    ChunkVectorRow,
    DerivationRow,
    EmbeddingRow,
    SectionRow,
)
from mindory.store.queries import embedding_info
from mindory.store.records import EmbeddingInfo
from mindory.store.vectors import (
    EmbeddingState,
    current_embedding_state,
    database_indexes_vectors,
    vectors_for_text_keys,
)


def spec_of(emb: Embedder) -> str:
    """A spec string that recreates an embedder object in another process, if any."""
    if isinstance(emb, HashedNgramEmbedder):
        return "hashed" if emb.dim == 384 else f"hashed:{emb.dim}"
    backend, folder = getattr(emb, "backend", None), getattr(emb, "folder", None)
    if isinstance(backend, str) and folder is not None:
        return f"{backend}:{folder}"
    return str(getattr(emb, "spec", None) or emb.id)


def embedding_fingerprint(embedder_id: str, context_header: bool) -> str:
    """The embedding settings' fingerprint: embedder id + context-header flag.

    Deliberately not part of the chunk settings fingerprint: changing the embedder
    re-embeds, it never re-chunks, so chunk ids stay what they are.
    """
    canonical = json.dumps(
        {"context_header": bool(context_header), "embedder": embedder_id},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def embeddings(st: State) -> list[EmbeddingInfo]:
    """Every embedding space with its vector count; the current one is marked."""
    with st.read() as s:
        counts = dict(
            s.execute(
                select(ChunkVectorRow.embedding_id, func.count()).group_by(
                    ChunkVectorRow.embedding_id
                )
            ).all()
        )
        rows = s.scalars(select(EmbeddingRow).order_by(EmbeddingRow.id)).all()
        return [embedding_info(r, int(counts.get(r.id, 0))) for r in rows]


def current_embedding(st: State) -> EmbeddingInfo | None:
    """The embedding searches use (the one last used by :meth:`embed`), or None."""
    return next((e for e in embeddings(st) if e.current), None)


def embedder(st: State, spec: str | Embedder | None = None) -> Embedder:
    """An embedder from a spec (``hashed``, ``model2vec:/path``, …), cached per library.

    None means the current embedding's, else the built-in default.
    """
    if spec is not None and not isinstance(spec, str):
        return spec
    if spec is None:
        current = current_embedding(st)
        spec = current.spec if current is not None else default_embedder()
    return st.embedder(spec)


def embed(
    st: State,
    embedder: str | Embedder | None = None,
    *,
    context_header: bool | None = None,
    batch_size: int = EMBED_BATCH,
    progress: ProgressFn | None = None,
    update_index: bool = True,
    book: str | None = None,
    windows: bool | None = None,
    cross_language: bool | None = None,
) -> EmbedResult:
    """Embed the chunks of every book's current derivation that have no vector yet
    in this embedding (embedder + context-header flag), in batches, one transaction
    each; the embedding becomes the current one. Then the vector index is brought
    up to date (``update_index``). ``book`` (a SHA-256): only that book's chunks.

    ``embedder`` None keeps the current embedding (or the built-in ``hashed``);
    ``context_header`` None keeps the current embedding's flag (else off).
    ``windows`` True also embeds each chunk's sentence windows for the second stage
    (:mod:`mindory.library.windows`); None does so when the library keeps them already.
    ``cross_language`` True also has e5 read each Latin-script chunk for questions in
    Chinese and Japanese (:mod:`mindory.search.across`); None likewise keeps it up to date.
    """
    report = progress or no_progress
    t0 = perf_counter()
    current = current_embedding(st)
    if embedder is None and current is not None:
        spec: str = current.spec
        emb = st.embedder(spec)
    elif isinstance(embedder, str) or embedder is None:
        spec = (embedder or default_embedder()).strip()
        emb = st.embedder(spec)
    else:
        emb = embedder
        spec = spec_of(emb)
        st.embedders[spec] = emb  # this process searches with this very object
    if cross_language:
        reader_across(emb, spec)  # refused before anything is written
    if context_header is None:
        context_header = bool(current.context_header) if current is not None else False
    fingerprint = embedding_fingerprint(emb.id, context_header)
    now = datetime.now(UTC)
    with st.write() as s:
        row = s.scalar(select(EmbeddingRow).where(EmbeddingRow.fingerprint == fingerprint))
        if row is None:
            row = EmbeddingRow(
                fingerprint=fingerprint,
                embedder_id=emb.id,
                spec=spec,
                dim=int(emb.dim),
                context_header=context_header,
                is_current=False,
                version=0,
                created_at=now,
            )
            s.add(row)
            s.flush()
        elif row.spec != spec and isinstance(embedder, str):
            row.spec = spec  # the same model, found elsewhere now
        embedding_id = int(row.id)
        s.execute(update(EmbeddingRow).values(is_current=EmbeddingRow.id == embedding_id))
    missing_q = (
        select(func.count())
        .select_from(ChunkRow)
        .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
        .outerjoin(
            ChunkVectorRow,
            (ChunkVectorRow.chunk_id == ChunkRow.id)
            & (ChunkVectorRow.embedding_id == embedding_id),
        )
        .where(DerivationRow.is_current.is_(True), ChunkVectorRow.chunk_id.is_(None))
    )
    book_id: int | None = None
    if book is not None:
        with st.read() as s:
            found = s.scalar(select(BookRow.id).where(BookRow.sha256 == book))
        if found is None:
            raise MindoryError(f"no book {book[:12]} to embed")
        book_id = int(found)
        missing_q = missing_q.where(DerivationRow.book_id == book_id)
    with st.read() as s:
        total_missing = int(s.scalar(missing_q) or 0)
        total_q = (
            select(func.count())
            .select_from(ChunkRow)
            .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
            .where(DerivationRow.is_current.is_(True))
        )
        if book_id is not None:
            total_q = total_q.where(DerivationRow.book_id == book_id)
        total = int(s.scalar(total_q) or 0)
    report("embed", 0, total_missing)
    done = 0
    after = 0
    t_embed = 0.0
    step = max(1, int(batch_size))
    while True:
        with st.read() as s:
            page = (
                select(ChunkRow.id, ChunkRow.text, SectionRow.title, BookRow.title)
                .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                .join(SectionRow, SectionRow.id == ChunkRow.section_id)
                .join(BookRow, BookRow.id == DerivationRow.book_id)
                .outerjoin(
                    ChunkVectorRow,
                    (ChunkVectorRow.chunk_id == ChunkRow.id)
                    & (ChunkVectorRow.embedding_id == embedding_id),
                )
                .where(
                    DerivationRow.is_current.is_(True),
                    ChunkVectorRow.chunk_id.is_(None),
                    ChunkRow.id > after,
                )
                .order_by(ChunkRow.id)
                .limit(step)
            )
            if book_id is not None:
                page = page.where(DerivationRow.book_id == book_id)
            rows = s.execute(page).all()
        if not rows:
            break
        texts = [
            embed_text_for_chunk(
                text, title=bt, section_title=sec, context_header=context_header, embedder=emb
            )
            for _, text, sec, bt in rows
        ]
        blobs, seconds = _vectors_of(st, emb, texts)
        t_embed += seconds
        with st.write() as w:
            w.connection().execute(
                insert(ChunkVectorRow),
                [
                    {
                        "chunk_id": int(r[0]),
                        "embedding_id": embedding_id,
                        "vector": blob,
                        "text_sha256": text_key(text),
                    }
                    for r, blob, text in zip(rows, blobs, texts)
                ],
            )
            w.execute(
                update(EmbeddingRow)
                .where(EmbeddingRow.id == embedding_id)
                .values(version=EmbeddingRow.version + 1)
            )
        done += len(rows)
        after = int(rows[-1][0])
        report("embed", done, total_missing)
    report("embed", total_missing, total_missing)
    windowed: WindowsResult | None = None
    kept = keeps_windows(st) if windows is None or cross_language is None else frozenset()
    kinds = [
        kind
        for kind, asked in ((RERANK, windows), (ACROSS, cross_language))
        if asked or (asked is None and kind in kept)
    ]
    if kinds:
        windowed = embed_windows(st, progress=progress, book=book, kinds=kinds)
    index_info: IndexInfo | None = None
    if update_index:
        index_info = index(st)
    info = next(e for e in embeddings(st) if e.fingerprint == fingerprint)
    return EmbedResult(
        embedding=info,
        embedded=done,
        total=total,
        seconds=perf_counter() - t0,
        embed_seconds=t_embed,
        index=index_info,
        windows=windowed,
    )


def text_key(text: str) -> str:
    """What a vector is a function of, besides the embedder: the exact text it read."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _vectors_of(st: State, emb: Embedder, texts: list[str]) -> tuple[list[bytes], float]:
    """The vector (little-endian float32 bytes) of each text the embedder reads, and the
    seconds spent in the embedder.

    A vector is a function of the embedder and that text, so one already stored for the
    same text by the same embedder (another copy of a book: 紅樓夢 in GBK and in Big5)
    is reused — found by the SHA-256 of the text, stored beside every vector — and each
    distinct remaining text is embedded once. So is one stored by the same model under an
    earlier text rule (``emb.earlier_ids``) for a text that rule read the same way
    (``emb.reads_as_before``): a new rule re-embeds only the texts it changes.
    """
    keys = [text_key(t) for t in texts]
    with st.read() as s:
        known = vectors_for_text_keys(s.connection(), emb.id, int(emb.dim), keys)
        # The same model under an earlier text rule (the routed embedder before Chinese
        # was read in Simplified): its vector of a text the rule did not change is ours.
        earlier = tuple(getattr(emb, "earlier_ids", ()))
        same = getattr(emb, "reads_as_before", None)
        if earlier and same is not None:
            unchanged = sorted(
                {k for k, t in zip(keys, texts, strict=True) if k not in known and same(t)}
            )
            for old_id in earlier:
                if not unchanged:
                    break
                found = vectors_for_text_keys(s.connection(), old_id, int(emb.dim), unchanged)
                known.update(found)
                unchanged = [k for k in unchanged if k not in found]
    todo: dict[str, str] = {}
    for key, text in zip(keys, texts):
        if key not in known:
            todo.setdefault(key, text)
    seconds = 0.0
    if todo:
        t = perf_counter()
        vectors = np.asarray(emb.embed(list(todo.values())), dtype="<f4")
        seconds = perf_counter() - t
        if vectors.shape != (len(todo), emb.dim):
            raise MindoryError(
                f"embedder {emb.id} returned shape {vectors.shape}, expected {(len(todo), emb.dim)}"
            )
        known.update(zip(todo, (v.tobytes() for v in vectors)))
    return [known[key] for key in keys], seconds


def embed_imported(st: State, result: ImportResult, progress: ProgressFn | None) -> ImportResult:
    """Embed an imported book's chunks that have no vector in the library's current
    embedding (part of an import: a search must not answer lexically for a new book
    while saying nothing). No current embedding (nothing was ever embedded): nothing
    to do — the first ``mindory embed`` chooses the embedder. Nothing missing: the
    embedder is not even loaded. The vector index (a cache) catches up at the next
    search. An embedder that cannot be loaded leaves the book imported, with a warning.
    """
    with st.read() as s:
        current = s.scalar(select(EmbeddingRow).where(EmbeddingRow.is_current.is_(True)))
        if current is None:
            return result
        fingerprint = str(current.fingerprint)
        embedding_id = int(current.id)
        missing = int(
            s.scalar(
                select(func.count())
                .select_from(ChunkRow)
                .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                .join(BookRow, BookRow.id == DerivationRow.book_id)
                .outerjoin(
                    ChunkVectorRow,
                    (ChunkVectorRow.chunk_id == ChunkRow.id)
                    & (ChunkVectorRow.embedding_id == embedding_id),
                )
                .where(
                    BookRow.sha256 == result.book,
                    DerivationRow.is_current.is_(True),
                    ChunkVectorRow.chunk_id.is_(None),
                )
            )
            or 0
        )
    if not missing:
        return replace(result, embedding=fingerprint)
    t = perf_counter()
    try:
        done = embed(st, None, progress=progress, update_index=False, book=result.book)
    except (MindoryError, ImportError, OSError) as exc:
        note = f"not embedded ({exc}); run mindory embed"
        return replace(result, warnings=(*result.warnings, note))
    timings = dict(result.timings)
    timings["embed"] = perf_counter() - t
    timings["total"] = timings.get("total", 0.0) + timings["embed"]
    return replace(
        result, embedded=done.embedded, embedding=done.embedding.fingerprint, timings=timings
    )


def index(st: State, *, rebuild: bool = False) -> IndexInfo:
    """Bring the vector index of the current embedding up to date (or rebuild it)."""
    with st.engine.connect() as conn:
        embedding = current_embedding_state(conn)
        if embedding is None:
            raise MindoryError("no vectors yet: run mindory embed first")
        if database_indexes_vectors(conn):
            return _database_index_info(conn, embedding)
        before = st.vectors.loaded
        loaded = st.vectors.ensure(conn, embedding, force_rebuild=rebuild)
    info = loaded.info()
    return replace(info, status="current", seconds=0.0) if loaded is before else info


def _database_index_info(conn: Connection, embedding: EmbeddingState) -> IndexInfo:
    """PostgreSQL: the database keeps its HNSW index itself (revision 0007); nothing to
    build, only what it holds."""
    from mindory.search.vector_index import ids_checksum
    from mindory.store.pg_vectors import indexed_ids

    ids = indexed_ids(conn, embedding)
    return IndexInfo(
        path=None,
        embedder=embedding.key,
        kind="pgvector-hnsw",
        count=int(ids.size),
        dim=embedding.dim,
        ids_sha256=ids_checksum(ids),
        status="current",
        seconds=0.0,
    )
