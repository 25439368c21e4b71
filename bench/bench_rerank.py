"""Benchmark: what the second stage (``rerank=true``) costs a question, with the sentence
windows stored (``mindory embed --windows``) or embedded when the question comes.

    .venv/bin/python bench/bench_rerank.py --db LIB                   # reader questions
    .venv/bin/python bench/bench_rerank.py --db LIB --queries Q.jsonl --limit 40

A library as it is (its current embedding, nothing built or changed): in process
(``Library.search``), warm (one search of each kind first), one question at a time, k=10,
the Latin-script questions of the query files (the stage re-reads only those). For each
it runs the plain hybrid search and the same search with ``rerank=True`` and takes the
stage's own time (``timings["rerank"]``) and the whole search's. A question whose windows
were all stored reads them back; one with any hit's windows missing embeds those now —
the run says how many of each. Prints Markdown; ``--json PATH`` writes the figures too.
Quality is measured by ``mindory eval Q.jsonl --mode hybrid --mode rerank``, not here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mindory.library import Library  # noqa: E402
from mindory.search.minilm import CJK_LIMIT, cjk_share  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERIES = [
    ROOT / "samples/queries/reader-questions.jsonl",
    ROOT / "samples/queries/reader-questions-2.jsonl",
]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def questions(paths: list[Path], limit: int | None) -> list[str]:
    out: list[str] = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                q = str(json.loads(line)["query"])
                if cjk_share(q) <= CJK_LIMIT and q not in out:
                    out.append(q)
    return out[:limit] if limit else out


def run(db: str, qs: list[str]) -> dict[str, Any]:
    stage: list[float] = []
    reranked: list[float] = []
    plain: list[float] = []
    made = read = 0
    with Library.open(db) as lib:
        lib.search(qs[0])
        lib.search(qs[0], rerank=True)
        for q in qs:
            plain.append(lib.search(q).timings["total"])
            result = lib.search(q, rerank=True)
            if "rerank" not in result.timings:
                continue
            stage.append(result.timings["rerank"])
            reranked.append(result.timings["total"])
            if any("embedded the sentence windows" in w for w in result.warnings):
                made += 1
            else:
                read += 1
    return {
        "db": db,
        "questions": len(stage),
        "windows_read": read,
        "windows_made_now": made,
        "stage_ms": {"p50": _pct(stage, 0.5), "p90": _pct(stage, 0.9)},
        "rerank_search_ms": {"p50": _pct(reranked, 0.5), "p90": _pct(reranked, 0.9)},
        "hybrid_search_ms": {"p50": _pct(plain, 0.5), "p90": _pct(plain, 0.9)},
        "stage_mean_ms": statistics.fmean(stage) if stage else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="a library (path or URL)")
    ap.add_argument("--queries", nargs="*", type=Path, default=QUERIES)
    ap.add_argument("--limit", type=int, default=None, help="first N Latin-script questions")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    figures = run(args.db, questions(args.queries, args.limit))
    print(f"# rerank cost — {figures['db']}\n")
    print(
        f"{figures['questions']} questions: windows read back for {figures['windows_read']}, "
        f"embedded now for {figures['windows_made_now']}\n"
    )
    print("| ms | p50 | p90 |\n|---|---:|---:|")
    for key, name in (
        ("stage_ms", "the stage"),
        ("rerank_search_ms", "search with rerank"),
        ("hybrid_search_ms", "search without"),
    ):
        print(f"| {name} | {figures[key]['p50']:.1f} | {figures[key]['p90']:.1f} |")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
