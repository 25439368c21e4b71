"""Vector search on PostgreSQL (revisions 0007, 0008): pgvector's HNSW index (cosine) over
``pg_chunk_vectors``, which a trigger keeps equal to the stored float32 blobs of
``chunk_vectors``. No process holds a private index file: every server and worker asks
the database. (SQLite keeps the FAISS file of :mod:`mindory.search.vectors`.)

Each embedding space has its own partial index over ``embedding::vector(dim)``; the query
names the embedding id and dimension as literals so that the planner can match it (a
prepared generic plan could not). HNSW filters after it walks the graph, so the search
runs with ``hnsw.iterative_scan = relaxed_order`` (pgvector 0.8): it keeps walking until
``n`` rows pass the filter (current derivations, a book, a section); the rows are then put
in exact order here. The score is the inner product, as FAISS's (the stored vectors are
unit length, so it is the cosine).
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection

from mindory.store.fts import Filters
from mindory.store.vectors import EmbeddingState

__all__ = ["EF_SEARCH", "indexed_count", "indexed_ids", "vector_search"]

# HNSW beam width: pgvector's maximum (its default is 40). On the corpus library (23,643
# MiniLM vectors) ef_search 200 and 400 found 0.968 and 0.986 of FAISS's exact top 10
# for the English reader questions (vector MRR 0.305 against 0.321); 1000 found all of
# them (0.321), at 18.8 ms p50 a query at 100k and 1M vectors (bench_pg_vectors.py).
EF_SEARCH = 1000


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


def indexed_count(conn: Connection, embedding: EmbeddingState) -> int:
    """How many current chunks have a vector in ``embedding``."""
    return int(
        conn.execute(
            text(
                "SELECT count(*) FROM pg_chunk_vectors AS v JOIN chunks AS c ON c.id = v.chunk_id "
                "JOIN derivations AS d ON d.id = c.derivation_id "
                "WHERE v.embedding_id = :e AND d.is_current"
            ),
            {"e": embedding.id},
        ).scalar()
        or 0
    )


def indexed_ids(conn: Connection, embedding: EmbeddingState) -> np.ndarray:
    """Sorted row ids of the current chunks with a vector in ``embedding``."""
    return np.fromiter(
        conn.execute(
            text(
                "SELECT v.chunk_id FROM pg_chunk_vectors AS v JOIN chunks AS c ON c.id = v.chunk_id "
                "JOIN derivations AS d ON d.id = c.derivation_id "
                "WHERE v.embedding_id = :e AND d.is_current ORDER BY v.chunk_id"
            ),
            {"e": embedding.id},
        ).scalars(),
        dtype=np.int64,
    )


def vector_search(
    conn: Connection,
    embedding: EmbeddingState,
    query: np.ndarray,
    n: int,
    filters: Filters,
    *,
    block: tuple[int, int] | None = None,
) -> list[tuple[int, float]]:
    """``(chunk row id, inner product)`` of the ``n`` nearest current chunks, best first.

    ``block`` = ``(first dimension, length)``: the query is zero outside it, and the
    vectors' blocks never share a graph worth walking (the default embedder's halves, see
    :mod:`mindory.search.routed`), so that block alone is searched, through its own
    HNSW index (revision 0008): the same inner products."""
    dim = int(embedding.dim)
    qv = np.asarray(query, dtype=np.float32).reshape(-1)
    if qv.size != dim or n < 1:
        return []
    conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, true)"), {"ef": str(EF_SEARCH)})
    conn.execute(text("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"))
    vec = f"(v.embedding::vector({dim}))"
    q = f"CAST(:q AS vector({dim}))"
    if block is not None:
        start, length = int(block[0]), int(block[1])
        if start < 0 or length < 1 or start + length > dim:
            raise ValueError(f"block {block} is outside a vector of {dim}")
        qv = qv[start : start + length]
        # the expression of revision 0008's index over that half
        vec = f"(subvector(v.embedding::vector({dim}), {start + 1}, {length})::vector({length}))"
        q = f"CAST(:q AS vector({length}))"
    params: dict[str, object] = {"q": _literal(qv), "n": n}
    where = filters.where(params, current="d.is_current")
    sql = (
        f"SELECT v.chunk_id, -({vec} <#> {q}) AS s FROM pg_chunk_vectors AS v "
        "JOIN chunks AS c ON c.id = v.chunk_id JOIN derivations AS d ON d.id = c.derivation_id "
        f"WHERE v.embedding_id = {int(embedding.id)} AND {where} "
        f"ORDER BY {vec} <=> {q} LIMIT :n"
    )
    rows = [(int(i), float(s)) for i, s in conn.execute(text(sql), params).all()]
    rows.sort(key=lambda item: (-item[1], item[0]))
    return rows
