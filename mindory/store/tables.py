"""The library's schema as SQLAlchemy Core tables: every table, column, key and index.

The schema changes only through Alembic revisions in ``migrations/``; a test proves
these tables and the revisions agree (``tests/store/test_db.py``). The ORM classes of
:mod:`mindory.store.models` map onto these tables, so there is one description of the
schema. It is written in Core, not in the ORM's declarative form, so that a reader of
a few rows (``mindory books``) needs only SQLAlchemy Core: importing the ORM costs
more than the whole command otherwise does (docs/benchmarks.md, "Start-up and doors").

Types are portable (``Text``, ``BigInteger``, ``LargeBinary``, ``JSON``, ``Boolean``,
``DateTime``) so PostgreSQL works with the same tables. Every ``source_*`` column is in
book source coordinates (file-global code points for plain text, section-local for
EPUB), as in :mod:`mindory.text.records`; ``utf16_*`` the same places in UTF-16 units,
``byte_*`` in the plain-text file's bytes; ``start``/``end`` of blocks and chunks are
code points of the section's normalized text. :mod:`mindory.store.models` says what
each table holds.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from mindory.reading.positions import LOCAL_READER

__all__ = [
    "FTS_TABLE",
    "METADATA",
    "NAMING_CONVENTION",
    "NOT_MODELS",
    "PG_VECTORS_TABLE",
    "TERMS_FTS_TABLE",
    "block_table",
    "book_details_table",
    "book_file_table",
    "book_image_table",
    "book_table",
    "bookmark_table",
    "chunk_table",
    "chunk_terms_table",
    "chunk_vector_table",
    "chunk_window_table",
    "derivation_table",
    "document_key_table",
    "embedding_table",
    "highlight_table",
    "is_model_name",
    "job_table",
    "library_fact_table",
    "normalization_table",
    "position_table",
    "reader_table",
    "section_table",
    "section_text_table",
    "toc_entry_table",
]

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
METADATA = MetaData(naming_convention=NAMING_CONVENTION)

# The SQLite full-text index over chunk text (revision 0002; not a table here).
FTS_TABLE = "chunks_fts"
TERMS_FTS_TABLE = "chunk_terms_fts"  # the word index over chunk_terms (revision 0004)
# Tables that exist in the database but not here: the FTS5 virtual tables, their shadow
# tables (chunks_fts_data, _idx, _docsize, _config) and the vocabulary view; on
# PostgreSQL the pgvector copies of chunk_vectors (0007). Alembic's autogenerate
# comparison skips names starting with these.
PG_VECTORS_TABLE = "pg_chunk_vectors"
NOT_MODELS: tuple[str, ...] = (FTS_TABLE, TERMS_FTS_TABLE, PG_VECTORS_TABLE)


def is_model_name(name: str | None) -> bool:
    """False for the FTS tables (``include_name`` filter of the schema comparison)."""
    return name is None or not name.startswith(NOT_MODELS)


# A 64-bit integer key that is also SQLite's rowid (so it autoincrements there).
RowId = BigInteger().with_variant(Integer(), "sqlite")
INT = BigInteger  # a Python int column (the ORM's default for ``Mapped[int]``)
TIME = DateTime(timezone=True)


def _id() -> Column[Any]:
    return Column("id", RowId, primary_key=True, autoincrement=True)


def _book_id(primary_key: bool = False) -> Column[Any]:
    return Column(
        "book_id",
        RowId,
        ForeignKey("books.id", ondelete="CASCADE"),
        primary_key=primary_key,
        nullable=False,
    )


def _ref(name: str, target: str, **kw: Any) -> Column[Any]:
    """A row-id column referring to ``target`` (``table.id``), deleted with it."""
    kw.setdefault("nullable", False)
    return Column(name, RowId, ForeignKey(target, ondelete="CASCADE"), **kw)


def _required(name: str, type_: Any) -> Column[Any]:
    return Column(name, type_, nullable=False)


def _optional(name: str, type_: Any) -> Column[Any]:
    return Column(name, type_, nullable=True)


def _flag(name: str, default: bool) -> Column[Any]:
    return Column(name, Boolean, nullable=False, default=default)


book_table = Table(
    "books",
    METADATA,
    _id(),
    Column("sha256", String(64), nullable=False, unique=True),
    _required("title", Text),
    _required("format", String(16)),  # "txt" | "epub"
    _required("file_name", Text),
    _required("file_size", INT),
    _optional("encoding", String(64)),
    _flag("lossy", False),
    Column("bad_bytes", INT, nullable=False, default=0),
    _optional("first_bad_byte", INT),
    _required("creators", JSON),
    _optional("language", String(64)),
    _required("identifiers", JSON),
    _required("warnings", JSON),
    _required("section_count", Integer),
    _required("toc_count", Integer),  # all TOC entries, nested ones included
    _required("imported_at", TIME),
)

# The catalogue's two orders (OPDS feeds page through them: mindory/store/catalogue.py).
Index(None, book_table.c.title, book_table.c.sha256)
Index(None, book_table.c.imported_at, book_table.c.id)

book_file_table = Table(
    "book_files",
    METADATA,
    _book_id(primary_key=True),
    _optional("data", LargeBinary),
    _optional("path", Text),
    _required("size", INT),
    CheckConstraint("data IS NOT NULL OR path IS NOT NULL", name="data_or_path"),
)

section_table = Table(
    "sections",
    METADATA,
    _id(),
    _book_id(),
    _required("ordinal", Integer),  # spine position / chapter number
    _required("title", Text),
    _optional("href", Text),
    _required("media_type", String(128)),
    _required("parser", String(16)),
    _flag("linear", True),
    _required("source_start", INT),  # book source coordinates (0 for EPUB)
    _required("utf16_start", INT),  # the same place in UTF-16 units
    _required("source_length", INT),
    _required("source_text", Text),
    _optional("cfi_table", Text),  # EPUB: CfiDocument.to_json(include_text=False)
    UniqueConstraint("book_id", "ordinal"),
)

toc_entry_table = Table(
    "toc_entries",
    METADATA,
    _id(),
    _book_id(),
    _ref("parent_id", "toc_entries.id", nullable=True, index=True),
    _required("position", Integer),
    _required("depth", Integer),
    _required("title", Text),
    _required("href", Text),
    _optional("section_ordinal", Integer),
    _optional("source_offset", INT),  # book source coordinates
    UniqueConstraint("book_id", "position"),
)

normalization_table = Table(
    "normalizations",
    METADATA,
    _id(),
    _book_id(),
    _required("profile", JSON),
    _required("profile_fingerprint", String(64)),
    UniqueConstraint("book_id", "profile_fingerprint"),
)

section_text_table = Table(
    "section_texts",
    METADATA,
    _id(),
    _ref("normalization_id", "normalizations.id"),
    _ref("section_id", "sections.id", index=True),
    _required("normalized_text", Text),
    _required("offset_map", LargeBinary),  # OffsetMap.to_bytes()
    _required("edit_count", Integer),
    _required("block_count", Integer),
    UniqueConstraint("normalization_id", "section_id"),
)

block_table = Table(
    "blocks",
    METADATA,
    _id(),
    _ref("section_text_id", "section_texts.id"),
    _required("index", Integer),
    _required("kind", String(16)),
    _optional("level", Integer),
    _required("start", INT),
    _required("end", INT),
    _required("source_start", INT),
    _required("source_end", INT),
    UniqueConstraint("section_text_id", "index"),
)

derivation_table = Table(
    "derivations",
    METADATA,
    _id(),
    _book_id(),
    _ref("normalization_id", "normalizations.id", index=True),
    _required("settings", JSON),
    _required("fingerprint", String(64)),
    _flag("is_current", False),
    _required("chunk_count", Integer),
    _required("created_at", TIME),
    UniqueConstraint("book_id", "fingerprint"),
)

chunk_table = Table(
    "chunks",
    METADATA,
    _id(),
    _required("chunk_id", String(64)),
    _ref("derivation_id", "derivations.id"),
    _ref("section_id", "sections.id", index=True),
    _required("index", Integer),
    _required("start", INT),
    _required("end", INT),
    _required("source_start", INT),
    _required("source_end", INT),
    _required("utf16_start", INT),
    _required("utf16_end", INT),
    _optional("byte_start", INT),  # plain text only
    _optional("byte_end", INT),
    # The normalized span of the text the chunk is read in (parent-child chunking).
    _optional("context_start", INT),
    _optional("context_end", INT),
    _required("text", Text),
    UniqueConstraint("derivation_id", "chunk_id"),
    Index(None, "derivation_id", "section_id", "index", unique=True),
)

embedding_table = Table(
    "embeddings",
    METADATA,
    _id(),
    Column("fingerprint", String(64), nullable=False, unique=True),
    _required("embedder_id", Text),
    _required("spec", Text),
    _required("dim", Integer),
    _flag("context_header", False),
    _flag("is_current", False),
    Column("version", INT, nullable=False, default=0),
    _required("created_at", TIME),
)

chunk_vector_table = Table(
    "chunk_vectors",
    METADATA,
    _ref("chunk_id", "chunks.id", primary_key=True),
    _ref("embedding_id", "embeddings.id", primary_key=True, index=True),
    _required("vector", LargeBinary),  # dim float32, little-endian
    # SHA-256 (hex) of the exact string the embedder read (revision 0009): a vector is a
    # function of the embedder and that string, so another copy of a text reuses it
    Column("text_sha256", String(64), nullable=True, index=True),
)

chunk_window_table = Table(
    "chunk_windows",
    METADATA,
    _ref("chunk_id", "chunks.id", primary_key=True),
    # the model and window rule that made them (rerank.windows_key): another rule or
    # model is another row, never a mixed one
    Column("windows_key", Text, primary_key=True),
    _required("count", Integer),
    _required("dim", Integer),
    # count × dim float16, little-endian, each row a unit vector (revision 0010); the
    # windows the model reads as nothing (another script) are left out
    _required("vectors", LargeBinary),
)

highlight_table = Table(
    "highlights",
    METADATA,
    _id(),
    Column("uid", String(32), nullable=False, unique=True),
    Column("reader_id", String(32), nullable=False, server_default=LOCAL_READER),
    _required("book_sha256", String(64)),
    _required("edition_sha256", String(64)),
    _required("status", String(16)),  # "anchored" | "orphaned"
    _required("section", Integer),  # ordinal in the edition
    _optional("href", Text),  # EPUB content document (None: plain text)
    _required("target", Text),  # the annotation's target.source: href, or the file name
    _required("source_start", INT),  # book source coordinates of the edition
    _required("source_end", INT),
    _required("utf16_start", INT),
    _required("utf16_end", INT),
    _required("exact", Text),
    _required("prefix", Text),  # 32 code points before (clipped at the section)
    _required("suffix", Text),  # 32 code points after
    _optional("cfi", Text),  # EPUB: the specification's range CFI
    _optional("note", Text),
    _required("color", String(32)),
    _optional("reanchored", JSON),  # the last re-anchoring
    _required("created_at", TIME),
    _required("updated_at", TIME),
    Index(None, "book_sha256", "section"),
    Index(None, "reader_id", "book_sha256"),
)

chunk_terms_table = Table(
    "chunk_terms",
    METADATA,
    _ref("chunk_id", "chunks.id", primary_key=True),
    _required("terms", Text),
)

library_fact_table = Table(
    "library_facts",
    METADATA,
    Column("key", String(64), primary_key=True),
    _required("value", Text),
)

reader_table = Table(
    "readers",
    METADATA,
    Column("id", String(32), primary_key=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    _required("created_at", TIME),
    # scrypt of the MD5 hex KOReader sends (revision 0009); NULL: tokens only
    _optional("password_hash", Text),
)


def _place_columns() -> list[Column[Any]]:
    """A place a reader keeps (position, bookmark): like a highlight, source coordinates
    of ``edition_sha256`` plus a quote. ``point`` is the place itself (book source
    coordinates); ``source_start``/``source_end`` the quoted text next to it (what
    re-anchoring looks for); ``locator`` the full resolved Locator's JSON."""
    return [
        _required("reader_id", String(32)),
        _required("book_sha256", String(64)),
        _required("edition_sha256", String(64)),
        _required("status", String(16)),  # "anchored" | "orphaned"
        _required("section", Integer),
        _optional("href", Text),
        _required("point", INT),
        _required("source_start", INT),
        _required("source_end", INT),
        _required("exact", Text),
        _required("prefix", Text),
        _required("suffix", Text),
        _required("locator", JSON),
        _optional("reanchored", JSON),
    ]


position_table = Table(
    "positions",
    METADATA,
    *_place_columns(),
    _id(),
    Column("uid", String(32), nullable=False, unique=True),
    _required("device", String(128)),
    _required("modified", TIME),
    _required("received_at", TIME),
    _optional("client", JSON),  # what the app sent beside the place (KOReader: progress, …)
    Index(None, "reader_id", "book_sha256", "modified"),
)

bookmark_table = Table(
    "bookmarks",
    METADATA,
    *_place_columns(),
    _id(),
    Column("uid", String(32), nullable=False, unique=True),
    _optional("title", Text),
    _required("created_at", TIME),
    Index(None, "reader_id", "book_sha256"),
)

job_table = Table(
    "jobs",
    METADATA,
    Column("id", String(32), primary_key=True),
    _required("kind", String(16)),  # "upload" | "folder"
    _required("state", String(16)),  # queued | running | succeeded | failed
    _required("file_name", Text),
    _required("request", JSON),
    _optional("phase", String(32)),
    _required("done", INT),
    _required("total", INT),
    _required("progress", Float),
    _optional("result", JSON),
    _optional("error", JSON),
    _required("attempts", Integer),
    _required("max_attempts", Integer),
    _optional("lease_owner", String(128)),
    _optional("lease_expires_at", TIME),
    _required("version", INT),
    _required("created_at", TIME),
    _required("updated_at", TIME),
    _optional("started_at", TIME),
    _optional("finished_at", TIME),
    Index(None, "state", "created_at"),
)

# ------------------------------------------------------------------ reading apps (0009)

document_key_table = Table(
    "document_keys",
    METADATA,
    _id(),
    _required("book_sha256", String(64)),  # like positions: the book by SHA-256, no key
    _required("method", String(16)),  # "binary" (partial MD5) | "filename"
    Column("key", String(64), nullable=False, index=True),
    _flag("alias", False),  # a key of an older edition this book replaced
    UniqueConstraint("book_sha256", "method", "key"),
)

book_details_table = Table(
    "book_details",
    METADATA,
    _book_id(primary_key=True),
    _optional("description", Text),
    _optional("publisher", Text),
    _optional("published", String(64)),
    _required("subjects", JSON),
    _optional("cover_href", Text),  # the cover image's ZIP member (EPUB)
    _optional("cover_type", String(64)),
)

book_image_table = Table(
    "book_images",
    METADATA,
    _book_id(primary_key=True),
    Column("kind", String(16), primary_key=True),  # "cover" | "thumbnail"
    _required("media_type", String(64)),
    _required("width", Integer),
    _required("height", Integer),
    _required("data", LargeBinary),
)
