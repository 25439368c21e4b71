"""Benchmark: pgvector HNSW in PostgreSQL against FAISS flat and FAISS HNSW, same vectors.

    .venv/bin/python bench/bench_pg_vectors.py --sizes 100000          # ~4 minutes
    .venv/bin/python bench/bench_pg_vectors.py --sizes 100000 1000000  # + ~30-40 minutes
    .venv/bin/python bench/bench_pg_vectors.py --sizes 1000000 --ef-pg 100 400 --ef-faiss 256

Vectors: N overlapping 800-character slices of ``shared/corpus`` embedded with the
hashed embedder (384 dims, float32, unit length), built by ``bench_embed_index.py``'s
functions and cached as ``$PGVEC_CACHE/vecs_<N>.npy`` (default ``/tmp/pgvec``). Queries:

* ``questions``: the hand-written reader questions in ``samples/queries/reader-questions.jsonl``;
* ``span``: 60-character substrings of indexed chunks (as in ``bench_embed_index.py``).

Besides FAISS flat and HNSW, an IVF index (``IndexIVFFlat``, about 4 √N lists trained on
a sample of 64 vectors a list, ``--nprobe`` lists searched).

Ground truth is FAISS ``IndexFlatIP`` (exact). Per method: build time, bytes (PostgreSQL:
``pg_table_size`` of the table, ``pg_relation_size`` of the index; FAISS: vectors + graph),
p50/p95 latency of one query at a time on one thread (PostgreSQL: one prepared
``ORDER BY embedding <=> $1 LIMIT 10`` round trip over the unix socket, as a server
request would do) and recall@10. pgvector's index uses the migrations' m=16,
ef_construction=64 (revision 0007), FAISS HNSW the ``VectorIndex`` M / efConstruction;
builds use 2 threads (PostgreSQL: ``max_parallel_maintenance_workers = 1``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import faiss
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_embed_index import CHUNK, chunk_set, corpus_texts, embed_all, latency, recall_at  # noqa: E402

from mindory.search.embedders import HashedNgramEmbedder  # noqa: E402
from mindory.search.vector_index import HNSW_EF_CONSTRUCTION, HNSW_M  # noqa: E402

CACHE = Path(os.environ.get("PGVEC_CACHE", "/tmp/pgvec"))
QUESTIONS = ROOT / "samples" / "queries" / "reader-questions.jsonl"
PG_M, PG_EF_CONSTRUCTION = 16, 64  # migrations/versions/0007_postgres_search.py
K = 10
Row = list[str]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load_data(n: int, n_queries: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The n chunk vectors (cached .npy) and the embedded query sets."""
    emb = HashedNgramEmbedder(384)
    vec_file, span_file = CACHE / f"vecs_{n}.npy", CACHE / f"span_{n}.json"
    if vec_file.exists() and span_file.exists():
        vecs = np.load(vec_file, mmap_mode=None)
        spans = json.loads(span_file.read_text(encoding="utf-8"))
    else:
        t = time.perf_counter()
        chunks, stride = chunk_set(corpus_texts(), n)
        vecs = embed_all(emb, chunks)
        rng = random.Random(7)
        spans = []
        for _ in range(n_queries):
            c = chunks[rng.randrange(len(chunks))]
            s = rng.randrange(0, CHUNK - 60)
            spans.append(c[s : s + 60])
        del chunks
        CACHE.mkdir(parents=True, exist_ok=True)
        np.save(vec_file, vecs)
        span_file.write_text(json.dumps(spans, ensure_ascii=False), encoding="utf-8")
        log(f"embedded {len(vecs):,} chunks (stride {stride}) in {time.perf_counter() - t:.0f} s")
    with QUESTIONS.open(encoding="utf-8") as f:
        questions = [json.loads(line)["query"] for line in f if line.strip()][:n_queries]
    queries = {"questions": emb.embed(questions), "span": emb.embed(spans[:n_queries])}
    return np.ascontiguousarray(vecs, dtype=np.float32), queries


def mb(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.0f} MB"


def measure(
    name: str,
    build: str,
    size: str,
    search: Callable[[np.ndarray], np.ndarray],
    queries: dict[str, np.ndarray],
    exact: dict[str, np.ndarray],
) -> Row:
    """One table row: latency on the question queries, recall@10 on every query set."""
    recalls = []
    for qname, q in queries.items():
        got = np.array([search(x[None, :]) for x in q])
        recalls.append(f"{recall_at(got, exact[qname]):.3f}")
    p50, p95 = latency(search, queries["questions"])
    log(f"{name}: p50 {p50:.2f} ms, R@10 {' / '.join(recalls)}")
    return [name, build, size, f"{p50:.2f}", f"{p95:.2f}", *recalls]


def bench_faiss(
    vecs: np.ndarray,
    queries: dict[str, np.ndarray],
    exact: dict[str, np.ndarray],
    flat: faiss.Index,
    flat_s: float,
    efs: list[int],
    probes: list[int],
) -> list[Row]:
    n, d = vecs.shape
    rows = [
        measure(
            "FAISS IndexFlatIP (exact)",
            f"{flat_s:.1f} s",
            mb(n * d * 4),
            lambda x: flat.search(x, K)[1][0],
            queries,
            exact,
        )
    ]
    faiss.omp_set_num_threads(2)
    t = time.perf_counter()
    hnsw = faiss.IndexHNSWFlat(d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    hnsw.add(vecs)
    build_s = time.perf_counter() - t
    faiss.omp_set_num_threads(1)
    g = hnsw.hnsw
    nbytes = n * d * 4 + g.neighbors.size() * 4 + g.levels.size() * 4 + g.offsets.size() * 8
    log(f"FAISS HNSW{HNSW_M} efConstruction {HNSW_EF_CONSTRUCTION} built in {build_s:.0f} s")
    for ef in efs:
        params = faiss.SearchParametersHNSW()
        params.efSearch = ef
        rows.append(
            measure(
                f"FAISS HNSW{HNSW_M} efC {HNSW_EF_CONSTRUCTION}, efSearch {ef}",
                f"{build_s:.1f} s (2 threads)",
                mb(nbytes),
                lambda x, p=params: hnsw.search(x, K, params=p)[1][0],
                queries,
                exact,
            )
        )
    nlist = ivf_lists(n)
    t = time.perf_counter()
    faiss.omp_set_num_threads(2)
    quantizer = faiss.IndexFlatIP(d)
    ivf = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(7)
    sample = vecs[rng.choice(n, min(n, 64 * nlist), replace=False)]
    ivf.train(sample)
    ivf.add(vecs)
    build_s = time.perf_counter() - t
    faiss.omp_set_num_threads(1)
    log(f"FAISS IVF{nlist},Flat trained on {len(sample):,} and filled in {build_s:.0f} s")
    for nprobe in probes:
        ivf.nprobe = nprobe
        rows.append(
            measure(
                f"FAISS IVF{nlist},Flat, nprobe {nprobe}",
                f"{build_s:.1f} s (2 threads)",
                mb(n * d * 4 + n * 8 + nlist * d * 4),
                lambda x: ivf.search(x, K)[1][0],
                queries,
                exact,
            )
        )
    return rows


def ivf_lists(n: int) -> int:
    """The IVF's list count: about 4 √n, a power of two (1,024 at 100k, 4,096 at 1M)."""
    return int(2 ** round(np.log2(4 * np.sqrt(n))))


def bench_pg(
    vecs: np.ndarray, queries: dict[str, np.ndarray], exact: dict[str, np.ndarray], efs: list[int]
) -> tuple[list[Row], list[str]]:
    import psycopg
    from pgvector.psycopg import register_vector

    from tests.pg import start_server

    notes: list[str] = []
    srv = start_server()
    try:
        srv.create_database("bench_vec")
        conninfo = f"dbname=bench_vec user=postgres host={srv.socket_dir}"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.add_notice_handler(lambda d: notes.append(f"NOTICE: {d.message_primary}"))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            register_vector(conn)
            ver = conn.execute(
                "SELECT version(), extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            notes.append(f"{ver[0].split(' on ')[0]}, pgvector {ver[1]}")
            conn.execute(
                "CREATE TABLE bench_vectors (id bigint PRIMARY KEY, embedding vector(384))"
            )
            t = time.perf_counter()
            with (
                conn.cursor() as cur,
                cur.copy("COPY bench_vectors (id, embedding) FROM STDIN (FORMAT BINARY)") as cp,
            ):
                cp.set_types(["int8", "vector"])
                for i, v in enumerate(vecs):
                    cp.write_row((i, v))
            conn.execute("VACUUM ANALYZE bench_vectors")
            load_s = time.perf_counter() - t
            log(f"PostgreSQL: COPY + VACUUM ANALYZE {len(vecs):,} rows in {load_s:.0f} s")
            conn.execute("SET maintenance_work_mem = '4GB'")
            conn.execute("SET max_parallel_maintenance_workers = 1")
            t = time.perf_counter()
            conn.execute(
                "CREATE INDEX bench_vectors_hnsw ON bench_vectors USING hnsw "
                f"(embedding vector_cosine_ops) WITH (m = {PG_M}, ef_construction = {PG_EF_CONSTRUCTION})"
            )
            build_s = time.perf_counter() - t
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            hwm = [
                ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if "VmHWM" in ln
            ]
            notes.append(f"index build backend peak RSS {hwm[0].split(':')[1].strip()}")
            log(
                f"PostgreSQL: HNSW m {PG_M} ef_construction {PG_EF_CONSTRUCTION} in {build_s:.0f} s"
            )
            table_b, index_b = conn.execute(
                "SELECT pg_table_size('bench_vectors'), pg_relation_size('bench_vectors_hnsw')"
            ).fetchone()
            sql = "SELECT id FROM bench_vectors ORDER BY embedding <=> %s LIMIT 10"
            plan = conn.execute("EXPLAIN " + sql, (queries["questions"][0],)).fetchall()
            notes.append("plan: " + " / ".join(r[0].strip()[:70] for r in plan))
            size = f"table {mb(table_b)} + index {mb(index_b)}"
            build = f"{build_s:.1f} s (+ load {load_s:.0f} s)"

            def search(x: np.ndarray) -> np.ndarray:
                ids = [r[0] for r in conn.execute(sql, (x[0],), prepare=True).fetchall()]
                return np.array(ids + [-1] * (K - len(ids)), dtype=np.int64)

            rows = []
            for ef in efs:
                conn.execute(f"SET hnsw.ef_search = {int(ef)}")
                name = f"pgvector HNSW m {PG_M} efC {PG_EF_CONSTRUCTION}, ef_search {ef}"
                rows.append(measure(name, build, size, search, queries, exact))
        return rows, notes
    finally:
        srv.stop()


def run(n: int, args: argparse.Namespace) -> str:
    t0 = time.perf_counter()
    vecs, queries = load_data(n, args.queries)
    faiss.omp_set_num_threads(1)
    t = time.perf_counter()
    flat = faiss.IndexFlatIP(vecs.shape[1])
    flat.add(vecs)
    flat_s = time.perf_counter() - t
    exact = {qn: flat.search(q, K)[1] for qn, q in queries.items()}
    rows: list[Row] = []
    notes: list[str] = []
    if not args.no_faiss:
        rows += bench_faiss(vecs, queries, exact, flat, flat_s, args.ef_faiss, args.nprobe)
    if not args.no_pg:
        pg_rows, notes = bench_pg(vecs, queries, exact, args.ef_pg)
        rows += pg_rows
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    qcount = ", ".join(f"{len(q)} {qn}" for qn, q in queries.items())
    out = [
        f"\n### {len(vecs):,} vectors × 384\n",
        f"queries: {qcount}; faiss {faiss.__version__}; {os.cpu_count()} cores; "
        f"run {time.perf_counter() - t0:.0f} s; python peak RSS {rss:,.0f} MB\n",
        "| method | build | size | p50 ms | p95 ms | R@10 questions | R@10 span |",
        "|---|---|---|---|---|---|---|",
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
        *(f"- {note}" for note in notes),
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--queries", type=int, default=300, help="max queries per set")
    ap.add_argument("--ef-pg", type=int, nargs="+", default=[40, 100, 200, 400])
    ap.add_argument("--ef-faiss", type=int, nargs="+", default=[64, 128, 256, 512])
    ap.add_argument("--nprobe", type=int, nargs="+", default=[32, 64, 128, 256])
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-faiss", action="store_true")
    ap.add_argument("--out", type=Path, help="append each size's Markdown to this file too")
    args = ap.parse_args()
    for n in args.sizes:
        text = run(n, args)
        print(text, flush=True)
        if args.out:
            with args.out.open("a", encoding="utf-8") as f:
                f.write(text)


if __name__ == "__main__":
    main()
