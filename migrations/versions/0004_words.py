"""words: the word index (analysed terms per chunk) and the library's key/value facts.

``chunk_terms`` holds each chunk's analysed terms (:mod:`mindory.search.words`), space
separated; it goes with its chunk (foreign key, cascade). On SQLite an FTS5 table
``chunk_terms_fts`` (``unicode61`` over the terms, external content) indexes it for BM25,
kept equal by triggers. ``library_facts`` holds what the library knows about itself,
among it ``word_analysis``: the analysis fingerprint its word index was built with.

Chunks imported before this revision have no terms yet: ``mindory index`` adds them
(search says so meanwhile).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TERMS_TRIGGERS = (
    """CREATE TRIGGER chunk_terms_fts_insert AFTER INSERT ON chunk_terms BEGIN
  INSERT INTO chunk_terms_fts(rowid, terms) VALUES (new.chunk_id, new.terms);
END""",
    """CREATE TRIGGER chunk_terms_fts_delete AFTER DELETE ON chunk_terms BEGIN
  INSERT INTO chunk_terms_fts(chunk_terms_fts, rowid, terms) VALUES ('delete', old.chunk_id, old.terms);
END""",
    """CREATE TRIGGER chunk_terms_fts_update AFTER UPDATE ON chunk_terms BEGIN
  INSERT INTO chunk_terms_fts(chunk_terms_fts, rowid, terms) VALUES ('delete', old.chunk_id, old.terms);
  INSERT INTO chunk_terms_fts(rowid, terms) VALUES (new.chunk_id, new.terms);
END""",
)


def _is_sqlite() -> bool:
    return op.get_context().dialect.name == "sqlite"


def _has_fts5() -> bool:
    if op.get_context().as_sql:
        return True
    options = op.get_bind().exec_driver_sql("PRAGMA compile_options").scalars().all()
    return "ENABLE_FTS5" in options


def upgrade() -> None:
    op.create_table(
        "chunk_terms",
        sa.Column("chunk_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("terms", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["chunks.id"],
            name=op.f("fk_chunk_terms_chunk_id_chunks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("chunk_id", name=op.f("pk_chunk_terms")),
    )
    op.create_table(
        "library_facts",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_library_facts")),
    )
    if _is_sqlite() and _has_fts5():
        op.execute(
            "CREATE VIRTUAL TABLE chunk_terms_fts USING fts5(terms, content='chunk_terms', "
            "content_rowid='chunk_id', tokenize='unicode61 remove_diacritics 0')"
        )
        for ddl in TERMS_TRIGGERS:
            op.execute(ddl)


def downgrade() -> None:
    if _is_sqlite():
        for name in ("chunk_terms_fts_insert", "chunk_terms_fts_delete", "chunk_terms_fts_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS chunk_terms_fts")
    op.drop_table("library_facts")
    op.drop_table("chunk_terms")
