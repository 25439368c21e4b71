"""Stored vectors and embedding spaces: which embedding is current, which chunks the vector
index must hold, and their vectors (little-endian float32 blobs in ``chunk_vectors``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError
from mindory.store.fts import Filters
from mindory.store.tables import chunk_table, chunk_vector_table, derivation_table, embedding_table


@dataclass(frozen=True)
class EmbeddingState:
    id: int
    fingerprint: str
    embedder_id: str
    spec: str
    dim: int
    context_header: bool
    version: int

    @property
    def key(self) -> str:
        """What the index manifest records as its embedder: id (+ the header flag)."""
        return self.embedder_id + ("+context-header" if self.context_header else "")


_CURRENT_EMBEDDING_STMT = (
    select(
        embedding_table.c.id,
        embedding_table.c.fingerprint,
        embedding_table.c.embedder_id,
        embedding_table.c.spec,
        embedding_table.c.dim,
        embedding_table.c.context_header,
        embedding_table.c.version,
    )
    .where(embedding_table.c.is_current.is_(True))
    .order_by(embedding_table.c.id.desc())
    .limit(1)
)


_EMBEDDING_VERSION_STMT = select(embedding_table.c.version).where(
    embedding_table.c.id == bindparam("id")
)


_CURRENT_DERIVATIONS_STMT = (
    select(derivation_table.c.id)
    .where(derivation_table.c.is_current.is_(True))
    .order_by(derivation_table.c.id)
)


def database_indexes_vectors(conn: Connection) -> bool:
    """Whether the database itself keeps the vector index (PostgreSQL: pgvector's HNSW,
    :mod:`mindory.store.pg_vectors`); otherwise (SQLite) the process builds a FAISS index
    from the stored vectors (:mod:`mindory.search.vectors`)."""
    return conn.dialect.name == "postgresql"


def current_embedding_state(conn: Connection) -> EmbeddingState | None:
    r = conn.execute(_CURRENT_EMBEDDING_STMT).first()
    if r is None:
        return None
    return EmbeddingState(int(r[0]), r[1], r[2], r[3], int(r[4]), bool(r[5]), int(r[6]))


def index_token(conn: Connection, embedding: EmbeddingState) -> tuple[Any, ...]:
    """Changes whenever the indexed id set may have changed: the embedding's version
    (every vector write bumps it) and the set of current derivations (imports,
    re-derivations and deletes change it)."""
    version = conn.execute(_EMBEDDING_VERSION_STMT, {"id": embedding.id}).scalar()
    ids = conn.execute(_CURRENT_DERIVATIONS_STMT).scalars()
    digest = hashlib.sha256(np.fromiter(ids, dtype="<i8").tobytes()).hexdigest()
    return (embedding.id, embedding.fingerprint, version, digest)


def indexed_ids(conn: Connection, embedding_id: int) -> np.ndarray:
    """Sorted row ids of current-derivation chunks that have a vector in the embedding."""
    q = (
        select(chunk_vector_table.c.chunk_id)
        .join(chunk_table, chunk_table.c.id == chunk_vector_table.c.chunk_id)
        .join(derivation_table, derivation_table.c.id == chunk_table.c.derivation_id)
        .where(
            chunk_vector_table.c.embedding_id == embedding_id,
            derivation_table.c.is_current.is_(True),
        )
        .order_by(chunk_vector_table.c.chunk_id)
    )
    return np.fromiter(conn.execute(q).scalars(), dtype=np.int64)


_IN_BATCH = 5000


def stored_vectors(
    conn: Connection, embedding: EmbeddingState, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, float32 vectors)`` of the given chunk ids, read from chunk_vectors."""
    wanted = np.asarray(ids, dtype=np.int64)
    base = select(chunk_vector_table.c.chunk_id, chunk_vector_table.c.vector).where(
        chunk_vector_table.c.embedding_id == embedding.id
    )
    rows: list[Any] = []
    if wanted.size <= 4 * _IN_BATCH:
        for lo in range(0, wanted.size, _IN_BATCH):
            part = wanted[lo : lo + _IN_BATCH].tolist()
            rows.extend(conn.execute(base.where(chunk_vector_table.c.chunk_id.in_(part))).all())
    else:
        keep = set(wanted.tolist())
        rows = [r for r in conn.execute(base) if r[0] in keep]
    width = embedding.dim * 4
    bad = next((r[0] for r in rows if len(r[1]) != width), None)
    if bad is not None:
        raise MindoryError(
            f"the stored vector of chunk row {bad} has the wrong length for dimension "
            f"{embedding.dim}: run mindory verify"
        )
    out_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(-1, embedding.dim)
    return out_ids, np.ascontiguousarray(vecs, dtype=np.float32)


def chunk_ids_in(conn: Connection, filters: Filters) -> np.ndarray:
    """Row ids of the current chunks a search is restricted to (a book, a section)."""
    q = (
        select(chunk_table.c.id)
        .join(derivation_table, derivation_table.c.id == chunk_table.c.derivation_id)
        .where(
            derivation_table.c.is_current.is_(True), derivation_table.c.book_id == filters.book_id
        )
    )
    if filters.section_id is not None:
        q = q.where(chunk_table.c.section_id == filters.section_id)
    return np.fromiter(conn.execute(q).scalars(), dtype=np.int64)


def current_chunk_count(conn: Connection) -> int:
    """How many chunks the current derivations hold (from the derivation rows: cheap)."""
    found = conn.execute(
        select(func.coalesce(func.sum(derivation_table.c.chunk_count), 0)).where(
            derivation_table.c.is_current.is_(True)
        )
    ).scalar()
    return int(found or 0)


# Keys per IN list when looking vectors up by the text their embedder read.
_KEY_BATCH = 500


def vectors_for_text_keys(
    conn: Connection, embedder_id: str, dim: int, keys: Sequence[str]
) -> dict[str, bytes]:
    """Stored vectors, in any embedding of ``embedder_id`` (and ``dim``), of the texts
    whose SHA-256 (hex) is one of ``keys``: key → vector. Through the index on
    ``chunk_vectors.text_sha256`` (revision 0009), so a lookup costs the same in a large
    library as in a small one."""
    wanted = sorted(set(keys))
    base = (
        select(
            chunk_vector_table.c.text_sha256,
            chunk_vector_table.c.vector,
            chunk_vector_table.c.chunk_id,
        )
        .join(embedding_table, embedding_table.c.id == chunk_vector_table.c.embedding_id)
        .where(embedding_table.c.embedder_id == embedder_id, embedding_table.c.dim == dim)
    )
    out: dict[str, bytes] = {}
    for lo in range(0, len(wanted), _KEY_BATCH):
        part = wanted[lo : lo + _KEY_BATCH]
        for key, blob, chunk_id in conn.execute(
            base.where(chunk_vector_table.c.text_sha256.in_(part))
        ):
            if len(blob) != dim * 4:
                raise MindoryError(
                    f"the stored vector of chunk row {chunk_id} has the wrong length for "
                    f"dimension {dim}: run mindory verify"
                )
            out.setdefault(str(key), bytes(blob))
    return out
