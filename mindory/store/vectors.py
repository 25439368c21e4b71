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
from mindory.store.models import (
    BookRow,
    ChunkRow,
    ChunkVectorRow,
    DerivationRow,
    EmbeddingRow,
    SectionRow,
)


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
        EmbeddingRow.id,
        EmbeddingRow.fingerprint,
        EmbeddingRow.embedder_id,
        EmbeddingRow.spec,
        EmbeddingRow.dim,
        EmbeddingRow.context_header,
        EmbeddingRow.version,
    )
    .where(EmbeddingRow.is_current.is_(True))
    .order_by(EmbeddingRow.id.desc())
    .limit(1)
)


_EMBEDDING_VERSION_STMT = select(EmbeddingRow.version).where(EmbeddingRow.id == bindparam("id"))


_CURRENT_DERIVATIONS_STMT = (
    select(DerivationRow.id).where(DerivationRow.is_current.is_(True)).order_by(DerivationRow.id)
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
        select(ChunkVectorRow.chunk_id)
        .join(ChunkRow, ChunkRow.id == ChunkVectorRow.chunk_id)
        .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
        .where(ChunkVectorRow.embedding_id == embedding_id, DerivationRow.is_current.is_(True))
        .order_by(ChunkVectorRow.chunk_id)
    )
    return np.fromiter(conn.execute(q).scalars(), dtype=np.int64)


_IN_BATCH = 5000


def stored_vectors(
    conn: Connection, embedding: EmbeddingState, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, float32 vectors)`` of the given chunk ids, read from chunk_vectors."""
    wanted = np.asarray(ids, dtype=np.int64)
    base = select(ChunkVectorRow.chunk_id, ChunkVectorRow.vector).where(
        ChunkVectorRow.embedding_id == embedding.id
    )
    rows: list[Any] = []
    if wanted.size <= 4 * _IN_BATCH:
        for lo in range(0, wanted.size, _IN_BATCH):
            part = wanted[lo : lo + _IN_BATCH].tolist()
            rows.extend(conn.execute(base.where(ChunkVectorRow.chunk_id.in_(part))).all())
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
        select(ChunkRow.id)
        .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
        .where(DerivationRow.is_current.is_(True), DerivationRow.book_id == filters.book_id)
    )
    if filters.section_id is not None:
        q = q.where(ChunkRow.section_id == filters.section_id)
    return np.fromiter(conn.execute(q).scalars(), dtype=np.int64)


def current_chunk_count(conn: Connection) -> int:
    """How many chunks the current derivations hold (from the derivation rows: cheap)."""
    found = conn.execute(
        select(func.coalesce(func.sum(DerivationRow.chunk_count), 0)).where(
            DerivationRow.is_current.is_(True)
        )
    ).scalar()
    return int(found or 0)


@dataclass(frozen=True)
class StoredTextVector:
    """A stored vector with what its embedder read it from: the chunk's text, its
    section's and book's titles, and whether the embedding put the context header first."""

    text: str
    section_title: str | None
    book_title: str | None
    context_header: bool
    vector: bytes  # dim float32, little-endian


# Texts per IN list when looking vectors up by chunk text.
_TEXT_BATCH = 200


def vectors_for_chunk_texts(
    conn: Connection, embedder_id: str, dim: int, texts: Sequence[str]
) -> list[StoredTextVector]:
    """Stored vectors, in any embedding of ``embedder_id``, of chunks whose text is one of
    ``texts``. The caller checks the text its embedder read (a header may precede it).

    No index on chunk text (that would be a schema change): each call scans the chunks
    with a vector of this embedder, which costs little next to embedding with a model.
    """
    wanted = sorted(set(texts))
    base = (
        select(
            ChunkRow.text,
            SectionRow.title,
            BookRow.title,
            EmbeddingRow.context_header,
            ChunkVectorRow.chunk_id,
            ChunkVectorRow.vector,
        )
        .select_from(ChunkVectorRow)
        .join(EmbeddingRow, EmbeddingRow.id == ChunkVectorRow.embedding_id)
        .join(ChunkRow, ChunkRow.id == ChunkVectorRow.chunk_id)
        .join(SectionRow, SectionRow.id == ChunkRow.section_id)
        .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
        .join(BookRow, BookRow.id == DerivationRow.book_id)
        .where(EmbeddingRow.embedder_id == embedder_id, EmbeddingRow.dim == dim)
    )
    out: list[StoredTextVector] = []
    for lo in range(0, len(wanted), _TEXT_BATCH):
        part = wanted[lo : lo + _TEXT_BATCH]
        for text, section, book, header, chunk_id, blob in conn.execute(
            base.where(ChunkRow.text.in_(part))
        ):
            if len(blob) != dim * 4:
                raise MindoryError(
                    f"the stored vector of chunk row {chunk_id} has the wrong length for "
                    f"dimension {dim}: run mindory verify"
                )
            out.append(StoredTextVector(str(text), section, book, bool(header), bytes(blob)))
    return out
