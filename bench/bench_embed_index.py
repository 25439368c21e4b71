"""Benchmark: hashed embedder throughput, FAISS flat / HNSW, sqlite-vec side by side.

    .venv/bin/python bench/bench_embed_index.py            # default run, ~2-3 minutes
    .venv/bin/python bench/bench_embed_index.py --quick    # smaller sizes, ~30 s
    .venv/bin/python bench/bench_embed_index.py --ef 64 128 256   # HNSW efSearch sweep
    .venv/bin/python bench/bench_embed_index.py --size 200000     # ~5 minutes

Chunks are fixed 800-character slices of the texts in ``shared/corpus`` (TXT files
decoded by the encoding in their name, EPUB text taken crudely from the XHTML); to
reach 100k vectors the slices overlap (stride = corpus length / wanted count). Two
query sets, both embedded with the same hashed embedder:

* ``doc``: 800-character slices starting half a stride after an indexed one (a passage
  whose near neighbours are in the index);
* ``span``: 60-character substrings of indexed chunks (short, search-box-like).

Everything runs on one thread (``faiss.omp_set_num_threads(1)``) except the HNSW
build, which uses FAISS's default threads like ``VectorIndex.build``. Prints Markdown.
"""

from __future__ import annotations

import argparse
import glob
import html
import os
import random
import re
import sqlite3
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mindory.search.embedders import HashedNgramEmbedder  # noqa: E402
from mindory.search.vector_index import HNSW_EF_CONSTRUCTION, HNSW_M, VectorIndex  # noqa: E402

CORPUS = Path(
    os.environ.get("MINDORY_CORPUS", Path(__file__).resolve().parents[2] / "shared" / "corpus")
)
CHUNK = 800
_ENCODINGS = {
    "ascii": "ascii",
    "utf8": "utf-8",
    "big5-cp950": "cp950",
    "gbk": "gbk",
    "big5hkscs-astral": "big5hkscs",
}


def corpus_texts(folder: Path = CORPUS) -> list[tuple[str, str]]:
    """(file name, text) of every TXT and EPUB in the corpus (duplicate texts skipped)."""
    out: list[tuple[str, str]] = []
    seen: set[int] = set()
    for p in sorted(glob.glob(str(folder / "*"))):
        name = os.path.basename(p)
        if name.endswith(".txt"):
            enc = _ENCODINGS.get(name.split("_")[3], "utf-8") if name.count("_") >= 4 else "utf-8"
            text = Path(p).read_bytes().decode(enc, errors="replace")
        elif name.endswith(".epub"):
            parts = []
            with zipfile.ZipFile(p) as z:
                for member in z.namelist():
                    if member.endswith((".xhtml", ".html", ".htm")):
                        x = z.read(member).decode("utf-8", "replace")
                        x = re.sub(r"(?s)<head.*?</head>|<[^>]+>", " ", x)
                        parts.append(re.sub(r"\s+", " ", html.unescape(x)))
            text = "\n\n".join(parts)
        else:
            continue
        key = hash(text[:5000])
        if len(text) >= CHUNK and key not in seen:
            seen.add(key)
            out.append((name, text))
    return out


def chunks_of(texts: Sequence[tuple[str, str]], stride: int, offset: int = 0) -> list[str]:
    return [t[i : i + CHUNK] for _, t in texts for i in range(offset, len(t) - CHUNK + 1, stride)]


def chunk_set(texts: Sequence[tuple[str, str]], n: int) -> tuple[list[str], int]:
    """About n overlapping 800-char chunks (and the stride used)."""
    total = sum(max(len(t) - CHUNK, 0) for _, t in texts)
    stride = max(1, min(CHUNK, total // n))
    return chunks_of(texts, stride)[:n], stride


def embed_all(emb: HashedNgramEmbedder, texts: Sequence[str], batch: int = 256) -> np.ndarray:
    out = np.empty((len(texts), emb.dim), dtype=np.float32)
    for i in range(0, len(texts), batch):
        out[i : i + batch] = emb.embed(texts[i : i + batch])
    return out


def latency(fn: Callable[[np.ndarray], object], queries: np.ndarray) -> tuple[float, float]:
    """p50, p95 in ms of fn on one query at a time."""
    for q in queries[:5]:
        fn(q[None, :])
    times = []
    for q in queries:
        t = time.perf_counter()
        fn(q[None, :])
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def recall_at(approx: np.ndarray, exact: np.ndarray) -> float:
    k = exact.shape[1]
    hits = [len(set(a[a >= 0].tolist()) & set(e[e >= 0].tolist())) for a, e in zip(approx, exact)]
    return float(np.sum(hits)) / (k * len(exact))


def bench_embedder(texts: Sequence[tuple[str, str]], rows: list[list[str]]) -> None:
    emb = HashedNgramEmbedder(384)
    for label, pick in (
        ("English", lambda n: "_en_" in n),
        ("Chinese/Japanese", lambda n: "_zh" in n or "_ja_" in n),
    ):
        chunks = chunks_of([(n, t) for n, t in texts if pick(n)], CHUNK)[:6000]
        emb.embed(chunks[:64])  # warm up (class table, power cache)
        t = time.perf_counter()
        for i in range(0, len(chunks), 32):
            emb.embed(chunks[i : i + 32])
        dt = time.perf_counter() - t
        rows.append(
            [
                f"hashed-ngram-v1-384, {label}",
                f"{len(chunks)} chunks",
                f"**{len(chunks) / dt:,.0f} chunks/s** ({len(chunks) * CHUNK / dt / 1e6:.1f} M chars/s)",
            ]
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10k/30k vectors instead of 10k/100k")
    ap.add_argument("--size", type=int, default=100_000, help="the large index size")
    ap.add_argument(
        "--ef", type=int, nargs="*", default=[128, 256, 512], help="HNSW efSearch values"
    )
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--no-sqlite-vec", action="store_true")
    args = ap.parse_args()

    faiss.omp_set_num_threads(1)
    rng = random.Random(7)
    t0 = time.perf_counter()
    texts = corpus_texts()
    rows: list[list[str]] = []
    bench_embedder(texts, rows)

    emb = HashedNgramEmbedder(384)
    big = 30_000 if args.quick else args.size
    chunks, stride = chunk_set(texts, big)
    t = time.perf_counter()
    vecs = embed_all(emb, chunks)
    embed_s = time.perf_counter() - t
    ids = np.arange(1, len(chunks) + 1, dtype=np.int64) * 7  # sparse ids, like DB row ids
    rows.append(
        [
            "hashed embed, batches of 256",
            f"{len(chunks):,} chunks (stride {stride})",
            f"{embed_s:.1f} s ({len(chunks) / embed_s:,.0f} chunks/s)",
        ]
    )

    doc_q = chunks_of(texts, stride, offset=stride // 2)
    doc_q = [doc_q[i] for i in rng.sample(range(len(doc_q)), args.queries)]
    span_q = []
    for _ in range(args.queries):
        c = chunks[rng.randrange(len(chunks))]
        s = rng.randrange(0, CHUNK - 60)
        span_q.append(c[s : s + 60])
    queries = {"doc": embed_all(emb, doc_q), "span": embed_all(emb, span_q)}
    k = 10

    exact: dict[tuple[int, str], np.ndarray] = {}
    for n in (10_000, len(chunks)):
        flat = VectorIndex(384, kind="flat", coarse_min=sys.maxsize)  # the float32 scan
        flat.build(ids[:n], vecs[:n])
        for qname, q in queries.items():
            exact[(n, qname)] = flat.search(q, k)[1]
        p50, p95 = latency(lambda x, flat=flat: flat.search(x, k), queries["doc"])
        rows.append(
            [
                f"FAISS flat IP, {n:,} × 384, k=10",
                "1 query, 1 thread",
                f"p50 {p50:.2f} ms · p95 {p95:.2f} ms",
            ]
        )
        book = ids[: min(2000, n)]
        p50, p95 = latency(
            lambda x, flat=flat, b=book: flat.search(x, k, allowed_ids=b), queries["doc"]
        )
        rows.append(
            [
                f"FAISS flat, filtered to 2,000 ids, {n:,}",
                "1 query",
                f"p50 {p50:.2f} ms · p95 {p95:.2f} ms",
            ]
        )

    n = len(chunks)
    t = time.perf_counter()
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    hnsw = VectorIndex(384, kind="hnsw")
    hnsw.build(ids, vecs)
    build_s = time.perf_counter() - t
    faiss.omp_set_num_threads(1)
    rows.append(
        [
            f"HNSW{HNSW_M} build, efConstruction {HNSW_EF_CONSTRUCTION}, {n:,}",
            f"{os.cpu_count()} threads",
            f"{build_s:.1f} s",
        ]
    )
    for ef in args.ef:
        hnsw.ef_search = ef
        r = {qn: recall_at(hnsw.search(q, k)[1], exact[(n, qn)]) for qn, q in queries.items()}
        p50, p95 = latency(lambda x: hnsw.search(x, k), queries["doc"])
        rows.append(
            [
                f"HNSW{HNSW_M} efSearch {ef}, {n:,}",
                f"R@10 doc {r['doc']:.3f} · span {r['span']:.3f}",
                f"p50 {p50:.2f} ms · p95 {p95:.2f} ms",
            ]
        )
    book = ids[:2000]
    p50, p95 = latency(lambda x: hnsw.search(x, k, allowed_ids=book), queries["doc"])
    rows.append(
        [
            f"HNSW, filtered to 2,000 ids (exact subset), {n:,}",
            "1 query",
            f"p50 {p50:.2f} ms · p95 {p95:.2f} ms",
        ]
    )
    # Deleted ids filtered at search time (before a compaction would kick in).
    hnsw.ef_search = args.ef[-1]
    hnsw.max_dead_share = 1.0
    dead = ids[rng.sample(range(n), n // 10)]
    hnsw.remove(dead)
    p50, p95 = latency(lambda x: hnsw.search(x, k), queries["doc"])
    rows.append(
        [
            f"HNSW, 10% ids deleted (IDSelectorNot), {n:,}",
            "1 query",
            f"p50 {p50:.2f} ms · p95 {p95:.2f} ms",
        ]
    )

    if not args.no_sqlite_vec:
        rows.extend(bench_sqlite_vec(ids, vecs, queries["doc"][:100], exact[(n, "doc")][:100], k))

    print(
        f"\ncorpus: {len(texts)} texts, {sum(len(t) for _, t in texts):,} characters; "
        f"numpy {np.__version__}, faiss {faiss.__version__}, {os.cpu_count()} cores; "
        f"total run {time.perf_counter() - t0:.0f} s\n"
    )
    print("| measurement | setting | result |")
    print("|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def bench_sqlite_vec(
    ids: np.ndarray, vecs: np.ndarray, queries: np.ndarray, exact: np.ndarray, k: int
) -> list[list[str]]:
    try:
        import sqlite_vec  # type: ignore[import-not-found]
    except ImportError:
        return [["sqlite-vec", "not installed", "skipped (pip install sqlite-vec)"]]
    connect = sqlite3.connect
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        # This Python's sqlite3 was built without extension loading; pysqlite3-binary
        # ships its own SQLite that has it.
        try:
            from pysqlite3 import dbapi2  # type: ignore[import-not-found]
        except ImportError:
            return [
                [
                    "sqlite-vec",
                    "python's sqlite3 can't load extensions",
                    "skipped (pip install pysqlite3-binary)",
                ]
            ]
        connect = dbapi2.connect
    db = connect(":memory:")
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    db.enable_load_extension(False)
    db.execute(
        f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{vecs.shape[1]}] distance_metric=cosine)"
    )
    t = time.perf_counter()
    db.executemany(
        "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
        ((int(i), v.tobytes()) for i, v in zip(ids, vecs)),
    )
    db.commit()
    load_s = time.perf_counter() - t

    def query(q: np.ndarray) -> list[int]:
        rows = db.execute(
            "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (q.astype(np.float32).tobytes(), k),
        ).fetchall()
        return [r[0] for r in rows]

    got = np.array([query(q) + [-1] * (k - len(query(q))) for q in queries[:50]])
    r = recall_at(got, exact[:50])
    p50, p95 = latency(lambda x: query(x[0]), queries)
    ver = db.execute("SELECT vec_version()").fetchone()[0]
    return [
        [
            f"sqlite-vec {ver} vec0 brute force, {len(ids):,} × 384",
            f"insert {load_s:.1f} s; R@10 vs flat {r:.3f}",
            f"p50 {p50:.2f} ms · p95 {p95:.2f} ms",
        ],
    ]


if __name__ == "__main__":
    main()
