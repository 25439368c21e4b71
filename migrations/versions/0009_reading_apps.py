"""reading apps: reader passwords, KOReader document keys, catalogue details, covers.

What OPDS catalogues, Readium manifests and KOReader's progress sync need (docs/apps.md):

* ``readers.password_hash``: a reader's password for HTTP Basic (e-ink apps can send
  nothing else) and KOReader's sync key, kept as a salted scrypt hash of the MD5 hex
  digest KOReader sends (``x-auth-key``), so one stored hash checks both; never the
  password itself. NULL: the reader has no password (tokens only).
* ``document_keys``: KOReader's document keys of a book (``method`` ``binary``: its
  partial MD5 of the file; ``filename``: the MD5 of the file name), named by the book's
  SHA-256 like highlights and positions (no foreign key). ``alias`` rows are the keys of
  an older edition a new one replaced (``import --replaces``).
* ``book_details``: what a catalogue shows beyond the book row (description, publisher,
  date, subjects, the cover's ZIP member), read once from the stored file.
* ``book_images``: the cover and its thumbnail, made once (``kind`` cover | thumbnail).
* ``positions.client``: what the app sent beside the place (KOReader: its ``progress``
  xpointer, ``percentage`` and ``device_id``), kept but never trusted over the place.
* two indexes on ``books`` for the catalogue's orders (by title; newest first).
* ``chunk_vectors.text_sha256``: the SHA-256 of the exact string the embedder read, so a
  text already embedded (the same novel in two encodings) reuses its vector through an
  index (vectors stored before this revision have none and are not reused).

Portable operations only; the added column goes through a batch operation for SQLite.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # the catalogue's two orders: by title, newest first (OPDS pages)
    op.create_index(op.f("ix_books_title_sha256"), "books", ["title", "sha256"], unique=False)
    op.create_index(op.f("ix_books_imported_at_id"), "books", ["imported_at", "id"], unique=False)
    with op.batch_alter_table("readers") as batch:
        batch.add_column(sa.Column("password_hash", sa.Text(), nullable=True))
    with op.batch_alter_table("positions") as batch:
        batch.add_column(sa.Column("client", sa.JSON(), nullable=True))
    with op.batch_alter_table("chunk_vectors") as batch:
        batch.add_column(sa.Column("text_sha256", sa.String(length=64), nullable=True))
    op.create_index(
        op.f("ix_chunk_vectors_text_sha256"), "chunk_vectors", ["text_sha256"], unique=False
    )
    op.create_table(
        "document_keys",
        sa.Column("id", ROW_ID, autoincrement=True, nullable=False),
        sa.Column("book_sha256", sa.String(length=64), nullable=False),
        sa.Column("method", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("alias", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_document_keys")),
        sa.UniqueConstraint(
            "book_sha256", "method", "key", name=op.f("uq_document_keys_book_sha256_method_key")
        ),
    )
    op.create_index(op.f("ix_document_keys_key"), "document_keys", ["key"], unique=False)
    op.create_table(
        "book_details",
        sa.Column("book_id", ROW_ID, nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("publisher", sa.Text(), nullable=True),
        sa.Column("published", sa.String(length=64), nullable=True),
        sa.Column("subjects", sa.JSON(), nullable=False),
        sa.Column("cover_href", sa.Text(), nullable=True),
        sa.Column("cover_type", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["book_id"],
            ["books.id"],
            name=op.f("fk_book_details_book_id_books"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("book_id", name=op.f("pk_book_details")),
    )
    op.create_table(
        "book_images",
        sa.Column("book_id", ROW_ID, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("media_type", sa.String(length=64), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["book_id"],
            ["books.id"],
            name=op.f("fk_book_images_book_id_books"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("book_id", "kind", name=op.f("pk_book_images")),
    )


def downgrade() -> None:
    op.drop_table("book_images")
    op.drop_table("book_details")
    op.drop_index(op.f("ix_document_keys_key"), table_name="document_keys")
    op.drop_table("document_keys")
    op.drop_index(op.f("ix_chunk_vectors_text_sha256"), table_name="chunk_vectors")
    with op.batch_alter_table("chunk_vectors") as batch:
        batch.drop_column("text_sha256")
    with op.batch_alter_table("positions") as batch:
        batch.drop_column("client")
    with op.batch_alter_table("readers") as batch:
        batch.drop_column("password_hash")
    op.drop_index(op.f("ix_books_imported_at_id"), table_name="books")
    op.drop_index(op.f("ix_books_title_sha256"), table_name="books")
