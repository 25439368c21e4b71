"""What a library holds while it is open: engines, sessions, caches, the vector index.

Every concern module of the library takes a :class:`State` (never the :class:`Library`
itself), so the concerns depend on this module and the store, not on each other's class.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from mindory.store.engine import DEFAULT_BUSY_TIMEOUT_MS, make_engine
from mindory.store.tables import FTS_TABLE

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.orm import Session

    from mindory.library.resources import Resources
    from mindory.reading.anchoring import SectionText
    from mindory.search.embedders import Embedder
    from mindory.search.pipeline import SearchServices
    from mindory.search.vectors import VectorStore
    from mindory.search.word_store import WordStore
    from mindory.store.fts import Filters
    from mindory.store.places import PlaceCache, Places

WRITE_BATCH = 1000  # chunk rows per INSERT batch (one progress report each)


class State:
    """An open library's engines, caches and vector index (see the module doc)."""

    def __init__(
        self,
        engine: Engine,
        url: str,
        path: Path | None,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> None:
        self.engine = engine
        self.url = url
        self.path = path  # the SQLite file (None for other databases)
        self.writer = engine.execution_options(mindory_write=True)
        self.write_batch = WRITE_BATCH
        self.busy_timeout_ms = busy_timeout_ms
        self.lock = threading.RLock()
        self.embedders: dict[str, Embedder] = {}
        self._places: PlaceCache | None = None
        self.texts = TextCache()
        self._vectors: VectorStore | None = None
        self._words: WordStore | None = None
        self._has_words = False
        self._resources: Resources | None = None
        self._has_fts: bool | None = None
        self._words_missing: tuple[tuple[int, ...], int] | None = None
        self._languages: tuple[tuple[int, ...], dict[int, str]] | None = None
        self._single_windows: OrderedDict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = (
            OrderedDict()
        )
        self._aux: Engine | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ sessions

    # The ORM is imported with the first session, not with the library: a read of a
    # few rows in Core (``mindory books``) never loads it (docs/architecture.md).

    def read(self) -> Session:
        from sqlalchemy.orm import Session

        return Session(self.engine, expire_on_commit=False)

    @contextlib.contextmanager
    def write(self) -> Iterator[Session]:
        from sqlalchemy.orm import Session

        with Session(self.writer, expire_on_commit=False) as session, session.begin():
            yield session

    def aux_engine(self) -> Engine:
        """A second connection pool, for reads made while a connection of the first is
        held: the vector half of a hybrid search (on a worker thread) and a book file
        read for byte offsets. Taking both from one pool deadlocks under load — every
        pooled connection held by a request that waits for a second one (the HTTP
        server runs 40 requests at once against a pool of 15) — until the pool's
        timeout. Work on this pool never waits for the first one."""
        with self.lock:
            if self._aux is None:
                if self.engine.dialect.name == "sqlite" and self.path is None:
                    self._aux = self.engine  # in memory: a second engine is another database
                else:
                    self._aux = make_engine(self.url, self.busy_timeout_ms)
            return self._aux

    def pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self.lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="mindory-search"
                )
            return self._executor

    def read_book(self, sha: str) -> bytes:
        """A book file's bytes, read through the second pool (see :meth:`aux_engine`)."""
        from mindory.store.reads import book_file_bytes

        with self.aux_engine().connect() as conn:  # Core: a search imports no ORM
            return book_file_bytes(conn, sha)

    @property
    def places(self) -> PlaceCache:
        """Section places kept across calls (made on first use)."""
        with self.lock:
            if self._places is None:
                from mindory.store.places import PlaceCache

                self._places = PlaceCache()
            return self._places

    def places_for(self, conn: Connection) -> Places:
        """Section places for one call on ``conn``, through the shared cache."""
        from mindory.store.places import Places

        return Places(self.places, conn, self.read_book)

    def has_fts(self, conn: Connection | None = None) -> bool:
        """True when the database has the FTS5 index (SQLite with revision 0002)."""
        if self._has_fts is None:
            if self.engine.dialect.name != "sqlite":
                self._has_fts = False
            else:
                with contextlib.ExitStack() as stack:
                    c = conn if conn is not None else stack.enter_context(self.engine.connect())
                    self._has_fts = bool(
                        c.exec_driver_sql(
                            "SELECT 1 FROM sqlite_master WHERE name = ?", (FTS_TABLE,)
                        ).first()
                    )
        return self._has_fts

    def words_missing(self, conn: Connection) -> int:
        """Current chunks without word index terms (counted again when the set of current
        derivations changes, or after :meth:`forget_words_count`)."""
        from mindory.store.fts import chunks_without_terms, current_derivations

        key = current_derivations(conn)
        cached = self._words_missing
        if cached is not None and cached[0] == key:
            return cached[1]
        count = chunks_without_terms(conn)
        self._words_missing = (key, count)
        return count

    def forget_words_count(self) -> None:
        self._words_missing = None

    def book_languages(self, conn: Connection) -> dict[int, str]:
        """The analysis language of every book by row id (:func:`mindory.search.words.
        language_of`), read again when the set of current derivations changes: a search
        asks for it every time, and reading every book's first section costs ~1.5 ms."""
        from mindory.search.words import language_of
        from mindory.store.fts import current_derivations
        from mindory.store.reads import book_language_rows

        key = current_derivations(conn)
        cached = self._languages
        if cached is not None and cached[0] == key:
            return cached[1]
        languages = {i: language_of(tag, start) for i, tag, start in book_language_rows(conn)}
        self._languages = (key, languages)
        return languages

    def single_windows(
        self,
        conn: Connection,
        windows_key: str,
        book_id: int | None,
        section_id: int | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`mindory.store.windows.single_windows_in_scope`, remembered for the last
        :data:`SINGLE_WINDOWS_SCOPES` scopes (within :data:`SINGLE_WINDOWS_BYTES`) until the
        current chunks or the stored windows change (their count: rows are only added, or
        deleted with their chunks): a question across languages over a 12,000-chunk book
        would read ~10 MB of rows each time."""
        from mindory.store.fts import current_derivations
        from mindory.store.windows import count_windows, single_windows_in_scope

        key = (windows_key, book_id, section_id, current_derivations(conn), count_windows(conn))
        with self.lock:
            found = self._single_windows.get(key)
            if found is not None:
                self._single_windows.move_to_end(key)
                return found
        ids, rows = single_windows_in_scope(
            conn, windows_key, book_id=book_id, section_id=section_id
        )
        # Kept as float32 (the same values: every float16 is one), so a question does not
        # widen ~5 million numbers each time.
        found = (ids, rows.astype("float32"))
        found[1].flags.writeable = False
        if found[1].nbytes > SINGLE_WINDOWS_BYTES:
            return found  # a scope this large is read each time, never held
        with self.lock:
            self._single_windows[key] = found
            while len(self._single_windows) > SINGLE_WINDOWS_SCOPES or (
                sum(r.nbytes for _, r in self._single_windows.values()) > SINGLE_WINDOWS_BYTES
            ):
                self._single_windows.popitem(last=False)
        return found

    # ------------------------------------------------------------------ search parts

    @property
    def index_path(self) -> Path | None:
        """The FAISS file beside the database (None for a non-file database: the
        index then lives in memory only, rebuilt by each process)."""
        if self.path is None:
            return None
        return self.path.with_name(self.path.name + ".faiss")

    @property
    def vectors(self) -> VectorStore:
        with self.lock:
            if self._vectors is None:
                from mindory.search.vectors import VectorStore

                self._vectors = VectorStore(self.index_path)
            return self._vectors

    @property
    def words_path(self) -> Path | None:
        """The word index's postings file beside the database (:mod:`mindory.search.
        word_store`; None for a non-file database)."""
        if self.path is None:
            return None
        return self.path.with_name(self.path.name + ".words")

    @property
    def words(self) -> WordStore:
        with self.lock:
            if self._words is None:
                from mindory.search.word_store import WordStore

                self._words = WordStore(self.words_path)
            return self._words

    def has_word_index(self, conn: Connection) -> bool:
        """Whether the database has the word index (asked once it has: it stays)."""
        if not self._has_words:
            from mindory.store import text_index

            self._has_words = text_index.has_word_index(conn, self.has_fts(conn))
        return self._has_words

    def word_postings(
        self, conn: Connection, terms: list[str], limit: int, filters: Filters
    ) -> list[tuple[int, float]] | None:
        """The word list from the postings in memory, or None where FTS5 answers
        (PostgreSQL has its own word index)."""
        if conn.dialect.name != "sqlite" or not self.has_fts(conn):
            return None
        return self.words.search(conn, terms, limit, filters)

    @property
    def resources(self) -> Resources:
        """Open EPUB archives for serving their members (made on first use)."""
        with self.lock:
            if self._resources is None:
                from mindory.library.resources import Resources

                self._resources = Resources()
            return self._resources

    def forget_book(self, sha: str) -> None:
        """Drop what is cached about a deleted book."""
        if self._resources is not None:
            self._resources.forget(sha)

    def embedder(self, spec: str) -> Embedder:
        """The embedder of a spec (``hashed``, ``model2vec:/path``, …), made once."""
        key = spec.strip()
        found = self.embedders.get(key)
        if found is None:
            from mindory.search.embedders import get_embedder

            found = self.embedders[key] = get_embedder(key)
        return found

    def services(self) -> SearchServices:
        """What :func:`mindory.search.pipeline.search` needs from this library."""
        from mindory.search.pipeline import SearchServices

        return SearchServices(
            engine=self.engine,
            aux_engine=self.aux_engine,
            pool=self.pool,
            embedder=self.embedder,
            vectors=self.vectors,
            places=self.places,
            read_book=self.read_book,
            has_fts=self.has_fts,
            words_missing=self.words_missing,
            book_languages=self.book_languages,
            single_windows=self.single_windows,
            word_postings=self.word_postings,
            has_word_index=self.has_word_index,
        )

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._aux is not None and self._aux is not self.engine:
            self._aux.dispose()
        self._aux = None
        self.engine.dispose()


TEXT_CACHE_ENTRIES = 512
# Books (or sections) whose cross-language rows stay in memory, and their bound in bytes
# (Pepys's 12,758 rows are 19.6 MB as float32).
SINGLE_WINDOWS_SCOPES = 8
SINGLE_WINDOWS_BYTES = 64 * 1024 * 1024


TEXT_CACHE_CHARS = 32_000_000


class TextCache:
    """Section texts (with their folded form, once computed) by (book SHA-256, ordinal):
    folding a 7 MB section costs about half a second. Bounded in entries and characters."""

    def __init__(
        self, max_entries: int = TEXT_CACHE_ENTRIES, max_chars: int = TEXT_CACHE_CHARS
    ) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, int], SectionText] = OrderedDict()
        self._chars = 0

    def get(self, key: tuple[str, int]) -> SectionText | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[str, int], text: SectionText) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._chars -= len(old.source_text)
            self._items[key] = text
            self._chars += len(text.source_text)
            while len(self._items) > 1 and (
                len(self._items) > self.max_entries or self._chars > self.max_chars
            ):
                _, dropped = self._items.popitem(last=False)
                self._chars -= len(dropped.source_text)
