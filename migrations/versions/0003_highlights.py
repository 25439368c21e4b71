"""highlights: a reader's marks, in source coordinates plus a W3C text quote.

One table, ``highlights`` (see mindory/db.py, docs/api.md): each row is keyed to
its book by the book's SHA-256 (``book_sha256``), not by a row id or a foreign
key, so re-importing the same file (other chunk settings, or after deleting the
book) finds them again, and moving them to a new edition is one update.
``edition_sha256`` names the book the stored coordinates refer to (the book
itself, or for an orphaned highlight the edition it was last placed in).

``chunks`` is not touched (a batch change of it would drop the FTS triggers of
revision 0002).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "highlights",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("uid", sa.String(length=32), nullable=False),
        sa.Column("book_sha256", sa.String(length=64), nullable=False),
        sa.Column("edition_sha256", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("section", sa.Integer(), nullable=False),
        sa.Column("href", sa.Text(), nullable=True),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("source_start", sa.BigInteger(), nullable=False),
        sa.Column("source_end", sa.BigInteger(), nullable=False),
        sa.Column("utf16_start", sa.BigInteger(), nullable=False),
        sa.Column("utf16_end", sa.BigInteger(), nullable=False),
        sa.Column("exact", sa.Text(), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("suffix", sa.Text(), nullable=False),
        sa.Column("cfi", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("color", sa.String(length=32), nullable=False),
        sa.Column("reanchored", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_highlights")),
        sa.UniqueConstraint("uid", name=op.f("uq_highlights_uid")),
    )
    with op.batch_alter_table("highlights", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_highlights_book_sha256_section"),
            ["book_sha256", "section"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("highlights", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_highlights_book_sha256_section"))

    op.drop_table("highlights")
