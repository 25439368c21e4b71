"""search: embeddings and chunk vectors; on SQLite the FTS5 full-text index over chunks.

``embeddings`` holds one row per embedding space (embedder id + context-header
flag) and ``chunk_vectors`` one float32 little-endian vector per chunk and
embedding (see mindory/db.py and docs/search.md).

On SQLite only, ``chunks_fts`` is a contentless FTS5 table with the trigram
tokenizer (Chinese and Japanese need no word segmenter) and ``columnsize=0``
(no per-row length table: chunks are all about the same length, and bm25() runs
about three times faster without it), plus ``chunks_fts_vocab`` (its term list,
used to expand two-character terms). Triggers keep it in step with ``chunks``
inside the writing transaction; each chunk is indexed as ``text || char(10)``
so that every occurrence of a two-character term, even at the very end of a
chunk, starts some trigram. Other databases have no FTS table: lexical search
falls back to LIKE there.

Note for later revisions: a batch-mode change of ``chunks`` on SQLite copies and
drops the table, which drops its triggers; such a revision must recreate them
(``_create_fts_triggers``).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FTS_TRIGGERS = (
    """CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
  INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text || char(10));
END""",
    """CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
  INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text || char(10));
END""",
    """CREATE TRIGGER chunks_fts_update AFTER UPDATE OF id, text ON chunks BEGIN
  INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text || char(10));
  INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text || char(10));
END""",
)


def _is_sqlite() -> bool:
    return op.get_context().dialect.name == "sqlite"


def _has_fts5() -> bool:
    if op.get_context().as_sql:  # offline SQL rendering: assume a normal SQLite build
        return True
    options = op.get_bind().exec_driver_sql("PRAGMA compile_options").scalars().all()
    return "ENABLE_FTS5" in options


def _create_fts_triggers() -> None:
    for ddl in FTS_TRIGGERS:
        op.execute(ddl)


def upgrade() -> None:
    op.create_table(
        "embeddings",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("embedder_id", sa.Text(), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("context_header", sa.Boolean(), nullable=False),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_embeddings")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_embeddings_fingerprint")),
    )
    op.create_table(
        "chunk_vectors",
        sa.Column("chunk_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "embedding_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["chunks.id"],
            name=op.f("fk_chunk_vectors_chunk_id_chunks"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["embedding_id"],
            ["embeddings.id"],
            name=op.f("fk_chunk_vectors_embedding_id_embeddings"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("chunk_id", "embedding_id", name=op.f("pk_chunk_vectors")),
    )
    with op.batch_alter_table("chunk_vectors", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_chunk_vectors_embedding_id"), ["embedding_id"], unique=False
        )

    if _is_sqlite() and _has_fts5():
        op.execute(
            "CREATE VIRTUAL TABLE chunks_fts USING fts5("
            "text, content='', columnsize=0, tokenize='trigram')"
        )
        op.execute("CREATE VIRTUAL TABLE chunks_fts_vocab USING fts5vocab(chunks_fts, 'row')")
        _create_fts_triggers()
        op.execute("INSERT INTO chunks_fts(rowid, text) SELECT id, text || char(10) FROM chunks")


def downgrade() -> None:
    if _is_sqlite():
        for name in ("chunks_fts_insert", "chunks_fts_delete", "chunks_fts_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS chunks_fts_vocab")
        op.execute("DROP TABLE IF EXISTS chunks_fts")
    with op.batch_alter_table("chunk_vectors", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chunk_vectors_embedding_id"))

    op.drop_table("chunk_vectors")
    op.drop_table("embeddings")
