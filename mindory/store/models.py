"""The library's schema: SQLAlchemy 2 typed models, and nothing else.

The schema changes only through Alembic revisions in ``migrations/`` (see
:func:`mindory.library.upgrade`); a test proves these models and the revisions
agree. Types are portable (``Text``, ``BigInteger``, ``LargeBinary``, ``JSON``,
``Boolean``, ``DateTime``) so PostgreSQL works with the same models.

The model, in one paragraph (docs/library.md has the long form). A **book** is
identified by the SHA-256 of its file; its bytes live in **book_files** (a
separate table, so listing books never loads them), or only a path there when
the user asks not to copy. Everything read from the file that does not depend
on pipeline settings hangs off the book: **sections** (source text, href,
media type, parser, the EPUB CFI table) and **toc_entries** (nested through
``parent_id``). Everything that depends on the normalization profile hangs off
a **normalization** (book × profile fingerprint): **section_texts**
(normalized text and serialized offset map, one per section) and **blocks**.
Everything that depends on the whole settings hangs off a **derivation**
(book × settings fingerprint, one per book marked current): **chunks**. Two
derivations that differ only in chunk sizes share one normalization.

Every ``source_*`` column is in book source coordinates (file-global code
points for plain text, section-local for EPUB), as in :mod:`mindory.text.records`.

Search (docs/search.md) adds **embeddings** (one row per embedding space:
embedder id + context-header flag, with the spec that recreates the embedder)
and **chunk_vectors** (one float32 little-endian vector per chunk and
embedding). On SQLite, revision 0002 also creates the FTS5 index
``chunks_fts`` (trigram tokenizer, contentless) and the triggers that keep it
in step with ``chunks``; those are not models (SQLAlchemy cannot describe a
virtual table), so the autogenerate comparison leaves them out
(:data:`NOT_MODELS`).

Highlights (revision 0003, docs/api.md) are the reader's own data: **highlights** holds
each in source coordinates plus a W3C text quote, keyed to its book by the book's
SHA-256 (no foreign key), so re-importing a file never touches them and a new edition
takes them over with one update.

Readers (revision 0005, docs/reading-state.md): **readers** (a name, the SHA-256 of the
token; the implicit local reader, :data:`LOCAL_READER`, has no row), and every reader's
own data names its reader by ``reader_id``: **highlights**, **positions** (reading
positions, one row per accepted write, newest ``modified`` wins) and **bookmarks**, the
last two in source coordinates plus a quote, like highlights.

Jobs (revision 0006, docs/api.md): **jobs** holds each import job — the request, its
state and progress, the result or error, and the lease of the worker running it — so
any server or ``mindory worker`` on the same database claims and runs it
(:mod:`mindory.store.jobs`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from mindory.reading.positions import LOCAL_READER

__all__ = [
    "FTS_TABLE",
    "TERMS_FTS_TABLE",
    "ChunkTermsRow",
    "LibraryFactRow",
    "NAMING_CONVENTION",
    "NOT_MODELS",
    "PG_VECTORS_TABLE",
    "Base",
    "BlockRow",
    "BookFileRow",
    "BookRow",
    "ChunkRow",
    "ChunkVectorRow",
    "DerivationRow",
    "EmbeddingRow",
    "HighlightRow",
    "JobRow",
    "LOCAL_READER",
    "BookmarkRow",
    "NormalizationRow",
    "PositionRow",
    "ReaderRow",
    "SectionRow",
    "SectionTextRow",
    "TocEntryRow",
    "is_model_name",
]

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# The SQLite full-text index over chunk text (revision 0002; not a model).
FTS_TABLE = "chunks_fts"
TERMS_FTS_TABLE = "chunk_terms_fts"  # the word index over chunk_terms (revision 0004)
# Tables that exist in the database but not as models: the FTS5 virtual tables,
# their shadow tables (chunks_fts_data, _idx, _docsize, _config) and the vocabulary
# view. Alembic's autogenerate comparison skips names starting with these.
PG_VECTORS_TABLE = "pg_chunk_vectors"  # PostgreSQL: pgvector copies of chunk_vectors (0007)
NOT_MODELS: tuple[str, ...] = (FTS_TABLE, TERMS_FTS_TABLE, PG_VECTORS_TABLE)


def is_model_name(name: str | None) -> bool:
    """False for the FTS tables (``include_name`` filter of the schema comparison)."""
    return name is None or not name.startswith(NOT_MODELS)


# A 64-bit integer key that is also SQLite's rowid (so it autoincrements there).
RowId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: dict[Any, Any] = {
        int: BigInteger(),
        str: Text(),
        bool: Boolean(),
        datetime: DateTime(timezone=True),
    }


def _book_fk() -> Any:
    return ForeignKey("books.id", ondelete="CASCADE")


class BookRow(Base):
    """One book file, identified by the SHA-256 of its bytes."""

    __tablename__ = "books"

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str]
    format: Mapped[str] = mapped_column(String(16))  # "txt" | "epub"
    file_name: Mapped[str]
    file_size: Mapped[int]
    encoding: Mapped[str | None] = mapped_column(String(64))
    lossy: Mapped[bool] = mapped_column(default=False)
    bad_bytes: Mapped[int] = mapped_column(default=0)
    first_bad_byte: Mapped[int | None]
    creators: Mapped[list[str]] = mapped_column(JSON)
    language: Mapped[str | None] = mapped_column(String(64))
    identifiers: Mapped[list[str]] = mapped_column(JSON)
    warnings: Mapped[list[str]] = mapped_column(JSON)
    section_count: Mapped[int] = mapped_column(Integer)
    toc_count: Mapped[int] = mapped_column(Integer)  # all TOC entries, nested ones included
    imported_at: Mapped[datetime]


class BookFileRow(Base):
    """The original file: its bytes, or (when not copied) where it was."""

    __tablename__ = "book_files"
    __table_args__ = (CheckConstraint("data IS NOT NULL OR path IS NOT NULL", name="data_or_path"),)

    book_id: Mapped[int] = mapped_column(RowId, _book_fk(), primary_key=True)
    data: Mapped[bytes | None] = mapped_column(LargeBinary)
    path: Mapped[str | None]
    size: Mapped[int]


class SectionRow(Base):
    """One spine document (EPUB) or chapter (plain text): source-level facts only."""

    __tablename__ = "sections"
    __table_args__ = (UniqueConstraint("book_id", "ordinal"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    book_id: Mapped[int] = mapped_column(RowId, _book_fk())
    ordinal: Mapped[int] = mapped_column(Integer)  # spine position / chapter number
    title: Mapped[str]
    href: Mapped[str | None]
    media_type: Mapped[str] = mapped_column(String(128))
    parser: Mapped[str] = mapped_column(String(16))
    linear: Mapped[bool] = mapped_column(default=True)
    source_start: Mapped[int]  # book source coordinates (0 for EPUB)
    utf16_start: Mapped[int]  # the same place in UTF-16 units
    source_length: Mapped[int]
    source_text: Mapped[str]
    cfi_table: Mapped[str | None]  # EPUB: CfiDocument.to_json(include_text=False)


class TocEntryRow(Base):
    """A table-of-contents entry; ``position`` is its place in a depth-first walk."""

    __tablename__ = "toc_entries"
    __table_args__ = (UniqueConstraint("book_id", "position"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    book_id: Mapped[int] = mapped_column(RowId, _book_fk())
    parent_id: Mapped[int | None] = mapped_column(
        RowId, ForeignKey("toc_entries.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer)
    depth: Mapped[int] = mapped_column(Integer)
    title: Mapped[str]
    href: Mapped[str]
    section_ordinal: Mapped[int | None] = mapped_column(Integer)
    source_offset: Mapped[int | None]  # book source coordinates


class NormalizationRow(Base):
    """A book normalized under one profile (the profile's own fingerprint)."""

    __tablename__ = "normalizations"
    __table_args__ = (UniqueConstraint("book_id", "profile_fingerprint"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    book_id: Mapped[int] = mapped_column(RowId, _book_fk())
    profile: Mapped[dict[str, Any]] = mapped_column(JSON)
    profile_fingerprint: Mapped[str] = mapped_column(String(64))


class SectionTextRow(Base):
    """A section's normalized text and offset map under one normalization."""

    __tablename__ = "section_texts"
    __table_args__ = (UniqueConstraint("normalization_id", "section_id"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    normalization_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("normalizations.id", ondelete="CASCADE")
    )
    section_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("sections.id", ondelete="CASCADE"), index=True
    )
    normalized_text: Mapped[str]
    offset_map: Mapped[bytes] = mapped_column(LargeBinary)  # OffsetMap.to_bytes()
    edit_count: Mapped[int] = mapped_column(Integer)
    block_count: Mapped[int] = mapped_column(Integer)


class BlockRow(Base):
    """A render block (paragraph, heading, ...) of a section under one normalization."""

    __tablename__ = "blocks"
    __table_args__ = (UniqueConstraint("section_text_id", "index"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    section_text_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("section_texts.id", ondelete="CASCADE")
    )
    index: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    level: Mapped[int | None] = mapped_column(Integer)
    start: Mapped[int]
    end: Mapped[int]
    source_start: Mapped[int]
    source_end: Mapped[int]


class DerivationRow(Base):
    """Everything derived from a book under one settings fingerprint."""

    __tablename__ = "derivations"
    __table_args__ = (UniqueConstraint("book_id", "fingerprint"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    book_id: Mapped[int] = mapped_column(RowId, _book_fk())
    normalization_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("normalizations.id", ondelete="CASCADE"), index=True
    )
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    fingerprint: Mapped[str] = mapped_column(String(64))
    is_current: Mapped[bool] = mapped_column(default=False)
    chunk_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]


class ChunkRow(Base):
    """A chunk. ``id`` is the integer row id (vector indexes key on it);
    ``chunk_id`` the stable id, a function of (book, section, settings, span)."""

    __tablename__ = "chunks"
    __table_args__ = (
        UniqueConstraint("derivation_id", "chunk_id"),
        Index(None, "derivation_id", "section_id", "index", unique=True),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    chunk_id: Mapped[str] = mapped_column(String(64))
    derivation_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("derivations.id", ondelete="CASCADE")
    )
    section_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("sections.id", ondelete="CASCADE"), index=True
    )
    index: Mapped[int] = mapped_column(Integer)
    start: Mapped[int]
    end: Mapped[int]
    source_start: Mapped[int]
    source_end: Mapped[int]
    utf16_start: Mapped[int]
    utf16_end: Mapped[int]
    byte_start: Mapped[int | None]  # plain text only
    byte_end: Mapped[int | None]
    # The normalized span of the text the chunk is read in (parent-child chunking).
    context_start: Mapped[int | None]
    context_end: Mapped[int | None]
    text: Mapped[str]


class EmbeddingRow(Base):
    """An embedding space: one embedder (id = name + version + dimension) with or
    without the context header. ``spec`` recreates the embedder (``hashed``,
    ``model2vec:/path``); ``version`` grows with every change to its vectors, so a
    search can tell cheaply whether its in-memory vector index is still current."""

    __tablename__ = "embeddings"

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    embedder_id: Mapped[str]
    spec: Mapped[str]
    dim: Mapped[int] = mapped_column(Integer)
    context_header: Mapped[bool] = mapped_column(default=False)
    is_current: Mapped[bool] = mapped_column(default=False)
    version: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime]


class ChunkVectorRow(Base):
    """A chunk's vector in one embedding: ``dim`` float32, little-endian."""

    __tablename__ = "chunk_vectors"

    chunk_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("chunks.id", ondelete="CASCADE"), primary_key=True
    )
    embedding_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("embeddings.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    vector: Mapped[bytes] = mapped_column(LargeBinary)


class HighlightRow(Base):
    """A reader's highlight: source coordinates + W3C TextQuoteSelector (+ CFI for EPUB).

    Keyed to its book by the book's SHA-256, not by row id (no foreign key): the same
    file imported again finds its highlights, and a new edition takes them over with
    one update of ``book_sha256``. ``edition_sha256`` is the book the coordinates
    refer to — the book itself, or for an ``orphaned`` highlight the edition it was
    last placed in. ``uid`` (32 hex digits) is the public id (``urn:uuid:…``).
    """

    __tablename__ = "highlights"
    __table_args__ = (
        Index(None, "book_sha256", "section"),
        Index(None, "reader_id", "book_sha256"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    uid: Mapped[str] = mapped_column(String(32), unique=True)
    reader_id: Mapped[str] = mapped_column(String(32), server_default=LOCAL_READER)
    book_sha256: Mapped[str] = mapped_column(String(64))
    edition_sha256: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # "anchored" | "orphaned"
    section: Mapped[int] = mapped_column(Integer)  # ordinal in the edition
    href: Mapped[str | None]  # EPUB content document (None: plain text)
    target: Mapped[str]  # the annotation's target.source: href, or the file name
    source_start: Mapped[int]  # book source coordinates of the edition
    source_end: Mapped[int]
    utf16_start: Mapped[int]
    utf16_end: Mapped[int]
    exact: Mapped[str]
    prefix: Mapped[str]  # 32 code points before (clipped at the section)
    suffix: Mapped[str]  # 32 code points after
    cfi: Mapped[str | None]  # EPUB: the specification's range CFI
    note: Mapped[str | None]
    color: Mapped[str] = mapped_column(String(32))
    reanchored: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the last re-anchoring
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class ChunkTermsRow(Base):
    """A chunk's analysed terms (:mod:`mindory.search.words`), space separated: what the
    word index ranks by BM25 (SQLite: the FTS5 table ``chunk_terms_fts``)."""

    __tablename__ = "chunk_terms"

    chunk_id: Mapped[int] = mapped_column(
        RowId, ForeignKey("chunks.id", ondelete="CASCADE"), primary_key=True
    )
    terms: Mapped[str]


class LibraryFactRow(Base):
    """What the library knows about itself, by key (``word_analysis``: the analysis
    fingerprint of its word index)."""

    __tablename__ = "library_facts"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str]


class ReaderRow(Base):
    """A reader of the library: ``id`` is derived from the name (not insertion order),
    ``token_hash`` the SHA-256 (hex) of the token, which is never stored."""

    __tablename__ = "readers"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]


class _PlaceColumns:
    """A place a reader keeps (position, bookmark): like a highlight, source coordinates
    of ``edition_sha256`` plus a quote. ``point`` is the place itself (book source
    coordinates); ``source_start``/``source_end`` the quoted text next to it (what
    re-anchoring looks for); ``locator`` the full resolved Locator's JSON."""

    reader_id: Mapped[str] = mapped_column(String(32))
    book_sha256: Mapped[str] = mapped_column(String(64))
    edition_sha256: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # "anchored" | "orphaned"
    section: Mapped[int] = mapped_column(Integer)
    href: Mapped[str | None]
    point: Mapped[int]
    source_start: Mapped[int]
    source_end: Mapped[int]
    exact: Mapped[str]
    prefix: Mapped[str]
    suffix: Mapped[str]
    locator: Mapped[dict[str, Any]] = mapped_column(JSON)
    reanchored: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class PositionRow(_PlaceColumns, Base):
    """A reading position as one device sent it (``modified``: the client's time)."""

    __tablename__ = "positions"
    __table_args__ = (Index(None, "reader_id", "book_sha256", "modified"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    uid: Mapped[str] = mapped_column(String(32), unique=True)
    device: Mapped[str] = mapped_column(String(128))
    modified: Mapped[datetime]
    received_at: Mapped[datetime]


class BookmarkRow(_PlaceColumns, Base):
    """A bookmark: ``uid`` is derived from (reader, book, place), not insertion order."""

    __tablename__ = "bookmarks"
    __table_args__ = (Index(None, "reader_id", "book_sha256"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True, autoincrement=True)
    uid: Mapped[str] = mapped_column(String(32), unique=True)
    title: Mapped[str | None]
    created_at: Mapped[datetime]


class JobRow(Base):
    """An import job (:mod:`mindory.store.jobs`). ``request`` is what the worker needs
    to run it (path, settings, copy, replaces, embed, cleanup); ``lease_owner`` and
    ``lease_expires_at`` say who runs it and until when (renewed while it runs): a job
    ``running`` with an expired lease is claimed again, until ``max_attempts``."""

    __tablename__ = "jobs"
    __table_args__ = (Index(None, "state", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # "upload" | "folder"
    state: Mapped[str] = mapped_column(String(16))  # queued | running | succeeded | failed
    file_name: Mapped[str]
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    phase: Mapped[str | None] = mapped_column(String(32))
    done: Mapped[int]
    total: Mapped[int]
    progress: Mapped[float] = mapped_column(Float)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    attempts: Mapped[int] = mapped_column(Integer)
    max_attempts: Mapped[int] = mapped_column(Integer)
    lease_owner: Mapped[str | None] = mapped_column(String(128))
    lease_expires_at: Mapped[datetime | None]
    version: Mapped[int]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
