"""Benchmark: the default embedder (``minilm+e5``) on real corpus books, per script, beside
the model's own ceiling on this machine.

    .venv/bin/python bench/bench_embed.py                   # 200 chunks a script, ~3 min
    .venv/bin/python bench/bench_embed.py --limit 60        # quick
    .venv/bin/python bench/bench_embed.py --scripts han --runs 3 --json out.json
    .venv/bin/python bench/bench_embed.py --book han=txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt

Per script (Latin → MiniLM, Han and kana → multilingual-e5), for one corpus book:

1. ``mindory import --no-embed`` into a temporary library (subprocess), then the chunks
   after the first ``--limit`` are deleted from it (cascades and FTS triggers keep it
   whole), so every run embeds the same N chunks;
2. **cli**: ``mindory embed --embedder minilm+e5 --json`` on a copy (subprocess): wall
   time from start to exit, CPU seconds of the child (``getrusage(RUSAGE_CHILDREN)``);
3. **in process**: ``Library.embed`` on another copy, batches of ``--batch``: the start
   (embedder loaded, nothing embedded), the first batch, the steady rate (median of the
   later batches' chunks/s);
4. **ceiling**: the texts those chunks give the embedder, tokenized beforehand (tokenizer
   ms per chunk reported), fed to the same ONNX session as the embedder builds —
   ``session.run`` alone, on the same full windows (e5: ≤510 tokens, each alone; MiniLM:
   the same length-sorted runs of 16). Timed one run after another on one core, two
   one-thread runs side by side (e5's way), and one after another on two intra-op threads
   (MiniLM's way); the ceiling is the fastest.

The machine's load average is printed beside the numbers: on a busy machine compare
runs taken in the same conditions. Prints Markdown; ``--json OUT`` writes every number.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mindory.library import Library  # noqa: E402
from mindory.search.e5 import E5Embedder, _int8_encoder, _source, dequantize  # noqa: E402
from mindory.search.embedders import embed_text_for_chunk, get_embedder  # noqa: E402
from mindory.search.minilm import (  # noqa: E402
    BATCH,
    CJK_LIMIT,
    MiniLMEmbedder,
    _folded_model,
    cjk_share,
)
from mindory.search.onnx_cache import cpu_session  # noqa: E402
from mindory.search.routed import ScriptRoutedEmbedder  # noqa: E402

CORPUS = Path(os.environ.get("MINDORY_CORPUS", ROOT.parent / "shared" / "corpus"))
BOOKS = {
    "latin": "epub2_en_romeo-and-juliet-feedbooks.epub",
    "han": "txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt",
    "kana": "epub3_ja_kusamakura-vertical-ruby.epub",
}
SPEC = "minilm+e5"
MINDORY = [str(Path(sys.executable).with_name("mindory"))]


def _run(cmd: Sequence[str], env: dict[str, str]) -> tuple[str, float, float]:
    """(stdout, wall seconds, CPU seconds of the child) of a command that must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(list(cmd), capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return done.stdout, wall, cpu


def make_library(book: Path, folder: Path, limit: int, env: dict[str, str]) -> Path:
    """A library holding ``book`` cut to its first ``limit`` chunks."""
    db = folder / "lib.sqlite"
    _run([*MINDORY, "--db", str(db), "import", "--no-embed", "--json", str(book)], env)
    con = sqlite3.connect(db)
    con.execute("PRAGMA foreign_keys = ON")  # the chunk's vectors and terms go with it
    with con:
        ids = [r[0] for r in con.execute("SELECT id FROM chunks ORDER BY id")]
        if len(ids) > limit:
            con.execute("DELETE FROM chunks WHERE id > ?", (ids[limit - 1],))
    con.close()
    return db


def embedder_texts(db: Path, emb: ScriptRoutedEmbedder) -> list[str]:
    """The texts the default embedder reads for the library's chunks, in chunk order."""
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT c.text, s.title FROM chunks c JOIN sections s ON s.id = c.section_id ORDER BY c.id"
    ).fetchall()
    con.close()
    return [
        embed_text_for_chunk(text, section_title=sec, context_header=False, embedder=emb)
        for text, sec in rows
    ]


def cli_embed(db: Path, env: dict[str, str]) -> dict[str, Any]:
    out, wall, cpu = _run([*MINDORY, "--db", str(db), "embed", "--embedder", SPEC, "--json"], env)
    result = json.loads(out)
    n = int(result["embedded"])
    return {
        "chunks": n,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "chunks_per_s": round(n / wall, 2),
        "cores_busy": round(cpu / wall, 2),
    }


def in_process_embed(db: Path, batch: int) -> dict[str, Any]:
    """Library.embed with a clock on every batch: start, first batch, steady rate."""
    marks: list[tuple[float, int]] = []

    def progress(_phase: str, done: int, _total: int) -> None:
        marks.append((time.perf_counter(), done))

    usage = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    with Library.open(str(db)) as lib:
        lib.embed(SPEC, batch_size=batch, progress=progress)
    end = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime
    steps = [(t, d) for t, d in marks if d > 0]
    start = marks[0][0] - t0  # embedder loaded, nothing embedded yet
    first_t, first_n = steps[0]
    rates = [
        (d1 - d0) / (t1 - t0_)
        for (t0_, d0), (t1, d1) in zip(steps, steps[1:])
        if d1 > d0 and t1 > t0_
    ]
    n = steps[-1][1]
    return {
        "chunks": n,
        "wall_s": round(end - t0, 3),
        "cpu_s": round(cpu, 3),
        "start_s": round(start, 3),
        "first_batch_chunks": first_n,
        "first_batch_s": round(first_t - marks[0][0], 3),
        "first_batch_chunks_per_s": round(first_n / (first_t - marks[0][0]), 2),
        "steady_chunks_per_s": round(statistics.median(rates), 2) if rates else None,
        "chunks_per_s": round(n / (end - t0), 2),
    }


def _timed(jobs: list[Callable[[], Any]], threads: int) -> float:
    """Wall seconds to run every job, on ``threads`` threads pulling from one queue."""
    queue = list(reversed(jobs))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                job = queue.pop()
            job()

    t = time.perf_counter()
    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - t


def e5_ceiling(e5: E5Embedder, texts: list[str]) -> dict[str, Any]:
    """e5's windows, tokenized and embedded beforehand: session.run alone."""
    tokenizer = e5._tokenizer
    f = e5._file
    t = time.perf_counter()
    ids = [tokenizer.ids("passage: " + text) for text in texts]
    tokenize_ms = (time.perf_counter() - t) / len(texts) * 1000
    width = f.max_positions - 2
    windows = [i[a : a + width] for i in ids for a in range(0, len(i), width)]
    feeds = []
    for w in windows:
        tokens = [f.bos, *w, f.eos]
        rows = dequantize(e5._words[tokens].tobytes(), len(tokens) * f.hidden)
        x = rows.reshape(len(tokens), f.hidden) + e5._positions[: len(tokens)] + e5._type
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        x = (x - mean) / np.sqrt(var + f.eps) * e5._ln[0] + e5._ln[1]
        feeds.append({"x": x[None].astype(np.float32)})
    return _ceiling(_e5_model(e5), feeds, len(texts), tokenize_ms) | {
        "windows": len(windows),
        "tokens_per_chunk": round(sum(len(i) + 2 for i in ids) / len(texts), 1),
        "window_tokens": sorted(len(w) + 2 for w in windows)[:: max(1, len(windows) // 12)],
    }


def minilm_ceiling(m: MiniLMEmbedder, texts: list[str]) -> dict[str, Any]:
    """MiniLM's length-sorted runs of 16, tokenized beforehand: session.run alone."""
    t = time.perf_counter()
    encodings = m._tokenizer.encode_batch(texts)
    tokenize_ms = (time.perf_counter() - t) / len(texts) * 1000
    order = sorted(range(len(texts)), key=lambda j: (-len(encodings[j].ids), j))
    feeds = []
    for lo in range(0, len(order), BATCH):
        part = order[lo : lo + BATCH]
        width = max(len(encodings[j].ids) for j in part)
        ids = np.zeros((len(part), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, j in enumerate(part):
            ids[row, : len(encodings[j].ids)] = encodings[j].ids
            mask[row, : len(encodings[j].ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in m._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        feeds.append(feed)
    return _ceiling(_folded_model()[0], feeds, len(texts), tokenize_ms)


def _e5_model(e5: E5Embedder) -> bytes:
    import hashlib

    return _int8_encoder(e5._file, hashlib.sha256(_source().read_bytes()).hexdigest())


def _ceiling(
    model: bytes, feeds: list[dict[str, np.ndarray]], n: int, tokenize_ms: float
) -> dict[str, Any]:
    """session.run alone on ``feeds``: one after another on a one-thread session, two side
    by side on it, and one after another on a session with two intra-op threads."""
    one, pooled = cpu_session(model, 1), cpu_session(model, 2)
    for session in (one, pooled):
        for feed in feeds[:2]:
            session.run(None, feed)  # warm: the first runs allocate
    serial = _timed([lambda feed=feed: one.run(None, feed) for feed in feeds], 1)
    side = _timed([lambda feed=feed: one.run(None, feed) for feed in feeds], 2)
    intra = _timed([lambda feed=feed: pooled.run(None, feed) for feed in feeds], 1)
    best = min(serial, side, intra)
    return {
        "chunks": n,
        "tokenize_ms_per_chunk": round(tokenize_ms, 2),
        "run_one_core_s": round(serial, 3),
        "run_2_side_by_side_s": round(side, 3),
        "run_intra_op_2_s": round(intra, 3),
        "ceiling_chunks_per_s": round(n / best, 2),
        "one_core_chunks_per_s": round(n / serial, 2),
    }


def bench_script(
    script: str, book: Path, args: argparse.Namespace, env: dict[str, str], emb: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"script": script, "book": book.name, "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench-embed-") as tmp:
        db = make_library(book, Path(tmp), args.limit, env)
        texts = embedder_texts(db, emb)
        cjk = [t for t in texts if cjk_share(t) > CJK_LIMIT]
        latin = [t for t in texts if cjk_share(t) <= CJK_LIMIT]
        out["chunks"] = len(texts)
        out["routed"] = {"minilm": len(latin), "e5": len(cjk)}
        for r in range(args.runs):
            run: dict[str, Any] = {"loadavg_before": os.getloadavg()[0]}
            copy = Path(tmp) / f"cli{r}.sqlite"
            shutil.copy(db, copy)
            run["cli"] = cli_embed(copy, env)
            if not args.skip_in_process:
                copy = Path(tmp) / f"lib{r}.sqlite"
                shutil.copy(db, copy)
                run["in_process"] = in_process_embed(copy, args.batch)
            if not args.skip_ceiling:
                ceiling: dict[str, Any] = {}
                if cjk:
                    ceiling["e5"] = e5_ceiling(emb._cjk, cjk)
                if latin:
                    ceiling["minilm"] = minilm_ceiling(emb._latin, latin)
                total = sum(c["chunks"] / c["ceiling_chunks_per_s"] for c in ceiling.values())
                ceiling["chunks_per_s"] = round(len(texts) / total, 2) if total else None
                run["ceiling"] = ceiling
            run["loadavg_after"] = os.getloadavg()[0]
            out["runs"].append(run)
    cli_rates = [r["cli"]["chunks_per_s"] for r in out["runs"]]
    out["cli_chunks_per_s_median"] = statistics.median(cli_rates)
    ceilings = [r["ceiling"]["chunks_per_s"] for r in out["runs"] if "ceiling" in r]
    if ceilings:
        out["ceiling_chunks_per_s_median"] = statistics.median(ceilings)
        out["ceiling_over_cli"] = round(
            out["ceiling_chunks_per_s_median"] / out["cli_chunks_per_s_median"], 2
        )
    return out


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| script | book | chunks | cli chunks/s | cli CPU s | start s | first batch "
        "chunks/s | steady chunks/s | ceiling chunks/s | one core | tokenizer ms/chunk | "
        "ceiling ÷ cli | load |",
        "|" + "---|" * 13,
    ]
    for res in results:
        for run in res["runs"]:
            ip = run.get("in_process", {})
            ceil = run.get("ceiling", {})
            model = ceil.get("e5") or ceil.get("minilm") or {}
            lines.append(
                f"| {res['script']} | {res['book'][:28]} | {res['chunks']} "
                f"| {run['cli']['chunks_per_s']} | {run['cli']['cpu_s']} "
                f"| {ip.get('start_s', '–')} | {ip.get('first_batch_chunks_per_s', '–')} "
                f"| {ip.get('steady_chunks_per_s', '–')} | {ceil.get('chunks_per_s', '–')} "
                f"| {model.get('one_core_chunks_per_s', '–')} "
                f"| {model.get('tokenize_ms_per_chunk', '–')} "
                f"| {res.get('ceiling_over_cli', '–')} "
                f"| {run['loadavg_before']:.1f}→{run['loadavg_after']:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--limit", type=int, default=200, help="chunks per script (default 200)")
    ap.add_argument("--scripts", nargs="+", choices=sorted(BOOKS), default=list(BOOKS))
    ap.add_argument(
        "--book", action="append", default=[], metavar="SCRIPT=FILE", help="another corpus book"
    )
    ap.add_argument("--runs", type=int, default=1, help="runs per script (medians reported)")
    ap.add_argument("--batch", type=int, default=32, help="in-process batch size (default 32)")
    ap.add_argument("--skip-ceiling", action="store_true")
    ap.add_argument("--skip-in-process", action="store_true")
    ap.add_argument("--json", dest="json_out", metavar="OUT", help="write every number here")
    args = ap.parse_args()
    books = dict(BOOKS)
    for item in args.book:
        script, _, name = item.partition("=")
        books[script] = name
        if script not in args.scripts:
            args.scripts.append(script)
    with tempfile.TemporaryDirectory(prefix="bench-embed-home-") as home:
        env = dict(os.environ, MINDORY_DB=str(Path(home) / "unused.sqlite"))
        emb = get_embedder(SPEC)
        assert isinstance(emb, ScriptRoutedEmbedder)
        results = [bench_script(s, CORPUS / books[s], args, env, emb) for s in args.scripts]
    print(f"cores: {os.cpu_count()}, embedder {emb.id}")
    print(markdown(results))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
