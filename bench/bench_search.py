"""Benchmark: full hybrid search (lexical FTS5 + FAISS + RRF + Locators) at 10k, 100k and
1M chunks; the FAISS part against sqlite-vec brute force; index build time and memory.

    .venv/bin/python bench/bench_search.py                 # 10k and 100k libraries (~5 min)
    .venv/bin/python bench/bench_search.py --million       # + FAISS alone at 1M (~10 min more)
    .venv/bin/python bench/bench_search.py --sizes 10000   # one size
    .venv/bin/python bench/bench_search.py --db LIB        # a library as it is (its own embedder)

``--db LIB`` measures a library as it is — its current embedding (the default
``minilm+e5``: the query embedding is part of every search), nothing built or changed
but the caches beside it (FAISS file, postings) — in process (``Library.search``) and
over HTTP against a real ``mindory serve`` (uvicorn) process, one request at a time, the
questions of ``samples/queries`` (reader questions first). Per stage p50 / p90 from the
timings every search reports (``SearchResult.timings``, also in the HTTP answer): words,
trigram, query embedding, vector search, fuse, arrange, locate, total; and the wall time.
``--hits PATH`` writes each question's hit list (chunk ids in order) from the in-process
run, to check that a change leaves the ranking as it was.

Libraries are built through the real pipeline (``Library.import_book``, then
``Library.embed``): first the books of ``shared/corpus`` (EPUB and plain text, English,
Chinese, Japanese), then — to reach the larger sizes — *synthetic books*: the normalized
text of the corpus sections written out as UTF-8 text files, one copy per round, each
with its own first line and its own chunk size (700-900 characters), so no two copies
are cut into the same chunks. Queries: the 70 hand-written queries of
``samples/queries`` plus 30 span-like queries (60 characters cut from random chunks).

Every search is one query at a time on one thread (``faiss.omp_set_num_threads(1)``),
k=10, with Locators and word matches for every hit — what ``mindory search`` returns.
The machine this runs on has 2 cores and is shared: re-run before relying on a number.

1M chunks: building a 1M-chunk library through the pipeline (import, FTS indexing,
embedding, index) takes well over the 10 minutes this benchmark allows itself on 2
cores, so ``--million`` measures the FAISS part alone: 1M real 800-character corpus
windows embedded with the hashed embedder, the index the library builds at that size
(IVF), latency and recall@10 against exact search for 1/8, 1/4 (the library's) and 1/2
of the lists searched.

Prints Markdown; ``--json PATH`` writes the figures too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mindory.importers import load_book  # noqa: E402
from mindory.library import Library  # noqa: E402
from mindory.search.embedders import HashedNgramEmbedder  # noqa: E402
from mindory.search.evaluation import load_queries  # noqa: E402
from mindory.search.vector_index import VectorIndex, manifest_path  # noqa: E402
from mindory.text.records import ChunkSettings, NormalizeProfile, Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# The sizes measured here are the indexes' and the pipeline's, not a model's: the
# libraries embed with the hashed embedder (the default minilm+e5 would take hours at
# 100k chunks); MINDORY_EMBEDDER set by the caller still wins.
os.environ.setdefault("MINDORY_EMBEDDER", "hashed")
CORPUS = Path(os.environ.get("MINDORY_CORPUS", ROOT.parent / "shared" / "corpus"))
QUERY_SETS = sorted((ROOT / "samples" / "queries").glob("*.jsonl"))
EVAL_BOOKS = ("news-from-nowhere", "qiaoshi-yanyi")


def rss_mb() -> float:
    """Resident memory of this process (MB), from /proc (Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def pct(times: Sequence[float]) -> tuple[float, float]:
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def corpus_files() -> list[Path]:
    files = sorted(p for p in CORPUS.glob("*") if p.suffix in (".txt", ".epub"))
    if not files:
        raise SystemExit(f"no corpus in {CORPUS} (set MINDORY_CORPUS)")
    return files


def corpus_sections() -> list[str]:
    """Normalized texts of every corpus section (the synthetic books are made of them),
    leaving out the books of the shipped query sets, so that an eval on a large library
    is not confused by copies of its answers."""
    out: list[str] = []
    for path in corpus_files():
        if any(name in path.name for name in EVAL_BOOKS):
            continue
        book = load_book(path, NormalizeProfile())
        out.extend(s.normalized_text for s in book.sections if len(s.normalized_text) > 200)
    return out


def build_library(db: Path, target: int, work: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Import the corpus, then synthetic books, until the library holds >= target chunks."""
    facts: dict[str, Any] = {"target": target}
    t0 = time.perf_counter()
    chunks = 0
    with Library.open(db) as lib:
        for path in corpus_files():
            result = lib.import_book(path)
            chunks += result.chunks
            if chunks >= target:
                break
        facts["corpus_chunks"] = chunks
        facts["corpus_import_s"] = time.perf_counter() - t0
        sections: list[str] | None = None
        copy = 0
        while chunks < target:
            if sections is None:
                sections = corpus_sections()
            copy += 1
            size = 700 + (copy * 37) % 200
            settings = Settings(chunking=ChunkSettings(size=size, overlap=size // 8))
            path = work / f"synthetic-{copy:03d}.txt"
            # A heading before each corpus section: chapters of ordinary size.
            body = "\n\n".join(f"CHAPTER {i + 1}\n\n{text}" for i, text in enumerate(sections))
            path.write_text(
                f"Synthetic book {copy} (corpus sections, chunk size {size})\n\n{body}", "utf-8"
            )
            result = lib.import_book(path, settings, copy=False)
            chunks += result.chunks
            log(f"  synthetic book {copy}: {result.chunks} chunks, library {chunks}")
        facts["chunks"] = chunks
        facts["import_s"] = time.perf_counter() - t0
        t = time.perf_counter()
        embedded = lib.embed(update_index=False)
        facts["embed_s"] = time.perf_counter() - t
        facts["embedded"] = embedded.embedded
    facts["db_mb"] = db.stat().st_size / 1e6
    return facts


def queries_for(lib: Library, n_spans: int, rng: random.Random) -> list[str]:
    qs = [q.query for path in QUERY_SETS for q in load_queries(path)]
    want = len(qs) + n_spans
    with lib.engine.connect() as conn:
        total = conn.exec_driver_sql("SELECT max(id) FROM chunks").scalar() or 0
        while len(qs) < want and total:
            row = conn.exec_driver_sql(
                "SELECT text FROM chunks WHERE id >= ? LIMIT 1", (rng.randrange(1, total + 1),)
            ).first()
            if row and len(row[0]) > 100:
                start = rng.randrange(0, len(row[0]) - 60)
                qs.append(" ".join(row[0][start : start + 60].split()))
    return qs


def bench_searches(lib: Library, queries: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("hybrid", "lexical", "vector"):
        for q in queries[:5]:
            lib.search(q, k=10, mode=mode)  # warm: index loaded, caches filled
        times: list[float] = []
        parts: dict[str, list[float]] = {}
        hits = 0
        for q in queries:
            t = time.perf_counter()
            result = lib.search(q, k=10, mode=mode)
            times.append(1000 * (time.perf_counter() - t))
            hits += len(result.hits)
            for key, value in result.timings.items():
                parts.setdefault(key, []).append(value)
        p50, p95 = pct(times)
        out[mode] = {
            "p50_ms": p50,
            "p95_ms": p95,
            "hits_per_query": hits / len(queries),
            "parts_p50_ms": {k: float(np.median(v)) for k, v in parts.items()},
        }
    return out


def stored_vectors(db: Path) -> tuple[np.ndarray, np.ndarray]:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT chunk_id, vector FROM chunk_vectors ORDER BY chunk_id").fetchall()
    con.close()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
    return ids, np.ascontiguousarray(vecs, dtype=np.float32)


def latency(fn: Callable[[np.ndarray], object], queries: np.ndarray) -> tuple[float, float]:
    for q in queries[:3]:
        fn(q[None, :])
    times = []
    for q in queries:
        t = time.perf_counter()
        fn(q[None, :])
        times.append(1000 * (time.perf_counter() - t))
    return pct(times)


def recall_at(approx: tuple[np.ndarray, np.ndarray], exact: tuple[np.ndarray, np.ndarray]) -> float:
    """Share of the exact top k found, from ``(scores, ids)`` pairs. A found id whose
    score ties the exact k-th (within 1e-6) counts too: which of equal vectors (the
    synthetic copies of a book) fills the last places is a tie-break, not a miss."""
    (a_scores, a_ids), (e_scores, e_ids) = approx, exact
    k = e_ids.shape[1]
    got = 0
    for a_s, a_i, e_s, e_i in zip(a_scores, a_ids, e_scores, e_ids):
        kth = float(e_s[e_i >= 0][-1]) if np.any(e_i >= 0) else np.inf
        wanted = set(e_i[e_i >= 0].tolist())
        got += sum(1 for s, i in zip(a_s, a_i) if i >= 0 and (i in wanted or s >= kth - 1e-6))
    return float(got) / (k * len(e_ids))


def float32_flat(dim: int) -> VectorIndex:
    """The exact float32 scan alone (no fp16 first pass at any size): the reference."""
    return VectorIndex(dim, kind="flat", coarse_min=sys.maxsize)


def sqlite_vec_latency(ids: np.ndarray, vecs: np.ndarray, queries: np.ndarray) -> dict[str, Any]:
    try:
        import sqlite_vec  # type: ignore[import-not-found]
    except ImportError:
        return {"skipped": "pip install sqlite-vec"}
    connect: Any = sqlite3.connect
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        try:
            from pysqlite3 import dbapi2  # type: ignore[import-not-found]
        except ImportError:
            return {
                "skipped": "python's sqlite3 cannot load extensions (pip install pysqlite3-binary)"
            }
        connect = dbapi2.connect
    con = connect(":memory:")
    con.enable_load_extension(True)
    sqlite_vec.load(con)
    con.enable_load_extension(False)
    con.execute(
        f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{vecs.shape[1]}] distance_metric=cosine)"
    )
    t = time.perf_counter()
    con.executemany(
        "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
        ((int(i), v.tobytes()) for i, v in zip(ids, vecs)),
    )
    con.commit()
    load_s = time.perf_counter() - t

    def query(q: np.ndarray) -> list[int]:
        return [
            r[0]
            for r in con.execute(
                "SELECT rowid FROM v WHERE embedding MATCH ? AND k = 10 ORDER BY distance",
                (q.astype(np.float32).tobytes(),),
            )
        ]

    p50, p95 = latency(lambda x: query(x[0]), queries)
    return {"p50_ms": p50, "p95_ms": p95, "load_s": load_s}


def bench_vectors(lib: Library, db: Path, query_texts: Sequence[str]) -> dict[str, Any]:
    """Index build (from SQLite) time and memory; FAISS flat / library index / sqlite-vec."""
    out: dict[str, Any] = {}
    before = rss_mb()
    t = time.perf_counter()
    info = lib.index(rebuild=True)
    out["index_build_s"] = time.perf_counter() - t
    out["index_kind"] = info.kind
    out["index_count"] = info.count
    out["index_rss_mb"] = rss_mb() - before
    path = lib.index_path
    if path is not None and path.exists():
        out["index_file_mb"] = (path.stat().st_size + manifest_path(path).stat().st_size) / 1e6
    ids, vecs = stored_vectors(db)
    emb = lib.embedder()
    qv = emb.embed(list(query_texts))
    qv = qv[np.any(qv, axis=1)]
    flat = float32_flat(vecs.shape[1])
    flat.build(ids, vecs)
    exact = flat.search(qv, 10, threads=1)
    out["faiss_flat"] = dict(zip(("p50_ms", "p95_ms"), latency(lambda x: flat.search(x, 10), qv)))
    loaded = lib.state.vectors.loaded  # the library's own index (flat or HNSW by size)
    assert loaded is not None
    idx = loaded.index
    # The first search makes what the index keeps beside its file (a large flat index's
    # fp16 copy): counted apart from the build.
    before = rss_mb()
    idx.search(qv[:1], 10)
    out["first_search_rss_mb"] = rss_mb() - before
    out["faiss_library"] = dict(zip(("p50_ms", "p95_ms"), latency(lambda x: idx.search(x, 10), qv)))
    out["faiss_library"]["kind"] = idx.kind
    out["faiss_library"]["recall@10_vs_exact"] = recall_at(idx.search(qv, 10, threads=1), exact)
    out["sqlite_vec"] = sqlite_vec_latency(ids, vecs, qv)
    return out


def bench_million(log: Callable[[str], None], n: int = 1_000_000) -> dict[str, Any]:
    """FAISS alone at 1M: real corpus windows, hashed embeddings, the library's HNSW."""
    out: dict[str, Any] = {"vectors": n}
    texts = [t for t in corpus_sections() if len(t) >= 800]
    total = sum(len(t) - 800 for t in texts)
    stride = max(1, total // n)
    emb = HashedNgramEmbedder(384)
    vecs = np.empty((n, 384), dtype=np.float32)
    t = time.perf_counter()

    def windows() -> Iterator[str]:
        while True:  # cycle (with a shifted phase) until n windows were made
            for phase in range(0, stride, max(1, stride // 3) or 1):
                for text in texts:
                    for start in range(phase, len(text) - 800, stride):
                        yield text[start : start + 800]

    k = 0
    batch: list[str] = []
    for window in windows():
        batch.append(window)
        if len(batch) == min(1024, n - k):
            vecs[k : k + len(batch)] = emb.embed(batch)
            k += len(batch)
            batch = []
            if k >= n:
                break
    vecs = vecs[:k]
    out["vectors"] = k
    out["embed_s"] = time.perf_counter() - t
    log(f"  1M: embedded {k} windows in {out['embed_s']:.0f} s")
    ids = np.arange(1, k + 1, dtype=np.int64)
    rng = np.random.default_rng(7)
    picks = rng.choice(k, 100, replace=False)
    # Queries: 60-character pieces of indexed windows' neighbours (span-like), embedded.
    q_texts = []
    for p in picks:
        text = texts[int(p) % len(texts)]
        s = int(rng.integers(0, max(1, len(text) - 60)))
        q_texts.append(text[s : s + 60])
    qv = emb.embed(q_texts)
    faiss.omp_set_num_threads(1)
    exact_index: VectorIndex | None = float32_flat(384)
    assert exact_index is not None
    exact_index.build(ids, vecs)
    exact = exact_index.search(qv, 10, threads=1)
    flat_search = exact_index.search
    out["flat"] = dict(zip(("p50_ms", "p95_ms"), latency(lambda x: flat_search(x, 10), qv[:30])))
    exact_index = flat_search = None  # type: ignore[assignment]  # free 1.5 GB before HNSW
    before = rss_mb()
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    t = time.perf_counter()
    large = VectorIndex(384)  # the library's choice at this size (IVF above 200k)
    large.build(ids, vecs)
    out["index_kind"] = large.kind
    out["index_build_s"] = time.perf_counter() - t
    out["index_rss_mb"] = rss_mb() - before
    faiss.omp_set_num_threads(1)
    log(f"  1M: {large.kind} index built in {out['index_build_s']:.0f} s")
    for share in (0.125, 0.25, 0.5):
        large.probe_share = share
        row: dict[str, Any] = dict(
            zip(("p50_ms", "p95_ms"), latency(lambda x: large.search(x, 10), qv))
        )
        row["recall@10_vs_exact"] = recall_at(large.search(qv, 10, threads=1), exact)
        out[f"probe_{share}"] = row
    out["library"] = out["probe_0.25"]  # the library's setting
    return out


# The stages of one search as its timings name them (SearchResult.timings), in order.
STAGES = {
    "words": "words",
    "lexical": "trigram",
    "embed": "query embedding",
    "index": "index check",
    "vector": "vectors",
    "wait": "vector wait",
    "fuse": "fuse",
    "arrange": "arrange",
    "locate": "locate",
    "total": "total",
}


def library_queries(names: Sequence[str] = ()) -> list[str]:
    """The questions of samples/queries (or of the sets ``names``), reader questions
    first, each once."""
    sets = [p for p in QUERY_SETS if not names or p.stem in names]
    sets.sort(key=lambda p: (p.name != "reader-questions.jsonl", p.name))
    return list(dict.fromkeys(q.query for path in sets for q in load_queries(path)))


def stage_table(rows: Sequence[dict[str, float]], walls: Sequence[float]) -> dict[str, Any]:
    """p50 / p90 of every stage over the searches that ran it, and of the wall time."""
    out: dict[str, Any] = {}
    for key in [*STAGES, *sorted({k for r in rows for k in r} - set(STAGES))]:
        values = [r[key] for r in rows if key in r]
        if values:
            out[key] = {
                "p50_ms": float(np.percentile(values, 50)),
                "p90_ms": float(np.percentile(values, 90)),
                "n": len(values),
            }
    out["wall"] = {
        "p50_ms": float(np.percentile(walls, 50)),
        "p90_ms": float(np.percentile(walls, 90)),
        "n": len(walls),
    }
    return out


def in_process(
    db: Path, queries: Sequence[str], mode: str, rounds: int
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """``Library.search`` over the questions (after a warm-up round): stages and hits."""
    rows: list[dict[str, float]] = []
    walls: list[float] = []
    hits: dict[str, list[str]] = {}
    with Library.open(db) as lib:
        for q in queries:
            lib.search(q, k=10, mode=mode)  # warm: models, index, postings, places
        for _ in range(rounds):
            for q in queries:
                t = time.perf_counter()
                result = lib.search(q, k=10, mode=mode)
                walls.append(1000 * (time.perf_counter() - t))
                rows.append(dict(result.timings))
                hits[q] = [h.chunk for h in result.hits]
        facts = {"embedder": result.embedder_id, "queries": len(queries), "rounds": rounds}
    return {"facts": facts, **stage_table(rows, walls)}, hits


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def over_http(db: Path, queries: Sequence[str], mode: str, rounds: int) -> dict[str, Any]:
    """``GET /search`` against a ``mindory serve`` process (uvicorn), one request at a
    time on one kept-alive connection, after a warm-up round; stages from the answer's
    timings, wall time at the client."""
    import httpx

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in ("MINDORY_TOKEN", "MINDORY_EMBEDDER")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mindory.server.serve", "--db", str(db), "--port", str(port),
         "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    rows: list[dict[str, float]] = []
    walls: list[float] = []
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if client.get("/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not start")
                time.sleep(0.1)
            for q in queries:
                client.get("/search", params={"q": q, "mode": mode}).raise_for_status()
            for _ in range(rounds):
                for q in queries:
                    t = time.perf_counter()
                    r = client.get("/search", params={"q": q, "mode": mode})
                    r.raise_for_status()
                    body = r.json()
                    walls.append(1000 * (time.perf_counter() - t))
                    rows.append({k: float(v) for k, v in body["timings"].items()})
    finally:
        proc.terminate()
        proc.wait(30)
    return stage_table(rows, walls)


def bench_library(args: argparse.Namespace) -> dict[str, Any]:
    queries = library_queries(args.sets)
    if args.queries:
        queries = queries[: args.queries]
    report: dict[str, Any] = {"db": str(args.db), "mode": args.mode, "queries": len(queries)}
    if not args.http_only:
        report["in_process"], hits = in_process(args.db, queries, args.mode, args.rounds)
        if args.hits:
            args.hits.write_text(json.dumps(hits, ensure_ascii=False, indent=0), "utf-8")
    if not args.in_process_only:
        report["http"] = over_http(args.db, queries, args.mode, args.rounds)
    return report


def print_library(report: dict[str, Any]) -> None:
    parts = [p for p in ("in_process", "http") if p in report]
    facts = report.get("in_process", {}).get("facts", {})
    print(f"\n{report['db']}, {report['mode']}, {report['queries']} questions, embedder "
          f"{facts.get('embedder', '?')}, one search at a time, k=10; p50 / p90 ms\n")  # fmt: skip
    print("| stage | " + " | ".join(p.replace("_", " ") for p in parts) + " |")
    print("|---|" + "---:|" * len(parts))
    keys = [k for k in [*STAGES, "wall"] if any(k in report[p] for p in parts)]
    keys += sorted({k for p in parts for k in report[p]} - set(keys) - {"facts"})
    for key in keys:
        cells = [
            f"{report[p][key]['p50_ms']:.1f} / {report[p][key]['p90_ms']:.1f}"
            if key in report[p]
            else "—"
            for p in parts
        ]
        name = STAGES.get(key, "wall (client)" if key == "wall" else key)
        print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--million", action="store_true", help="also FAISS alone at 1M vectors")
    ap.add_argument("--spans", type=int, default=30, help="span-like queries added")
    ap.add_argument("--keep", type=Path, help="build the libraries in this folder and keep them")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    ap.add_argument("--db", type=Path, help="measure this library as it is (no build)")
    ap.add_argument("--mode", default="hybrid", help="with --db: the search mode")
    ap.add_argument("--rounds", type=int, default=1, help="with --db: passes over the questions")
    ap.add_argument("--queries", type=int, help="with --db: only the first N questions")
    ap.add_argument("--sets", nargs="*", default=[], help="with --db: these query files only")
    ap.add_argument("--hits", type=Path, help="with --db: write each question's hit list here")
    ap.add_argument("--in-process-only", action="store_true", help="with --db: no server")
    ap.add_argument("--http-only", action="store_true", help="with --db: the server only")
    args = ap.parse_args()
    if args.db is not None:
        library = bench_library(args)
        print_library(library)
        if args.json:
            args.json.write_text(json.dumps(library, indent=1), encoding="utf-8")
        return

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    faiss.omp_set_num_threads(1)
    rng = random.Random(7)
    report: dict[str, Any] = {"cores": os.cpu_count(), "faiss": faiss.__version__, "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="mindory-bench-") as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        for size in args.sizes:
            work = base / f"lib-{size}"
            work.mkdir(exist_ok=True)
            db = work / "lib.sqlite"
            log(f"building a library of >= {size} chunks in {db}")
            if db.exists():
                with Library.open(db) as lib:
                    facts: dict[str, Any] = {
                        "reused": True,
                        "chunks": lib.embed(update_index=False).total,
                    }
            else:
                facts = build_library(db, size, work, log)
            log(f"  {facts}")
            with Library.open(db) as lib:
                vectors = bench_vectors(lib, db, queries_for(lib, args.spans, rng))
                log(f"  vectors: {vectors}")
                queries = queries_for(lib, args.spans, rng)
                searches = bench_searches(lib, queries)
                log(f"  searches: {json.dumps(searches)}")
            report["sizes"][str(size)] = {"library": facts, "vectors": vectors, "search": searches}
        if args.million:
            report["million"] = bench_million(log)
            log(f"  1M: {report['million']}")
    print_markdown(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")


def print_markdown(report: dict[str, Any]) -> None:
    print(f"\n{report['cores']} cores, faiss {report['faiss']}, one query at a time, k=10\n")
    print(
        "| chunks | hybrid p50 / p95 | lexical p50 / p95 | vector p50 / p95 | hybrid parts (p50 ms) |"
    )
    print("|---:|---:|---:|---:|---|")
    for data in report["sizes"].values():
        s = data["search"]
        parts = ", ".join(f"{k} {v:.1f}" for k, v in s["hybrid"]["parts_p50_ms"].items())
        print(
            f"| {data['library']['chunks']:,} | {s['hybrid']['p50_ms']:.1f} / {s['hybrid']['p95_ms']:.1f} ms"
            f" | {s['lexical']['p50_ms']:.1f} / {s['lexical']['p95_ms']:.1f} ms"
            f" | {s['vector']['p50_ms']:.1f} / {s['vector']['p95_ms']:.1f} ms | {parts} |"
        )
    print(
        "\n| chunks | index build (from SQLite) | memory | file | FAISS flat | library index | sqlite-vec |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for data in report["sizes"].values():
        v = data["vectors"]
        lib_idx = v["faiss_library"]
        sv = v["sqlite_vec"]
        sv_text = (
            f"{sv['p50_ms']:.1f} / {sv['p95_ms']:.1f} ms"
            if "p50_ms" in sv
            else sv.get("skipped", "")
        )
        print(
            f"| {data['library']['chunks']:,} | {v['index_build_s']:.2f} s ({v['index_kind']})"
            f" | +{v['index_rss_mb']:.0f} MB (+{v.get('first_search_rss_mb', 0):.0f} on the first"
            f" search) | {v.get('index_file_mb', 0):.0f} MB"
            f" | {v['faiss_flat']['p50_ms']:.2f} / {v['faiss_flat']['p95_ms']:.2f} ms"
            f" | {lib_idx['kind']} {lib_idx['p50_ms']:.2f} / {lib_idx['p95_ms']:.2f} ms,"
            f" R@10 {lib_idx['recall@10_vs_exact']:.3f} | {sv_text} |"
        )
    if "million" in report:
        m = report["million"]
        print(
            f"\n1M (FAISS alone, {m['vectors']:,} vectors): embed {m['embed_s']:.0f} s; exact flat "
            f"{m['flat']['p50_ms']:.1f} / {m['flat']['p95_ms']:.1f} ms; {m['index_kind']} build "
            f"{m['index_build_s']:.0f} s (+{m['index_rss_mb']:.0f} MB)"
        )
        for share in (0.125, 0.25, 0.5):
            row = m[f"probe_{share}"]
            print(
                f"  lists searched {share:.3g}: {row['p50_ms']:.2f} / {row['p95_ms']:.2f} ms, "
                f"R@10 vs exact {row['recall@10_vs_exact']:.3f}"
            )


if __name__ == "__main__":
    main()
