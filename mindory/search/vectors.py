"""The vector index of the current embedding, kept exactly equal to the stored vectors.

The FAISS file beside the database is a cache with a manifest (embedder, dimension,
count, id checksum): a mismatch is repaired from the stored vectors (ids added and
removed) or, when most of it differs, rebuilt — never served stale."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError
from mindory.search.vector_index import Manifest, VectorIndex, manifest_path
from mindory.store.vectors import EmbeddingState, index_token, indexed_ids, stored_vectors

# Above this many vectors the index is IVF instead of an exact flat scan. At 114k
# chunks (bench_search.py, 2 cores) flat answered in 7-15 ms p50 and HNSW32 in 4.6 ms
# but found only 0.93 of the exact top 10 (0.95 asked); the vector half runs on its own
# thread beside the word index, so the exact scan costs a hybrid query little: flat up
# to 200k (vector_index.FLAT_MAX), IVF above (0.991 at 1M in 18.5 ms).
INDEX_FLAT_MAX = 200_000


# HNSW beam width (an index made with kind="hnsw"). On 114k real chunk embeddings (bench_search.py) efSearch 512 found
# 0.96 of the exact top 10 for span-like queries and 0.78 for short questions (whose
# scores tie a lot); 1024: 0.98 and 0.89 at ~5 ms a query; 2048: 0.99 / 0.95 at ~10 ms.
INDEX_EF_SEARCH = 1024


REPAIR_MIN = 1000  # an index this far (or half its size) off the database is rebuilt


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """The vector index after :meth:`Library.index`: what it holds and what was done.

    ``status``: ``current`` (nothing to do), ``loaded`` (the file matched),
    ``repaired`` (ids added/removed from stored vectors), ``rebuilt`` / ``built``.
    """

    path: str | None
    embedder: str
    kind: str
    count: int
    dim: int
    ids_sha256: str
    status: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "embedder": self.embedder,
            "kind": self.kind,
            "count": self.count,
            "dim": self.dim,
            "ids_sha256": self.ids_sha256,
            "status": self.status,
            "seconds": round(self.seconds, 4),
        }


@dataclass(frozen=True)
class LoadedIndex:
    embedding_id: int
    token: tuple[Any, ...]
    index: VectorIndex
    path: Path | None
    status: str
    seconds: float

    def info(self) -> IndexInfo:
        man = self.index.manifest()
        return IndexInfo(
            path=str(self.path) if self.path is not None else None,
            embedder=man.embedder_id,
            kind=man.kind,
            count=man.count,
            dim=man.dim,
            ids_sha256=man.ids_sha256,
            status=self.status,
            seconds=self.seconds,
        )


def _load_own_manifest(
    path: Path, embedding: EmbeddingState, options: Mapping[str, Any]
) -> VectorIndex | None:
    """The saved index as its own manifest describes it (same embedder and dimension),
    to be repaired instead of rebuilt; None when unusable."""
    try:
        doc = json.loads(manifest_path(path).read_text(encoding="utf-8"))
        saved = Manifest(
            embedder_id=str(doc["embedder_id"]),
            dim=int(doc["dim"]),
            count=int(doc["count"]),
            ids_sha256=str(doc["ids_sha256"]),
            kind=str(doc["kind"]),
            format_version=int(doc["format_version"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if saved.embedder_id != embedding.key or saved.dim != embedding.dim:
        return None
    return VectorIndex.load(path, saved, **options)


def _repair(
    conn: Connection, index: VectorIndex, ids: np.ndarray, embedding: EmbeddingState
) -> VectorIndex | None:
    """Remove the ids the database no longer has, add the missing ones from stored
    vectors; None when so much differs that a rebuild is cheaper."""
    have = index.ids()
    extra = np.setdiff1d(have, ids, assume_unique=True)
    missing = np.setdiff1d(ids, have, assume_unique=True)
    if extra.size + missing.size > max(REPAIR_MIN, ids.size // 2):
        return None
    if extra.size:
        index.remove(extra)
    if missing.size:
        found, vecs = stored_vectors(conn, embedding, missing)
        index.add(found, vecs)
    return index


class VectorStore:
    """The loaded vector index of one library (file ``path`` beside the database, or
    memory only), guarded by a lock: a concurrent repair must not change it under a
    search."""

    def __init__(self, path: Path | None, **options: Any) -> None:
        self.path = path
        self.options: dict[str, Any] = {
            "flat_max": INDEX_FLAT_MAX,
            "ef_search": INDEX_EF_SEARCH,
            **options,
        }
        self.loaded: LoadedIndex | None = None
        self.lock = threading.RLock()

    def ensure(
        self, conn: Connection, embedding: EmbeddingState, *, force_rebuild: bool = False
    ) -> LoadedIndex:
        """The vector index of ``embedding``, exactly matching the database.

        Cheap when nothing changed since the last call (one query: the embedding's
        version and the set of current derivations). Otherwise the ids that should
        be indexed are read and compared with the index in memory, then with the
        file's manifest; a mismatch is repaired from the stored vectors (ids added
        and removed) or, when most of it differs, rebuilt — never served stale.
        """
        with self.lock:
            token = index_token(conn, embedding)
            loaded = self.loaded
            if (
                not force_rebuild
                and loaded is not None
                and loaded.embedding_id == embedding.id
                and loaded.token == token
            ):
                return loaded
            t0 = perf_counter()
            ids = indexed_ids(conn, embedding.id)
            expected = Manifest.for_ids(embedding.key, embedding.dim, ids)
            path = self.path
            candidate: VectorIndex | None = None
            status = "built"
            if loaded is not None and loaded.embedding_id == embedding.id and not force_rebuild:
                if loaded.index.manifest().matches(expected):
                    self.loaded = replace(loaded, token=token, status="current")
                    return self.loaded
                candidate = loaded.index
            if candidate is None and path is not None and not force_rebuild:
                found = VectorIndex.load(path, expected, **self.options)
                if found is not None:
                    self.loaded = LoadedIndex(
                        embedding.id, token, found, path, "loaded", perf_counter() - t0
                    )
                    return self.loaded
                candidate = _load_own_manifest(path, embedding, self.options)
            vindex: VectorIndex | None = None
            if candidate is not None:
                vindex = _repair(conn, candidate, ids, embedding)
                status = "repaired" if vindex is not None else "rebuilt"
            if vindex is None:
                vindex = VectorIndex(embedding.dim, embedder_id=embedding.key, **self.options)
                all_ids, vecs = stored_vectors(conn, embedding, ids)
                vindex.build(all_ids, vecs)
                if loaded is not None or (path is not None and path.exists()):
                    status = "rebuilt"
            if not vindex.manifest().matches(expected):  # pragma: no cover - a bug
                raise MindoryError("the rebuilt vector index does not match the database")
            saved = path
            if path is not None:
                try:
                    vindex.save(path)
                except MindoryError:
                    saved = None  # read-only folder: serve from memory
            self.loaded = LoadedIndex(
                embedding.id, token, vindex, saved, status, perf_counter() - t0
            )
            return self.loaded

    def search(
        self, loaded: LoadedIndex, query: np.ndarray, n: int, allowed: np.ndarray | None
    ) -> list[tuple[int, float]]:
        """``(chunk row id, cosine)`` best first among ``allowed`` ids (None: all)."""
        with self.lock:
            scores, ids = loaded.index.search(query, n, allowed_ids=allowed)
        return [(int(i), float(s)) for s, i in zip(scores[0], ids[0]) if i >= 0]

    def clear(self) -> None:
        with self.lock:
            self.loaded = None
