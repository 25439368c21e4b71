"""The word index's postings in memory (:mod:`mindory.search.postings`), kept equal to
the rows of ``chunk_terms``: what the word list of a large SQLite library is ranked by.

Like the FAISS file beside the database, the postings are a cache with a file
(``<database>.words``) that records what it was made from: the analysis on record and
its rows. Each search first reads a few numbers that change whenever the rows may have
(:func:`mindory.store.words_fts.terms_state`); when they differ from the last search's,
the held rows are compared with the database's and repaired (rows added and removed) or,
when most of them differ, rebuilt — never served stale: the repaired postings must hold
FTS5's own row and token totals, or the search falls back to FTS5.

Below :data:`POSTINGS_MIN` rows a one-off ``mindory search`` asks FTS5 (a few
milliseconds; loading the postings would cost more), but a process that keeps searching
(the server) takes the postings from :data:`SERVE_MIN` rows after its first
:data:`WARM_SEARCHES` searches: at 23.6k chunks FTS5 took 16–31 ms a question beside the
vector thread, the postings ~1 ms. ``mindory index`` makes the file from
:data:`SERVE_MIN` rows, so a server loads it rather than building it on a request.

Below :data:`EXACT_MIN` rows FTS5's list is budgeted (:func:`mindory.store.words_fts.
words_search`: the rarest terms, their best 100 re-scored with every term) and the
postings rank the same way, so a list never depends on which of the two answered; from
:data:`EXACT_MIN` up they rank every row holding a term.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError
from mindory.search.postings import WordPostings
from mindory.store.fts import Filters
from mindory.store.vectors import chunk_ids_in
from mindory.store.words_fts import (
    BM25_BUDGET,
    RERANK_DEPTH,
    current_chunk_ids,
    phrase_tokens,
    term_row_ids,
    term_rows,
    terms_state,
)

__all__ = ["EXACT_MIN", "POSTINGS_MIN", "SERVE_MIN", "WordStore"]

# From this many rows of the word index up, its list comes from the postings: at 114k
# chunks FTS5 took 12–15 ms a question (bench_search.py), the postings ~1 ms; at 23k
# FTS5 takes ~4 ms alone and building the postings ~1.2 s (once, then the file), loading
# the file ~60 ms plus reading the row ids (~0.1 s in all, more than FTS5's one answer).
POSTINGS_MIN = 50_000
# A process past its first WARM_SEARCHES searches (a server) uses them from SERVE_MIN
# rows: there FTS5 shares the cores with the vector thread (16–31 ms a question at 23.6k).
SERVE_MIN = 10_000
WARM_SEARCHES = 3
# Below this many rows the postings rank as FTS5's budgeted list does (module doc).
EXACT_MIN = 50_000
REPAIR_MIN = 2000  # rows this far (or half the index) off the database: rebuilt


@dataclass(frozen=True, eq=False)
class LoadedPostings:
    state: tuple[Any, ...]
    postings: WordPostings
    current: list[np.ndarray]  # per segment: rows of current chunks
    rows: int
    tokens: int
    status: str  # loaded (the file), repaired, built, current


class WordStore:
    """The postings of one library (file ``path`` beside the database, or memory only),
    guarded by a lock: a repair must not change them under a search."""

    def __init__(
        self,
        path: Path | None,
        min_rows: int = POSTINGS_MIN,
        serve_min_rows: int = SERVE_MIN,
        exact_min_rows: int = EXACT_MIN,
    ) -> None:
        self.path = path
        self.min_rows = min_rows
        self.serve_min_rows = serve_min_rows
        self.exact_min_rows = exact_min_rows
        self.searches = 0  # searches asked of this store (a server's count grows)
        self.loaded: LoadedPostings | None = None
        self._held: WordPostings | None = None  # kept across a fallback, for repair
        self._held_analysis = ""
        self.lock = threading.RLock()

    def ensure(self, conn: Connection, min_rows: int | None = None) -> LoadedPostings | None:
        """The postings equal to the database now, or None where FTS5 answers (fewer
        rows than ``min_rows``, by default the least a server uses them from; or the
        postings could not be made equal)."""
        with self.lock:
            state = terms_state(conn)
            loaded = self.loaded
            if loaded is not None and loaded.state == state:
                return loaded
            rows, tokens, analysis = int(state[0]), int(state[1]), str(state[3])
            least = min(self.min_rows, self.serve_min_rows) if min_rows is None else min_rows
            if rows < least:
                self.loaded = self._held = None
                return None
            held = term_row_ids(conn)
            postings, status = self._repaired(conn, held, analysis)
            if postings.totals() != (rows, tokens):
                # A write between the reads, or a row changed in place: build afresh.
                postings, status = WordPostings.build(term_rows(conn, held)), "built"
                if postings.totals() != (rows, tokens):
                    self.loaded, self._held = None, postings
                    return None
            if self.path is not None and status in ("built", "repaired"):
                with contextlib.suppress(MindoryError):  # read-only folder: from memory
                    postings.save(self.path, {"analysis": analysis})
            self._held, self._held_analysis = postings, analysis
            self.loaded = LoadedPostings(
                state, postings, postings.masks(current_chunk_ids(conn)), rows, tokens, status
            )
            return self.loaded

    def _repaired(
        self, conn: Connection, held: np.ndarray, analysis: str
    ) -> tuple[WordPostings, str]:
        # A copy: a search running now keeps the postings it was given, unchanged.
        postings, status = None, "current"
        if self._held is not None and self._held_analysis == analysis:
            postings = self._held.copy()
        if postings is None and self.path is not None and self.path.exists():
            found = WordPostings.load(self.path)
            if found is not None and found[1].get("analysis") == analysis:
                postings, status = found[0], "loaded"
        if postings is not None:
            have = postings.ids()
            extra = np.setdiff1d(have, held, assume_unique=True)
            missing = np.setdiff1d(held, have, assume_unique=True)
            if extra.size + missing.size > max(REPAIR_MIN, held.size // 2):
                postings = None
            elif extra.size or missing.size:
                postings.remove(extra)
                postings.add(term_rows(conn, missing))
                status = "repaired"
        if postings is None:
            return WordPostings.build(term_rows(conn, held)), "built"
        return postings, status

    def search(
        self, conn: Connection, terms: list[str], limit: int, filters: Filters
    ) -> list[tuple[int, float]] | None:
        """The word list (``(chunk row id, -bm25)`` best first) from the postings, or
        None where FTS5 must answer (small index; a term FTS5 reads as a phrase)."""
        unique = list(dict.fromkeys(terms))
        tokens = [phrase_tokens(t) for t in unique]
        if any(len(t) > 1 for t in tokens):
            return None  # "o'clock": a phrase of two tokens needs positions
        self.searches += 1
        least = self.min_rows
        if self.searches > WARM_SEARCHES:
            least = min(least, self.serve_min_rows)
        loaded = self.ensure(conn, least)
        if loaded is None:
            return None
        usable = loaded.current
        if filters.book_id is not None:
            usable = loaded.postings.masks(chunk_ids_in(conn, filters))
        words = {t: p[0] for t, p in zip(unique, tokens) if p}
        if loaded.rows < self.exact_min_rows:
            return _budgeted(loaded, words, limit, usable)
        return loaded.postings.search(
            list(words.values()),
            rows=loaded.rows,
            total_tokens=loaded.tokens,
            limit=limit,
            usable=usable,
        )

    def clear(self) -> None:
        with self.lock:
            self.loaded = self._held = None


def _budgeted(
    loaded: LoadedPostings, words: dict[str, str], limit: int, usable: list[np.ndarray]
) -> list[tuple[int, float]]:
    """:func:`mindory.store.words_fts.words_search`'s list, step by step, from the
    postings (``words``: each query term's one token): the rarest terms until their
    chunks add up to the budget, their best ``RERANK_DEPTH`` re-scored with every term."""
    postings = loaded.postings

    def ranked(tokens: list[str], n: int, use: list[np.ndarray]) -> list[tuple[int, float]]:
        return postings.search(
            tokens, rows=loaded.rows, total_tokens=loaded.tokens, limit=n, usable=use
        )

    if not words:
        return []
    held = {t: postings.doc_count(token) for t, token in words.items()}
    if sum(held.values()) <= BM25_BUDGET:
        return ranked(list(words.values()), limit, usable)
    chosen: list[str] = []
    total = 0
    for term in sorted(held, key=lambda t: (held[t], t)):
        if held[term] == 0:
            continue
        if chosen and total + held[term] > BM25_BUDGET:
            break
        chosen.append(term)
        total += held[term]
    if not chosen:
        return []
    if len(chosen) == sum(1 for t in held if held[t]):
        return ranked([words[t] for t in chosen], limit, usable)
    candidates = ranked([words[t] for t in chosen], max(limit, RERANK_DEPTH), usable)
    picked = np.array(sorted(i for i, _ in candidates), dtype=np.int64)
    # Every term's score of those candidates alone: the same ties (the smaller id).
    return ranked(list(words.values()), len(candidates), postings.masks(picked))[:limit]
