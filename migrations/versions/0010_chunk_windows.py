"""chunk windows: each chunk's sentence windows, embedded once for the second stage.

The rerank mode (``rerank=true``, :mod:`mindory.search.rerank`) re-reads the first hits
one sentence window at a time. Embedding those windows at question time costs ~0.9 s on
two cores; ``mindory embed --windows`` embeds them once and keeps them here, so the
stage reads them back in milliseconds. One row per chunk and window rule
(``windows_key``: the model's id and the window width): ``count`` × ``dim`` float16 unit
vectors, little-endian. Deleted with its chunk.

Portable operations only.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "chunk_windows",
        sa.Column("chunk_id", ROW_ID, nullable=False),
        sa.Column("windows_key", sa.Text(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vectors", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["chunks.id"],
            name=op.f("fk_chunk_windows_chunk_id_chunks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("chunk_id", "windows_key", name=op.f("pk_chunk_windows")),
    )


def downgrade() -> None:
    op.drop_table("chunk_windows")
