"""The vector index: a FAISS file beside the database, a rebuildable cache.

``VectorIndex`` keeps unit vectors under int64 ids (the chunk row ids in the DB) in a
``faiss.IndexIDMap2``, over

* ``IndexFlatIP`` (exact inner product = cosine) up to ``FLAT_MAX`` vectors, and
* ``IndexIVFFlat`` (inner product, about 4 √n lists, a quarter of them searched) above
  it, where an exact scan gets slow: at 1M vectors it found 0.991 of the exact top 10
  for reader questions in 18.5 ms, where HNSW32 found 0.85 in 9.7 ms at efSearch 4096
  (docs/benchmarks.md, ``bench/bench_pg_vectors.py``);
* ``IndexHNSWFlat`` (M=32) when asked for by name (``kind="hnsw"``).

IVF and HNSW are not emptied by ``remove_ids`` here: removed ids go to a deleted set
that every search filters out with an ``IDSelectorNot``, and the index is rebuilt once
the dead share passes ``MAX_DEAD_SHARE``. An IVF index is trained again (rebuilt) when
it has grown to ``IVF_RETRAIN_GROWTH`` times what it was trained on.

``save`` writes the index to a temporary file in the same folder and renames it into
place, then writes ``<path>.manifest.json`` (embedder id, dimension, count, sha256 of
the sorted id set, kind, format version). ``load`` returns None — the caller rebuilds
from the vectors stored in SQLite — when the file is missing, unreadable, or does not
match what the caller expects; it also recomputes count and checksum from the ids
actually in the file, so a stale index is never served.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mindory.errors import MindoryError

__all__ = [
    "FORMAT_VERSION",
    "Manifest",
    "VectorIndex",
    "ids_checksum",
    "load",
    "manifest_path",
]

log = logging.getLogger(__name__)
# faiss is imported in the functions that build, load and search an index (50–90 ms):
# a words-only search, or a process that never touches vectors, does not wait for it.
# faiss ships partial type stubs (no SearchParametersHNSW, no kwargs constructors); the
# untyped handle ``_faiss`` is used where they fall short.

FORMAT_VERSION = 1
FLAT, HNSW, IVF = "flat", "hnsw", "ivf"
KINDS = (FLAT, HNSW, IVF)

# Measured with bench/bench_embed_index.py on hashed embeddings of real corpus chunks
# (d=384, one search thread, 2 cores). Exact flat search is memory-bound: 16 ms at 100k
# and 31 ms at 200k on the test VM (DESIGN §7: 5.5 ms at 100k on a faster day), still
# interactive, and exact; so flat up to 200k. Above it HNSW32, which at 200k builds in
# 50-80 s with efConstruction 40 (100 took 190 s for no recall gain at efSearch 512) and
# answers in ~3.2 ms at efSearch 512 with R@10 1.00 on passage-like queries and 0.96 on
# 60-character span queries (efSearch 256: 1.8 ms, 0.996 / 0.875).
FLAT_MAX = 200_000
HNSW_THRESHOLD = FLAT_MAX  # the name before IVF replaced HNSW above it
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 40
HNSW_EF_SEARCH = 512
MAX_DEAD_SHARE = 0.2
# IVF: lists ~ 4 √n (a power of two, at least IVF_MIN_PER_LIST vectors a list), k-means
# on IVF_TRAIN_PER_LIST vectors a list, a quarter of the lists searched. At 1M hashed
# corpus vectors (4,096 lists; the hardest case, real models cluster better): nprobe 256
# R@10 0.942 in 4.8 ms, 512 0.977 in 9.1 ms, 1,024 0.991 in 18.5 ms; built in 78 s. At
# 100k (1,024 lists) an eighth gave only 0.898, a quarter 0.958: a quarter it is.
IVF_LIST_FACTOR = 4
IVF_MIN_PER_LIST = 39  # FAISS's k-means wants 39 points a centroid at least
IVF_TRAIN_PER_LIST = 64
IVF_PROBE_SHARE = 1 / 4
IVF_RETRAIN_GROWTH = 4
# A flat index this large is scanned in half precision first (an fp16 copy: half the
# memory to stream, 2.7-2.8 instead of 5.5-6.7 ms at 114k vectors, bench_search.py), then
# the best k + COARSE_EXTRA are scored again from the float32 vectors: the hits keep exact
# cosines, and 50 spare places absorb fp16's error (~1e-3 of a cosine): recall@10 against
# the float32 scan alone was 1.000 there (bench_search.py).
COARSE_MIN = 50_000
COARSE_EXTRA = 50
# Over HNSW, a filter this small is answered exactly from the allowed vectors alone:
# fast, and exact where graph search would lose recall under a tight filter.
EXACT_SUBSET_MAX = 20_000


def ids_checksum(ids: Iterable[int] | np.ndarray) -> str:
    """sha256 hex of the sorted ids as little-endian int64 bytes (the manifest's checksum).

    The database side computes the same from its chunk row ids to state what it expects.
    """
    arr = np.sort(np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype="<i8"))
    return hashlib.sha256(arr.tobytes()).hexdigest()


def manifest_path(path: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(path)}.manifest.json")


@dataclass(frozen=True)
class Manifest:
    """What an index file holds. ``matches`` compares what decides validity."""

    embedder_id: str
    dim: int
    count: int
    ids_sha256: str
    kind: str = FLAT
    format_version: int = FORMAT_VERSION

    @classmethod
    def for_ids(
        cls, embedder_id: str, dim: int, ids: Iterable[int] | np.ndarray, kind: str = FLAT
    ) -> Manifest:
        arr = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype=np.int64)
        return cls(embedder_id, int(dim), int(arr.size), ids_checksum(arr), kind)

    def matches(self, other: Manifest) -> bool:
        # kind is how, not what: a flat and an HNSW index of the same vectors both serve.
        return (
            self.format_version == other.format_version
            and self.embedder_id == other.embedder_id
            and self.dim == other.dim
            and self.count == other.count
            and self.ids_sha256 == other.ids_sha256
        )

    def mismatch(self, other: Manifest) -> str | None:
        """The first field that differs, for logging; None when they match."""
        for name in ("format_version", "embedder_id", "dim", "count", "ids_sha256"):
            if getattr(self, name) != getattr(other, name):
                return f"{name} {getattr(self, name)!r} != {getattr(other, name)!r}"
        return None


@contextlib.contextmanager
def _omp_threads(n: int | None) -> Iterator[None]:
    """Run FAISS with n OpenMP threads, then restore (DESIGN §7: 1 for stable latency)."""
    import faiss

    if n is None:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _as_ids(ids: Iterable[int] | np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(
        np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype=np.int64).ravel()
    )
    return arr


class VectorIndex:
    """int64 id → unit float32 vector; exact (flat), IVF or HNSW inner-product search.

    ``kind="auto"`` (default) picks flat up to ``flat_max`` vectors and IVF above,
    re-deciding whenever the index is (re)built; ``"flat"`` / ``"ivf"`` / ``"hnsw"``
    force one.

    Not safe for concurrent writes: serialize build/add/remove/save (searches may run
    concurrently with each other).
    """

    def __init__(
        self,
        dim: int,
        *,
        embedder_id: str = "",
        kind: str = "auto",
        flat_max: int = FLAT_MAX,
        hnsw_m: int = HNSW_M,
        ef_construction: int = HNSW_EF_CONSTRUCTION,
        ef_search: int = HNSW_EF_SEARCH,
        probe_share: float = IVF_PROBE_SHARE,
        max_dead_share: float = MAX_DEAD_SHARE,
        build_threads: int | None = None,
        coarse_min: int = COARSE_MIN,
    ) -> None:
        if kind not in ("auto", *KINDS):
            raise ValueError(f"kind must be auto, flat, ivf or hnsw, not {kind!r}")
        self.dim = int(dim)
        self.embedder_id = embedder_id
        self.policy = kind
        self.flat_max = int(flat_max)
        self.probe_share = float(probe_share)
        self._trained_for = 0  # IVF: how many vectors its lists were trained on
        self.hnsw_m = int(hnsw_m)
        self.ef_construction = int(ef_construction)
        self.ef_search = int(ef_search)
        self.max_dead_share = float(max_dead_share)
        self.build_threads = build_threads  # None: FAISS's default (all cores)
        self._deleted: set[int] = set()  # IVF, HNSW: removed ids still in the index
        self._dead_sel: tuple[Any, Any] | None = None  # cache, reset when _deleted changes
        self._ids_cache: np.ndarray | None = None
        self.coarse_min = int(coarse_min)
        self._coarse: Any = None  # flat ≥ coarse_min: the fp16 copy (made on first search)
        self._halves: dict[int, Any] = {}  # flat: half → its rows' half (made on first search)
        self._kind = FLAT if kind == "auto" else kind
        self._index: Any = self._new_index(self._kind)

    # ---------------------------------------------------------------- construction

    def _new_index(self, kind: str, train: np.ndarray | None = None) -> Any:
        """An empty index of ``kind`` (IVF: its lists trained on ``train``)."""
        import faiss

        inner: Any
        if kind == HNSW:
            inner = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = self.ef_construction
            inner.hnsw.efSearch = self.ef_search
        elif kind == IVF:
            sample = train if train is not None else np.zeros((0, self.dim), np.float32)
            nlist = ivf_lists(len(sample))
            # (No vectors yet: one list, trained on a zero vector — an exact scan — until
            # the first add outgrows it and trains the lists on real vectors.)
            inner = faiss.IndexIVFFlat(
                faiss.IndexFlatIP(self.dim), self.dim, nlist, faiss.METRIC_INNER_PRODUCT
            )
            picked = (
                _training_sample(sample, nlist)
                if len(sample)
                else np.zeros((1, self.dim), np.float32)
            )
            with _omp_threads(self.build_threads):
                inner.train(picked)
            inner.make_direct_map()  # reconstruct by position (vectors(), subsets)
            self._trained_for = len(sample)
        else:
            inner = faiss.IndexFlatIP(self.dim)
        return faiss.IndexIDMap2(inner)

    def _kind_for(self, count: int) -> str:
        if self.policy != "auto":
            return self.policy
        return IVF if count > self.flat_max else FLAT

    def _nprobe(self) -> int:
        import faiss

        _faiss: Any = faiss  # (partial stubs)
        nlist = int(_faiss.downcast_index(self._index.index).nlist)
        return max(1, min(nlist, round(nlist * self.probe_share)))

    def _check(self, ids: np.ndarray, vectors: np.ndarray | Any) -> np.ndarray:
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.ndim == 1 and vecs.size == 0:
            vecs = vecs.reshape(0, self.dim)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise ValueError(f"vectors must have shape (n, {self.dim}), not {vecs.shape}")
        if vecs.shape[0] != ids.size:
            raise ValueError(f"{ids.size} ids for {vecs.shape[0]} vectors")
        if ids.size and ids.min() < 0:
            raise ValueError("ids must be >= 0 (-1 marks a missing result)")
        if np.unique(ids).size != ids.size:
            raise ValueError("duplicate ids")
        return vecs

    def build(self, ids: Iterable[int] | np.ndarray, vectors: np.ndarray) -> None:
        """Replace the whole contents (choosing flat or IVF by size)."""
        id_arr = _as_ids(ids)
        vecs = self._check(id_arr, vectors)
        kind = self._kind_for(id_arr.size)
        index = self._new_index(kind, vecs if kind == IVF else None)
        if id_arr.size:
            with _omp_threads(self.build_threads):
                index.add_with_ids(vecs, id_arr)
        self._index, self._kind = index, kind
        self._coarse = None
        self._halves = {}
        self._deleted = set()
        self._dead_sel = None
        self._ids_cache = None

    def add(self, ids: Iterable[int] | np.ndarray, vectors: np.ndarray) -> None:
        """Add new ids. An id already in the index is an error (remove it first).

        Crossing the flat threshold converts the index once (a rebuild); so does an IVF
        index grown to ``IVF_RETRAIN_GROWTH`` times what its lists were trained on.
        """
        id_arr = _as_ids(ids)
        vecs = self._check(id_arr, vectors)
        if id_arr.size == 0:
            return
        if np.isin(id_arr, self.ids(), assume_unique=True).any():
            raise ValueError("some ids are already in the index")
        if self._deleted and not self._deleted.isdisjoint(id_arr.tolist()):
            # A dead id still sits in the index; re-adding it needs a clean one.
            self._compact()
        live = self.ntotal - len(self._deleted) + id_arr.size
        outgrown = self._kind == IVF and live > IVF_RETRAIN_GROWTH * max(self._trained_for, 1)
        if self._kind_for(live) != self._kind or outgrown:
            old_ids, old_vecs = self.vectors()
            self.build(np.r_[old_ids, id_arr], np.vstack([old_vecs, vecs]))
            return
        with _omp_threads(self.build_threads):
            self._index.add_with_ids(vecs, id_arr)
            if self._coarse is not None:
                self._coarse.add_with_ids(vecs, id_arr)
            for half, sub in self._halves.items():
                part, rows = self._half_rows(vecs, half)
                sub.add_with_ids(part, id_arr[rows])
        self._ids_cache = None

    def remove(self, ids: Iterable[int] | np.ndarray) -> int:
        """Remove ids (unknown ones are ignored); returns how many were removed.

        Batch them: over flat each call scans the id map (~24 ms at 1M).
        """
        import faiss

        id_arr = np.unique(_as_ids(ids))
        present = id_arr[np.isin(id_arr, self.ids(), assume_unique=True)]
        if present.size == 0:
            return 0
        if self._kind == FLAT:
            removed = int(self._index.remove_ids(faiss.IDSelectorBatch(present)))
            if self._coarse is not None:
                self._coarse.remove_ids(faiss.IDSelectorBatch(present))
            for sub in self._halves.values():
                sub.remove_ids(faiss.IDSelectorBatch(present))
        else:
            self._deleted.update(present.tolist())
            self._dead_sel = None
            removed = int(present.size)
            if len(self._deleted) > self.max_dead_share * self.ntotal:
                self._compact()
        self._ids_cache = None
        return removed

    def _compact(self) -> None:
        """Rebuild from the live vectors (drops the dead entries; may change kind)."""
        ids, vecs = self.vectors()
        self.build(ids, vecs)

    # ---------------------------------------------------------------- inspection

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def ntotal(self) -> int:
        """Entries in the FAISS index, dead ones included."""
        return int(self._index.ntotal)

    @property
    def dead_count(self) -> int:
        return len(self._deleted)

    def __len__(self) -> int:
        return self.ntotal - len(self._deleted)

    def __repr__(self) -> str:
        return (
            f"VectorIndex(kind={self._kind!r}, dim={self.dim}, count={len(self)}, "
            f"dead={self.dead_count}, embedder_id={self.embedder_id!r})"
        )

    def _all_ids(self) -> np.ndarray:
        """Ids of every entry in FAISS order, dead ones included."""
        import faiss

        return faiss.vector_to_array(self._index.id_map).astype(np.int64, copy=False)

    def ids(self) -> np.ndarray:
        """Sorted live ids."""
        if self._ids_cache is None:
            all_ids = self._all_ids()
            if self._deleted:
                dead = np.fromiter(self._deleted, dtype=np.int64, count=len(self._deleted))
                all_ids = all_ids[~np.isin(all_ids, dead)]
            self._ids_cache = np.sort(all_ids)
        return self._ids_cache

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of the live entries, in insertion order (copies)."""
        import faiss

        all_ids = self._all_ids()
        n = all_ids.size
        if n == 0:
            return all_ids.copy(), np.zeros((0, self.dim), dtype=np.float32)
        inner = faiss.downcast_index(self._index.index)
        vecs = np.asarray(inner.reconstruct_n(0, n), dtype=np.float32).reshape(n, self.dim)
        if self._deleted:
            dead = np.fromiter(self._deleted, dtype=np.int64, count=len(self._deleted))
            keep = ~np.isin(all_ids, dead)
            return all_ids[keep], vecs[keep]
        return all_ids.copy(), vecs

    def manifest(self) -> Manifest:
        return Manifest.for_ids(self.embedder_id, self.dim, self.ids(), kind=self._kind)

    # ---------------------------------------------------------------- search

    def search(
        self,
        query_vectors: np.ndarray,
        k: int,
        allowed_ids: Iterable[int] | np.ndarray | None = None,
        *,
        threads: int | None = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k by inner product: (scores float32 (nq, k), ids int64 (nq, k)).

        Where fewer than k vectors qualify, the row is padded with id -1 and score -inf.
        ``allowed_ids`` restricts the hits to those ids (e.g. one book's chunks).
        ``threads=1`` (default) keeps single-query latency steady; pass None to let FAISS
        use every core for a large batch of queries.
        """
        if k <= 0:
            raise ValueError("k must be positive")
        q = np.ascontiguousarray(query_vectors, dtype=np.float32)
        if q.ndim == 1:
            q = q.reshape(1, -1)
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (nq, {self.dim}), not {q.shape}")
        nq = q.shape[0]
        allowed: np.ndarray | None = None
        if allowed_ids is not None:
            allowed = np.unique(_as_ids(allowed_ids))
            allowed = allowed[np.isin(allowed, self.ids(), assume_unique=True)]
            if allowed.size == 0:
                return _empty(nq, k)
        if len(self) == 0 or nq == 0:
            return _empty(nq, k)
        # Everything FAISS does here runs on `threads` threads, numpy's BLAS stays out:
        # on 2 cores an OpenMP pool and numpy's BLAS pool fighting over the CPUs turned a
        # 0.5 ms filtered search into 8 ms.
        with _omp_threads(threads):
            if allowed is not None and self._kind != FLAT and allowed.size <= EXACT_SUBSET_MAX:
                return self._search_subset(q, k, allowed)
            if allowed is None and self._kind == FLAT:
                found = self._search_half(q, k)
                if found is not None:
                    return found
            return self._search_faiss(q, k, allowed)

    def _search_half(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray] | None:
        """A query that fills one half of the dimensions only (the default embedder's
        vectors: MiniLM's half or e5's, :mod:`mindory.search.routed`) against the rows
        that fill that half, on that half alone: a quarter of the bytes to scan for an
        English question (1.0 against 6.8 ms at 23.6k × 768). Every row left out scores
        exactly 0, so the answer is the full scan's whenever its k-th score is above 0
        (same products, same sums: the scores agree bit for bit); else None (the full
        scan answers)."""
        import faiss

        half = self.dim // 2
        if self.dim % 2 or q.shape[0] != 1:
            return None
        first, second = bool(q[0, :half].any()), bool(q[0, half:].any())
        if first == second:
            return None
        which = 0 if first else 1
        sub = self._halves.get(which)
        if sub is None:
            ids, vecs = self.vectors()
            part, rows = self._half_rows(vecs, which)
            sub = faiss.IndexIDMap2(faiss.IndexFlatIP(half))
            sub.add_with_ids(part, ids[rows])
            self._halves[which] = sub
        if sub.ntotal < k:
            return None
        scores, ids = sub.search(np.ascontiguousarray(q[:, which * half : (which + 1) * half]), k)
        if not scores[0, k - 1] > 0:
            return None
        return _finish(scores, ids)

    def _half_rows(self, vecs: np.ndarray, which: int) -> tuple[np.ndarray, np.ndarray]:
        """Half ``which`` of the rows of ``vecs`` that have anything in it, and their rows."""
        half = self.dim // 2
        part = vecs[:, which * half : (which + 1) * half]
        rows = np.flatnonzero(part.any(axis=1))
        return np.ascontiguousarray(part[rows], dtype=np.float32), rows

    def _search_faiss(
        self, q: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        _faiss: Any = faiss  # (partial stubs)
        keep: list[Any] = []  # FAISS selectors don't own their parts: keep them alive
        sel: Any = None
        if allowed is not None:
            # Over flat this stays exact (the selector is checked before each distance);
            # `allowed` already excludes the dead ids.
            sel = faiss.IDSelectorBatch(allowed)
            keep.append(sel)
        elif self._deleted:
            sel = self._dead_selector()
        params: Any = None
        if self._kind == HNSW:
            ef = max(self.ef_search, k)
            if allowed is not None:
                # A filter leaves fewer candidates per visited node: widen the beam.
                share = allowed.size / max(self.ntotal, 1)
                ef = min(max(ef, int(ef / max(share, 1e-3) ** 0.5)), 4096)
            params = _faiss.SearchParametersHNSW(sel=sel, efSearch=ef)
        elif self._kind == IVF:
            nlist = int(_faiss.downcast_index(self._index.index).nlist)
            nprobe = self._nprobe()
            if allowed is not None:  # fewer candidates per list: search more lists
                share = allowed.size / max(self.ntotal, 1)
                nprobe = min(nlist, max(nprobe, int(nprobe / max(share, 1e-3) ** 0.5)))
            params = _faiss.SearchParametersIVF(sel=sel, nprobe=nprobe)
        elif sel is not None:
            params = _faiss.SearchParameters(sel=sel)
        coarse = self._coarse_index() if self._kind == FLAT else None
        if coarse is not None:
            _, found = coarse.search(q, min(k + COARSE_EXTRA, self.ntotal), params=params)
            del keep
            return self._rescored(q, found, k)
        scores, ids = self._index.search(q, k, params=params)
        del keep
        return _finish(scores, ids)

    def _coarse_index(self) -> Any:
        """The fp16 copy of a large flat index (None below ``coarse_min``)."""
        import faiss

        if self.ntotal < max(self.coarse_min, 1):
            return None
        if self._coarse is None:
            ids, vecs = self.vectors()
            sq = faiss.IndexScalarQuantizer(
                self.dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
            )
            coarse = faiss.IndexIDMap2(sq)
            with _omp_threads(self.build_threads):
                coarse.add_with_ids(vecs, ids)
            self._coarse = coarse
        return self._coarse

    def _rescored(self, q: np.ndarray, found: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` of the coarse candidates ``found`` by exact inner product
        (float32 vectors; ties: the smaller id)."""
        out_s, out_i = _empty(q.shape[0], k)
        for row in range(q.shape[0]):
            ids = found[row][found[row] >= 0]
            if not ids.size:
                continue
            vecs = np.asarray(self._index.reconstruct_batch(ids), dtype=np.float32)
            scores = vecs.reshape(ids.size, self.dim) @ q[row]
            order = np.lexsort((ids, -scores))[:k]
            out_s[row, : order.size] = scores[order]
            out_i[row, : order.size] = ids[order]
        return _finish(out_s, out_i)

    def _dead_selector(self) -> Any:
        """IDSelectorNot(deleted ids), built once per change of the deleted set.

        (Building it per query cost ~3 ms at 10k dead ids.)
        """
        import faiss

        if self._dead_sel is None:
            dead = np.fromiter(self._deleted, dtype=np.int64, count=len(self._deleted))
            batch = faiss.IDSelectorBatch(dead)
            # IDSelectorNot doesn't own its argument: keep both alive together.
            self._dead_sel = (batch, faiss.IDSelectorNot(batch))
        return self._dead_sel[1]

    def _search_subset(
        self, q: np.ndarray, k: int, allowed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-k over just the allowed ids (their vectors fetched by id).

        Used over IVF and HNSW for small filters, where they would lose recall.
        """
        import faiss

        vecs = np.ascontiguousarray(self._index.reconstruct_batch(allowed), dtype=np.float32)
        scores, pos = faiss.knn(
            q,
            vecs.reshape(allowed.size, self.dim),
            min(k, allowed.size),
            faiss.METRIC_INNER_PRODUCT,
        )
        out_s, out_i = _empty(q.shape[0], k)
        out_s[:, : pos.shape[1]] = scores
        out_i[:, : pos.shape[1]] = np.where(pos >= 0, allowed[np.maximum(pos, 0)], -1)
        return _finish(out_s, out_i)

    # ---------------------------------------------------------------- persistence

    def save(self, path: str | os.PathLike[str]) -> Manifest:
        """Write the index atomically, then its manifest; returns the manifest.

        Order: index → temp file, manifest → temp file, old manifest removed, index
        renamed into place, manifest renamed into place. A crash at any point leaves
        either the old pair, or an index without manifest (which ``load`` refuses).
        """
        import faiss

        target = Path(path)
        folder = target.parent
        man = self.manifest()
        doc: dict[str, Any] = asdict(man)
        if self._kind == HNSW:
            doc["hnsw"] = {"M": self.hnsw_m, "efConstruction": self.ef_construction}
        if self._kind == IVF:
            doc["ivf"] = {"trained_for": self._trained_for}
        if self._kind != FLAT:
            doc["deleted_ids"] = sorted(self._deleted)
        mpath = manifest_path(target)
        tmp_index = tmp_manifest = None
        try:
            tmp_index = _temp_name(folder, target.name)
            faiss.write_index(self._index, str(tmp_index))
            _fsync_file(tmp_index)
            tmp_manifest = _temp_name(folder, mpath.name)
            tmp_manifest.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
            _fsync_file(tmp_manifest)
            mpath.unlink(missing_ok=True)
            os.replace(tmp_index, target)
            tmp_index = None
            os.replace(tmp_manifest, mpath)
            tmp_manifest = None
            _fsync_dir(folder)
        except (OSError, RuntimeError) as exc:
            raise MindoryError(f"cannot write the vector index: {exc}", path=str(target)) from exc
        finally:
            for leftover in (tmp_index, tmp_manifest):
                if leftover is not None:
                    with contextlib.suppress(OSError):
                        leftover.unlink()
        return man

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], expected: Manifest, **options: Any
    ) -> VectorIndex | None:
        """The saved index if it holds exactly what ``expected`` says, else None.

        None means "rebuild": the file or manifest is missing or unreadable, the format,
        embedder, dimension, count or id checksum differs — checked against the manifest
        and again against the ids actually in the file. ``options`` are passed to the
        constructor (thresholds, ef_search, ...).
        """
        import faiss

        _faiss: Any = faiss  # (partial stubs)
        target = Path(path)

        def refuse(reason: str) -> VectorIndex | None:
            log.info("vector index %s not used (%s); rebuild it", target, reason)
            return None

        mpath = manifest_path(target)
        if not target.is_file() or not mpath.is_file():
            return refuse("missing")
        try:
            doc = json.loads(mpath.read_text(encoding="utf-8"))
            saved = Manifest(
                embedder_id=str(doc["embedder_id"]),
                dim=int(doc["dim"]),
                count=int(doc["count"]),
                ids_sha256=str(doc["ids_sha256"]),
                kind=str(doc["kind"]),
                format_version=int(doc["format_version"]),
            )
            deleted = {int(i) for i in doc.get("deleted_ids", [])}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            return refuse(f"unreadable manifest: {exc}")
        why = saved.mismatch(expected)
        if why is not None:
            return refuse(f"manifest differs: {why}")
        if saved.kind not in KINDS:
            return refuse(f"unknown kind {saved.kind!r}")
        try:
            index = faiss.read_index(str(target))
        except (RuntimeError, MemoryError, OSError) as exc:
            return refuse(f"unreadable index: {exc}")
        if not isinstance(index, faiss.IndexIDMap2) or index.d != expected.dim:
            return refuse("not an IndexIDMap2 of the expected dimension")
        inner = faiss.downcast_index(index.index)
        want = {FLAT: faiss.IndexFlatIP, HNSW: faiss.IndexHNSWFlat, IVF: faiss.IndexIVFFlat}[
            saved.kind
        ]
        if not isinstance(inner, want) or inner.metric_type != faiss.METRIC_INNER_PRODUCT:
            return refuse(f"inner index is {type(inner).__name__}, manifest says {saved.kind}")
        if saved.kind == FLAT and deleted:
            return refuse("a flat index with deleted ids")
        options.setdefault("embedder_id", expected.embedder_id)
        if saved.kind == HNSW:
            hnsw_doc = doc.get("hnsw") or {}
            options.setdefault("hnsw_m", int(hnsw_doc.get("M", HNSW_M)))
            options.setdefault(
                "ef_construction", int(hnsw_doc.get("efConstruction", HNSW_EF_CONSTRUCTION))
            )
        if saved.kind == IVF:
            _faiss.downcast_index(index.index).make_direct_map()  # (not in the file)
        vi = cls(expected.dim, **options)
        vi._index = index
        vi._kind = saved.kind
        if saved.kind == IVF:
            vi._trained_for = int((doc.get("ivf") or {}).get("trained_for", index.ntotal))
        vi._deleted = deleted
        vi._ids_cache = None
        all_ids = vi._all_ids()
        if np.unique(all_ids).size != all_ids.size or not deleted.issubset(all_ids.tolist()):
            return refuse("corrupt id map")
        why = vi.manifest().mismatch(expected)
        if why is not None:
            return refuse(f"file content differs from manifest: {why}")
        return vi


load = VectorIndex.load


def ivf_lists(n: int) -> int:
    """An IVF index's list count for ``n`` vectors: the power of two nearest to
    ``IVF_LIST_FACTOR`` √n, with at least ``IVF_MIN_PER_LIST`` vectors a list (1,024 at
    100k, 4,096 at 1M)."""
    if n < 2 * IVF_MIN_PER_LIST:
        return 1
    want = int(2 ** round(np.log2(IVF_LIST_FACTOR * np.sqrt(n))))
    cap = int(2 ** np.floor(np.log2(n / IVF_MIN_PER_LIST)))
    return max(1, min(want, cap))


def _training_sample(vectors: np.ndarray, nlist: int) -> np.ndarray:
    """``IVF_TRAIN_PER_LIST`` vectors a list, picked with a fixed seed (same input, same
    pick), in their stored order."""
    want = IVF_TRAIN_PER_LIST * nlist
    if len(vectors) <= want:
        return np.ascontiguousarray(vectors, dtype=np.float32)
    rng = np.random.default_rng(0)
    picked = np.sort(rng.choice(len(vectors), size=want, replace=False))
    return np.ascontiguousarray(vectors[picked], dtype=np.float32)


def _empty(nq: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full((nq, k), -np.inf, dtype=np.float32), np.full((nq, k), -1, dtype=np.int64)


def _finish(scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids = np.asarray(ids, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float32)
    scores[ids < 0] = -np.inf  # FAISS pads with -3.4e38; say "no result" plainly
    return scores, ids


def _temp_name(folder: Path, name: str) -> Path:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    os.close(fd)
    return Path(tmp)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    # Makes the renames durable on POSIX; directories can't be opened on Windows.
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
