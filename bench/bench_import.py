"""Import benchmark: the whole corpus into a fresh library, then again (unchanged).

Reports wall time per book and in total, the split into read / parse /
normalize / chunk / write, the database size against the input size (and per
table when SQLite has the ``dbstat`` table), and the time of a second import of
the same files with the same settings (target: under 5% of the first).

    .venv/bin/python bench/bench_import.py [CORPUS_DIR] [--no-copy] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mindory.library import ImportFailure, ImportResult, Library, book_files_in

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
PHASES = ("read", "parse", "normalize", "chunk", "write")


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f}"


def _db_size(db: Path) -> tuple[int, dict[str, int]]:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try:
            rows = conn.execute(
                "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
        except sqlite3.OperationalError:  # SQLite built without dbstat
            rows = []
    finally:
        conn.close()
    size = db.stat().st_size + sum(
        p.stat().st_size for p in db.parent.glob(db.name + "-*") if p.is_file()
    )
    return size, {str(name): int(n) for name, n in rows}


def run(corpus: Path, copy: bool) -> dict[str, Any]:
    files = book_files_in([corpus])
    input_bytes = sum(f.stat().st_size for f in files)
    with tempfile.TemporaryDirectory(prefix="mindory-bench-") as tmp:
        db = Path(tmp) / "library.sqlite"
        with Library.open(db) as lib:
            lib.import_book(ROOT / "samples" / "wasteland.epub")  # warm imports and caches
            lib.delete_book("waste")
            rows: list[dict[str, Any]] = []
            t0 = time.perf_counter()
            for f in files:
                t = time.perf_counter()
                result = lib.import_book(f, copy=copy)
                wall = time.perf_counter() - t
                rows.append(
                    {
                        "file": f.name,
                        "bytes": f.stat().st_size,
                        "status": result.status,
                        "sections": result.sections,
                        "chunks": result.chunks,
                        "wall": wall,
                        **{p: result.timings.get(p, 0.0) for p in PHASES},
                    }
                )
            first_total = time.perf_counter() - t0

            seconds: list[float] = []
            statuses: set[str] = set()
            for _ in range(3):
                t0 = time.perf_counter()
                again: list[ImportResult | ImportFailure] = list(lib.import_many(files, copy=copy))
                seconds.append(time.perf_counter() - t0)
                statuses |= {r.status for r in again}
            second_total = seconds[0]

            t0 = time.perf_counter()
            report = lib.verify()
            verify_seconds = time.perf_counter() - t0
        db_bytes, tables = _db_size(db)
    return {
        "copy": copy,
        "files": len(files),
        "input_bytes": input_bytes,
        "books": rows,
        "first_seconds": first_total,
        "second_seconds": second_total,
        "second_statuses": sorted(statuses),
        "second_share": second_total / first_total,
        "repeat_seconds": sorted(seconds)[1],
        "db_bytes": db_bytes,
        "tables": tables,
        "verify_seconds": verify_seconds,
        "verify_ok": report.ok,
        "chunks": report.chunks,
    }


def show(res: dict[str, Any]) -> None:
    print(f"## import of {res['files']} files ({_mb(res['input_bytes'])} MB), copy={res['copy']}")
    print()
    print("| file | MB | sections | chunks | wall s | read | parse | normalize | chunk | write |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in res["books"]:
        print(
            f"| {r['file']} | {_mb(r['bytes'])} | {r['sections']} | {r['chunks']} | "
            f"{r['wall']:.2f} | " + " | ".join(f"{r[p]:.3f}" for p in PHASES) + " |"
        )
    sums = {p: sum(r[p] for r in res["books"]) for p in PHASES}
    total = sum(sums.values())
    print(
        f"| **total** | {_mb(res['input_bytes'])} | | {sum(r['chunks'] for r in res['books'])} | "
        f"{res['first_seconds']:.2f} | "
        + " | ".join(f"{sums[p]:.2f} ({100 * sums[p] / total:.0f}%)" for p in PHASES)
        + " |"
    )
    print()
    print(
        f"- first import: {res['first_seconds']:.2f} s "
        f"({res['input_bytes'] / 1e6 / res['first_seconds']:.1f} MB/s of files)"
    )
    print(
        f"- second import, same files and settings ({', '.join(res['second_statuses'])}): "
        f"{1000 * res['second_seconds']:.0f} ms = {100 * res['second_share']:.2f}% of the first "
        f"(median of 3 repeats: {1000 * res['repeat_seconds']:.0f} ms = "
        f"{100 * res['repeat_seconds'] / res['first_seconds']:.2f}%)"
    )
    print(
        f"- database: {_mb(res['db_bytes'])} MB for {_mb(res['input_bytes'])} MB of files "
        f"({res['db_bytes'] / res['input_bytes']:.2f}×)"
    )
    if res["tables"]:
        top = ", ".join(f"{name} {_mb(n)}" for name, n in list(res["tables"].items())[:8])
        print(f"- largest tables/indexes (MB): {top}")
    print(
        f"- verify: {res['chunks']} chunks in {res['verify_seconds']:.2f} s, "
        f"{'ok' if res['verify_ok'] else 'PROBLEMS'}"
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=CORPUS)
    parser.add_argument("--no-copy", action="store_true", help="also measure copy=False")
    parser.add_argument("--json", type=Path, help="write the numbers to this file")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"bench_import: no corpus folder at {args.corpus}")
    results = [run(args.corpus, copy=True)]
    if args.no_copy:
        results.append(run(args.corpus, copy=False))
    for res in results:
        show(res)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
