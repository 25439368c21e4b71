"""routed halves: on PostgreSQL, an HNSW index per half of the default embedder's vectors.

The default embedder (``minilm+e5``, :mod:`mindory.search.routed`) puts MiniLM's vector in
the first 384 numbers and multilingual-e5's in the last 384, the other half zero. One
HNSW graph over such vectors falls apart into two components (no neighbour link crosses
between orthogonal halves), so a question entering on the wrong side never reaches its
own. From this revision an embedding space of that embedder gets, instead of the one
index over the whole vector, one partial HNSW index (cosine) per half, over
``subvector(embedding::vector(768), start, 384)::vector(384)`` (pgvector leaves a
zero half out of a cosine index), which :mod:`mindory.store.pg_vectors` searches with the
half the question fills. Other embedding spaces keep their index. On SQLite: nothing.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROUTED = "minilm+e5-%"  # embedder ids of mindory.search.routed (768 = 2 × 384)
HALF_INDEX = (
    "'CREATE INDEX IF NOT EXISTS ix_pg_chunk_vectors_hnsw_%s_%s ON pg_chunk_vectors "
    "USING hnsw ((subvector(embedding::vector(768), %s, 384)::vector(384)) vector_cosine_ops) "
    "WITH (m = 16, ef_construction = 64) WHERE embedding_id = %s'"
)
WHOLE_INDEX = (
    "'CREATE INDEX IF NOT EXISTS ix_pg_chunk_vectors_hnsw_%s ON pg_chunk_vectors "
    "USING hnsw ((embedding::vector(%s)) vector_cosine_ops) "
    "WITH (m = 16, ef_construction = 64) WHERE embedding_id = %s'"
)


def _index_function(halves: bool) -> str:
    routed = (
        f"""
    IF NEW.dim = 768 AND NEW.embedder_id LIKE '{ROUTED}' THEN
        EXECUTE format({HALF_INDEX}, NEW.id, 'a', 1, NEW.id);
        EXECUTE format({HALF_INDEX}, NEW.id, 'b', 385, NEW.id);
        RETURN NULL;
    END IF;"""
        if halves
        else ""
    )
    return f"""
CREATE OR REPLACE FUNCTION mindory_embedding_index() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        EXECUTE format('DROP INDEX IF EXISTS ix_pg_chunk_vectors_hnsw_%s', OLD.id);
        EXECUTE format('DROP INDEX IF EXISTS ix_pg_chunk_vectors_hnsw_%s_a', OLD.id);
        EXECUTE format('DROP INDEX IF EXISTS ix_pg_chunk_vectors_hnsw_%s_b', OLD.id);
        RETURN NULL;
    END IF;{routed}
    IF NEW.dim BETWEEN 1 AND 2000 THEN
        EXECUTE format({WHOLE_INDEX}, NEW.id, NEW.dim, NEW.id);
    END IF;
    RETURN NULL;
END
$$
"""


def _is_postgresql() -> bool:
    return op.get_context().dialect.name == "postgresql"


def upgrade() -> None:
    if not _is_postgresql():
        return
    op.execute(_index_function(halves=True))
    # The spaces there already: their halves indexed, the whole-vector index dropped.
    op.execute(
        "DO $$ DECLARE r record; BEGIN FOR r IN SELECT id FROM embeddings "
        f"WHERE dim = 768 AND embedder_id LIKE '{ROUTED}' LOOP "
        f"EXECUTE format({HALF_INDEX}, r.id, 'a', 1, r.id); "
        f"EXECUTE format({HALF_INDEX}, r.id, 'b', 385, r.id); "
        "EXECUTE format('DROP INDEX IF EXISTS ix_pg_chunk_vectors_hnsw_%s', r.id); "
        "END LOOP; END $$"
    )


def downgrade() -> None:
    if not _is_postgresql():
        return
    op.execute(_index_function(halves=False))
    op.execute(
        "DO $$ DECLARE r record; BEGIN FOR r IN SELECT id, dim FROM embeddings "
        f"WHERE dim = 768 AND embedder_id LIKE '{ROUTED}' LOOP "
        "EXECUTE format('DROP INDEX IF EXISTS ix_pg_chunk_vectors_hnsw_%s_a', r.id); "
        "EXECUTE format('DROP INDEX IF EXISTS ix_pg_chunk_vectors_hnsw_%s_b', r.id); "
        f"EXECUTE format({WHOLE_INDEX}, r.id, r.dim, r.id); "
        "END LOOP; END $$"
    )
