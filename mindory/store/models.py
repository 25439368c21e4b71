"""The ORM classes of the library's tables, and what each table holds.

Each class maps onto its table in :mod:`mindory.store.tables` (the schema's one
description, in Core, with every column's type and key); the annotations here only type
the attributes. The schema changes only through Alembic revisions in ``migrations/``; a
test proves the tables and the revisions agree.

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
embedding). **chunk_windows** (revision 0010) holds, for the second stage, each chunk's
sentence windows embedded (float16), once ``mindory embed --windows`` asked for them.
On SQLite, revision 0002 also creates the FTS5 index
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

from sqlalchemy.orm import DeclarativeBase, Mapped

from mindory.reading.positions import LOCAL_READER
from mindory.store import tables
from mindory.store.tables import (
    FTS_TABLE,
    NAMING_CONVENTION,
    NOT_MODELS,
    PG_VECTORS_TABLE,
    TERMS_FTS_TABLE,
    is_model_name,
)

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
    "ChunkWindowsRow",
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


class Base(DeclarativeBase):
    """The ORM's base: every class maps onto a table of :mod:`mindory.store.tables`
    (the schema's one description); the annotations only type the attributes."""

    metadata = tables.METADATA


class BookRow(Base):
    """One book file, identified by the SHA-256 of its bytes."""

    __table__ = tables.book_table

    id: Mapped[int]
    sha256: Mapped[str]
    title: Mapped[str]
    format: Mapped[str]
    file_name: Mapped[str]
    file_size: Mapped[int]
    encoding: Mapped[str | None]
    lossy: Mapped[bool]
    bad_bytes: Mapped[int]
    first_bad_byte: Mapped[int | None]
    creators: Mapped[list[str]]
    language: Mapped[str | None]
    identifiers: Mapped[list[str]]
    warnings: Mapped[list[str]]
    section_count: Mapped[int]
    toc_count: Mapped[int]
    imported_at: Mapped[datetime]


class BookFileRow(Base):
    """The original file: its bytes, or (when not copied) where it was."""

    __table__ = tables.book_file_table

    book_id: Mapped[int]
    data: Mapped[bytes | None]
    path: Mapped[str | None]
    size: Mapped[int]


class SectionRow(Base):
    """One spine document (EPUB) or chapter (plain text): source-level facts only."""

    __table__ = tables.section_table

    id: Mapped[int]
    book_id: Mapped[int]
    ordinal: Mapped[int]
    title: Mapped[str]
    href: Mapped[str | None]
    media_type: Mapped[str]
    parser: Mapped[str]
    linear: Mapped[bool]
    source_start: Mapped[int]
    utf16_start: Mapped[int]
    source_length: Mapped[int]
    source_text: Mapped[str]
    cfi_table: Mapped[str | None]


class TocEntryRow(Base):
    """A table-of-contents entry; ``position`` is its place in a depth-first walk."""

    __table__ = tables.toc_entry_table

    id: Mapped[int]
    book_id: Mapped[int]
    parent_id: Mapped[int | None]
    position: Mapped[int]
    depth: Mapped[int]
    title: Mapped[str]
    href: Mapped[str]
    section_ordinal: Mapped[int | None]
    source_offset: Mapped[int | None]


class NormalizationRow(Base):
    """A book normalized under one profile (the profile's own fingerprint)."""

    __table__ = tables.normalization_table

    id: Mapped[int]
    book_id: Mapped[int]
    profile: Mapped[dict[str, Any]]
    profile_fingerprint: Mapped[str]


class SectionTextRow(Base):
    """A section's normalized text and offset map under one normalization."""

    __table__ = tables.section_text_table

    id: Mapped[int]
    normalization_id: Mapped[int]
    section_id: Mapped[int]
    normalized_text: Mapped[str]
    offset_map: Mapped[bytes]
    edit_count: Mapped[int]
    block_count: Mapped[int]


class BlockRow(Base):
    """A render block (paragraph, heading, ...) of a section under one normalization."""

    __table__ = tables.block_table

    id: Mapped[int]
    section_text_id: Mapped[int]
    index: Mapped[int]
    kind: Mapped[str]
    level: Mapped[int | None]
    start: Mapped[int]
    end: Mapped[int]
    source_start: Mapped[int]
    source_end: Mapped[int]


class DerivationRow(Base):
    """Everything derived from a book under one settings fingerprint."""

    __table__ = tables.derivation_table

    id: Mapped[int]
    book_id: Mapped[int]
    normalization_id: Mapped[int]
    settings: Mapped[dict[str, Any]]
    fingerprint: Mapped[str]
    is_current: Mapped[bool]
    chunk_count: Mapped[int]
    created_at: Mapped[datetime]


class ChunkRow(Base):
    """A chunk. ``id`` is the integer row id (vector indexes key on it);
    ``chunk_id`` the stable id, a function of (book, section, settings, span)."""

    __table__ = tables.chunk_table

    id: Mapped[int]
    chunk_id: Mapped[str]
    derivation_id: Mapped[int]
    section_id: Mapped[int]
    index: Mapped[int]
    start: Mapped[int]
    end: Mapped[int]
    source_start: Mapped[int]
    source_end: Mapped[int]
    utf16_start: Mapped[int]
    utf16_end: Mapped[int]
    byte_start: Mapped[int | None]
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

    __table__ = tables.embedding_table

    id: Mapped[int]
    fingerprint: Mapped[str]
    embedder_id: Mapped[str]
    spec: Mapped[str]
    dim: Mapped[int]
    context_header: Mapped[bool]
    is_current: Mapped[bool]
    version: Mapped[int]
    created_at: Mapped[datetime]


class ChunkVectorRow(Base):
    """A chunk's vector in one embedding: ``dim`` float32, little-endian."""

    __table__ = tables.chunk_vector_table

    chunk_id: Mapped[int]
    embedding_id: Mapped[int]
    vector: Mapped[bytes]
    text_sha256: Mapped[str | None]


class ChunkWindowsRow(Base):
    """The sentence windows of a chunk, embedded for the second stage
    (:mod:`mindory.search.rerank`): ``count`` × ``dim`` float16 unit vectors."""

    __table__ = tables.chunk_window_table

    chunk_id: Mapped[int]
    windows_key: Mapped[str]
    count: Mapped[int]
    dim: Mapped[int]
    vectors: Mapped[bytes]


class HighlightRow(Base):
    """A reader's highlight: source coordinates + W3C TextQuoteSelector (+ CFI for EPUB).

    Keyed to its book by the book's SHA-256, not by row id (no foreign key): the same
    file imported again finds its highlights, and a new edition takes them over with
    one update of ``book_sha256``. ``edition_sha256`` is the book the coordinates
    refer to — the book itself, or for an ``orphaned`` highlight the edition it was
    last placed in. ``uid`` (32 hex digits) is the public id (``urn:uuid:…``).
    """

    __table__ = tables.highlight_table

    id: Mapped[int]
    uid: Mapped[str]
    reader_id: Mapped[str]
    book_sha256: Mapped[str]
    edition_sha256: Mapped[str]
    status: Mapped[str]
    section: Mapped[int]
    href: Mapped[str | None]
    target: Mapped[str]
    source_start: Mapped[int]
    source_end: Mapped[int]
    utf16_start: Mapped[int]
    utf16_end: Mapped[int]
    exact: Mapped[str]
    prefix: Mapped[str]
    suffix: Mapped[str]
    cfi: Mapped[str | None]
    note: Mapped[str | None]
    color: Mapped[str]
    reanchored: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class ChunkTermsRow(Base):
    """A chunk's analysed terms (:mod:`mindory.search.words`), space separated: what the
    word index ranks by BM25 (SQLite: the FTS5 table ``chunk_terms_fts``)."""

    __table__ = tables.chunk_terms_table

    chunk_id: Mapped[int]
    terms: Mapped[str]


class LibraryFactRow(Base):
    """What the library knows about itself, by key (``word_analysis``: the analysis
    fingerprint of its word index)."""

    __table__ = tables.library_fact_table

    key: Mapped[str]
    value: Mapped[str]


class ReaderRow(Base):
    """A reader of the library: ``id`` is derived from the name (not insertion order),
    ``token_hash`` the SHA-256 (hex) of the token, which is never stored."""

    __table__ = tables.reader_table

    id: Mapped[str]
    name: Mapped[str]
    token_hash: Mapped[str]
    created_at: Mapped[datetime]
    password_hash: Mapped[str | None]


class _PlaceColumns:
    """A place a reader keeps (position, bookmark): like a highlight, source coordinates
    of ``edition_sha256`` plus a quote. ``point`` is the place itself (book source
    coordinates); ``source_start``/``source_end`` the quoted text next to it (what
    re-anchoring looks for); ``locator`` the full resolved Locator's JSON."""

    reader_id: Mapped[str]
    book_sha256: Mapped[str]
    edition_sha256: Mapped[str]
    status: Mapped[str]
    section: Mapped[int]
    href: Mapped[str | None]
    point: Mapped[int]
    source_start: Mapped[int]
    source_end: Mapped[int]
    exact: Mapped[str]
    prefix: Mapped[str]
    suffix: Mapped[str]
    locator: Mapped[dict[str, Any]]
    reanchored: Mapped[dict[str, Any] | None]


class PositionRow(_PlaceColumns, Base):
    """A reading position as one device sent it (``modified``: the client's time)."""

    __table__ = tables.position_table

    id: Mapped[int]
    uid: Mapped[str]
    device: Mapped[str]
    modified: Mapped[datetime]
    received_at: Mapped[datetime]
    client: Mapped[dict[str, Any] | None]


class BookmarkRow(_PlaceColumns, Base):
    """A bookmark: ``uid`` is derived from (reader, book, place), not insertion order."""

    __table__ = tables.bookmark_table

    id: Mapped[int]
    uid: Mapped[str]
    title: Mapped[str | None]
    created_at: Mapped[datetime]


class JobRow(Base):
    """An import job (:mod:`mindory.store.jobs`). ``request`` is what the worker needs
    to run it (path, settings, copy, replaces, embed, cleanup); ``lease_owner`` and
    ``lease_expires_at`` say who runs it and until when (renewed while it runs): a job
    ``running`` with an expired lease is claimed again, until ``max_attempts``."""

    __table__ = tables.job_table

    id: Mapped[str]
    kind: Mapped[str]
    state: Mapped[str]
    file_name: Mapped[str]
    request: Mapped[dict[str, Any]]
    phase: Mapped[str | None]
    done: Mapped[int]
    total: Mapped[int]
    progress: Mapped[float]
    result: Mapped[dict[str, Any] | None]
    error: Mapped[dict[str, Any] | None]
    attempts: Mapped[int]
    max_attempts: Mapped[int]
    lease_owner: Mapped[str | None]
    lease_expires_at: Mapped[datetime | None]
    version: Mapped[int]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class DocumentKeyRow(Base):
    """A KOReader document key of a book (revision 0009): ``method`` ``binary`` (the
    partial MD5 of the file) or ``filename``; ``alias``: a key of an edition this book
    replaced."""

    __table__ = tables.document_key_table

    id: Mapped[int]
    book_sha256: Mapped[str]
    method: Mapped[str]
    key: Mapped[str]
    alias: Mapped[bool]


class BookDetailsRow(Base):
    """What a catalogue shows beyond the book row, read once from the stored file."""

    __table__ = tables.book_details_table

    book_id: Mapped[int]
    description: Mapped[str | None]
    publisher: Mapped[str | None]
    published: Mapped[str | None]
    subjects: Mapped[list[str]]
    cover_href: Mapped[str | None]
    cover_type: Mapped[str | None]


class BookImageRow(Base):
    """A book's cover or thumbnail image (``kind``), made once."""

    __table__ = tables.book_image_table

    book_id: Mapped[int]
    kind: Mapped[str]
    media_type: Mapped[str]
    width: Mapped[int]
    height: Mapped[int]
    data: Mapped[bytes]
