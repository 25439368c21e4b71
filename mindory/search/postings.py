"""The word index's postings in memory: BM25 over numpy arrays, scored exactly as
SQLite FTS5's ``bm25()`` scores the same rows.

FTS5 ranks a question with one common word by visiting every chunk that holds it
(~12–15 ms at 100k chunks, ``mindory.store.words_fts``); here each query term is one
slice of two arrays (which chunks hold it, how often), so a whole ranking is a few
vector operations. The index mirrors the rows of ``chunk_terms`` (the FTS5 table's
content), tokenized as FTS5 tokenizes them (:func:`mindory.store.words_fts.tokens_of`),
so with FTS5's own row and token totals every score equals ``bm25()``'s: the same
``N``, average length, document frequencies and token counts.

Pure: rows in, arrays out; what keeps it equal to the database is
:mod:`mindory.search.word_store`. An index is a few *segments* (the rows of one build,
or of one repair), each sorted by term; removed rows are masked until a merge.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from mindory.errors import MindoryError
from mindory.store.words_fts import BM25_B, BM25_K1, tokens_of

__all__ = ["FORMAT_VERSION", "Segment", "WordPostings", "build_segment", "merge"]

FORMAT_VERSION = 1
MAX_SEGMENTS = 4  # more than this after a repair: merged into one
DEAD_SHARE = 0.25  # masked rows above this share of the index: merged away


@dataclass(frozen=True, eq=False)
class Segment:
    """Postings of some rows: ``ids`` (chunk row ids, ascending, one per document),
    ``lengths`` (tokens per document), and per term (``vocab``: token → term number)
    the slice ``offsets[t]:offsets[t + 1]`` of ``docs`` (document numbers, ascending)
    and ``tfs`` (occurrences)."""

    ids: np.ndarray  # int64
    lengths: np.ndarray  # int32
    vocab: dict[str, int]
    offsets: np.ndarray  # int64, len(vocab) + 1
    docs: np.ndarray  # int32
    tfs: np.ndarray  # int32

    def postings(self, token: str) -> tuple[np.ndarray, np.ndarray] | None:
        t = self.vocab.get(token)
        if t is None:
            return None
        lo, hi = int(self.offsets[t]), int(self.offsets[t + 1])
        return self.docs[lo:hi], self.tfs[lo:hi]


def _segment(
    ids: np.ndarray, lengths: np.ndarray, tokens: list[str], term: np.ndarray, doc: np.ndarray
) -> Segment:
    """A segment from one (term number, document number) pair per token occurrence."""
    n = max(len(ids), 1)
    key = term.astype(np.int64) * n + doc.astype(np.int64)
    uniq, counts = np.unique(key, return_counts=True)
    terms = uniq // n
    return Segment(
        ids=np.ascontiguousarray(ids, dtype=np.int64),
        lengths=np.ascontiguousarray(lengths, dtype=np.int32),
        vocab={t: i for i, t in enumerate(tokens)},
        offsets=np.searchsorted(terms, np.arange(len(tokens) + 1)).astype(np.int64),
        docs=(uniq % n).astype(np.int32),
        tfs=counts.astype(np.int32),
    )


def build_segment(rows: Iterable[tuple[int, str]]) -> Segment:
    """The postings of ``(chunk row id, analysed terms)`` rows."""
    pairs = sorted((int(i), str(t)) for i, t in rows)
    if len({i for i, _ in pairs}) != len(pairs):
        raise MindoryError("the word postings were given one chunk twice")
    per_doc = [tokens_of(t) for _, t in pairs]
    lengths = np.fromiter((len(t) for t in per_doc), dtype=np.int64, count=len(per_doc))
    vocab: dict[str, int] = {}
    flat = chain.from_iterable(per_doc)
    term = np.fromiter(
        (vocab.setdefault(t, len(vocab)) for t in flat), dtype=np.int64, count=int(lengths.sum())
    )
    doc = np.repeat(np.arange(len(pairs), dtype=np.int64), lengths)
    ids = np.fromiter((i for i, _ in pairs), dtype=np.int64, count=len(pairs))
    return _segment(ids, lengths, list(vocab), term, doc)


def merge(segments: Sequence[Segment], alive: Sequence[np.ndarray]) -> Segment:
    """One segment of the rows of ``segments`` still ``alive`` (a mask per segment)."""
    vocab: dict[str, int] = {}
    ids_parts, length_parts, term_parts, doc_parts, tf_parts = [], [], [], [], []
    base = 0
    for seg, keep in zip(segments, alive):
        renumber = np.full(len(seg.ids), -1, dtype=np.int64)
        renumber[keep] = base + np.arange(int(keep.sum()))
        base += int(keep.sum())
        ids_parts.append(seg.ids[keep])
        length_parts.append(seg.lengths[keep])
        to_merged = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for t in seg.vocab), np.int64, len(seg.vocab)
        )
        per_term = np.diff(seg.offsets)
        term = np.repeat(to_merged, per_term)
        doc = renumber[seg.docs]
        held = doc >= 0
        term_parts.append(term[held])
        doc_parts.append(doc[held])
        tf_parts.append(seg.tfs[held])
    ids = np.concatenate(ids_parts) if ids_parts else np.zeros(0, np.int64)
    order = np.argsort(ids, kind="stable")
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    term = np.concatenate(term_parts) if term_parts else np.zeros(0, np.int64)
    doc = position[np.concatenate(doc_parts)] if doc_parts else np.zeros(0, np.int64)
    tf = np.concatenate(tf_parts) if tf_parts else np.zeros(0, np.int64)
    lengths = np.concatenate(length_parts)[order] if length_parts else np.zeros(0, np.int32)
    sort = np.lexsort((doc, term))
    tokens = list(vocab)
    term, doc, tf = term[sort], doc[sort], tf[sort]
    return Segment(
        ids=ids[order],
        lengths=lengths.astype(np.int32),
        vocab={t: i for i, t in enumerate(tokens)},
        offsets=np.searchsorted(term, np.arange(len(tokens) + 1)).astype(np.int64),
        docs=doc.astype(np.int32),
        tfs=tf.astype(np.int32),
    )


def _positions(held: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Where the ``ids`` that ``held`` (ascending) has are in it."""
    ids = np.asarray(ids, dtype=np.int64)
    at = np.searchsorted(held, ids)
    inside = at < len(held)
    at = at[inside]
    return at[held[at] == ids[inside]]


class WordPostings:
    """The postings of a set of ``chunk_terms`` rows, in segments, with removed rows
    masked (``alive``)."""

    def __init__(self, segments: Sequence[Segment] = ()) -> None:
        self.segments: list[Segment] = list(segments)
        self.alive: list[np.ndarray] = [np.ones(len(s.ids), dtype=bool) for s in self.segments]
        self._norms: dict[int, tuple[tuple[int, float], np.ndarray]] = {}

    @classmethod
    def build(cls, rows: Iterable[tuple[int, str]]) -> WordPostings:
        return cls([build_segment(rows)])

    def copy(self) -> WordPostings:
        """Another index over the same segments (read-only arrays), its own masks."""
        out = WordPostings()
        out.segments = list(self.segments)
        out.alive = [a.copy() for a in self.alive]
        return out

    def ids(self) -> np.ndarray:
        """The chunk row ids held, ascending."""
        parts = [s.ids[a] for s, a in zip(self.segments, self.alive)]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def totals(self) -> tuple[int, int]:
        """``(rows, tokens)`` held: FTS5's averages record of the same rows."""
        rows = sum(int(a.sum()) for a in self.alive)
        tokens = sum(int(s.lengths[a].sum()) for s, a in zip(self.segments, self.alive))
        return rows, tokens

    def remove(self, ids: np.ndarray) -> None:
        for seg, alive in zip(self.segments, self.alive):
            alive[_positions(seg.ids, ids)] = False
        self._compact()

    def add(self, rows: Iterable[tuple[int, str]]) -> None:
        segment = build_segment(rows)
        if len(segment.ids):
            self.segments.append(segment)
            self.alive.append(np.ones(len(segment.ids), dtype=bool))
        self._compact()

    def _compact(self) -> None:
        size = sum(len(s.ids) for s in self.segments)
        dead = size - sum(int(a.sum()) for a in self.alive)
        if len(self.segments) > MAX_SEGMENTS or (size and dead > DEAD_SHARE * size):
            merged = merge(self.segments, self.alive)
            self.segments = [merged]
            self.alive = [np.ones(len(merged.ids), dtype=bool)]

    def masks(self, ids: np.ndarray) -> list[np.ndarray]:
        """Per segment, which of its rows are among ``ids`` (ascending) and alive."""
        out = []
        for seg, alive in zip(self.segments, self.alive):
            at = _positions(seg.ids, ids)
            mask = np.zeros(len(seg.ids), dtype=bool)
            mask[at] = True
            out.append(mask & alive)
        return out

    def doc_count(self, token: str) -> int:
        """How many rows held hold ``token`` (FTS5's ``fts5vocab`` count of the same rows)."""
        found = [s.postings(token) for s in self.segments]
        return sum(int(a[p[0]].sum()) for p, a in zip(found, self.alive) if p is not None)

    def search(
        self,
        tokens: Sequence[str],
        *,
        rows: int,
        total_tokens: int,
        limit: int,
        usable: Sequence[np.ndarray],
    ) -> list[tuple[int, float]]:
        """``(chunk row id, -bm25)`` best first (ties: smaller id) among the rows
        ``usable`` marks (a mask per segment, :meth:`masks`), for the OR of single
        ``tokens``, with FTS5's totals of the whole index (``rows``, ``total_tokens``)."""
        if rows <= 0 or limit <= 0:
            return []
        avgdl = total_tokens / rows
        terms: list[tuple[float, list[tuple[np.ndarray, np.ndarray] | None]]] = []
        for token in dict.fromkeys(tokens):
            found = [s.postings(token) for s in self.segments]
            df = sum(int(a[p[0]].sum()) for p, a in zip(found, self.alive) if p is not None)
            if df == 0:
                continue
            idf = max(1e-6, math.log((rows - df + 0.5) / (df + 0.5)))
            terms.append((idf, found))
        id_parts, score_parts = [], []
        for n, (seg, use) in enumerate(zip(self.segments, usable)):
            scores = np.zeros(len(seg.ids), dtype=np.float64)
            norm = self._norm(n, avgdl)
            for idf, found in terms:
                posting = found[n]
                if posting is None:
                    continue
                docs, tfs = posting
                tf = tfs.astype(np.float64)
                scores[docs] += idf * ((tf * (BM25_K1 + 1)) / (tf + norm[docs]))
            held = np.flatnonzero((scores > 0) & use)
            id_parts.append(seg.ids[held])
            score_parts.append(scores[held])
        if not id_parts:
            return []
        ids = np.concatenate(id_parts)
        scores = np.concatenate(score_parts)
        if len(scores) > limit:
            # Everything tied with the last kept score stays in the running: ties go
            # to the smaller id, whichever segment holds it.
            floor = np.partition(scores, len(scores) - limit)[len(scores) - limit]
            keep = scores >= floor
            ids, scores = ids[keep], scores[keep]
        order = np.lexsort((ids, -scores))[:limit]
        return [(int(ids[j]), float(scores[j])) for j in order]

    def _norm(self, n: int, avgdl: float) -> np.ndarray:
        """``k1 · (1 − b + b · length / avgdl)`` of segment ``n``'s documents (kept: the
        same for every query until the index changes)."""
        key = (id(self.segments[n]), avgdl)
        found = self._norms.get(n)
        if found is None or found[0] != key:
            seg = self.segments[n]
            found = self._norms[n] = (key, BM25_K1 * (1 - BM25_B + BM25_B * seg.lengths / avgdl))
        return found[1]

    # ------------------------------------------------------------------ the file

    def save(self, path: Path, facts: dict[str, str]) -> None:
        """Write the index (merged into one segment) to ``path`` with ``facts`` (what it
        was made from), atomically."""
        if len(self.segments) != 1 or not self.alive[0].all():
            merged = merge(self.segments, self.alive)
            self.segments, self.alive = [merged], [np.ones(len(merged.ids), dtype=bool)]
        seg = self.segments[0]
        vocab = "\n".join(seg.vocab).encode("utf-8")
        head = "\n".join([f"format={FORMAT_VERSION}", *(f"{k}={v}" for k, v in facts.items())])
        tmp = path.with_name(path.name + ".tmp")
        try:
            with tmp.open("wb") as fh:
                np.savez(
                    fh,
                    head=np.frombuffer(head.encode("utf-8"), dtype=np.uint8),
                    vocab=np.frombuffer(vocab, dtype=np.uint8),
                    ids=seg.ids,
                    lengths=seg.lengths,
                    offsets=seg.offsets,
                    docs=seg.docs,
                    tfs=seg.tfs,
                )
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise MindoryError(f"cannot write the word postings {path}: {exc}") from exc

    @classmethod
    def load(cls, path: Path) -> tuple[WordPostings, dict[str, str]] | None:
        """The index saved at ``path`` and its facts; None when missing or unreadable."""
        try:
            with np.load(path, allow_pickle=False) as data:
                head = bytes(data["head"]).decode("utf-8").split("\n")
                facts = dict(line.split("=", 1) for line in head if "=" in line)
                if facts.get("format") != str(FORMAT_VERSION):
                    return None
                text = bytes(data["vocab"]).decode("utf-8")
                tokens = text.split("\n") if text else []
                seg = Segment(
                    ids=data["ids"],
                    lengths=data["lengths"],
                    vocab={t: i for i, t in enumerate(tokens)},
                    offsets=data["offsets"],
                    docs=data["docs"],
                    tfs=data["tfs"],
                )
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None  # (UnicodeDecodeError is a ValueError)
        n = len(seg.ids)
        if (
            len(seg.offsets) != len(seg.vocab) + 1
            or len(seg.lengths) != n
            or len(seg.docs) != len(seg.tfs)
            or (
                len(seg.docs)
                and (int(seg.docs.max()) >= n or int(seg.offsets[-1]) != len(seg.docs))
            )
            or (n > 1 and not bool(np.all(np.diff(seg.ids) > 0)))
        ):
            return None
        return cls([seg]), facts
