"""postgres search: on PostgreSQL, the word, trigram and vector indexes; on SQLite nothing.

SQLite has its FTS5 tables (revisions 0002, 0004) and the FAISS file. PostgreSQL gets:

* the extensions ``vector`` (pgvector; creating it needs a superuser, or a database
  where it was created already) and ``pg_trgm``;
* ``ix_chunk_terms_tsv``: a GIN index over ``to_tsvector('simple', terms)`` of
  ``chunk_terms`` (mindory analyses the text itself, so the ``simple`` configuration:
  no stemming, no stop words) — the word index (:mod:`mindory.store.pg_search`);
* ``ix_chunks_text_trgm``: a ``pg_trgm`` GIN index over ``lower(text)`` of ``chunks``,
  which answers the case-folded ``LIKE '%term%'`` of the trigram list and of quotes;
* ``pg_chunk_vectors`` (not a model: the stored float32 blobs of ``chunk_vectors`` stay
  the truth, on both databases): one ``vector`` per ``chunk_vectors`` row, decoded from
  the blob by ``mindory_f4_vector()`` in a trigger on ``chunk_vectors`` (so imports,
  ``embed`` and ``copy`` need no PostgreSQL code) and deleted with its row (foreign
  key, cascade). Each embedding space gets a partial HNSW index (cosine) over
  ``embedding::vector(dim)`` when its ``embeddings`` row is inserted (a trigger), and
  loses it with the row: :mod:`mindory.store.pg_vectors` searches it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Little-endian float32 bytes -> vector, exactly (every float32 is a double, and the
# double goes back to the same float32). Subnormals, zeros and signs included.
F4_VECTOR = r"""
CREATE OR REPLACE FUNCTION mindory_f4_vector(b bytea) RETURNS vector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT array_agg(
    CASE WHEN e = 255 THEN 'NaN'::float8
         WHEN e = 0 THEN (1 - 2 * s) * m * 2 ^ (-149)::float8
         ELSE (1 - 2 * s) * (1 + m / 8388608.0::float8) * 2 ^ (e - 127)::float8 END
    ORDER BY i)::real[]::vector
FROM (
    SELECT i, (u >> 31) & 1 AS s, (u >> 23) & 255 AS e, u & 8388607 AS m
    FROM (
        SELECT i, get_byte(b, 4 * i)::bigint | (get_byte(b, 4 * i + 1)::bigint << 8)
               | (get_byte(b, 4 * i + 2)::bigint << 16) | (get_byte(b, 4 * i + 3)::bigint << 24)
               AS u
        FROM generate_series(0, length(b) / 4 - 1) AS i
    ) AS words
) AS parts
$$
"""

SYNC_FUNCTION = """
CREATE OR REPLACE FUNCTION mindory_sync_pg_vector() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pg_chunk_vectors (chunk_id, embedding_id, embedding)
    VALUES (NEW.chunk_id, NEW.embedding_id, mindory_f4_vector(NEW.vector))
    ON CONFLICT (chunk_id, embedding_id) DO UPDATE SET embedding = EXCLUDED.embedding;
    RETURN NULL;
END
$$
"""

INDEX_FUNCTION = """
CREATE OR REPLACE FUNCTION mindory_embedding_index() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        EXECUTE format('DROP INDEX IF EXISTS ix_pg_chunk_vectors_hnsw_%s', OLD.id);
        RETURN NULL;
    END IF;
    IF NEW.dim BETWEEN 1 AND 2000 THEN
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS ix_pg_chunk_vectors_hnsw_%s ON pg_chunk_vectors '
            'USING hnsw ((embedding::vector(%s)) vector_cosine_ops) '
            'WITH (m = 16, ef_construction = 64) WHERE embedding_id = %s',
            NEW.id, NEW.dim, NEW.id);
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
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    op.execute(
        "CREATE INDEX ix_chunk_terms_tsv ON chunk_terms "
        "USING gin (to_tsvector('simple'::regconfig, terms))"
    )
    op.execute("CREATE INDEX ix_chunks_text_trgm ON chunks USING gin (lower(text) gin_trgm_ops)")
    op.execute(
        "CREATE TABLE pg_chunk_vectors ("
        "chunk_id BIGINT NOT NULL, embedding_id BIGINT NOT NULL, embedding vector NOT NULL, "
        "CONSTRAINT pk_pg_chunk_vectors PRIMARY KEY (chunk_id, embedding_id), "
        "CONSTRAINT fk_pg_chunk_vectors_chunk_vectors FOREIGN KEY (chunk_id, embedding_id) "
        "REFERENCES chunk_vectors (chunk_id, embedding_id) ON DELETE CASCADE)"
    )
    op.execute(F4_VECTOR)
    op.execute(SYNC_FUNCTION)
    op.execute(INDEX_FUNCTION)
    op.execute(
        "CREATE TRIGGER chunk_vectors_pg_sync AFTER INSERT OR UPDATE OF vector ON chunk_vectors "
        "FOR EACH ROW EXECUTE FUNCTION mindory_sync_pg_vector()"
    )
    op.execute(
        "CREATE TRIGGER embeddings_pg_index AFTER INSERT OR DELETE ON embeddings "
        "FOR EACH ROW EXECUTE FUNCTION mindory_embedding_index()"
    )
    # What is there already: the vectors first, then one index per embedding space.
    op.execute(
        "INSERT INTO pg_chunk_vectors (chunk_id, embedding_id, embedding) "
        "SELECT chunk_id, embedding_id, mindory_f4_vector(vector) FROM chunk_vectors"
    )
    op.execute(
        "DO $$ DECLARE r record; BEGIN FOR r IN SELECT id, dim FROM embeddings "
        "WHERE dim BETWEEN 1 AND 2000 LOOP EXECUTE format("
        "'CREATE INDEX IF NOT EXISTS ix_pg_chunk_vectors_hnsw_%s ON pg_chunk_vectors "
        "USING hnsw ((embedding::vector(%s)) vector_cosine_ops) "
        "WITH (m = 16, ef_construction = 64) WHERE embedding_id = %s', r.id, r.dim, r.id); "
        "END LOOP; END $$"
    )


def downgrade() -> None:
    if not _is_postgresql():
        return
    op.execute("DROP TRIGGER IF EXISTS embeddings_pg_index ON embeddings")
    op.execute("DROP TRIGGER IF EXISTS chunk_vectors_pg_sync ON chunk_vectors")
    op.execute("DROP TABLE IF EXISTS pg_chunk_vectors")  # its HNSW indexes go with it
    op.execute("DROP FUNCTION IF EXISTS mindory_embedding_index()")
    op.execute("DROP FUNCTION IF EXISTS mindory_sync_pg_vector()")
    op.execute("DROP FUNCTION IF EXISTS mindory_f4_vector(bytea)")
    op.execute("DROP INDEX IF EXISTS ix_chunks_text_trgm")
    op.execute("DROP INDEX IF EXISTS ix_chunk_terms_tsv")
