"""The word index's postings in memory (:mod:`mindory.search.postings`), kept equal to
the rows of ``chunk_terms``: what the word list of a large SQLite library is ranked by.

Like the FAISS file beside the database, the postings are a cache with a file
(``<database>.words``) that records what it was made from: the analysis on record and
its rows. Each search first reads a few numbers that change whenever the rows may have
(:func:`mindory.store.words_fts.terms_state`); when they differ from the last search's,
the held rows are compared with the database's and repaired (rows added and removed) or,
when most of them differ, rebuilt — never served stale: the repaired postings must hold
FTS5's own row and token totals, or the search falls back to FTS5.

Below :data:`POSTINGS_MIN` rows FTS5 ranks a question in a few milliseconds and the
postings are not made (a one-off ``mindory search`` does not pay for loading them).
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
    current_chunk_ids,
    phrase_tokens,
    term_row_ids,
    term_rows,
    terms_state,
)

__all__ = ["POSTINGS_MIN", "WordStore"]

# From this many rows of the word index up, its list comes from the postings: at 114k
# chunks FTS5 took 12–15 ms a question (bench_search.py), the postings ~1 ms; at 23k
# FTS5 takes ~4 ms and building the postings ~1.2 s (once, then the file).
POSTINGS_MIN = 50_000
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

    def __init__(self, path: Path | None, min_rows: int = POSTINGS_MIN) -> None:
        self.path = path
        self.min_rows = min_rows
        self.loaded: LoadedPostings | None = None
        self._held: WordPostings | None = None  # kept across a fallback, for repair
        self._held_analysis = ""
        self.lock = threading.RLock()

    def ensure(self, conn: Connection) -> LoadedPostings | None:
        """The postings equal to the database now, or None where FTS5 answers (too
        few rows, or the postings could not be made equal)."""
        with self.lock:
            state = terms_state(conn)
            loaded = self.loaded
            if loaded is not None and loaded.state == state:
                return loaded
            rows, tokens, analysis = int(state[0]), int(state[1]), str(state[3])
            if rows < self.min_rows:
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
        tokens = [phrase_tokens(t) for t in dict.fromkeys(terms)]
        if any(len(t) > 1 for t in tokens):
            return None  # "o'clock": a phrase of two tokens needs positions
        loaded = self.ensure(conn)
        if loaded is None:
            return None
        usable = loaded.current
        if filters.book_id is not None:
            usable = loaded.postings.masks(chunk_ids_in(conn, filters))
        return loaded.postings.search(
            [t[0] for t in tokens if t],
            rows=loaded.rows,
            total_tokens=loaded.tokens,
            limit=limit,
            usable=usable,
        )

    def clear(self) -> None:
        with self.lock:
            self.loaded = self._held = None
