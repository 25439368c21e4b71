"""The same Alembic revisions on PostgreSQL: 0001-0010 up and down, revision 0007's
indexes and triggers (the vectors decoded exactly, one HNSW index per embedding space),
revision 0008's index per half of the default embedder's vectors, and nothing of 0007 or
0008 on SQLite."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy import inspect, text

from mindory.library import Library
from mindory.store.engine import downgrade, make_engine, upgrade
from tests.conftest import SAMPLES
from tests.pg import PgServer


def _names(conn: object, sql: str) -> set[str]:
    return {str(r[0]) for r in conn.execute(text(sql))}  # type: ignore[attr-defined]


def test_revisions_up_and_down_on_postgresql(pg_server: PgServer) -> None:
    engine = make_engine(pg_server.create_database("migrations"), 60_000)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            assert _names(conn, "SELECT extname FROM pg_extension") >= {"vector", "pg_trgm"}
            indexes = _names(conn, "SELECT indexname FROM pg_indexes")
            assert {"ix_chunk_terms_tsv", "ix_chunks_text_trgm"} <= indexes
            assert "pg_chunk_vectors" in inspect(conn).get_table_names()
            assert "chunk_windows" in inspect(conn).get_table_names()
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0010"
        downgrade(engine, "0006")
        with engine.connect() as conn:
            assert "pg_chunk_vectors" not in inspect(conn).get_table_names()
            assert "ix_chunk_terms_tsv" not in _names(conn, "SELECT indexname FROM pg_indexes")
        upgrade(engine)
        downgrade(engine, "base")
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
        upgrade(engine)
    finally:
        engine.dispose()


def test_revisions_0007_and_0008_do_nothing_on_sqlite(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'lib.sqlite'}", 5000)
    try:
        upgrade(engine, "0006")
        with engine.connect() as conn:
            before = _names(conn, "SELECT name FROM sqlite_master")
        upgrade(engine, "0008")
        with engine.connect() as conn:
            assert _names(conn, "SELECT name FROM sqlite_master") == before
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0008"
    finally:
        engine.dispose()


def test_vectors_are_decoded_exactly_and_indexed(pg_server: PgServer, pg_template: str) -> None:
    url = pg_server.create_database("vectors", template=pg_template)
    with Library.open(url) as lib:
        lib.import_book(SAMPLES / "wasteland.epub")
        lib.embed()
        with lib.engine.connect() as conn:
            emb, dim = conn.execute(text("SELECT id, dim FROM embeddings")).one()
            rows = conn.execute(
                text(
                    "SELECT c.vector, v.embedding::text FROM chunk_vectors AS c "
                    "JOIN pg_chunk_vectors AS v USING (chunk_id, embedding_id)"
                )
            ).all()
            n = conn.execute(text("SELECT count(*) FROM chunk_vectors")).scalar()
            assert len(rows) == n and n
            for blob, literal in rows:
                stored = np.frombuffer(blob, dtype="<f4")
                decoded = np.array(literal.strip("[]").split(","), dtype=np.float32)
                assert stored.shape == (dim,) and np.array_equal(stored, decoded)
            # one HNSW (cosine) index for this embedding space, used for a nearest search
            defs = _names(
                conn,
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'pg_chunk_vectors' "
                "AND indexdef LIKE '%hnsw%'",
            )
            assert len(defs) == 1
            (ddl,) = defs
            assert "vector_cosine_ops" in ddl and f"embedding_id = {emb}" in ddl
            conn.execute(text("SET LOCAL enable_seqscan = off"))
            q = "[" + ",".join(["0.1"] * dim) + "]"
            plan = "\n".join(
                str(r[0])
                for r in conn.execute(
                    text(
                        f"EXPLAIN SELECT chunk_id FROM pg_chunk_vectors WHERE embedding_id = {emb} "
                        f"ORDER BY embedding::vector({dim}) <=> '{q}'::vector({dim}) LIMIT 5"
                    )
                )
            )
            assert f"ix_pg_chunk_vectors_hnsw_{emb}" in plan, plan
        info = lib.index()  # nothing to build: the database keeps the index
        assert (info.kind, info.count, info.path) == ("pgvector-hnsw", n, None)
        # a deleted book takes its vectors along (foreign keys, cascade)
        lib.delete_book(lib.books()[0].id)
        with lib.engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM pg_chunk_vectors")).scalar() == 0


def _hnsw(conn: object, embedding_id: int) -> set[str]:
    return {
        n.removeprefix(f"ix_pg_chunk_vectors_hnsw_{embedding_id}")
        for n in _names(conn, "SELECT indexname FROM pg_indexes")
        if n.startswith(f"ix_pg_chunk_vectors_hnsw_{embedding_id}")
    }


def test_the_default_embedders_halves_get_an_index_each(pg_server: PgServer) -> None:
    engine = make_engine(pg_server.create_database("halves"), 60_000)
    insert = (
        "INSERT INTO embeddings (id, fingerprint, embedder_id, spec, dim, context_header, "
        "is_current, version, created_at) VALUES (:i, :f, :e, :s, :d, false, false, 0, now())"
    )
    try:
        upgrade(engine, "0007")
        with engine.begin() as conn:  # a routed space made before 0008: one whole index
            conn.execute(
                text(insert), dict(i=1, f="a", e="minilm+e5-x-y-z-t1-768", s="minilm+e5", d=768)
            )
            assert _hnsw(conn, 1) == {""}
        upgrade(engine)
        with engine.begin() as conn:
            assert _hnsw(conn, 1) == {"_a", "_b"}  # one per half, the whole one gone
            conn.execute(
                text(insert), dict(i=2, f="b", e="minilm+e5-x-y-z-t1-768", s="minilm+e5", d=768)
            )
            conn.execute(text(insert), dict(i=3, f="c", e="hashed-ngram-v1-384", s="hashed", d=384))
            assert _hnsw(conn, 2) == {"_a", "_b"} and _hnsw(conn, 3) == {""}
            conn.execute(text("DELETE FROM embeddings WHERE id = 2"))
            assert _hnsw(conn, 2) == set()
        downgrade(engine, "0007")
        with engine.connect() as conn:
            assert _hnsw(conn, 1) == {""} and _hnsw(conn, 3) == {""}
    finally:
        engine.dispose()
