"""readers: several readers share one library; positions and bookmarks.

``readers`` holds each reader's name and the SHA-256 of their token (the token itself is
never stored); a reader's id is derived from the name. The implicit local reader (the
reader of a library without readers, and of the server's own token) is ``local`` and has
no row. ``highlights`` gains ``reader_id``: every existing highlight was the local
reader's. ``positions`` (one row per accepted write; the newest client ``modified`` wins)
and ``bookmarks`` keep a place like highlights do: source coordinates of an edition, the
text quoted at the place, the resolved Locator as JSON. Like highlights they name their
book by SHA-256 (no foreign key), so a new edition takes them over with one update.

Written with portable operations only (PostgreSQL runs it as it is); the one column
dropped on downgrade goes through a batch operation for SQLite.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _row_id() -> sa.Column[int]:
    return sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        autoincrement=True,
        nullable=False,
    )


def _place_columns() -> list[sa.Column[object]]:
    return [
        sa.Column("uid", sa.String(length=32), nullable=False),
        sa.Column("reader_id", sa.String(length=32), nullable=False),
        sa.Column("book_sha256", sa.String(length=64), nullable=False),
        sa.Column("edition_sha256", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("section", sa.Integer(), nullable=False),
        sa.Column("href", sa.Text(), nullable=True),
        sa.Column("point", sa.BigInteger(), nullable=False),
        sa.Column("source_start", sa.BigInteger(), nullable=False),
        sa.Column("source_end", sa.BigInteger(), nullable=False),
        sa.Column("exact", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("suffix", sa.Text(), nullable=False),
        sa.Column("locator", sa.JSON(), nullable=False),
        sa.Column("reanchored", sa.JSON(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "readers",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_readers")),
        sa.UniqueConstraint("name", name=op.f("uq_readers_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_readers_token_hash")),
    )
    op.add_column(
        "highlights",
        sa.Column("reader_id", sa.String(length=32), server_default="local", nullable=False),
    )
    op.create_index(
        op.f("ix_highlights_reader_id_book_sha256"),
        "highlights",
        ["reader_id", "book_sha256"],
        unique=False,
    )
    op.create_table(
        "positions",
        _row_id(),
        *_place_columns(),
        sa.Column("device", sa.String(length=128), nullable=False),
        sa.Column("modified", sa.DateTime(timezone=True), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_positions")),
        sa.UniqueConstraint("uid", name=op.f("uq_positions_uid")),
    )
    op.create_index(
        op.f("ix_positions_reader_id_book_sha256_modified"),
        "positions",
        ["reader_id", "book_sha256", "modified"],
        unique=False,
    )
    op.create_table(
        "bookmarks",
        _row_id(),
        *_place_columns(),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bookmarks")),
        sa.UniqueConstraint("uid", name=op.f("uq_bookmarks_uid")),
    )
    op.create_index(
        op.f("ix_bookmarks_reader_id_book_sha256"),
        "bookmarks",
        ["reader_id", "book_sha256"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_bookmarks_reader_id_book_sha256"), table_name="bookmarks")
    op.drop_table("bookmarks")
    op.drop_index(op.f("ix_positions_reader_id_book_sha256_modified"), table_name="positions")
    op.drop_table("positions")
    op.drop_index(op.f("ix_highlights_reader_id_book_sha256"), table_name="highlights")
    with op.batch_alter_table("highlights", schema=None) as batch_op:
        batch_op.drop_column("reader_id")
    op.drop_table("readers")
