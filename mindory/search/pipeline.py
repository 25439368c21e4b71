"""One search, top to bottom: analyze → lexical ∥ vector → fuse → hits.

The only place a query is run. :class:`SearchServices` is what it needs from an open
library (engines, a worker pool, embedders, the vector index, the place cache); the
store answers every question about rows, :mod:`mindory.reading.locate` places each hit.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from time import perf_counter

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from mindory.errors import MindoryError
from mindory.reading.locate import DEFAULT_PAGE_SIZE
from mindory.search.analysis import analyze
from mindory.search.embedders import Embedder
from mindory.search.fusion import CANDIDATES, MODES, RRF_K, Fused, rrf
from mindory.search.hits import SearchResult, build_hits
from mindory.search.lexical import lexical_search, scan
from mindory.search.vectors import VectorStore
from mindory.store.fts import Filters
from mindory.store.places import PlaceCache
from mindory.store.queries import search_filters
from mindory.store.vectors import EmbeddingState, chunk_ids_in, current_embedding_state

__all__ = ["SearchServices", "search"]


@dataclass(frozen=True)
class SearchServices:
    """What a search needs from an open library (:meth:`mindory.library.state.State.services`)."""

    engine: Engine
    aux_engine: Callable[[], Engine]  # a second pool for the vector half (see State)
    pool: Callable[[], concurrent.futures.ThreadPoolExecutor]
    embedder: Callable[[str], Embedder]
    vectors: VectorStore
    places: PlaceCache
    read_book: Callable[[str], bytes]  # a book file's bytes by SHA-256 (byte offsets)
    has_fts: Callable[[Connection], bool]


def search(
    sv: SearchServices,
    query: str,
    *,
    k: int = 10,
    mode: str = "hybrid",
    book: str | None = None,
    section: int | None = None,
    weights: Mapping[str, float] | None = None,
    rrf_k: int = RRF_K,
    candidates: int = CANDIDATES,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> SearchResult:
    """The ``k`` best chunks for ``query``, each with its Locator and word matches.

    ``mode``: ``hybrid`` (default: lexical and vector ranks fused by RRF with
    ``weights``), ``lexical`` or ``vector``. ``book`` (id, id prefix or title)
    and ``section`` (its ordinal; needs ``book``) restrict the search. Hybrid
    search without vectors is lexical search with a warning.
    """
    if mode not in MODES:
        raise MindoryError(f"unknown search mode {mode!r}: use hybrid, vector or lexical")
    if k < 1:
        raise MindoryError(f"k must be 1 or more, not {k}")
    if section is not None and book is None:
        raise MindoryError("a section filter needs a book (--book)")
    t_start = perf_counter()
    timings: dict[str, float] = {}
    warnings: list[str] = []
    terms = analyze(query)
    n = max(k, candidates)
    lists: dict[str, list[tuple[int, float]]] = {}
    book_sha: str | None = None
    embedding: EmbeddingState | None = None
    with sv.engine.connect() as conn:
        filters = Filters()
        if book is not None:
            with Session(bind=conn) as s:
                book_sha, filters = search_filters(s, book, section)
        vector_part: Future[list[tuple[int, float]]] | None = None
        if mode in ("hybrid", "vector"):
            embedding = current_embedding_state(conn)
            if embedding is None:
                if mode == "vector":
                    raise MindoryError("no vectors yet: run mindory embed first")
                warnings.append("no vectors yet (run mindory embed): lexical results only")
            elif mode == "hybrid" and not terms.empty:
                # FAISS and SQLite both release the GIL: the vector search runs on a
                # worker thread (its own connection) while this one searches text.
                vector_part = sv.pool().submit(
                    _vector_search_own_connection, sv, embedding, terms.query, n, filters, timings
                )
            else:
                lists["vector"] = vector_search(
                    sv, conn, embedding, terms.query, n, filters, timings
                )
        if mode in ("hybrid", "lexical") and not terms.empty:
            t = perf_counter()
            try:
                if sv.has_fts(conn):
                    lists["lexical"] = lexical_search(conn, terms, limit=n, filters=filters)
                else:
                    lists["lexical"] = scan(conn, terms, limit=n, filters=filters)
            except BaseException:
                if vector_part is not None:
                    vector_part.cancel()
                    concurrent.futures.wait([vector_part])
                raise
            timings["lexical"] = 1000 * (perf_counter() - t)
        if vector_part is not None:
            lists["vector"] = vector_part.result()
        if mode == "hybrid":
            fused = rrf(lists, weights, rrf_k)
        else:
            fused = [
                Fused(i, raw, {mode: (r, raw)})
                for r, (i, raw) in enumerate(lists.get(mode, []), start=1)
            ]
        top = fused[:k]
        t = perf_counter()
        hits = build_hits(sv.places, sv.read_book, conn, top, terms, page_size)
        timings["locate"] = 1000 * (perf_counter() - t)
    timings["total"] = 1000 * (perf_counter() - t_start)
    return SearchResult(
        query=query,
        mode=mode,
        k=k,
        hits=tuple(hits),
        terms=terms,
        book=book_sha,
        section=section,
        embedding=embedding.fingerprint if embedding is not None else None,
        embedder_id=embedding.embedder_id if embedding is not None else None,
        warnings=tuple(warnings),
        timings=timings,
    )


def _vector_search_own_connection(
    sv: SearchServices,
    embedding: EmbeddingState,
    query: str,
    n: int,
    filters: Filters,
    timings: dict[str, float],
) -> list[tuple[int, float]]:
    # The caller holds a connection of the main pool: take this one from the other.
    with sv.aux_engine().connect() as conn:
        return vector_search(sv, conn, embedding, query, n, filters, timings)


def vector_search(
    sv: SearchServices,
    conn: Connection,
    embedding: EmbeddingState,
    query: str,
    n: int,
    filters: Filters,
    timings: dict[str, float],
) -> list[tuple[int, float]]:
    """``(chunk row id, cosine)`` of the ``n`` nearest chunks to the query's vector."""
    t = perf_counter()
    emb = sv.embedder(embedding.spec)
    if emb.id != embedding.embedder_id:
        raise MindoryError(
            f"the embedder {embedding.spec!r} is now {emb.id}, but the vectors were made "
            f"by {embedding.embedder_id}: run mindory embed --embedder {embedding.spec}"
        )
    qv = emb.embed([query])
    timings["embed"] = 1000 * (perf_counter() - t)
    t = perf_counter()
    loaded = sv.vectors.ensure(conn, embedding)
    timings["index"] = 1000 * (perf_counter() - t)
    if not np.any(qv):
        return []  # no features: every similarity would be 0
    t = perf_counter()
    allowed = chunk_ids_in(conn, filters) if filters.book_id is not None else None
    found = sv.vectors.search(loaded, qv, n, allowed)
    timings["vector"] = 1000 * (perf_counter() - t)
    return found
