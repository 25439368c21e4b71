"""The library: the one orchestrator over the pipeline and the database.

``Library.open(path_or_url)`` opens (and upgrades to the newest schema) a
SQLite file or any SQLAlchemy URL; ``import_book`` runs a file through the
pipeline (importers → normalize → chunking) and stores everything in one
transaction. The CLI and the HTTP API call these methods and nothing else;
every return type is a frozen dataclass with a ``to_json()`` that gives the
shape both doors print.

Reproducibility (DESIGN §3): a book is its file's SHA-256; re-importing the
same bytes with the same settings hashes the file, finds the derivation and
returns ``unchanged`` without parsing or writing. Chunk ids depend only on
(book hash, section, settings fingerprint, span), so two libraries agree on
them whatever the import order.

Atomicity and concurrency: parsing, normalizing and chunking happen before
any write; the write is one transaction (``BEGIN IMMEDIATE`` on SQLite, so two
writers queue instead of failing), and SQLite runs in WAL mode, so readers in
other processes keep reading while an import writes, and a killed import
leaves no trace.
"""

from __future__ import annotations

import codecs
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter
from typing import Any, Literal, TypeVar

import numpy as np
from sqlalchemy import (
    Engine,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from mindory.errors import LimitError, MindoryError, NotFoundError
from mindory.importers import load_book
from mindory.reading.anchoring import (
    DEFAULT_MIN_PREFIX,
    DEFAULT_MIN_PREFIX_CJK,
    SectionHint,
    SectionText,
    StoredAnchor,
    _is_cjk_text,
    calibrate_quote,
    reanchor_all,
)
from mindory.reading.highlights import (
    MAX_QUOTE_CHARS,
    UNITS,
    UNSET,
    Calibration,
    Highlight,
    ReanchorReport,
    Unset,
    check_color,
    check_note,
    parse_highlight_id,
)
from mindory.reading.locate import (
    DEFAULT_PAGE_SIZE,
    Locator,
    SectionPlace,
    chunks_containing,
    locate_position,
    locate_span,
    places_from_book,
    resolve_cfi,
)
from mindory.search.embedders import (
    Embedder,
    HashedNgramEmbedder,
    embed_text_for_chunk,
    get_embedder,
)
from mindory.search.lexical import (
    CANDIDATES,
    MODES,
    RRF_K,
    Filters,
    Fused,
    Hit,
    Match,
    ModeScore,
    QueryTerms,
    SearchResult,
    analyze,
    find_matches,
    lexical_search,
    rrf,
    scan_search,
)
from mindory.search.vector_index import Manifest, VectorIndex, manifest_path
from mindory.store.models import (
    FTS_TABLE,
    BlockRow,
    BookFileRow,
    BookRow,
    ChunkRow,
    ChunkVectorRow,
    DerivationRow,
    EmbeddingRow,
    HighlightRow,
    NormalizationRow,
    SectionRow,
    SectionTextRow,
    TocEntryRow,
)
from mindory.text.chunking import chunk_book
from mindory.text.encoding import ByteIndex, decode_bytes
from mindory.text.offsets import OffsetMap, OffsetMapError, Utf16Index
from mindory.text.records import Block, Book, Chunk, NormalizeProfile, Settings, TocEntry, chunk_id

__all__ = [
    "MIGRATIONS",
    "BlockInfo",
    "BlockPage",
    "BookInfo",
    "Calibration",
    "ChunkInfo",
    "DerivationInfo",
    "EmbedResult",
    "EmbeddingInfo",
    "Highlight",
    "Hit",
    "ImportFailure",
    "ImportResult",
    "IndexInfo",
    "Library",
    "LocateResult",
    "ProgressFn",
    "ReanchorReport",
    "SearchResult",
    "SectionDetail",
    "SectionInfo",
    "TocNode",
    "VerifyReport",
    "book_files_in",
    "default_db_path",
    "embedding_fingerprint",
    "profile_fingerprint",
    "resolve_url",
    "upgrade",
]

MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"
BOOK_SUFFIXES = frozenset({".txt", ".epub"})
DEFAULT_BUSY_TIMEOUT_MS = 60_000
WRITE_BATCH = 1000  # chunk rows per INSERT batch (one progress report each)
MAX_PROBLEMS = 200  # verify stops collecting problems after this many
DEFAULT_EMBEDDER = "hashed"  # the built-in offline embedder (mindory.search.embedders)
EMBED_BATCH = 256  # chunks per embed call and per vector-writing transaction
# Above this many vectors the index is HNSW instead of an exact flat scan: exact
# search over 100k x 384 takes ~24 ms a query on the 2-core test machine (memory
# bound), HNSW32 ~1-3 ms with recall@10 >= 0.95 (docs/search.md, bench_search.py).
INDEX_HNSW_THRESHOLD = 50_000
# HNSW beam width. On 114k real chunk embeddings (bench_search.py) efSearch 512 found
# 0.96 of the exact top 10 for span-like queries and 0.78 for short questions (whose
# scores tie a lot); 1024: 0.98 and 0.89 at ~5 ms a query; 2048: 0.99 / 0.95 at ~10 ms.
INDEX_EF_SEARCH = 1024
REPAIR_MIN = 1000  # an index this far (or half its size) off the database is rebuilt
# Section places (texts, offset map, blocks, CFI table) kept across searches: building
# one for a large EPUB section costs tens of milliseconds (mostly the CFI table).
PLACE_CACHE_ENTRIES = 256
PLACE_CACHE_CHARS = 16_000_000

ImportStatus = Literal["created", "unchanged", "rederived"]
# progress(phase, done, total): phases "read", "parse", "chunk", "write".
ProgressFn = Callable[[str, int, int], None]

T = TypeVar("T")


# --------------------------------------------------------------------------- location


def default_db_path() -> Path:
    """The library used when no ``--db``/``MINDORY_DB``/``MINDORY_DATABASE_URL`` is given."""
    import platformdirs

    return Path(platformdirs.user_data_dir("mindory", appauthor=False)) / "library.sqlite"


def resolve_url(path_or_url: str | os.PathLike[str] | None) -> tuple[str, Path | None]:
    """``(SQLAlchemy URL, SQLite file or None)`` for a path, a URL or nothing.

    Nothing means ``MINDORY_DATABASE_URL`` if set, else :func:`default_db_path`.
    Anything with ``://`` is a URL; everything else is a SQLite file path.
    """
    if path_or_url is None or os.fspath(path_or_url) == "":
        path_or_url = os.environ.get("MINDORY_DATABASE_URL") or default_db_path()
    text = os.fspath(path_or_url)
    if "://" in text:
        url = make_url(text)
        path: Path | None = None
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            path = Path(str(url.database)).expanduser().resolve()
        return text, path
    path = Path(text).expanduser().resolve()
    return f"sqlite:///{path}", path


# --------------------------------------------------------------------------- engine


def _make_engine(url: str, busy_timeout_ms: int) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    engine = create_engine(parsed, connect_args={"timeout": busy_timeout_ms / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy (not the sqlite3 module) issue BEGIN: see _on_begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock up front: a deferred transaction that
        # reads first and upgrades later can fail with SQLITE_BUSY at once
        # (busy_timeout does not help), BEGIN IMMEDIATE waits its turn instead.
        immediate = conn.get_execution_options().get("mindory_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


# --------------------------------------------------------------------------- migrations


def _alembic_config(connection: Connection | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


@functools.cache
def _script_heads() -> tuple[str, ...]:
    from alembic.script import ScriptDirectory

    if not (MIGRATIONS / "env.py").is_file():
        raise MindoryError(f"the schema migrations are missing: {MIGRATIONS}")
    return tuple(ScriptDirectory.from_config(_alembic_config()).get_heads())


@functools.cache
def _known_revisions() -> frozenset[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_alembic_config())
    return frozenset(rev.revision for rev in script.walk_revisions())


def _current_heads(conn: Connection) -> tuple[str, ...]:
    from alembic.runtime.migration import MigrationContext

    return tuple(MigrationContext.configure(conn).get_current_heads())


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default: the newest) in one transaction."""
    from alembic import command

    def check(conn: Connection) -> bool:
        """True when the schema is already at ``revision`` (only "head" is checked)."""
        current = _current_heads(conn)
        unknown = [rev for rev in current if rev not in _known_revisions()]
        if unknown:
            raise MindoryError(
                f"the library's schema ({', '.join(unknown)}) is newer than this mindory; "
                "upgrade mindory"
            )
        return revision == "head" and sorted(current) == sorted(_script_heads())

    # Look first without the write lock: opening a library must not wait for
    # an import that another process is writing.
    with engine.connect() as conn:
        if check(conn):
            return
    with engine.execution_options(mindory_write=True).begin() as conn:
        if not check(conn):  # another process may have upgraded meanwhile
            command.upgrade(_alembic_config(conn), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Take the schema back to ``revision`` (tests and emergencies)."""
    from alembic import command

    with engine.execution_options(mindory_write=True).begin() as conn:
        command.downgrade(_alembic_config(conn), revision)


# --------------------------------------------------------------------------- phase timing

# The importers normalize while they parse (EPUB text is normalized while the
# DOM is walked), so "normalize" time is measured by timing their
# normalization entry points while an import runs in this context.
_PHASE_TIMES: ContextVar[dict[str, float] | None] = ContextVar("mindory_phase_times", default=None)


def _timed(fn: Callable[..., T], phase: str) -> Callable[..., T]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        acc = _PHASE_TIMES.get()
        if acc is None:
            return fn(*args, **kwargs)
        t = perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[phase] = acc.get(phase, 0.0) + perf_counter() - t

    wrapper.__mindory_timed__ = True  # type: ignore[attr-defined]
    return wrapper


def _install_phase_timers() -> None:
    from mindory.importers import epub, text

    for module, name in ((text, "normalize"), (epub, "extract_text")):
        fn = getattr(module, name, None)
        if callable(fn) and not getattr(fn, "__mindory_timed__", False):
            setattr(module, name, _timed(fn, "normalize"))


_install_phase_timers()


# --------------------------------------------------------------------------- records


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:  # SQLite hands back naive datetimes; they were UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat(timespec="seconds")


def profile_fingerprint(profile: NormalizeProfile) -> str:
    """Fingerprint of the normalization profile alone (rows that depend only on it)."""
    canonical = json.dumps(asdict(profile), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class DerivationInfo:
    fingerprint: str
    settings: Mapping[str, Any]
    current: bool
    chunk_count: int
    created_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "current": self.current,
            "chunk_count": self.chunk_count,
            "settings": dict(self.settings),
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class BookInfo:
    """A stored book (no texts). ``id`` is the SHA-256 of the file."""

    id: str
    title: str
    format: str
    file_name: str
    file_size: int
    encoding: str | None
    lossy: bool
    bad_bytes: int
    first_bad_byte: int | None
    creators: tuple[str, ...]
    language: str | None
    identifiers: tuple[str, ...]
    warnings: tuple[str, ...]
    section_count: int
    toc_count: int
    stored: Literal["copy", "path"]
    imported_at: str | None
    derivations: tuple[DerivationInfo, ...] = ()

    @property
    def current(self) -> DerivationInfo | None:
        return next((d for d in self.derivations if d.current), None)

    def to_json(self) -> dict[str, Any]:
        current = self.current
        return {
            "id": self.id,
            "title": self.title,
            "format": self.format,
            "file_name": self.file_name,
            "file_size": self.file_size,
            "encoding": self.encoding,
            "lossy": self.lossy,
            "bad_bytes": self.bad_bytes,
            "first_bad_byte": self.first_bad_byte,
            "creators": list(self.creators),
            "language": self.language,
            "identifiers": list(self.identifiers),
            "section_count": self.section_count,
            "toc_count": self.toc_count,
            "chunk_count": current.chunk_count if current else 0,
            "fingerprint": current.fingerprint if current else None,
            "stored": self.stored,
            "imported_at": self.imported_at,
            "warnings": list(self.warnings),
            "derivations": [d.to_json() for d in self.derivations],
        }


@dataclass(frozen=True, slots=True)
class SectionInfo:
    """A section under the book's current (or a chosen) derivation."""

    ordinal: int
    title: str
    href: str | None
    media_type: str
    parser: str
    linear: bool
    source_start: int
    source_end: int
    utf16_start: int
    normalized_length: int
    block_count: int
    chunk_count: int

    def to_json(self) -> dict[str, Any]:
        return {
            "ordinal": self.ordinal,
            "title": self.title,
            "href": self.href,
            "media_type": self.media_type,
            "parser": self.parser,
            "linear": self.linear,
            "source_start": self.source_start,
            "source_end": self.source_end,
            "utf16_start": self.utf16_start,
            "normalized_length": self.normalized_length,
            "block_count": self.block_count,
            "chunk_count": self.chunk_count,
        }


@dataclass(frozen=True)
class SectionDetail:
    """One section with its texts and offset map."""

    book: str
    info: SectionInfo
    source_text: str
    normalized_text: str
    offset_map: OffsetMap
    cfi_table: str | None = field(default=None, repr=False)

    def cfi_document(self) -> Any:
        """The section's :class:`~mindory.importers.cfi.CfiDocument`, or None (plain text)."""
        if self.cfi_table is None:
            return None
        from mindory.importers.cfi import CfiDocument

        return CfiDocument.from_json(self.cfi_table, self.source_text)

    def to_json(self, *, with_text: bool = True) -> dict[str, Any]:
        out = {"book": self.book, **self.info.to_json()}
        if with_text:
            out["source_text"] = self.source_text
            out["normalized_text"] = self.normalized_text
            out["offset_map"] = json.loads(self.offset_map.to_json())
        return out


@dataclass(frozen=True, slots=True)
class TocNode:
    title: str
    href: str
    section: int | None
    source_offset: int | None
    children: tuple[TocNode, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "href": self.href,
            "section": self.section,
            "source_offset": self.source_offset,
            "children": [c.to_json() for c in self.children],
        }


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """A stored chunk. ``row_id`` is the library-local integer id (vector indexes)."""

    id: str
    section: int
    index: int
    start: int
    end: int
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    text: str
    byte_start: int | None = None
    byte_end: int | None = None
    cfi: str | None = None
    cfi_epubjs: str | None = None
    row_id: int | None = None
    context_start: int | None = None  # parent-child: the normalized span to read it in
    context_end: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The same shape as :func:`mindory.text.shapes.chunk_json` (no row id: it is local)."""
        out: dict[str, Any] = {
            "id": self.id,
            "section": self.section,
            "index": self.index,
            "start": self.start,
            "end": self.end,
            "source_start": self.source_start,
            "source_end": self.source_end,
            "utf16_start": self.utf16_start,
            "utf16_end": self.utf16_end,
        }
        if self.byte_start is not None:
            out["byte_start"] = self.byte_start
            out["byte_end"] = self.byte_end
        if self.cfi is not None:
            out["cfi"] = self.cfi
            out["cfi_epubjs"] = self.cfi_epubjs
        if self.context_start is not None:
            out["context_start"] = self.context_start
            out["context_end"] = self.context_end
        out["text"] = self.text
        return out


@dataclass(frozen=True, slots=True)
class BlockInfo:
    index: int
    kind: str
    level: int | None
    start: int
    end: int
    source_start: int
    source_end: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "level": self.level,
            "start": self.start,
            "end": self.end,
            "source_start": self.source_start,
            "source_end": self.source_end,
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class BlockPage:
    book: str
    section: int
    page: int  # counted from 1
    page_size: int
    total: int  # blocks in the section
    blocks: tuple[BlockInfo, ...]

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))

    def to_json(self) -> dict[str, Any]:
        return {
            "book": self.book,
            "section": self.section,
            "page": self.page,
            "page_size": self.page_size,
            "pages": self.pages,
            "total": self.total,
            "blocks": [b.to_json() for b in self.blocks],
        }


@dataclass(frozen=True, slots=True)
class ImportResult:
    path: str
    book: str  # sha256
    title: str
    format: str
    status: ImportStatus
    fingerprint: str
    sections: int
    chunks: int
    blocks: int
    toc_entries: int
    warnings: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds per phase
    made_current: bool = False  # an existing derivation became the current one
    # A new edition: the books whose highlights moved here, and what became of each.
    replaces: tuple[str, ...] = ()
    reanchored: tuple[ReanchorReport, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "book": self.book,
            "title": self.title,
            "format": self.format,
            "fingerprint": self.fingerprint,
            "sections": self.sections,
            "chunks": self.chunks,
            "blocks": self.blocks,
            "toc_entries": self.toc_entries,
            "made_current": self.made_current,
            "warnings": list(self.warnings),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "replaces": list(self.replaces),
            "reanchored": [r.to_json() for r in self.reanchored],
        }


@dataclass(frozen=True, slots=True)
class ImportFailure:
    """A file a batch import could not import; nothing of it was written."""

    path: str
    error: str
    kind: str  # the error's class name

    status: Literal["failed"] = "failed"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "error": self.error, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class VerifyReport:
    books: int
    sections: int
    section_texts: int
    blocks: int
    chunks: int
    problems: tuple[str, ...]
    truncated: bool = False  # more problems than were collected

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "books": self.books,
            "sections": self.sections,
            "section_texts": self.section_texts,
            "blocks": self.blocks,
            "chunks": self.chunks,
            "problems": list(self.problems),
            "truncated": self.truncated,
        }


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def book_files_in(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files to import: named files as given, folders searched recursively for
    ``.txt``/``.epub`` (hidden entries skipped), in a stable order, no duplicates."""
    out: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and f.suffix.lower() in BOOK_SUFFIXES
                and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
        else:
            found = [p]
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def _read_file(path: Path) -> bytes:
    if not path.exists():
        raise MindoryError("no such file", path=str(path))
    if not path.is_file():
        raise MindoryError("not a file", path=str(path))
    try:
        return path.read_bytes()
    except OSError as exc:
        raise MindoryError(f"cannot read file: {exc.strerror or exc}", path=str(path)) from exc


def _walk_toc(entries: Sequence[TocEntry], depth: int = 0) -> Iterator[tuple[TocEntry, int]]:
    for entry in entries:
        yield entry, depth
        yield from _walk_toc(entry.children, depth + 1)


# --------------------------------------------------------------------------- library


class Library:
    """A library of books in one database. Open with :meth:`open`; close when done."""

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
        self._writer = engine.execution_options(mindory_write=True)
        self.write_batch = WRITE_BATCH  # chunk rows per INSERT (and per progress report)
        self.index_options: dict[str, Any] = {
            "hnsw_threshold": INDEX_HNSW_THRESHOLD,
            "ef_search": INDEX_EF_SEARCH,
        }
        self._embedders: dict[str, Embedder] = {}
        self._loaded_index: _LoadedIndex | None = None
        self._index_lock = threading.RLock()
        self._has_fts: bool | None = None
        self._places = _PlaceCache()
        self._texts = _TextCache()
        self._busy_timeout_ms = busy_timeout_ms
        self._aux: Engine | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    def open(
        cls,
        path_or_url: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> Library:
        """Open a library (a SQLite path or a SQLAlchemy URL; see :func:`resolve_url`),
        creating it if needed and upgrading its schema to the newest revision."""
        url, path = resolve_url(path_or_url)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise MindoryError(
                    f"cannot create the library folder: {exc.strerror or exc}",
                    path=str(path.parent),
                ) from exc
        engine = _make_engine(url, busy_timeout_ms)
        try:
            upgrade(engine)
        except SQLAlchemyError as exc:
            engine.dispose()
            where = str(path) if path is not None else make_url(url).render_as_string()
            raise MindoryError(f"cannot open the library: {_first_line(exc)}", path=where) from exc
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, url, path, busy_timeout_ms)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._aux is not None and self._aux is not self.engine:
            self._aux.dispose()
        self._aux = None
        self.engine.dispose()

    def _aux_engine(self) -> Engine:
        """A second connection pool, for reads made while a connection of the first is
        held: the vector half of a hybrid search (on a worker thread) and a book file
        read for byte offsets. Taking both from one pool deadlocks under load — every
        pooled connection held by a request that waits for a second one (the HTTP
        server runs 40 requests at once against a pool of 15) — until the pool's
        timeout. Work on this pool never waits for the first one."""
        with self._index_lock:
            if self._aux is None:
                if self.engine.dialect.name == "sqlite" and self.path is None:
                    self._aux = self.engine  # in memory: a second engine is another database
                else:
                    self._aux = _make_engine(self.url, self._busy_timeout_ms)
            return self._aux

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _read(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    @contextlib.contextmanager
    def _write(self) -> Iterator[Session]:
        with Session(self._writer, expire_on_commit=False) as session, session.begin():
            yield session

    # ------------------------------------------------------------------ import

    def import_book(
        self,
        path: str | os.PathLike[str],
        settings: Settings | None = None,
        *,
        copy: bool = True,
        progress: ProgressFn | None = None,
        replaces: str | None = None,
    ) -> ImportResult:
        """Import one file; see the module doc for what ``unchanged`` costs.

        ``copy=False`` stores the file's path instead of its bytes. Raises a
        MindoryError (naming the file) for bad input; nothing is written then.

        A new edition: ``replaces`` names a book (any ref) this file is a changed
        version of; every highlight of that book is re-anchored onto this one in the
        same transaction, and the result reports each (``reanchored``). Without it, a
        file that is a new book takes over the highlights of the other books sharing a
        package identifier with it (EPUB ``dc:identifier``). The old book is kept.
        """
        settings = settings or Settings()
        report = progress or _no_progress
        p = Path(path)
        timings: dict[str, float] = {}
        t_start = perf_counter()

        report("read", 0, 1)
        data = _read_file(p)
        sha = hashlib.sha256(data).hexdigest()
        timings["read"] = perf_counter() - t_start
        report("read", 1, 1)
        old = self._replaced_book(p, sha, replaces) if replaces is not None else None

        fingerprint = settings.fingerprint
        found = self._unchanged(p, sha, fingerprint, timings, t_start)
        if found is not None:
            return self._reanchor_stored(found, old) if old is not None else found

        report("parse", 0, 1)
        t = perf_counter()
        phase_times: dict[str, float] = {}
        token = _PHASE_TIMES.set(phase_times)
        try:
            book = load_book(p, settings.profile)
        finally:
            _PHASE_TIMES.reset(token)
        if book.sha256 != sha:
            raise MindoryError("the file changed while it was being imported", path=str(p))
        # CFI tables are built here, not inside the write transaction.
        cfi_tables, cfi_warnings = _cfi_tables(book)
        elapsed = perf_counter() - t
        timings["normalize"] = min(phase_times.get("normalize", 0.0), elapsed)
        timings["parse"] = elapsed - timings["normalize"]
        report("parse", 1, 1)

        report("chunk", 0, 1)
        t = perf_counter()
        chunks = chunk_book(book, settings)
        prepared = _Prepared(
            path=p,
            book=book,
            data=data,
            copy=copy,
            settings=settings,
            chunks=chunks,
            byte_spans=_byte_spans(book, chunks),
            cfi_tables=cfi_tables,
            warnings=(*book.warnings, *cfi_warnings),
        )
        timings["chunk"] = perf_counter() - t
        report("chunk", 1, 1)

        t = perf_counter()
        try:
            result = self._store(prepared, report, old)
        except IntegrityError:
            # Another writer stored the same book first (possible without
            # SQLite's BEGIN IMMEDIATE, e.g. on PostgreSQL): look again.
            found = self._unchanged(p, sha, fingerprint, timings, t_start)
            if found is None:
                result = self._store(prepared, report, old)
            else:
                return self._reanchor_stored(found, old) if old is not None else found
        timings["write"] = perf_counter() - t
        timings["total"] = perf_counter() - t_start
        return _with_timings(result, timings)

    def import_many(
        self,
        paths: Iterable[str | os.PathLike[str]],
        settings: Settings | None = None,
        *,
        copy: bool = True,
        progress: Callable[[Path], ProgressFn | None] | None = None,
        replaces: str | None = None,
    ) -> Iterator[ImportResult | ImportFailure]:
        """Import files and folders (see :func:`book_files_in`), one transaction per
        book; a bad file yields an :class:`ImportFailure` and the batch goes on.
        ``replaces`` is passed to every :meth:`import_book` (meant for one file)."""
        for p in book_files_in(paths):
            try:
                yield self.import_book(
                    p,
                    settings,
                    copy=copy,
                    progress=progress(p) if progress else None,
                    replaces=replaces,
                )
            except SQLAlchemyError:
                raise  # the database, not the file: stop
            except MindoryError as exc:
                yield ImportFailure(str(p), str(exc), type(exc).__name__)
            except Exception as exc:  # noqa: BLE001 - one bad book must not stop the batch
                yield ImportFailure(str(p), f"{p}: {type(exc).__name__}: {exc}", type(exc).__name__)

    def _unchanged(
        self, p: Path, sha: str, fingerprint: str, timings: dict[str, float], t_start: float
    ) -> ImportResult | None:
        """The result for an already imported (book, settings), or None."""
        with self._read() as s:
            row = s.execute(
                select(BookRow, DerivationRow)
                .join(DerivationRow, DerivationRow.book_id == BookRow.id)
                .where(BookRow.sha256 == sha, DerivationRow.fingerprint == fingerprint)
            ).first()
            if row is None:
                return None
            book_row, derivation = row
            blocks = _block_total(s, derivation.normalization_id)
        made_current = False
        if not derivation.is_current:
            with self._write() as w:
                _make_current(w, book_row.id, derivation.id)
            made_current = True
        timings["total"] = perf_counter() - t_start
        return ImportResult(
            path=str(p),
            book=sha,
            title=book_row.title,
            format=book_row.format,
            status="unchanged",
            fingerprint=fingerprint,
            sections=book_row.section_count,
            chunks=derivation.chunk_count,
            blocks=blocks,
            toc_entries=book_row.toc_count,
            warnings=tuple(book_row.warnings),
            timings=dict(timings),
            made_current=made_current,
        )

    def _store(
        self, prepared: _Prepared, report: ProgressFn, replaces: str | None = None
    ) -> ImportResult:
        book, settings = prepared.book, prepared.settings
        chunks, byte_spans = prepared.chunks, prepared.byte_spans
        now = datetime.now(UTC)
        fingerprint = settings.fingerprint
        total_rows = len(chunks)
        report("write", 0, total_rows)
        with self._write() as s:
            book_row = s.scalar(select(BookRow).where(BookRow.sha256 == book.sha256))
            status: ImportStatus
            if book_row is None:
                status = "created"
                book_id, section_ids = _insert_book(s, prepared, now)
                toc_count = sum(1 for _ in _walk_toc(book.toc))
            else:
                book_id = book_row.id
                toc_count = book_row.toc_count
                existing = s.scalar(
                    select(DerivationRow).where(
                        DerivationRow.book_id == book_id, DerivationRow.fingerprint == fingerprint
                    )
                )
                if existing is not None:
                    # Stored by another writer meanwhile: nothing to do.
                    made_current = not existing.is_current
                    if made_current:
                        _make_current(s, book_id, existing.id)
                    blocks = _block_total(s, existing.normalization_id)
                    moved = self._new_edition(s, prepared.book, "unchanged", replaces)
                    return replace(
                        _result(
                            prepared,
                            "unchanged",
                            existing.chunk_count,
                            blocks,
                            toc_count,
                            made_current,
                        ),
                        **moved,
                    )
                status = "rederived"
                section_ids = _check_sections(s, book_id, book)
            normalization_id, block_total = _normalization(s, book_id, book, settings, section_ids)
            s.execute(
                update(DerivationRow)
                .where(DerivationRow.book_id == book_id, DerivationRow.is_current.is_(True))
                .values(is_current=False)
            )
            conn = s.connection()
            derivation_id = conn.execute(
                insert(DerivationRow).returning(DerivationRow.id),
                {
                    "book_id": book_id,
                    "normalization_id": normalization_id,
                    "settings": settings.to_dict(),
                    "fingerprint": fingerprint,
                    "is_current": True,
                    "chunk_count": len(chunks),
                    "created_at": now,
                },
            ).scalar_one()
            step = max(1, self.write_batch)
            for lo in range(0, total_rows, step):
                batch = chunks[lo : lo + step]
                rows = [
                    _chunk_row(c, derivation_id, section_ids[c.section], byte_spans, lo + k)
                    for k, c in enumerate(batch)
                ]
                _insert_chunks(conn, rows)
                report("write", min(lo + step, total_rows), total_rows)
            moved = self._new_edition(s, book, status, replaces)
        report("write", total_rows, total_rows)
        return replace(
            _result(prepared, status, len(chunks), block_total, toc_count, False), **moved
        )

    # ------------------------------------------------------------------ reading

    def books(self) -> list[BookInfo]:
        """Every book, by title (then id)."""
        with self._read() as s:
            rows = s.execute(
                select(BookRow, BookFileRow.data.is_(None))
                .join(BookFileRow, BookFileRow.book_id == BookRow.id)
                .order_by(BookRow.title, BookRow.sha256)
            ).all()
            derivations = _derivations_by_book(s, [r[0].id for r in rows])
            return [_book_info(b, by_path, derivations.get(b.id, ())) for b, by_path in rows]

    def book(self, ref: str) -> BookInfo:
        """A book by id (its SHA-256 or a prefix of it) or a unique prefix of its title."""
        with self._read() as s:
            row = _resolve_book(s, ref)
            by_path = s.scalar(
                select(BookFileRow.data.is_(None)).where(BookFileRow.book_id == row.id)
            )
            derivations = _derivations_by_book(s, [row.id])
            return _book_info(row, bool(by_path), derivations.get(row.id, ()))

    def book_file(self, ref: str, *, _engine: Engine | None = None) -> bytes:
        """The original file's bytes (read from its path when it was not copied)."""
        with Session(_engine or self.engine, expire_on_commit=False) as s:
            row = _resolve_book(s, ref)
            file_row = s.get_one(BookFileRow, row.id)
            if file_row.data is not None:
                return file_row.data
            path = Path(file_row.path or "")
        data = _read_file(path)
        if hashlib.sha256(data).hexdigest() != row.sha256:
            raise MindoryError("the book file changed since it was imported", path=str(path))
        return data

    def toc(self, ref: str) -> tuple[TocNode, ...]:
        with self._read() as s:
            row = _resolve_book(s, ref)
            entries = s.execute(
                select(TocEntryRow)
                .where(TocEntryRow.book_id == row.id)
                .order_by(TocEntryRow.position)
            ).scalars()
            children: dict[int | None, list[TocEntryRow]] = {}
            for e in entries:
                children.setdefault(e.parent_id, []).append(e)

        def build(parent: int | None) -> tuple[TocNode, ...]:
            return tuple(
                TocNode(e.title, e.href, e.section_ordinal, e.source_offset, build(e.id))
                for e in children.get(parent, [])
            )

        return build(None)

    def sections(self, ref: str, *, fingerprint: str | None = None) -> list[SectionInfo]:
        with self._read() as s:
            row = _resolve_book(s, ref)
            derivation = _derivation(s, row, fingerprint)
            chunk_counts = dict(
                s.execute(
                    select(ChunkRow.section_id, func.count())
                    .where(ChunkRow.derivation_id == derivation.id)
                    .group_by(ChunkRow.section_id)
                ).all()
            )
            rows = s.execute(
                select(
                    SectionRow.id,
                    SectionRow.ordinal,
                    SectionRow.title,
                    SectionRow.href,
                    SectionRow.media_type,
                    SectionRow.parser,
                    SectionRow.linear,
                    SectionRow.source_start,
                    SectionRow.source_length,
                    SectionRow.utf16_start,
                    func.length(SectionTextRow.normalized_text),
                    SectionTextRow.block_count,
                )
                .join(SectionTextRow, SectionTextRow.section_id == SectionRow.id)
                .where(
                    SectionRow.book_id == row.id,
                    SectionTextRow.normalization_id == derivation.normalization_id,
                )
                .order_by(SectionRow.ordinal)
            )
            return [
                SectionInfo(
                    ordinal=o,
                    title=title,
                    href=href,
                    media_type=mt,
                    parser=parser,
                    linear=bool(linear),
                    source_start=ss,
                    source_end=ss + sl,
                    utf16_start=us,
                    normalized_length=int(nl or 0),
                    block_count=bc,
                    chunk_count=int(chunk_counts.get(sid, 0)),
                )
                for sid, o, title, href, mt, parser, linear, ss, sl, us, nl, bc in rows
            ]

    def section(self, ref: str, ordinal: int, *, fingerprint: str | None = None) -> SectionDetail:
        """One section with its source text, normalized text and offset map."""
        with self._read() as s:
            row = _resolve_book(s, ref)
            derivation = _derivation(s, row, fingerprint)
            found = s.execute(
                select(SectionRow, SectionTextRow)
                .join(SectionTextRow, SectionTextRow.section_id == SectionRow.id)
                .where(
                    SectionRow.book_id == row.id,
                    SectionRow.ordinal == ordinal,
                    SectionTextRow.normalization_id == derivation.normalization_id,
                )
            ).first()
            if found is None:
                raise NotFoundError(
                    f"{row.title!r} has no section {ordinal} (sections 0–{row.section_count - 1})"
                )
            sec, text = found
            chunk_count = s.scalar(
                select(func.count()).where(
                    ChunkRow.derivation_id == derivation.id, ChunkRow.section_id == sec.id
                )
            )
        info = SectionInfo(
            ordinal=sec.ordinal,
            title=sec.title,
            href=sec.href,
            media_type=sec.media_type,
            parser=sec.parser,
            linear=sec.linear,
            source_start=sec.source_start,
            source_end=sec.source_start + sec.source_length,
            utf16_start=sec.utf16_start,
            normalized_length=len(text.normalized_text),
            block_count=text.block_count,
            chunk_count=int(chunk_count or 0),
        )
        return SectionDetail(
            book=row.sha256,
            info=info,
            source_text=sec.source_text,
            normalized_text=text.normalized_text,
            offset_map=OffsetMap.from_bytes(text.offset_map),
            cfi_table=sec.cfi_table,
        )

    def chunks(
        self,
        ref: str,
        *,
        section: int | None = None,
        fingerprint: str | None = None,
        offset: int = 0,
        limit: int | None = None,
        with_cfi: bool = False,
    ) -> list[ChunkInfo]:
        """Chunks of the current (or the given) derivation, in reading order.

        ``with_cfi`` adds EPUB CFIs (both flavors) from the stored CFI tables.
        """
        with self._read() as s:
            row = _resolve_book(s, ref)
            derivation = _derivation(s, row, fingerprint)
            return _chunk_infos(s, derivation.id, section, offset, limit, with_cfi)

    def blocks(
        self,
        ref: str,
        section: int,
        page: int = 1,
        page_size: int = 50,
        *,
        fingerprint: str | None = None,
    ) -> BlockPage:
        """One page (counted from 1) of a section's render blocks, with their text."""
        if page < 1:
            raise MindoryError(f"page must be 1 or more, not {page}")
        if page_size < 1:
            raise MindoryError(f"page size must be 1 or more, not {page_size}")
        with self._read() as s:
            row = _resolve_book(s, ref)
            derivation = _derivation(s, row, fingerprint)
            found = s.execute(
                select(SectionTextRow)
                .join(SectionRow, SectionRow.id == SectionTextRow.section_id)
                .where(
                    SectionRow.book_id == row.id,
                    SectionRow.ordinal == section,
                    SectionTextRow.normalization_id == derivation.normalization_id,
                )
            ).scalar()
            if found is None:
                raise NotFoundError(
                    f"{row.title!r} has no section {section} (sections 0–{row.section_count - 1})"
                )
            blocks = s.execute(
                select(BlockRow)
                .where(BlockRow.section_text_id == found.id)
                .order_by(BlockRow.index)
                .offset((page - 1) * page_size)
                .limit(page_size)
            ).scalars()
            text = found.normalized_text
            infos = tuple(
                BlockInfo(
                    b.index,
                    b.kind,
                    b.level,
                    b.start,
                    b.end,
                    b.source_start,
                    b.source_end,
                    text[b.start : b.end],
                )
                for b in blocks
            )
            return BlockPage(row.sha256, section, page, page_size, found.block_count, infos)

    # ------------------------------------------------------------------ delete

    def delete_book(self, ref: str) -> BookInfo:
        """Delete a book and everything derived from it; returns what was deleted."""
        info = self.book(ref)
        with self._write() as s:
            s.execute(delete(BookRow).where(BookRow.sha256 == info.id))
        # Its chunks' vectors went with it (cascade); take them out of the index too.
        path = self.index_path
        if self._loaded_index is not None or (path is not None and path.exists()):
            with self.engine.connect() as conn:
                embedding = _current_embedding_row(conn)
                if embedding is not None:
                    self._ensure_index(conn, embedding)
        return info

    # ------------------------------------------------------------------ export

    def export(self, ref: str, *, fingerprint: str | None = None) -> Iterator[str]:
        """The book as JSON lines (no trailing newlines): book, TOC, then per section
        the section (texts and offset map), its blocks and its chunks.

        Byte-identical across runs, processes and libraries for the same file
        and settings: no row ids, no timestamps, fixed key order.
        """
        with self._read() as s:
            row = _resolve_book(s, ref)
            derivation = _derivation(s, row, fingerprint)
            yield _dumps(
                {
                    "type": "book",
                    "id": row.sha256,
                    "title": row.title,
                    "format": row.format,
                    "file_name": row.file_name,
                    "file_size": row.file_size,
                    "encoding": row.encoding,
                    "lossy": row.lossy,
                    "bad_bytes": row.bad_bytes,
                    "first_bad_byte": row.first_bad_byte,
                    "creators": list(row.creators),
                    "language": row.language,
                    "identifiers": list(row.identifiers),
                    "warnings": list(row.warnings),
                    "section_count": row.section_count,
                    "fingerprint": derivation.fingerprint,
                    "settings": derivation.settings,
                    "chunk_count": derivation.chunk_count,
                }
            )
            toc = s.execute(
                select(TocEntryRow)
                .where(TocEntryRow.book_id == row.id)
                .order_by(TocEntryRow.position)
            ).scalars()
            position_of: dict[int, int] = {}
            for e in toc:
                position_of[e.id] = e.position
                yield _dumps(
                    {
                        "type": "toc",
                        "position": e.position,
                        "depth": e.depth,
                        "parent": position_of.get(e.parent_id) if e.parent_id else None,
                        "title": e.title,
                        "href": e.href,
                        "section": e.section_ordinal,
                        "source_offset": e.source_offset,
                    }
                )
            section_ids = s.execute(
                select(SectionRow.id, SectionRow.ordinal)
                .where(SectionRow.book_id == row.id)
                .order_by(SectionRow.ordinal)
            ).all()
            for section_id, ordinal in section_ids:
                sec = s.get_one(SectionRow, section_id)
                text = s.execute(
                    select(SectionTextRow).where(
                        SectionTextRow.section_id == section_id,
                        SectionTextRow.normalization_id == derivation.normalization_id,
                    )
                ).scalar_one()
                omap = OffsetMap.from_bytes(text.offset_map)
                yield _dumps(
                    {
                        "type": "section",
                        "ordinal": ordinal,
                        "title": sec.title,
                        "href": sec.href,
                        "media_type": sec.media_type,
                        "parser": sec.parser,
                        "linear": sec.linear,
                        "source_start": sec.source_start,
                        "source_end": sec.source_start + sec.source_length,
                        "utf16_start": sec.utf16_start,
                        "source_text": sec.source_text,
                        "normalized_text": text.normalized_text,
                        "offset_map": json.loads(omap.to_json()),
                    }
                )
                s.expunge(sec)
                for b in s.execute(
                    select(BlockRow)
                    .where(BlockRow.section_text_id == text.id)
                    .order_by(BlockRow.index)
                ).scalars():
                    yield _dumps(
                        {
                            "type": "block",
                            "section": ordinal,
                            "index": b.index,
                            "kind": b.kind,
                            "level": b.level,
                            "start": b.start,
                            "end": b.end,
                            "source_start": b.source_start,
                            "source_end": b.source_end,
                        }
                    )
                s.expunge_all()
                for c in _chunk_infos(s, derivation.id, ordinal, 0, None, True):
                    yield _dumps({"type": "chunk", **c.to_json()})

    # ------------------------------------------------------------------ verify

    def verify(self, ref: str | None = None) -> VerifyReport:
        """Check every stored invariant (DESIGN §1) against the stored texts and maps.

        Per section text: the map parses, is monotone, matches both texts'
        lengths and every copy run is equal in both texts. Per block and chunk:
        spans inside the text, source span == the map's source span, chunk text
        == the normalized slice, UTF-16 spans recomputed from the source text,
        byte spans (plain text) decode to the source slice, chunk ids
        recomputed. Per book: the file hash, contiguous ordinals, one current
        derivation, fingerprints recomputed from the stored settings, TOC
        targets inside their sections.
        """
        v = _Verifier()
        with self._read() as s:
            if ref is None:
                ids = list(s.scalars(select(BookRow.id).order_by(BookRow.sha256)))
            else:
                ids = [_resolve_book(s, ref).id]
            for book_id in ids:
                _verify_book(s, book_id, v)
                s.expunge_all()
            if ref is None:
                _verify_vectors(s, v)
        return VerifyReport(
            books=len(ids),
            sections=v.sections,
            section_texts=v.section_texts,
            blocks=v.blocks,
            chunks=v.chunks,
            problems=tuple(v.problems),
            truncated=v.truncated,
        )

    # ------------------------------------------------------------------ embeddings

    def embeddings(self) -> list[EmbeddingInfo]:
        """Every embedding space with its vector count; the current one is marked."""
        with self._read() as s:
            counts = dict(
                s.execute(
                    select(ChunkVectorRow.embedding_id, func.count()).group_by(
                        ChunkVectorRow.embedding_id
                    )
                ).all()
            )
            rows = s.scalars(select(EmbeddingRow).order_by(EmbeddingRow.id)).all()
            return [_embedding_info(r, int(counts.get(r.id, 0))) for r in rows]

    def current_embedding(self) -> EmbeddingInfo | None:
        """The embedding searches use (the one last used by :meth:`embed`), or None."""
        return next((e for e in self.embeddings() if e.current), None)

    def embedder(self, spec: str | Embedder | None = None) -> Embedder:
        """An embedder from a spec (``hashed``, ``model2vec:/path``, …), cached per library.

        None means the current embedding's, else the built-in default.
        """
        if spec is not None and not isinstance(spec, str):
            return spec
        if spec is None:
            current = self.current_embedding()
            spec = current.spec if current is not None else DEFAULT_EMBEDDER
        key = spec.strip()
        found = self._embedders.get(key)
        if found is None:
            found = get_embedder(key)
            self._embedders[key] = found
        return found

    def embed(
        self,
        embedder: str | Embedder | None = None,
        *,
        context_header: bool | None = None,
        batch_size: int = EMBED_BATCH,
        progress: ProgressFn | None = None,
        update_index: bool = True,
    ) -> EmbedResult:
        """Embed the chunks of every book's current derivation that have no vector yet
        in this embedding (embedder + context-header flag), in batches, one transaction
        each; the embedding becomes the current one. Then the vector index is brought
        up to date (``update_index``).

        ``embedder`` None keeps the current embedding (or the built-in ``hashed``);
        ``context_header`` None keeps the current embedding's flag (else off).
        """
        report = progress or _no_progress
        t0 = perf_counter()
        current = self.current_embedding()
        if embedder is None and current is not None:
            spec: str = current.spec
            emb = self.embedder(spec)
        elif isinstance(embedder, str) or embedder is None:
            spec = (embedder or DEFAULT_EMBEDDER).strip()
            emb = self.embedder(spec)
        else:
            emb = embedder
            spec = _spec_of(emb)
            self._embedders[spec] = emb  # this process searches with this very object
        if context_header is None:
            context_header = bool(current.context_header) if current is not None else False
        fingerprint = embedding_fingerprint(emb.id, context_header)
        now = datetime.now(UTC)
        with self._write() as s:
            row = s.scalar(select(EmbeddingRow).where(EmbeddingRow.fingerprint == fingerprint))
            if row is None:
                row = EmbeddingRow(
                    fingerprint=fingerprint,
                    embedder_id=emb.id,
                    spec=spec,
                    dim=int(emb.dim),
                    context_header=context_header,
                    is_current=False,
                    version=0,
                    created_at=now,
                )
                s.add(row)
                s.flush()
            elif row.spec != spec and isinstance(embedder, str):
                row.spec = spec  # the same model, found elsewhere now
            embedding_id = int(row.id)
            s.execute(update(EmbeddingRow).values(is_current=EmbeddingRow.id == embedding_id))
        missing_q = (
            select(func.count())
            .select_from(ChunkRow)
            .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
            .outerjoin(
                ChunkVectorRow,
                (ChunkVectorRow.chunk_id == ChunkRow.id)
                & (ChunkVectorRow.embedding_id == embedding_id),
            )
            .where(DerivationRow.is_current.is_(True), ChunkVectorRow.chunk_id.is_(None))
        )
        with self._read() as s:
            total_missing = int(s.scalar(missing_q) or 0)
            total = int(
                s.scalar(
                    select(func.count())
                    .select_from(ChunkRow)
                    .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                    .where(DerivationRow.is_current.is_(True))
                )
                or 0
            )
        report("embed", 0, total_missing)
        done = 0
        after = 0
        t_embed = 0.0
        step = max(1, int(batch_size))
        while True:
            with self._read() as s:
                rows = s.execute(
                    select(ChunkRow.id, ChunkRow.text, SectionRow.title, BookRow.title)
                    .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                    .join(SectionRow, SectionRow.id == ChunkRow.section_id)
                    .join(BookRow, BookRow.id == DerivationRow.book_id)
                    .outerjoin(
                        ChunkVectorRow,
                        (ChunkVectorRow.chunk_id == ChunkRow.id)
                        & (ChunkVectorRow.embedding_id == embedding_id),
                    )
                    .where(
                        DerivationRow.is_current.is_(True),
                        ChunkVectorRow.chunk_id.is_(None),
                        ChunkRow.id > after,
                    )
                    .order_by(ChunkRow.id)
                    .limit(step)
                ).all()
            if not rows:
                break
            texts = [
                embed_text_for_chunk(
                    t, title=bt, section_title=st, context_header=bool(context_header)
                )
                for _, t, st, bt in rows
            ]
            t = perf_counter()
            vectors = np.asarray(emb.embed(texts), dtype="<f4")
            t_embed += perf_counter() - t
            if vectors.shape != (len(rows), emb.dim):
                raise MindoryError(
                    f"embedder {emb.id} returned shape {vectors.shape}, expected "
                    f"{(len(rows), emb.dim)}"
                )
            with self._write() as w:
                w.connection().execute(
                    insert(ChunkVectorRow),
                    [
                        {"chunk_id": int(r[0]), "embedding_id": embedding_id, "vector": v.tobytes()}
                        for r, v in zip(rows, vectors)
                    ],
                )
                w.execute(
                    update(EmbeddingRow)
                    .where(EmbeddingRow.id == embedding_id)
                    .values(version=EmbeddingRow.version + 1)
                )
            done += len(rows)
            after = int(rows[-1][0])
            report("embed", done, total_missing)
        report("embed", total_missing, total_missing)
        index_info: IndexInfo | None = None
        if update_index:
            index_info = self.index()
        info = next(e for e in self.embeddings() if e.fingerprint == fingerprint)
        return EmbedResult(
            embedding=info,
            embedded=done,
            total=total,
            seconds=perf_counter() - t0,
            embed_seconds=t_embed,
            index=index_info,
        )

    # ------------------------------------------------------------------ vector index

    @property
    def index_path(self) -> Path | None:
        """The FAISS file beside the database (None for a non-file database: the
        index then lives in memory only, rebuilt by each process)."""
        if self.path is None:
            return None
        return self.path.with_name(self.path.name + ".faiss")

    def index(self, *, rebuild: bool = False) -> IndexInfo:
        """Bring the vector index of the current embedding up to date (or rebuild it)."""
        with self.engine.connect() as conn:
            embedding = _current_embedding_row(conn)
            if embedding is None:
                raise MindoryError("no vectors yet: run mindory embed first")
            before = self._loaded_index
            loaded = self._ensure_index(conn, embedding, force_rebuild=rebuild)
        info = loaded.info()
        return replace(info, status="current", seconds=0.0) if loaded is before else info

    def _ensure_index(
        self, conn: Connection, embedding: _EmbeddingState, *, force_rebuild: bool = False
    ) -> _LoadedIndex:
        """The vector index of ``embedding``, exactly matching the database.

        Cheap when nothing changed since the last call (one query: the embedding's
        version and the set of current derivations). Otherwise the ids that should
        be indexed are read and compared with the index in memory, then with the
        file's manifest; a mismatch is repaired from the stored vectors (ids added
        and removed) or, when most of it differs, rebuilt — never served stale.
        """
        with self._index_lock:
            token = _index_token(conn, embedding)
            loaded = self._loaded_index
            if (
                not force_rebuild
                and loaded is not None
                and loaded.embedding_id == embedding.id
                and loaded.token == token
            ):
                return loaded
            t0 = perf_counter()
            ids = _indexed_ids(conn, embedding.id)
            expected = Manifest.for_ids(embedding.key, embedding.dim, ids)
            path = self.index_path
            candidate: VectorIndex | None = None
            status = "built"
            if loaded is not None and loaded.embedding_id == embedding.id and not force_rebuild:
                if loaded.index.manifest().matches(expected):
                    self._loaded_index = replace(loaded, token=token, status="current")
                    return self._loaded_index
                candidate = loaded.index
            if candidate is None and path is not None and not force_rebuild:
                found = VectorIndex.load(path, expected, **self.index_options)
                if found is not None:
                    self._loaded_index = _LoadedIndex(
                        embedding.id, token, found, path, "loaded", perf_counter() - t0
                    )
                    return self._loaded_index
                candidate = _load_own_manifest(path, embedding, self.index_options)
            vindex: VectorIndex | None = None
            if candidate is not None:
                vindex = _repair(conn, candidate, ids, embedding)
                status = "repaired" if vindex is not None else "rebuilt"
            if vindex is None:
                vindex = VectorIndex(embedding.dim, embedder_id=embedding.key, **self.index_options)
                all_ids, vecs = _stored_vectors(conn, embedding, ids)
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
            self._loaded_index = _LoadedIndex(
                embedding.id, token, vindex, saved, status, perf_counter() - t0
            )
            return self._loaded_index

    # ------------------------------------------------------------------ search

    def search(
        self,
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
        embedding: _EmbeddingState | None = None
        with self.engine.connect() as conn:
            filters = Filters()
            if book is not None:
                with Session(bind=conn) as s:
                    row = _resolve_book(s, book)
                    book_sha = row.sha256
                    section_id: int | None = None
                    if section is not None:
                        section_id = s.scalar(
                            select(SectionRow.id).where(
                                SectionRow.book_id == row.id, SectionRow.ordinal == section
                            )
                        )
                        if section_id is None:
                            raise NotFoundError(
                                f"{row.title!r} has no section {section} "
                                f"(sections 0–{row.section_count - 1})"
                            )
                    filters = Filters(book_id=int(row.id), section_id=section_id)
            vector_part: Future[list[tuple[int, float]]] | None = None
            if mode in ("hybrid", "vector"):
                embedding = _current_embedding_row(conn)
                if embedding is None:
                    if mode == "vector":
                        raise MindoryError("no vectors yet: run mindory embed first")
                    warnings.append("no vectors yet (run mindory embed): lexical results only")
                elif mode == "hybrid" and not terms.empty:
                    # FAISS and SQLite both release the GIL: the vector search runs on a
                    # worker thread (its own connection) while this one searches text.
                    vector_part = self._pool().submit(
                        self._vector_search_own_connection,
                        embedding,
                        terms.query,
                        n,
                        filters,
                        timings,
                    )
                else:
                    lists["vector"] = self._vector_search(
                        conn, embedding, terms.query, n, filters, timings
                    )
            if mode in ("hybrid", "lexical") and not terms.empty:
                t = perf_counter()
                try:
                    if self.has_fts(conn):
                        lists["lexical"] = lexical_search(conn, terms, limit=n, filters=filters)
                    else:
                        lists["lexical"] = scan_search(conn, terms, limit=n, filters=filters)
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
            hits = _build_hits(self, conn, top, terms, mode, page_size)
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

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._index_lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="mindory-search"
                )
            return self._executor

    def _vector_search_own_connection(
        self,
        embedding: _EmbeddingState,
        query: str,
        n: int,
        filters: Filters,
        timings: dict[str, float],
    ) -> list[tuple[int, float]]:
        # The caller holds a connection of the main pool: take this one from the other.
        with self._aux_engine().connect() as conn:
            return self._vector_search(conn, embedding, query, n, filters, timings)

    def _vector_search(
        self,
        conn: Connection,
        embedding: _EmbeddingState,
        query: str,
        n: int,
        filters: Filters,
        timings: dict[str, float],
    ) -> list[tuple[int, float]]:
        t = perf_counter()
        emb = self.embedder(embedding.spec)
        if emb.id != embedding.embedder_id:
            raise MindoryError(
                f"the embedder {embedding.spec!r} is now {emb.id}, but the vectors were made "
                f"by {embedding.embedder_id}: run mindory embed --embedder {embedding.spec}"
            )
        qv = emb.embed([query])
        timings["embed"] = 1000 * (perf_counter() - t)
        t = perf_counter()
        loaded = self._ensure_index(conn, embedding)
        timings["index"] = 1000 * (perf_counter() - t)
        if not np.any(qv):
            return []  # no features: every similarity would be 0
        t = perf_counter()
        allowed: np.ndarray | None = None
        if filters.book_id is not None:
            q = (
                select(ChunkRow.id)
                .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                .where(DerivationRow.is_current.is_(True), DerivationRow.book_id == filters.book_id)
            )
            if filters.section_id is not None:
                q = q.where(ChunkRow.section_id == filters.section_id)
            allowed = np.fromiter(conn.execute(q).scalars(), dtype=np.int64)
        with self._index_lock:  # a concurrent repair must not change it under the search
            scores, ids = loaded.index.search(qv, n, allowed_ids=allowed)
        timings["vector"] = 1000 * (perf_counter() - t)
        return [(int(i), float(s)) for s, i in zip(scores[0], ids[0]) if i >= 0]

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

    # ------------------------------------------------------------------ locate

    def place(self, ref: str, section: int) -> SectionPlace:
        """What locating needs about one section (current derivation's normalization)."""
        with self.engine.connect() as conn, Session(bind=conn) as s:
            row = _resolve_book(s, ref)
            derivation = _derivation(s, row, None)
            section_id = s.scalar(
                select(SectionRow.id).where(
                    SectionRow.book_id == row.id, SectionRow.ordinal == section
                )
            )
            if section_id is None:
                raise NotFoundError(
                    f"{row.title!r} has no section {section} (sections 0–{row.section_count - 1})"
                )
            places = _Places(self, conn)
            return places.get(int(section_id), derivation.normalization_id)

    def locate(
        self,
        ref: str,
        *,
        cfi: str | None = None,
        section: int | None = None,
        offset: int | None = None,
        utf16: bool = False,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> LocateResult:
        """A place in a book → section, block, page, and the chunks containing it.

        Either ``cfi`` (EPUB; a point or the start of a range) or ``section`` and
        ``offset`` — the offset counted from the start of the section's source text,
        in code points (``utf16=True``: UTF-16 units).
        """
        if (cfi is None) == (section is None or offset is None):
            raise MindoryError("give either a CFI, or a section and an offset")
        with self.engine.connect() as conn, Session(bind=conn) as s:
            row = _resolve_book(s, ref)
            derivation = _derivation(s, row, None)
            places = _Places(self, conn)
            sections = s.execute(
                select(SectionRow.id, SectionRow.ordinal)
                .where(SectionRow.book_id == row.id)
                .order_by(SectionRow.ordinal)
            ).all()
            id_of = {int(o): int(i) for i, o in sections}
            end: int | None = None
            if cfi is not None:
                if row.format != "epub":
                    raise MindoryError(f"{row.title!r} is plain text: CFIs address EPUB books")
                from mindory.importers.cfi import CfiError

                with_tables = [
                    places.get(i, derivation.normalization_id)
                    for i in s.scalars(
                        select(SectionRow.id).where(
                            SectionRow.book_id == row.id, SectionRow.cfi_table.is_not(None)
                        )
                    )
                ]
                try:
                    ordinal, position, end = resolve_cfi(with_tables, cfi)
                except CfiError as exc:
                    raise MindoryError(f"{row.title!r}: {exc}") from exc
                place = places.get(id_of[ordinal], derivation.normalization_id)
            else:
                assert section is not None and offset is not None
                if section not in id_of:
                    raise NotFoundError(
                        f"{row.title!r} has no section {section} "
                        f"(sections 0–{row.section_count - 1})"
                    )
                place = places.get(id_of[section], derivation.normalization_id)
                local = offset
                if utf16:
                    u16 = Utf16Index(place.source_text)
                    if not 0 <= offset <= u16.utf16_length:
                        raise MindoryError(
                            f"UTF-16 offset {offset} outside section {section} "
                            f"[0, {u16.utf16_length}]"
                        )
                    try:
                        local = u16.from_utf16(offset)
                    except IndexError as exc:
                        raise MindoryError(f"section {section}: {exc}") from exc
                if not 0 <= local <= len(place.source_text):
                    raise MindoryError(
                        f"offset {offset} outside section {section} [0, {len(place.source_text)}]"
                    )
                position = place.source_start + local
            where = locate_position(place, position, page_size=page_size)
            chunk_rows = _chunk_infos(
                s, derivation.id, place.ordinal, 0, None, with_cfi=row.format == "epub"
            )
            containing = chunks_containing(chunk_rows, position)
        return LocateResult(
            book=row.sha256,
            title=row.title,
            position=where,
            chunks=tuple(containing),
            range_end=end if end is not None and end != position else None,
        )

    def locate_chunk(self, ref: str, chunk: str, *, page_size: int = DEFAULT_PAGE_SIZE) -> Locator:
        """The Locator of a chunk of the book (its id, or a unique prefix of it)."""
        with self.engine.connect() as conn, Session(bind=conn) as s:
            row = _resolve_book(s, ref)
            c, normalization_id = _find_chunk(s, row, chunk)
            places = _Places(self, conn)
            place = places.get(int(c.section_id), int(normalization_id))
            places.know_bytes(int(row.id), c)
            return _chunk_locator(place, c, page_size)

    # ------------------------------------------------------------------ quotes

    def section_texts(self, ref: str, ordinals: Iterable[int] | None = None) -> list[SectionText]:
        """The book's sections as :class:`~mindory.reading.anchoring.SectionText` (all, or the
        given ordinals), cached: their folded text is computed once."""
        with self._read() as s:
            return self._section_texts(s, _resolve_book(s, ref), ordinals)

    def _section_texts(
        self, s: Session, book: BookRow, ordinals: Iterable[int] | None = None
    ) -> list[SectionText]:
        wanted = None if ordinals is None else sorted(set(ordinals))
        if wanted is not None:
            for n in wanted:
                if not 0 <= n < book.section_count:
                    raise NotFoundError(
                        f"{book.title!r} has no section {n} (sections 0–{book.section_count - 1})"
                    )
        every = wanted if wanted is not None else list(range(book.section_count))
        found: dict[int, SectionText] = {}
        missing: list[int] = []
        for n in every:
            cached = self._texts.get((book.sha256, n))
            if cached is None:
                missing.append(n)
            else:
                found[n] = cached
        if missing:
            rows = s.execute(
                select(
                    SectionRow.ordinal,
                    SectionRow.source_text,
                    SectionRow.source_start,
                    SectionRow.href,
                    SectionRow.title,
                ).where(SectionRow.book_id == book.id, SectionRow.ordinal.in_(missing))
            ).all()
            for ordinal, text, start, href, title in rows:
                st = SectionText(int(ordinal), text, int(start), href, title)
                self._texts.put((book.sha256, int(ordinal)), st)
                found[int(ordinal)] = st
        return [found[n] for n in every if n in found]

    def calibrate_quote(
        self,
        ref: str,
        quote: str,
        *,
        section: int | None = None,
        chunk: str | None = None,
        min_prefix: int | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> Calibration:
        """Find the exact source span of a quote (an assistant's citation) in a book.

        Searched: the chunk's source text, then its section (``chunk``, an id or a
        unique prefix; the chunk's span is the hint); or one ``section``; or every
        section. :func:`mindory.reading.anchoring.calibrate_quote` decides: ``exact``,
        ``normalized``, ``prefix`` (at least ``min_prefix`` folded code points;
        default 16, 5 for CJK) or ``rejected``. The answer never holds text that is
        not in the book, and keeps the raw quote.
        """
        if len(quote) > MAX_QUOTE_CHARS:
            raise LimitError(
                f"the quote has {len(quote):,} characters; at most {MAX_QUOTE_CHARS:,}"
            )
        if min_prefix is not None and min_prefix < 1:
            raise MindoryError(f"min_prefix must be 1 or more, not {min_prefix}")
        chunk_ref: str | None = None
        with self.engine.connect() as conn, Session(bind=conn) as s:
            row = _resolve_book(s, ref)
            hint: tuple[int, int] | None = None
            items: list[SectionText]
            if chunk is not None:
                c, _normalization = _find_chunk(s, row, chunk)
                chunk_ref = c.chunk_id
                ordinal = int(
                    s.execute(
                        select(SectionRow.ordinal).where(SectionRow.id == c.section_id)
                    ).scalar_one()
                )
                if section is not None and section != ordinal:
                    raise MindoryError(
                        f"chunk {c.chunk_id[:12]} is in section {ordinal}, not {section}"
                    )
                (st,) = self._section_texts(s, row, [ordinal])
                a, b = c.source_start - st.source_start, c.source_end - st.source_start
                piece = SectionText(ordinal, st.source_text[a:b], c.source_start, st.href, st.title)
                items, hint, scope, searched = (
                    [piece, st],
                    (c.source_start, c.source_end),
                    "chunk",
                    ordinal,
                )
            elif section is not None:
                items, scope, searched = self._section_texts(s, row, [section]), "section", section
            else:
                items, scope, searched = self._section_texts(s, row), "book", None
            match = calibrate_quote(items, quote, hint=hint, min_prefix=min_prefix)
            locator = None
            if match.source_start is not None and match.source_end is not None:
                assert match.section is not None
                place = _place_of(self, s, conn, row, match.section)
                locator = locate_span(
                    place, match.source_start, match.source_end, page_size=page_size
                )
        floor = min_prefix
        if floor is None:
            floor = DEFAULT_MIN_PREFIX_CJK if _is_cjk_text(quote) else DEFAULT_MIN_PREFIX
        return Calibration(
            book=row.sha256,
            match=match,
            locator=locator,
            scope=scope,
            min_prefix=floor,
            chunk=chunk_ref,
            searched_section=searched,
        )

    # ------------------------------------------------------------------ highlights

    def add_highlight(
        self,
        ref: str,
        *,
        section: int | None = None,
        start: int | None = None,
        end: int | None = None,
        unit: str = "codepoint",
        cfi: str | None = None,
        exact: str | None = None,
        note: str | None = None,
        color: str | None = None,
    ) -> Highlight:
        """Store a highlight: ``section`` + ``[start, end)`` in book source coordinates
        (``unit`` ``codepoint`` or ``utf16``: as a chunk's ``source_*`` / ``utf16_*``;
        plain text counts from the file's start, EPUB from the section's), or an EPUB
        range ``cfi``. ``exact``, when given, must be the text there (a check against
        stale positions). The quote, its 32-code-point context, both spans and the
        CFI (EPUB) are stored."""
        color = check_color(color)
        note = check_note(note)
        if unit not in UNITS:
            raise MindoryError(f"unknown unit {unit!r}: use codepoint or utf16")
        with self.engine.connect() as conn, Session(bind=conn) as s:
            row = _resolve_book(s, ref)
            if cfi is not None:
                if start is not None or end is not None:
                    raise MindoryError("give either a CFI or a span (start, end), not both")
                if row.format != "epub":
                    raise MindoryError(f"{row.title!r} is plain text: CFIs address EPUB books")
                ordinal, start, end = _resolve_cfi_in(self, s, conn, row, cfi)
                if section is not None and section != ordinal:
                    raise MindoryError(f"the CFI points into section {ordinal}, not {section}")
                section = ordinal
                place = _place_of(self, s, conn, row, section)
            else:
                if section is None or start is None or end is None:
                    raise MindoryError(
                        "a highlight needs a section and a span (start, end), or a CFI"
                    )
                place = _place_of(self, s, conn, row, section)
                if unit == "utf16":
                    start, end = _from_utf16(place, start, end)
            if start >= end:
                raise MindoryError(f"the span [{start}, {end}) is empty: a highlight needs text")
            if not place.source_start <= start < end <= place.source_end:
                raise MindoryError(
                    f"the span [{start}, {end}) is outside section {section} "
                    f"[{place.source_start}, {place.source_end})"
                )
            loc = locate_span(place, start, end)
            if exact is not None and loc.highlight != exact:
                raise MindoryError(
                    f"section {section} [{start}, {end}) holds {_clip(loc.highlight)!r}, "
                    f"not the given quote {_clip(exact)!r}"
                )
        now = datetime.now(UTC)
        values = _highlight_values(loc, row.sha256, row.format)
        new = HighlightRow(
            uid=uuid.uuid4().hex,
            book_sha256=row.sha256,
            status="anchored",
            note=note,
            color=color,
            reanchored=None,
            created_at=now,
            updated_at=now,
            **values,
        )
        with self._write() as w:
            w.add(new)
        return _highlight(new)

    def highlights(
        self, ref: str, *, section: int | None = None, status: str | None = None
    ) -> list[Highlight]:
        """The book's highlights in reading order (orphans last, by creation);
        ``section``: the anchored ones in that section; ``status``: anchored/orphaned."""
        if status is not None and status not in ("anchored", "orphaned"):
            raise MindoryError(f"unknown status {status!r}: use anchored or orphaned")
        with self._read() as s:
            row = _resolve_book(s, ref)
            q = select(HighlightRow).where(HighlightRow.book_sha256 == row.sha256)
            if section is not None:
                q = q.where(HighlightRow.section == section, HighlightRow.status == "anchored")
            if status is not None:
                q = q.where(HighlightRow.status == status)
            q = q.order_by(
                HighlightRow.status,
                HighlightRow.section,
                HighlightRow.source_start,
                HighlightRow.source_end,
                HighlightRow.created_at,
                HighlightRow.id,
            )
            return [_highlight(h) for h in s.scalars(q)]

    def highlight(self, ref: str, highlight: str) -> Highlight:
        """One highlight of the book by its id (``urn:uuid:…`` or the bare UUID)."""
        with self._read() as s:
            return _highlight(_find_highlight(s, _resolve_book(s, ref), highlight))

    def update_highlight(
        self,
        ref: str,
        highlight: str,
        *,
        note: str | None | Unset = UNSET,
        color: str | Unset = UNSET,
    ) -> Highlight:
        """Change a highlight's note (None clears it) and/or colour; the rest stays."""
        new_note = note if isinstance(note, Unset) else check_note(note)
        new_color = color if isinstance(color, Unset) else check_color(color)
        with self._write() as w:
            h = _find_highlight(w, _resolve_book(w, ref), highlight)
            if not isinstance(new_note, Unset):
                h.note = new_note
            if not isinstance(new_color, Unset):
                h.color = new_color
            h.updated_at = datetime.now(UTC)
            w.flush()
            return _highlight(h)

    def delete_highlight(self, ref: str, highlight: str) -> Highlight:
        """Delete one highlight; returns it as it was."""
        with self._write() as w:
            h = _find_highlight(w, _resolve_book(w, ref), highlight)
            out = _highlight(h)
            w.delete(h)
        return out

    # ------------------------------------------------------------------ new editions

    def _replaced_book(self, p: Path, sha: str, replaces: str) -> str:
        """The SHA-256 of the book ``replaces`` names (a new edition must differ)."""
        with self._read() as s:
            row = _resolve_book(s, replaces)
        if row.sha256 == sha:
            raise MindoryError(
                f"this is the very file of {row.title!r} ({sha[:12]}); "
                "a new edition to replace it must differ",
                path=str(p),
            )
        return row.sha256

    def _new_edition(
        self, s: Session, book: Book, status: ImportStatus, replaces: str | None
    ) -> dict[str, Any]:
        """Inside an import's write transaction: move the highlights of the book
        ``replaces`` names — or, for a new book, of the books sharing a package
        identifier with it — onto ``book``. The ImportResult fields to set."""
        olds = [replaces] if replaces is not None else []
        if not olds and status == "created":
            olds = _same_identifiers(s, book)
        if not olds:
            return {}
        places: dict[int, SectionPlace] = {}

        def place(ordinal: int) -> SectionPlace:
            if ordinal not in places:
                places[ordinal] = places_from_book(book, only=ordinal)[0]
            return places[ordinal]

        texts = SectionText.from_book(book)
        reports = self._move_highlights(s, olds, book.sha256, book.format, texts, place)
        return {"replaces": tuple(olds), "reanchored": tuple(reports)}

    def _reanchor_stored(self, result: ImportResult, old: str) -> ImportResult:
        """An import that found its file already stored, with ``replaces``: move the
        old book's highlights onto it in a transaction of their own."""
        with self._write() as w:
            row = _resolve_book(w, result.book)
            conn = w.connection()
            places: dict[int, SectionPlace] = {}

            def place(ordinal: int) -> SectionPlace:
                if ordinal not in places:
                    places[ordinal] = _place_of(self, w, conn, row, ordinal)
                return places[ordinal]

            texts = self._section_texts(w, row)
            reports = self._move_highlights(w, [old], row.sha256, row.format, texts, place)
        return replace(result, replaces=(old,), reanchored=tuple(reports))

    def _move_highlights(
        self,
        s: Session,
        olds: Sequence[str],
        new_sha: str,
        new_format: str,
        new_texts: Sequence[SectionText],
        new_place: Callable[[int], SectionPlace],
    ) -> list[ReanchorReport]:
        """Re-anchor every highlight of the books ``olds`` onto the book ``new_sha``
        (inside the caller's write transaction) and move them to it; one report each.

        A placed highlight gets the new coordinates, quote, context and CFI; an orphan
        keeps its old place and quote (``edition`` still names the book they refer to)
        and is listed under the new book as ``orphaned``. The old sections are given to
        re-anchoring as text when their book is still here (landmarks carry positions
        over precisely), else as ordinal + href.
        """
        rows = list(
            s.scalars(
                select(HighlightRow)
                .where(HighlightRow.book_sha256.in_(list(olds)))
                .order_by(HighlightRow.id)
            )
        )
        if not rows:
            return []
        by_edition: dict[str, list[HighlightRow]] = {}
        for h in rows:
            by_edition.setdefault(h.edition_sha256, []).append(h)
        now = datetime.now(UTC)
        reports: dict[int, ReanchorReport] = {}
        for edition, group in by_edition.items():
            ed_row = s.scalar(select(BookRow).where(BookRow.sha256 == edition))
            hints: list[SectionText | SectionHint] = []
            wanted = sorted({h.section for h in group})
            if ed_row is not None:
                known = [n for n in wanted if 0 <= n < ed_row.section_count]
                hints.extend(self._section_texts(s, ed_row, known))
                wanted = [n for n in wanted if n not in known]
            hrefs = {h.section: h.href for h in group}
            hints.extend(SectionHint(ordinal=n, href=hrefs[n]) for n in wanted)
            anchors = [
                StoredAnchor(
                    section=h.section,
                    source_start=h.source_start,
                    source_end=h.source_end,
                    exact=h.exact,
                    prefix=h.prefix,
                    suffix=h.suffix,
                    href=h.href,
                    id=h.uid,
                )
                for h in group
            ]
            for h, r in zip(group, reanchor_all(anchors, hints, new_texts), strict=True):
                report = ReanchorReport(
                    id=h.uid,
                    status=r.status,
                    confidence=r.confidence,
                    note=r.note,
                    old_book=h.book_sha256,
                    old_section=h.section,
                    old_source=(h.source_start, h.source_end),
                    old_exact=h.exact,
                    new_book=new_sha,
                    changed=r.changed,
                    edits=r.edits,
                )
                if r.placed:
                    assert r.section is not None
                    assert r.source_start is not None and r.source_end is not None
                    loc = locate_span(new_place(r.section), r.source_start, r.source_end)
                    for key, value in _highlight_values(loc, new_sha, new_format).items():
                        setattr(h, key, value)
                    h.status = "anchored"
                    report = replace(
                        report,
                        new_section=loc.section,
                        new_source=(loc.source_start, loc.source_end),
                        new_utf16=(loc.utf16_start, loc.utf16_end),
                        new_exact=loc.highlight,
                    )
                else:
                    h.status = "orphaned"
                h.book_sha256 = new_sha
                h.reanchored = report.stored(now)
                h.updated_at = now
                reports[h.id] = report
        s.flush()
        return [reports[h.id] for h in rows]


# --------------------------------------------------------------------------- helpers


def _no_progress(_phase: str, _done: int, _total: int) -> None:
    return None


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _with_timings(result: ImportResult, timings: dict[str, float]) -> ImportResult:
    return replace(result, timings=dict(timings))


@dataclass(frozen=True)
class _Prepared:
    """Everything an import writes, computed before the write transaction starts."""

    path: Path
    book: Book
    data: bytes
    copy: bool
    settings: Settings
    chunks: Sequence[Chunk]
    byte_spans: Sequence[tuple[int, int]] | None
    cfi_tables: Sequence[str | None]
    warnings: tuple[str, ...]


def _result(
    prepared: _Prepared,
    status: ImportStatus,
    chunks: int,
    blocks: int,
    toc_entries: int,
    made_current: bool,
) -> ImportResult:
    book = prepared.book
    return ImportResult(
        path=str(prepared.path),
        book=book.sha256,
        title=book.title,
        format=book.format,
        status=status,
        fingerprint=prepared.settings.fingerprint,
        sections=len(book.sections),
        chunks=chunks,
        blocks=blocks,
        toc_entries=toc_entries,
        warnings=prepared.warnings,
        made_current=made_current,
    )


def _block_total(s: Session, normalization_id: int) -> int:
    total = s.scalar(
        select(func.coalesce(func.sum(SectionTextRow.block_count), 0)).where(
            SectionTextRow.normalization_id == normalization_id
        )
    )
    return int(total or 0)


def _make_current(s: Session, book_id: int, derivation_id: int) -> None:
    s.execute(
        update(DerivationRow)
        .where(DerivationRow.book_id == book_id)
        .values(is_current=DerivationRow.id == derivation_id)
    )


_SQLITE_MAX_VARIABLES = 32766  # SQLite >= 3.32


def _insert_chunks(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Insert chunk rows. On SQLite as multi-row ``INSERT … VALUES`` statements through
    the DB-API cursor (inside the same transaction): the FTS5 trigger then indexes a
    whole batch at once — row by row (executemany), FTS5 flushes its buffer at every
    statement and the corpus import took 3.4x as long; SQLAlchemy's compiler is slow for
    such statements, so the SQL is written here."""
    if not rows:
        return
    if conn.dialect.name != "sqlite":
        conn.execute(insert(ChunkRow), list(rows))
        return
    cols = list(rows[0])
    per = max(1, _SQLITE_MAX_VARIABLES // len(cols))
    head = f"INSERT INTO chunks ({', '.join(chr(34) + c + chr(34) for c in cols)}) VALUES "
    one = "(" + ",".join("?" * len(cols)) + ")"
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for lo in range(0, len(rows), per):
            part = rows[lo : lo + per]
            cursor.execute(head + ",".join([one] * len(part)), [r[c] for r in part for c in cols])
    finally:
        cursor.close()


def _chunk_row(
    c: Chunk,
    derivation_id: int,
    section_id: int,
    byte_spans: Sequence[tuple[int, int]] | None,
    k: int,
) -> dict[str, Any]:
    context = getattr(c, "context", None)  # parent-child chunking: the parent's span
    return {
        "chunk_id": c.id,
        "derivation_id": derivation_id,
        "section_id": section_id,
        "index": c.index,
        "start": c.start,
        "end": c.end,
        "source_start": c.source_start,
        "source_end": c.source_end,
        "utf16_start": c.utf16_start,
        "utf16_end": c.utf16_end,
        "byte_start": byte_spans[k][0] if byte_spans else None,
        "byte_end": byte_spans[k][1] if byte_spans else None,
        "context_start": context[0] if context else None,
        "context_end": context[1] if context else None,
        "text": c.text,
    }


def _byte_spans(book: Book, chunks: Sequence[Chunk]) -> list[tuple[int, int]] | None:
    index = getattr(book.source, "bytes_index", None) if book.format == "txt" else None
    if index is None:
        return None
    return [(index.byte_offset(c.source_start), index.byte_offset(c.source_end)) for c in chunks]


def _cfi_tables(book: Book) -> tuple[list[str | None], list[str]]:
    """Per section, the serialized CFI table (EPUB content documents), and warnings.

    Stored without the text (the section's source text is stored beside it).
    """
    tables: list[str | None] = []
    warnings: list[str] = []
    for sec in book.sections:
        table: str | None = None
        if book.format == "epub" and sec.parser != "none" and sec.dom is not None:
            try:
                cfi = getattr(sec.dom, "cfi", None)
                if cfi is not None:
                    table = str(cfi.to_json(include_text=False))
            except MindoryError as exc:
                warnings.append(f"section {sec.ordinal} ({sec.href}): no CFI table: {exc}")
        tables.append(table)
    return tables, warnings


def _insert_book(s: Session, prepared: _Prepared, now: datetime) -> tuple[int, dict[int, int]]:
    book, data, copy, p = prepared.book, prepared.data, prepared.copy, prepared.path
    conn = s.connection()
    book_id = conn.execute(
        insert(BookRow).returning(BookRow.id),
        {
            "sha256": book.sha256,
            "title": book.title,
            "format": book.format,
            "file_name": book.file_name,
            "file_size": len(data),
            "encoding": book.encoding,
            "lossy": book.lossy,
            "bad_bytes": book.bad_bytes,
            "first_bad_byte": book.first_bad_byte,
            "creators": list(book.creators),
            "language": book.language,
            "identifiers": list(book.identifiers),
            "warnings": list(prepared.warnings),
            "section_count": len(book.sections),
            "toc_count": sum(1 for _ in _walk_toc(book.toc)),
            "imported_at": now,
        },
    ).scalar_one()
    conn.execute(
        insert(BookFileRow),
        {
            "book_id": book_id,
            "data": data if copy else None,
            "path": None if copy else str(p.resolve()),
            "size": len(data),
        },
    )
    utf16 = getattr(book.source, "utf16", None) if book.format == "txt" else None
    section_rows = [
        {
            "book_id": book_id,
            "ordinal": sec.ordinal,
            "title": sec.title,
            "href": sec.href,
            "media_type": sec.media_type,
            "parser": sec.parser,
            "linear": sec.linear,
            "source_start": sec.source_start,
            "utf16_start": utf16.to_utf16(sec.source_start) if utf16 else sec.source_start,
            "source_length": len(sec.source_text),
            "source_text": sec.source_text,
            "cfi_table": table,
        }
        for sec, table in zip(book.sections, prepared.cfi_tables)
    ]
    # Many rows per statement (executemany), then read the new ids back by key.
    conn.execute(insert(SectionRow), section_rows)
    section_ids = {
        int(o): int(i)
        for i, o in conn.execute(
            select(SectionRow.id, SectionRow.ordinal).where(SectionRow.book_id == book_id)
        )
    }
    # TOC: insert flat (depth-first order), then link each entry to its parent.
    walk = list(_walk_toc(book.toc))
    if not walk:
        return book_id, section_ids
    conn.execute(
        insert(TocEntryRow),
        [
            {
                "book_id": book_id,
                "parent_id": None,
                "position": position,
                "depth": depth,
                "title": entry.title,
                "href": entry.href,
                "section_ordinal": entry.section,
                "source_offset": entry.source_offset,
            }
            for position, (entry, depth) in enumerate(walk)
        ],
    )
    id_at = dict(
        conn.execute(
            select(TocEntryRow.position, TocEntryRow.id).where(TocEntryRow.book_id == book_id)
        ).all()
    )
    toc_ids = [int(id_at[position]) for position in range(len(walk))]
    links: list[dict[str, int]] = []
    parents: list[int] = []  # the id of the last entry at each depth
    for entry_id, (_, depth) in zip(toc_ids, walk):
        del parents[depth:]
        if parents:
            links.append({"entry": entry_id, "parent": parents[-1]})
        parents.append(entry_id)
    if links:
        conn.execute(
            update(TocEntryRow)
            .where(TocEntryRow.id == bindparam("entry"))
            .values(parent_id=bindparam("parent")),
            links,
        )
    return book_id, section_ids


def _check_sections(s: Session, book_id: int, book: Book) -> dict[int, int]:
    """Section ids of a stored book, after checking the new parse has the same sections.

    Sections hold only what does not depend on the settings; a profile that
    changed them would need a new model, so it is refused instead of stored
    inconsistently.
    """
    stored = s.execute(
        select(SectionRow.id, SectionRow.ordinal, SectionRow.source_start, SectionRow.source_text)
        .where(SectionRow.book_id == book_id)
        .order_by(SectionRow.ordinal)
    ).all()
    same = len(stored) == len(book.sections) and all(
        (o, ss, st) == (sec.ordinal, sec.source_start, sec.source_text)
        for (_, o, ss, st), sec in zip(stored, book.sections)
    )
    if not same:
        raise MindoryError(
            "these settings split the book into different sections than the stored import; "
            "delete the book and import it again",
            path=book.file_name,
        )
    return {int(o): int(sid) for sid, o, _, _ in stored}


def _normalization(
    s: Session, book_id: int, book: Book, settings: Settings, section_ids: dict[int, int]
) -> tuple[int, int]:
    """The normalization row for the settings' profile (created with its section
    texts and blocks when new); returns (id, number of blocks)."""
    pfp = profile_fingerprint(settings.profile)
    found = s.execute(
        select(NormalizationRow.id).where(
            NormalizationRow.book_id == book_id, NormalizationRow.profile_fingerprint == pfp
        )
    ).scalar()
    if found is not None:
        return int(found), _block_total(s, found)
    conn = s.connection()
    normalization_id = conn.execute(
        insert(NormalizationRow).returning(NormalizationRow.id),
        {"book_id": book_id, "profile": asdict(settings.profile), "profile_fingerprint": pfp},
    ).scalar_one()
    conn.execute(
        insert(SectionTextRow),
        [
            {
                "normalization_id": normalization_id,
                "section_id": section_ids[sec.ordinal],
                "normalized_text": sec.normalized_text,
                "offset_map": sec.offset_map.to_bytes(),
                "edit_count": sec.offset_map.edit_count,
                "block_count": len(sec.blocks),
            }
            for sec in book.sections
        ],
    )
    text_id_of = dict(
        conn.execute(
            select(SectionTextRow.section_id, SectionTextRow.id).where(
                SectionTextRow.normalization_id == normalization_id
            )
        ).all()
    )
    block_rows: list[dict[str, Any]] = []
    for sec in book.sections:
        text_id = text_id_of[section_ids[sec.ordinal]]
        shift = sec.source_start
        block_rows.extend(
            {
                "section_text_id": text_id,
                "index": k,
                "kind": b.kind,
                "level": b.level,
                "start": b.start,
                "end": b.end,
                "source_start": b.source_start + shift,
                "source_end": b.source_end + shift,
            }
            for k, b in enumerate(sec.blocks)
        )
    if block_rows:
        conn.execute(insert(BlockRow), block_rows)
    return int(normalization_id), len(block_rows)


def _derivations_by_book(s: Session, ids: list[int]) -> dict[int, tuple[DerivationInfo, ...]]:
    out: dict[int, list[DerivationInfo]] = {}
    if not ids:
        return {}
    for d in s.execute(
        select(DerivationRow)
        .where(DerivationRow.book_id.in_(ids))
        .order_by(DerivationRow.book_id, DerivationRow.created_at, DerivationRow.id)
    ).scalars():
        out.setdefault(d.book_id, []).append(
            DerivationInfo(
                fingerprint=d.fingerprint,
                settings=d.settings,
                current=d.is_current,
                chunk_count=d.chunk_count,
                created_at=_iso(d.created_at),
            )
        )
    return {k: tuple(v) for k, v in out.items()}


def _book_info(row: BookRow, by_path: bool, derivations: tuple[DerivationInfo, ...]) -> BookInfo:
    return BookInfo(
        id=row.sha256,
        title=row.title,
        format=row.format,
        file_name=row.file_name,
        file_size=row.file_size,
        encoding=row.encoding,
        lossy=row.lossy,
        bad_bytes=row.bad_bytes,
        first_bad_byte=row.first_bad_byte,
        creators=tuple(row.creators),
        language=row.language,
        identifiers=tuple(row.identifiers),
        warnings=tuple(row.warnings),
        section_count=row.section_count,
        toc_count=row.toc_count,
        stored="path" if by_path else "copy",
        imported_at=_iso(row.imported_at),
        derivations=derivations,
    )


_HEX = frozenset("0123456789abcdef")


def _resolve_book(s: Session, ref: str) -> BookRow:
    """Id, id prefix (4+ hex digits) or unique title prefix (case-insensitive);
    failing that, a unique part of a title."""
    ref = ref.strip()
    if not ref:
        raise NotFoundError("no book named: the book reference is empty")
    low = ref.lower()
    if len(low) >= 4 and set(low) <= _HEX:
        rows = list(
            s.scalars(select(BookRow).where(BookRow.sha256.startswith(low, autoescape=True)))
        )
        if len(rows) == 1:
            return rows[0]
        if len(rows) > 1:
            raise MindoryError(f"{ref!r} is the start of {len(rows)} book ids; give more of it")
    rows = list(
        s.scalars(
            select(BookRow)
            .where(func.lower(BookRow.title).startswith(low, autoescape=True))
            .order_by(BookRow.title, BookRow.sha256)
        )
    )
    if not rows:
        # SQLite's lower() folds ASCII only: compare in Python, prefixes first,
        # then (as a convenience) words inside the title: "waste" finds "The Waste Land".
        everything = list(s.scalars(select(BookRow).order_by(BookRow.title, BookRow.sha256)))
        key = ref.casefold()
        rows = [r for r in everything if r.title.casefold().startswith(key)]
        if not rows:
            rows = [r for r in everything if key in r.title.casefold()]
    if len(rows) == 1:
        return rows[0]
    exact = [r for r in rows if r.title.casefold() == ref.casefold()]
    if len(exact) == 1:
        return exact[0]
    if not rows:
        raise NotFoundError(f"no book with id or title starting with {ref!r}")
    names = "; ".join(f"{r.title} ({r.sha256[:12]})" for r in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    raise MindoryError(f"{ref!r} matches {len(rows)} books: {names}{more}; use the id")


def _derivation(s: Session, book: BookRow, fingerprint: str | None) -> DerivationRow:
    q = select(DerivationRow).where(DerivationRow.book_id == book.id)
    if fingerprint is None:
        found = s.scalar(q.where(DerivationRow.is_current.is_(True)))
        what = "current derivation"
    else:
        matches = list(
            s.scalars(q.where(DerivationRow.fingerprint.startswith(fingerprint, autoescape=True)))
        )
        if len(matches) > 1:
            raise MindoryError(f"{fingerprint!r} starts {len(matches)} fingerprints; give more")
        found = matches[0] if matches else None
        what = f"derivation with fingerprint {fingerprint!r}"
    if found is None:
        raise NotFoundError(f"{book.title!r} has no {what}")
    return found


def _chunk_infos(
    s: Session,
    derivation_id: int,
    section: int | None,
    offset: int,
    limit: int | None,
    with_cfi: bool,
) -> list[ChunkInfo]:
    q = (
        select(
            ChunkRow.id,
            ChunkRow.chunk_id,
            SectionRow.ordinal,
            ChunkRow.index,
            ChunkRow.start,
            ChunkRow.end,
            ChunkRow.source_start,
            ChunkRow.source_end,
            ChunkRow.utf16_start,
            ChunkRow.utf16_end,
            ChunkRow.text,
            ChunkRow.byte_start,
            ChunkRow.byte_end,
            ChunkRow.section_id,
            ChunkRow.context_start,
            ChunkRow.context_end,
        )
        .join(SectionRow, SectionRow.id == ChunkRow.section_id)
        .where(ChunkRow.derivation_id == derivation_id)
        .order_by(SectionRow.ordinal, ChunkRow.index)
    )
    if section is not None:
        q = q.where(SectionRow.ordinal == section)
    if offset:
        q = q.offset(offset)
    if limit is not None:
        q = q.limit(limit)
    rows = s.execute(q).all()
    cfi_docs: dict[int, Any] = {}
    if with_cfi:
        section_ids = sorted({r[13] for r in rows})
        for sid, table, text in s.execute(
            select(SectionRow.id, SectionRow.cfi_table, SectionRow.source_text).where(
                SectionRow.id.in_(section_ids), SectionRow.cfi_table.is_not(None)
            )
        ):
            from mindory.importers.cfi import CfiDocument

            cfi_docs[sid] = CfiDocument.from_json(str(table), text)
    out: list[ChunkInfo] = []
    for rid, cid, o, i, st, en, ss, se, us, ue, text, bs, be, sid, cs, ce in rows:
        doc = cfi_docs.get(sid)
        cfi = cfi_ej = None
        if doc is not None:
            cfi = doc.range(ss, se)
            cfi_ej = doc.range(ss, se, "epubjs")
        out.append(
            ChunkInfo(cid, o, i, st, en, ss, se, us, ue, text, bs, be, cfi, cfi_ej, rid, cs, ce)
        )
    return out


# --------------------------------------------------------------------------- verify


class _Verifier:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.truncated = False
        self.sections = self.section_texts = self.blocks = self.chunks = 0

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        else:
            self.truncated = True


_STATEFUL_CODECS = ("iso2022", "iso-2022", "hz", "utf-7", "utf_7")


def _verify_book(s: Session, book_id: int, v: _Verifier) -> None:
    book = s.get_one(BookRow, book_id)
    name = f"{book.title} ({book.sha256[:12]})"
    file_row = s.get(BookFileRow, book_id)
    data: bytes | None = None
    if file_row is None:
        v.problem(f"{name}: the book file row is missing")
    elif file_row.data is not None:
        data = file_row.data
        if hashlib.sha256(data).hexdigest() != book.sha256:
            v.problem(f"{name}: the stored file bytes do not hash to the book id")
        if len(data) != book.file_size:
            v.problem(f"{name}: the stored file has {len(data)} bytes, not {book.file_size}")
    elif file_row.path:
        p = Path(file_row.path)
        if not p.is_file():
            v.problem(f"{name}: the book file is gone: {p}")
        elif hashlib.sha256(p.read_bytes()).hexdigest() != book.sha256:
            v.problem(f"{name}: the book file changed since it was imported: {p}")

    sections = list(
        s.scalars(
            select(SectionRow).where(SectionRow.book_id == book_id).order_by(SectionRow.ordinal)
        )
    )
    v.sections += len(sections)
    if [sec.ordinal for sec in sections] != list(range(len(sections))):
        v.problem(f"{name}: section ordinals are not 0..{len(sections) - 1}")
    if len(sections) != book.section_count:
        v.problem(f"{name}: {len(sections)} sections stored, the book says {book.section_count}")
    by_id = {sec.id: sec for sec in sections}
    by_ordinal = {sec.ordinal: sec for sec in sections}
    for sec in sections:
        if len(sec.source_text) != sec.source_length:
            v.problem(f"{name} §{sec.ordinal}: source text length differs from source_length")
        if sec.cfi_table is not None:
            try:
                from mindory.importers.cfi import CfiDocument

                CfiDocument.from_json(sec.cfi_table, sec.source_text)
            except Exception as exc:  # noqa: BLE001 - report any failure as a problem
                v.problem(f"{name} §{sec.ordinal}: unreadable CFI table ({exc})")

    toc = list(s.scalars(select(TocEntryRow).where(TocEntryRow.book_id == book_id)))
    if len(toc) != book.toc_count:
        v.problem(f"{name}: {len(toc)} TOC entries stored, the book says {book.toc_count}")
    for e in toc:
        if e.section_ordinal is None:
            continue
        target = by_ordinal.get(e.section_ordinal)
        if target is None:
            v.problem(
                f"{name}: TOC entry {e.title!r} points at missing section {e.section_ordinal}"
            )
        elif e.source_offset is not None and not (
            target.source_start <= e.source_offset <= target.source_start + target.source_length
        ):
            v.problem(f"{name}: TOC entry {e.title!r} points outside section {e.section_ordinal}")

    derivations = list(s.scalars(select(DerivationRow).where(DerivationRow.book_id == book_id)))
    if sum(1 for d in derivations if d.is_current) != 1:
        v.problem(f"{name}: {sum(d.is_current for d in derivations)} current derivations, not 1")

    maps: dict[int, tuple[str, OffsetMap | None]] = {}  # section_text id -> (normalized, map)
    normalizations = list(
        s.scalars(select(NormalizationRow).where(NormalizationRow.book_id == book_id))
    )
    for norm in normalizations:
        try:
            expected = profile_fingerprint(NormalizeProfile(**norm.profile))
        except (TypeError, ValueError) as exc:
            v.problem(f"{name}: unreadable profile of normalization {norm.id}: {exc}")
            expected = None
        if expected is not None and expected != norm.profile_fingerprint:
            v.problem(f"{name}: profile fingerprint {norm.profile_fingerprint} is not {expected}")
        texts = list(
            s.scalars(select(SectionTextRow).where(SectionTextRow.normalization_id == norm.id))
        )
        if sorted(t.section_id for t in texts) != sorted(by_id):
            v.problem(f"{name}: normalization {norm.profile_fingerprint} lacks some sections")
        for t in texts:
            v.section_texts += 1
            owner = by_id.get(t.section_id)
            if owner is None:
                v.problem(f"{name}: section text {t.id} belongs to another book's section")
                continue
            where = f"{name} §{owner.ordinal} [{norm.profile_fingerprint}]"
            omap = _check_map(v, where, t, owner)
            maps[t.id] = (t.normalized_text, omap)
            _check_blocks(s, v, where, t, owner, omap)
        for d in derivations:
            if d.normalization_id != norm.id:
                continue
            _check_derivation(s, v, name, book, d, norm, by_id, texts, maps, data)
    _check_highlights(s, v, name, book, by_ordinal)


def _check_highlights(
    s: Session, v: _Verifier, name: str, book: BookRow, by_ordinal: Mapping[int, SectionRow]
) -> None:
    """Every anchored highlight of the book holds its quote, context and UTF-16 span."""
    rows = s.scalars(
        select(HighlightRow).where(
            HighlightRow.book_sha256 == book.sha256, HighlightRow.status == "anchored"
        )
    )
    indexes: dict[int, Utf16Index] = {}
    for h in rows:
        where = f"{name}: highlight {h.uid}"
        sec = by_ordinal.get(h.section)
        if sec is None or h.edition_sha256 != book.sha256:
            v.problem(f"{where} names section {h.section} of another edition")
            continue
        a, b = h.source_start - sec.source_start, h.source_end - sec.source_start
        text = sec.source_text
        if not 0 <= a < b <= len(text) or text[a:b] != h.exact:
            v.problem(f"{where}: the text at [{h.source_start}, {h.source_end}) is not its quote")
            continue
        if h.prefix != text[max(0, a - 32) : a] or h.suffix != text[b : b + 32]:
            v.problem(f"{where}: its stored context differs from the text around it")
        u = indexes.get(h.section) or indexes.setdefault(h.section, Utf16Index(text))
        if (h.utf16_start - sec.utf16_start, h.utf16_end - sec.utf16_start) != (
            u.to_utf16(a),
            u.to_utf16(b),
        ):
            v.problem(f"{where}: its UTF-16 span does not match its code point span")


def _verify_vectors(s: Session, v: _Verifier) -> None:
    """Every stored vector holds ``dim`` float32 values of its embedding."""
    rows = s.execute(
        select(EmbeddingRow.fingerprint, EmbeddingRow.dim, func.count())
        .join(ChunkVectorRow, ChunkVectorRow.embedding_id == EmbeddingRow.id)
        .where(func.length(ChunkVectorRow.vector) != EmbeddingRow.dim * 4)
        .group_by(EmbeddingRow.fingerprint, EmbeddingRow.dim)
    ).all()
    for fingerprint, dim, count in rows:
        v.problem(f"embedding {fingerprint}: {count} vector(s) are not {dim} float32 values")


def _check_map(v: _Verifier, where: str, t: SectionTextRow, sec: SectionRow) -> OffsetMap | None:
    try:
        omap = OffsetMap.from_bytes(t.offset_map)  # validates monotone runs
        omap.check(sec.source_text, t.normalized_text)  # lengths, copy runs equal
    except OffsetMapError as exc:
        v.problem(f"{where}: offset map: {exc}")
        return None
    if omap.edit_count != t.edit_count:
        v.problem(f"{where}: offset map holds {omap.edit_count} edits, row says {t.edit_count}")
    return omap


def _span_problems(
    omap: OffsetMap, starts: np.ndarray, ends: np.ndarray, src_s: np.ndarray, src_e: np.ndarray
) -> np.ndarray:
    """Indices whose stored source span differs from the map's (section-local arrays)."""
    bad = np.zeros(len(starts), dtype=bool)
    nonempty = ends > starts
    if nonempty.any():
        es, ee = omap.source_spans(starts[nonempty], ends[nonempty])
        bad[nonempty] = (es != src_s[nonempty]) | (ee != src_e[nonempty])
    for k in np.flatnonzero(~nonempty).tolist():
        exp = omap.source_span(int(starts[k]), int(ends[k]))
        bad[k] = exp != (int(src_s[k]), int(src_e[k]))
    return np.flatnonzero(bad)


def _check_blocks(
    s: Session,
    v: _Verifier,
    where: str,
    t: SectionTextRow,
    sec: SectionRow,
    omap: OffsetMap | None,
) -> None:
    rows = s.execute(
        select(
            BlockRow.index, BlockRow.start, BlockRow.end, BlockRow.source_start, BlockRow.source_end
        )
        .where(BlockRow.section_text_id == t.id)
        .order_by(BlockRow.index)
    ).all()
    v.blocks += len(rows)
    if len(rows) != t.block_count:
        v.problem(f"{where}: {len(rows)} blocks stored, the row says {t.block_count}")
    if not rows:
        return
    arr = np.asarray([r[:5] for r in rows], dtype=np.int64)
    if not np.array_equal(arr[:, 0], np.arange(len(arr))):
        v.problem(f"{where}: block indices are not 0..{len(arr) - 1}")
    n = len(t.normalized_text)
    outside = np.flatnonzero((arr[:, 1] < 0) | (arr[:, 1] > arr[:, 2]) | (arr[:, 2] > n))
    if len(outside):
        v.problem(f"{where}: block {int(arr[outside[0], 0])} lies outside the normalized text")
        return
    if np.any(arr[1:, 1] < arr[:-1, 2]):
        v.problem(f"{where}: blocks overlap or are out of order")
    if omap is None:
        return
    shift = sec.source_start
    bad = _span_problems(omap, arr[:, 1], arr[:, 2], arr[:, 3] - shift, arr[:, 4] - shift)
    if len(bad):
        k = int(bad[0])
        v.problem(
            f"{where}: block {int(arr[k, 0])} source span [{int(arr[k, 3])}, {int(arr[k, 4])}) "
            f"is not the map's ({len(bad)} block(s) differ)"
        )


def _check_derivation(
    s: Session,
    v: _Verifier,
    name: str,
    book: BookRow,
    d: DerivationRow,
    norm: NormalizationRow,
    by_id: Mapping[int, SectionRow],
    texts: Sequence[SectionTextRow],
    maps: Mapping[int, tuple[str, OffsetMap | None]],
    data: bytes | None,
) -> None:
    where_d = f"{name} [{d.fingerprint}]"
    try:
        settings = Settings.from_dict(d.settings)
    except (TypeError, ValueError) as exc:
        v.problem(f"{where_d}: unreadable settings: {exc}")
        return
    if settings.fingerprint != d.fingerprint:
        v.problem(f"{where_d}: the stored settings fingerprint to {settings.fingerprint}")
    if profile_fingerprint(settings.profile) != norm.profile_fingerprint:
        v.problem(f"{where_d}: settings profile differs from its normalization's")
    text_of = {t.section_id: t for t in texts}
    rows = s.execute(
        select(
            ChunkRow.section_id,
            ChunkRow.index,
            ChunkRow.start,
            ChunkRow.end,
            ChunkRow.source_start,
            ChunkRow.source_end,
            ChunkRow.utf16_start,
            ChunkRow.utf16_end,
            ChunkRow.chunk_id,
            ChunkRow.text,
            ChunkRow.byte_start,
            ChunkRow.byte_end,
            ChunkRow.context_start,
            ChunkRow.context_end,
        )
        .where(ChunkRow.derivation_id == d.id)
        .order_by(ChunkRow.section_id, ChunkRow.index)
    ).all()
    v.chunks += len(rows)
    if len(rows) != d.chunk_count:
        v.problem(f"{where_d}: {len(rows)} chunks stored, the derivation says {d.chunk_count}")
    codec: str | None = None
    if book.format == "txt" and data is not None and not book.lossy and book.encoding:
        try:
            codec = codecs.lookup(book.encoding).name
        except LookupError:
            codec = None
        if codec and codec.startswith(_STATEFUL_CODECS):
            codec = None
    by_section: dict[int, list[Any]] = {}
    for r in rows:
        by_section.setdefault(r[0], []).append(r)
    for section_id, chunks in by_section.items():
        sec = by_id.get(section_id)
        t = text_of.get(section_id)
        if sec is None or t is None:
            v.problem(f"{where_d}: chunks of section id {section_id}, not in this book/profile")
            continue
        where = f"{where_d} §{sec.ordinal}"
        normalized, omap = maps.get(t.id, (t.normalized_text, None))
        arr = np.asarray([c[1:8] for c in chunks], dtype=np.int64)
        if not np.array_equal(arr[:, 0], np.arange(len(arr))):
            v.problem(f"{where}: chunk indices are not 0..{len(arr) - 1}")
        starts, ends = arr[:, 1], arr[:, 2]
        bad_range = np.flatnonzero((starts < 0) | (starts >= ends) | (ends > len(normalized)))
        if len(bad_range):
            v.problem(f"{where}: chunk {int(arr[bad_range[0], 0])} has an empty or outside span")
            continue
        for c in chunks:
            idx, st, en = c[1], c[2], c[3]
            if c[9] != normalized[st:en]:
                v.problem(f"{where}: chunk {idx} text is not normalized[{st}:{en}]")
            cs, ce = c[12], c[13]
            if (cs is None) != (ce is None) or (
                cs is not None and ce is not None and not 0 <= cs <= ce <= len(normalized)
            ):
                v.problem(f"{where}: chunk {idx} context [{cs}, {ce}) is not a span of the text")
            expected_id = chunk_id(book.sha256, sec.ordinal, d.fingerprint, st, en)
            if c[8] != expected_id:
                v.problem(f"{where}: chunk {idx} id {c[8]} is not {expected_id}")
        shift = sec.source_start
        local_s, local_e = arr[:, 3] - shift, arr[:, 4] - shift
        if omap is not None:
            bad = _span_problems(omap, starts, ends, local_s, local_e)
            if len(bad):
                k = int(bad[0])
                v.problem(
                    f"{where}: chunk {int(arr[k, 0])} source span [{int(arr[k, 3])}, "
                    f"{int(arr[k, 4])}) is not the map's ({len(bad)} chunk(s) differ)"
                )
        src_len = len(sec.source_text)
        if np.any((local_s < 0) | (local_e > src_len) | (local_s > local_e)):
            v.problem(f"{where}: a chunk's source span lies outside the section")
            continue
        u16 = Utf16Index(sec.source_text)
        exp_us = u16.to_utf16_array(local_s) + sec.utf16_start
        exp_ue = u16.to_utf16_array(local_e) + sec.utf16_start
        bad_u = np.flatnonzero((exp_us != arr[:, 5]) | (exp_ue != arr[:, 6]))
        if len(bad_u):
            k = int(bad_u[0])
            v.problem(
                f"{where}: chunk {int(arr[k, 0])} UTF-16 span [{int(arr[k, 5])}, {int(arr[k, 6])}) "
                f"should be [{int(exp_us[k])}, {int(exp_ue[k])})"
            )
        if codec is not None and data is not None:
            for c in chunks:
                bs, be = c[10], c[11]
                if bs is None or be is None:
                    v.problem(f"{where}: chunk {c[1]} of a plain-text book has no byte span")
                    break
                try:
                    decoded = data[bs:be].decode(codec)
                except UnicodeDecodeError:
                    decoded = None
                if decoded != sec.source_text[c[4] - shift : c[5] - shift]:
                    v.problem(
                        f"{where}: chunk {c[1]} bytes [{bs}, {be}) do not decode to its source"
                    )
                    break


# --------------------------------------------------------------------------- search


def _spec_of(emb: Embedder) -> str:
    """A spec string that recreates an embedder object in another process, if any."""
    if isinstance(emb, HashedNgramEmbedder):
        return DEFAULT_EMBEDDER if emb.dim == 384 else f"{DEFAULT_EMBEDDER}:{emb.dim}"
    backend, folder = getattr(emb, "backend", None), getattr(emb, "folder", None)
    if isinstance(backend, str) and folder is not None:
        return f"{backend}:{folder}"
    return str(getattr(emb, "spec", None) or emb.id)


def embedding_fingerprint(embedder_id: str, context_header: bool) -> str:
    """The embedding settings' fingerprint: embedder id + context-header flag.

    Deliberately not part of the chunk settings fingerprint: changing the embedder
    re-embeds, it never re-chunks, so chunk ids stay what they are.
    """
    canonical = json.dumps(
        {"context_header": bool(context_header), "embedder": embedder_id},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class EmbeddingInfo:
    """An embedding space: which embedder (and header flag), and how many vectors."""

    fingerprint: str
    embedder_id: str
    spec: str
    dim: int
    context_header: bool
    current: bool
    vectors: int
    created_at: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "embedder": self.embedder_id,
            "spec": self.spec,
            "dim": self.dim,
            "context_header": self.context_header,
            "current": self.current,
            "vectors": self.vectors,
            "created_at": self.created_at,
        }


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


@dataclass(frozen=True, slots=True)
class EmbedResult:
    embedding: EmbeddingInfo
    embedded: int  # vectors made by this call
    total: int  # chunks of current derivations
    seconds: float
    embed_seconds: float  # in the embedder alone
    index: IndexInfo | None = None

    def to_json(self) -> dict[str, Any]:
        rate = self.embedded / self.embed_seconds if self.embed_seconds > 0 else None
        return {
            "embedding": self.embedding.to_json(),
            "embedded": self.embedded,
            "total_chunks": self.total,
            "seconds": round(self.seconds, 4),
            "chunks_per_second": round(rate, 1) if rate is not None else None,
            "index": self.index.to_json() if self.index is not None else None,
        }


@dataclass(frozen=True, slots=True)
class LocateResult:
    """A position in a book: where it is (:func:`mindory.reading.locate.locate_position`) and
    the chunks of the current derivation that contain it."""

    book: str
    title: str
    position: Mapping[str, Any]
    chunks: tuple[ChunkInfo, ...]
    range_end: int | None = None  # a range CFI: where the range ends (source)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"book": self.book, "bookTitle": self.title, **self.position}
        if self.range_end is not None:
            out["rangeEnd"] = self.range_end
        out["chunks"] = [{k: v for k, v in c.to_json().items() if k != "text"} for c in self.chunks]
        return out


@dataclass(frozen=True)
class _EmbeddingState:
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


@dataclass(frozen=True)
class _LoadedIndex:
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


def _embedding_info(row: EmbeddingRow, vectors: int) -> EmbeddingInfo:
    return EmbeddingInfo(
        fingerprint=row.fingerprint,
        embedder_id=row.embedder_id,
        spec=row.spec,
        dim=row.dim,
        context_header=bool(row.context_header),
        current=bool(row.is_current),
        vectors=vectors,
        created_at=_iso(row.created_at),
    )


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


def _current_embedding_row(conn: Connection) -> _EmbeddingState | None:
    r = conn.execute(_CURRENT_EMBEDDING_STMT).first()
    if r is None:
        return None
    return _EmbeddingState(int(r[0]), r[1], r[2], r[3], int(r[4]), bool(r[5]), int(r[6]))


def _index_token(conn: Connection, embedding: _EmbeddingState) -> tuple[Any, ...]:
    """Changes whenever the indexed id set may have changed: the embedding's version
    (every vector write bumps it) and the set of current derivations (imports,
    re-derivations and deletes change it)."""
    version = conn.execute(_EMBEDDING_VERSION_STMT, {"id": embedding.id}).scalar()
    ids = conn.execute(_CURRENT_DERIVATIONS_STMT).scalars()
    digest = hashlib.sha256(np.fromiter(ids, dtype="<i8").tobytes()).hexdigest()
    return (embedding.id, embedding.fingerprint, version, digest)


def _indexed_ids(conn: Connection, embedding_id: int) -> np.ndarray:
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


def _stored_vectors(
    conn: Connection, embedding: _EmbeddingState, ids: np.ndarray
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


def _load_own_manifest(
    path: Path, embedding: _EmbeddingState, options: Mapping[str, Any]
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
    conn: Connection, index: VectorIndex, ids: np.ndarray, embedding: _EmbeddingState
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
        found, vecs = _stored_vectors(conn, embedding, missing)
        index.add(found, vecs)
    return index


class _ByteOffsets:
    """Code point → byte offset of a plain-text book: the stored chunk byte spans
    first; otherwise the book file is decoded once (exact ByteIndex)."""

    def __init__(self, lib: Library, sha: str) -> None:
        self._lib = lib
        self._sha = sha
        self.known: dict[int, int] = {}
        self._index: ByteIndex | None = None
        self._tried = False
        # Shared across request threads: one decodes, the others wait for its index
        # (they must not see "tried, no index" while it is being built).
        self._lock = threading.Lock()

    def _load(self) -> ByteIndex | None:
        if self._tried:
            return self._index
        with self._lock:
            if not self._tried:
                try:
                    # Called while the caller holds a pooled connection: use the other pool.
                    data = self._lib.book_file(self._sha, _engine=self._lib._aux_engine())
                    self._index = ByteIndex(data, decode_bytes(data))
                except MindoryError:
                    self._index = None
                self._tried = True
        return self._index

    def can(self, positions: Iterable[int]) -> bool:
        return all(p in self.known for p in positions) or self._load() is not None

    def __call__(self, cp: int) -> int:
        found = self.known.get(cp)
        if found is not None:
            return found
        index = self._load()
        if index is None:
            raise MindoryError("the book file cannot be read: no byte offsets")
        return index.byte_offset(cp)


@dataclass
class _BookFacts:
    sha: str
    title: str
    format: str
    file_name: str
    lengths: tuple[int, ...]
    bytes: _ByteOffsets | None


# Statements built once (building a select costs more than running it here).
_BOOKS_STMT = select(
    BookRow.id, BookRow.sha256, BookRow.title, BookRow.format, BookRow.file_name
).where(BookRow.id.in_(bindparam("ids", expanding=True)))
_TXT_LENGTH_STMT = select(func.max(SectionRow.source_start + SectionRow.source_length)).where(
    SectionRow.book_id == bindparam("id")
)
_SPAN_LENGTHS_STMT = (
    select(SectionRow.source_length)
    .where(SectionRow.book_id == bindparam("id"))
    .order_by(SectionRow.ordinal)
)
_SECTIONS_STMT = (
    select(
        SectionRow.id,
        SectionTextRow.normalization_id,
        SectionRow.book_id,
        SectionRow.ordinal,
        SectionRow.title,
        SectionRow.href,
        SectionRow.media_type,
        SectionRow.source_start,
        SectionRow.utf16_start,
        SectionRow.source_text,
        SectionRow.cfi_table,
        SectionTextRow.id,
        SectionTextRow.normalized_text,
        SectionTextRow.offset_map,
    )
    .join(SectionTextRow, SectionTextRow.section_id == SectionRow.id)
    .where(
        SectionRow.id.in_(bindparam("sections", expanding=True)),
        SectionTextRow.normalization_id.in_(bindparam("normalizations", expanding=True)),
    )
)
_BLOCKS_STMT = (
    select(
        BlockRow.section_text_id,
        BlockRow.index,
        BlockRow.kind,
        BlockRow.level,
        BlockRow.start,
        BlockRow.end,
        BlockRow.source_start,
        BlockRow.source_end,
    )
    .where(BlockRow.section_text_id.in_(bindparam("ids", expanding=True)))
    .order_by(BlockRow.section_text_id, BlockRow.index)
)
_HIT_ROWS_STMT = (
    select(
        ChunkRow.id,
        ChunkRow.chunk_id,
        ChunkRow.section_id,
        ChunkRow.start,
        ChunkRow.end,
        ChunkRow.source_start,
        ChunkRow.source_end,
        ChunkRow.byte_start,
        ChunkRow.byte_end,
        ChunkRow.context_start,
        ChunkRow.context_end,
        DerivationRow.normalization_id,
        DerivationRow.book_id,
    )
    .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
    .where(ChunkRow.id.in_(bindparam("ids", expanding=True)))
)


_PLACE_KEYS_STMT = (
    select(
        SectionRow.id,
        SectionTextRow.normalization_id,
        BookRow.sha256,
        SectionRow.ordinal,
        NormalizationRow.profile_fingerprint,
        SectionRow.book_id,
    )
    .join(SectionTextRow, SectionTextRow.section_id == SectionRow.id)
    .join(NormalizationRow, NormalizationRow.id == SectionTextRow.normalization_id)
    .join(BookRow, BookRow.id == SectionRow.book_id)
    .where(
        SectionRow.id.in_(bindparam("sections", expanding=True)),
        SectionTextRow.normalization_id.in_(bindparam("normalizations", expanding=True)),
    )
)


def _block_rows(conn: Connection, text_ids: Sequence[int]) -> Iterable[Any]:
    """Block rows of some section texts: through the DB-API cursor on SQLite (a large
    section has thousands of blocks, and SQLAlchemy's rows cost ~3 µs each)."""
    if conn.dialect.name != "sqlite":
        return conn.execute(_BLOCKS_STMT, {"ids": list(text_ids)}).all()
    marks = ",".join("?" * len(text_ids))
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(
            'SELECT section_text_id, "index", kind, level, start, "end", source_start, '
            f"source_end FROM blocks WHERE section_text_id IN ({marks}) "
            'ORDER BY section_text_id, "index"',
            list(text_ids),
        )
        return list(cursor.fetchall())
    finally:
        cursor.close()


class _PlaceCache:
    """Section places across searches, keyed by what decides their content: the book's
    SHA-256, the section ordinal and the normalization profile's fingerprint (never by
    row ids, which SQLite may reuse). Bounded by entries and by characters held."""

    def __init__(self, max_entries: int = PLACE_CACHE_ENTRIES, max_chars: int = PLACE_CACHE_CHARS):
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._items: OrderedDict[tuple[str, int, str], SectionPlace] = OrderedDict()
        self._chars = 0
        self._bytes: dict[str, _ByteOffsets] = {}
        self.book_lengths: dict[str, tuple[int, ...]] = {}  # book sha -> resource lengths
        self._lock = threading.Lock()

    @staticmethod
    def _size(place: SectionPlace) -> int:
        return len(place.source_text) + len(place.normalized_text)

    def get(self, key: tuple[str, int, str]) -> SectionPlace | None:
        with self._lock:
            place = self._items.get(key)
            if place is not None:
                self._items.move_to_end(key)
            return place

    def put(self, key: tuple[str, int, str], place: SectionPlace) -> None:
        with self._lock:
            if key in self._items:
                return
            self._items[key] = place
            self._chars += self._size(place)
            while self._items and (
                len(self._items) > self.max_entries or self._chars > self.max_chars
            ):
                _, old = self._items.popitem(last=False)
                self._chars -= self._size(old)

    def byte_offsets(self, lib: Library, sha: str) -> _ByteOffsets:
        with self._lock:
            found = self._bytes.get(sha)
            if found is None:
                found = self._bytes[sha] = _ByteOffsets(lib, sha)
            return found

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes.clear()
            self.book_lengths.clear()
            self._chars = 0


class _Places:
    """SectionPlaces from stored rows for one search or locate call.

    :meth:`prefetch` resolves many ``(section id, normalization id)`` pairs in one
    query of small columns, then loads (texts, map, blocks, CFI table) only the
    sections the library's :class:`_PlaceCache` does not hold yet.
    """

    def __init__(self, lib: Library, conn: Connection) -> None:
        self._lib = lib
        self._conn = conn
        self._keys: dict[tuple[int, int], tuple[str, int, str, int]] = {}
        self._books: dict[int, _BookFacts] = {}
        # This call's own references: a section larger than the shared cache's budget
        # is evicted at once, but must still serve the call that loaded it.
        self._local: dict[tuple[str, int, str], SectionPlace] = {}

    def _load_books(self, ids: Iterable[int]) -> None:
        wanted = sorted({int(i) for i in ids} - set(self._books))
        if not wanted:
            return
        cache = self._lib._places
        for book_id, sha, title, fmt, file_name in self._conn.execute(_BOOKS_STMT, {"ids": wanted}):
            lengths = cache.book_lengths.get(sha)
            if lengths is None:
                if fmt == "txt":  # one resource: the file (its sections are contiguous)
                    end = self._conn.execute(_TXT_LENGTH_STMT, {"id": book_id}).scalar()
                    lengths = (int(end or 0),)
                else:  # one resource per spine document
                    lengths = tuple(
                        int(n)
                        for n in self._conn.execute(_SPAN_LENGTHS_STMT, {"id": book_id}).scalars()
                    )
                cache.book_lengths[sha] = lengths
            byte_offsets = cache.byte_offsets(self._lib, sha) if fmt == "txt" else None
            self._books[int(book_id)] = _BookFacts(
                sha, title, fmt, file_name, lengths, byte_offsets
            )

    def book(self, book_id: int) -> _BookFacts:
        if book_id not in self._books:
            self._load_books([book_id])
        return self._books[book_id]

    def prefetch(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Make the places of many ``(section id, normalization id)`` pairs ready."""
        wanted = {(int(a), int(b)) for a, b in pairs} - set(self._keys)
        if not wanted:
            return
        params = {
            "sections": sorted({a for a, _ in wanted}),
            "normalizations": sorted({b for _, b in wanted}),
        }
        for sid, nid, sha, ordinal, pfp, book_id in self._conn.execute(_PLACE_KEYS_STMT, params):
            if (int(sid), int(nid)) in wanted:
                self._keys[(int(sid), int(nid))] = (str(sha), int(ordinal), str(pfp), int(book_id))
        cache = self._lib._places
        missing = []
        for pair in wanted:
            key = self._keys.get(pair)
            if key is None:
                continue
            found = cache.get(key[:3])
            if found is None:
                missing.append(pair)
            else:
                self._local[key[:3]] = found
        if not missing:
            return
        params = {
            "sections": sorted({a for a, _ in missing}),
            "normalizations": sorted({b for _, b in missing}),
        }
        rows = [
            row
            for row in self._conn.execute(_SECTIONS_STMT, params)
            if (int(row[0]), int(row[1])) in missing
        ]
        self._load_books(int(r[2]) for r in rows)
        text_ids = [int(r[11]) for r in rows]
        shift_of = {int(r[11]): int(r[7]) for r in rows}
        blocks: dict[int, list[Block]] = {t: [] for t in text_ids}
        if text_ids:
            for t, i, kind, level, a, b, bs, be in _block_rows(self._conn, text_ids):
                shift = shift_of[int(t)]
                blocks[int(t)].append(
                    Block(int(i), kind, int(a), int(b), int(bs) - shift, int(be) - shift, level)
                )
        for row in rows:
            place = self._build(row, tuple(blocks[int(row[11])]))
            key3 = self._keys[(int(row[0]), int(row[1]))][:3]
            self._local[key3] = place
            cache.put(key3, place)

    def _build(self, row: Any, blocks: tuple[Block, ...]) -> SectionPlace:
        (
            _sid,
            _nid,
            book_id,
            ordinal,
            title,
            href,
            media_type,
            ss,
            u16,
            source,
            table,
            _text_id,
            norm,
            omap,
        ) = row
        facts = self.book(int(book_id))
        cfi = None
        if table is not None:
            from mindory.importers.cfi import CfiDocument

            cfi = CfiDocument.from_json(str(table), source)
        is_txt = facts.format == "txt"
        return SectionPlace(
            book_format=facts.format,
            book_title=facts.title,
            ordinal=int(ordinal),
            href=facts.file_name if is_txt else (href or ""),
            media_type="text/plain" if is_txt else media_type,
            title=title,
            source_text=source,
            normalized_text=norm,
            offset_map=OffsetMap.from_bytes(omap),
            blocks=blocks,
            resource_source_lengths=facts.lengths,
            resource_index=0 if is_txt else int(ordinal),
            source_start=int(ss),
            cfi=cfi,
            utf16_source_start=int(u16),
            byte_offset=facts.bytes,
        )

    def know_bytes(self, book_id: int, row: Any) -> None:
        """Record a stored chunk's byte span (plain text) for its book's byte lookup."""
        facts = self.book(int(book_id))
        if facts.bytes is not None and row.byte_start is not None and row.byte_end is not None:
            facts.bytes.known[int(row.source_start)] = int(row.byte_start)
            facts.bytes.known[int(row.source_end)] = int(row.byte_end)

    def get(self, section_id: int, normalization_id: int) -> SectionPlace:
        pair = (int(section_id), int(normalization_id))
        self.prefetch([pair])
        key = self._keys.get(pair)
        place = self._local.get(key[:3]) if key is not None else None
        if place is None:
            raise NotFoundError(
                f"no section row {section_id} under normalization {normalization_id}"
            )
        return place


def _chunk_locator(place: SectionPlace, c: Any, page_size: int) -> Locator:
    """The Locator of a stored chunk row (with its parent span, if it has one)."""
    context: tuple[int, int] | None = None
    if c.context_start is not None and c.context_end is not None:
        ls, le = place.offset_map.source_span(int(c.context_start), int(c.context_end))
        context = (ls + place.source_start, le + place.source_start)
    bytes_fn = place.byte_offset
    if isinstance(bytes_fn, _ByteOffsets):
        wanted = [int(c.source_start), int(c.source_end), *(context or ())]
        if not bytes_fn.can(wanted):
            place = replace(place, byte_offset=None)
    return locate_span(
        place,
        int(c.source_start),
        int(c.source_end),
        normalized=(int(c.start), int(c.end)),
        page_size=page_size,
        chunk_id=str(c.chunk_id),
        context=context,
    )


def _matches(place: SectionPlace, start: int, end: int, terms: QueryTerms) -> tuple[Match, ...]:
    found = find_matches(place.normalized_text, start, end, terms)
    if not found:
        return ()
    shift = place.source_start
    starts = np.fromiter((a for a, _, _ in found), dtype=np.int64, count=len(found))
    ends = np.fromiter((b for _, b, _ in found), dtype=np.int64, count=len(found))
    src_s, src_e = place.offset_map.source_spans(starts, ends)
    out: list[Match] = []
    for (a, b, words), ls, le in zip(found, src_s.tolist(), src_e.tolist()):
        out.append(
            Match(
                terms=words,
                text=place.source_text[ls:le],
                source_start=ls + shift,
                source_end=le + shift,
                utf16_start=place.to_utf16(ls + shift),
                utf16_end=place.to_utf16(le + shift),
                normalized_start=a,
                normalized_end=b,
            )
        )
    return tuple(out)


def _build_hits(
    lib: Library,
    conn: Connection,
    top: Sequence[Fused],
    terms: QueryTerms,
    mode: str,
    page_size: int,
) -> list[Hit]:
    if not top:
        return []
    rows = conn.execute(_HIT_ROWS_STMT, {"ids": [f.id for f in top]}).all()
    by_id = {int(r.id): r for r in rows}
    places = _Places(lib, conn)
    places.prefetch((int(r.section_id), int(r.normalization_id)) for r in rows)
    for r in rows:
        places.know_bytes(int(r.book_id), r)
    hits: list[Hit] = []
    for f in top:
        found = by_id.get(f.id)
        if found is None:
            continue  # deleted since it was ranked
        r = found
        place = places.get(int(r.section_id), int(r.normalization_id))
        facts = places.book(int(r.book_id))
        scores = {
            m: (ModeScore(*f.ranks[m]) if m in f.ranks else None) for m in ("lexical", "vector")
        }
        hits.append(
            Hit(
                rank=len(hits) + 1,
                score=f.score,
                scores=scores,
                chunk=str(r.chunk_id),
                book=facts.sha,
                book_title=facts.title,
                section=place.ordinal,
                section_title=place.title,
                locator=_chunk_locator(place, r, page_size),
                matches=_matches(place, int(r.start), int(r.end), terms),
                row_id=int(r.id),
            )
        )
    return hits


# --------------------------------------------------------------------------- quotes, highlights

TEXT_CACHE_ENTRIES = 512
TEXT_CACHE_CHARS = 32_000_000


class _TextCache:
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


def _find_chunk(s: Session, row: BookRow, chunk: str) -> tuple[ChunkRow, int]:
    """A chunk of the book by id or unique id prefix (the current derivation's first):
    the row and its derivation's normalization id."""
    found = s.execute(
        select(ChunkRow, DerivationRow.normalization_id)
        .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
        .where(
            DerivationRow.book_id == row.id,
            ChunkRow.chunk_id.startswith(chunk.strip().lower(), autoescape=True),
        )
        .order_by(DerivationRow.is_current.desc(), ChunkRow.id)
        .limit(3)
    ).all()
    if not found or not chunk.strip():
        raise NotFoundError(f"{row.title!r} has no chunk {chunk!r}")
    ids = {r[0].chunk_id for r in found}
    if len(ids) > 1:
        raise MindoryError(f"{chunk!r} starts {len(ids)} chunk ids; give more of it")
    c, normalization_id = found[0]
    return c, int(normalization_id)


def _section_id(s: Session, row: BookRow, ordinal: int) -> int:
    section_id = s.scalar(
        select(SectionRow.id).where(SectionRow.book_id == row.id, SectionRow.ordinal == ordinal)
    )
    if section_id is None:
        raise NotFoundError(
            f"{row.title!r} has no section {ordinal} (sections 0–{row.section_count - 1})"
        )
    return int(section_id)


def _place_of(
    lib: Library, s: Session, conn: Connection, row: BookRow, ordinal: int
) -> SectionPlace:
    """The place of a section under the book's current derivation."""
    derivation = _derivation(s, row, None)
    return _Places(lib, conn).get(_section_id(s, row, ordinal), derivation.normalization_id)


def _resolve_cfi_in(
    lib: Library, s: Session, conn: Connection, row: BookRow, cfi: str
) -> tuple[int, int, int]:
    """An EPUB CFI of the book → (section ordinal, source start, source end)."""
    from mindory.importers.cfi import CfiError

    derivation = _derivation(s, row, None)
    places = _Places(lib, conn)
    with_tables = [
        places.get(i, derivation.normalization_id)
        for i in s.scalars(
            select(SectionRow.id).where(
                SectionRow.book_id == row.id, SectionRow.cfi_table.is_not(None)
            )
        )
    ]
    try:
        return resolve_cfi(with_tables, cfi)
    except CfiError as exc:
        raise MindoryError(f"{row.title!r}: {exc}") from exc


def _from_utf16(place: SectionPlace, start: int, end: int) -> tuple[int, int]:
    """Book UTF-16 positions of a section → book code point positions."""
    base = place.to_utf16(place.source_start)
    index = Utf16Index(place.source_text)
    out = []
    for u in (start, end):
        try:
            out.append(place.source_start + index.from_utf16(u - base))
        except IndexError as exc:
            raise MindoryError(
                f"UTF-16 position {u} of section {place.ordinal}: {exc} "
                f"(the section spans [{base}, {base + index.utf16_length}])"
            ) from exc
    return out[0], out[1]


def _clip(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _highlight_values(loc: Locator, sha: str, fmt: str) -> dict[str, Any]:
    """The columns of a highlight placed at ``loc`` in the book ``sha``."""
    return {
        "edition_sha256": sha,
        "section": loc.section,
        "href": loc.href if fmt == "epub" else None,
        "target": loc.href,
        "source_start": loc.source_start,
        "source_end": loc.source_end,
        "utf16_start": loc.utf16_start,
        "utf16_end": loc.utf16_end,
        "exact": loc.highlight,
        "prefix": loc.quote_prefix,
        "suffix": loc.quote_suffix,
        "cfi": loc.cfi,
    }


def _highlight(h: HighlightRow) -> Highlight:
    return Highlight(
        id=h.uid,
        book=h.book_sha256,
        edition=h.edition_sha256,
        format="epub" if h.href is not None else "txt",
        status="orphaned" if h.status == "orphaned" else "anchored",
        section=h.section,
        href=h.href,
        target=h.target,
        source_start=h.source_start,
        source_end=h.source_end,
        utf16_start=h.utf16_start,
        utf16_end=h.utf16_end,
        exact=h.exact,
        prefix=h.prefix,
        suffix=h.suffix,
        cfi=h.cfi,
        note=h.note,
        color=h.color,
        created=_utc(h.created_at),
        modified=_utc(h.updated_at),
        reanchored=h.reanchored,
    )


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _find_highlight(s: Session, row: BookRow, ref: str) -> HighlightRow:
    uid = parse_highlight_id(ref)
    found = (
        s.scalar(
            select(HighlightRow).where(
                HighlightRow.uid == uid, HighlightRow.book_sha256 == row.sha256
            )
        )
        if uid is not None
        else None
    )
    if found is None:
        raise NotFoundError(f"{row.title!r} has no highlight {ref!r}")
    return found


def _same_identifiers(s: Session, book: Book) -> list[str]:
    """Other books sharing a package identifier with ``book`` that have highlights."""
    idents = {i.strip() for i in book.identifiers if i and i.strip()}
    if not idents:
        return []
    rows = s.execute(
        select(BookRow.sha256, BookRow.identifiers).where(
            BookRow.sha256 != book.sha256, BookRow.format == book.format
        )
    ).all()
    sharing = [sha for sha, theirs in rows if idents & {str(i).strip() for i in theirs or ()}]
    if not sharing:
        return []
    marked = set(
        s.scalars(
            select(HighlightRow.book_sha256).where(HighlightRow.book_sha256.in_(sharing)).distinct()
        )
    )
    return sorted(sha for sha in sharing if sha in marked)
