"""Benchmark: what the second stage (``rerank=true``) costs a question, with the sentence
windows stored (``mindory embed --windows``) or embedded when the question comes.

    .venv/bin/python bench/bench_rerank.py --db LIB                   # reader questions
    .venv/bin/python bench/bench_rerank.py --db LIB --script cjk --within-book
    .venv/bin/python bench/bench_rerank.py --db LIB --queries Q.jsonl --limit 40

A library as it is (its current embedding, nothing built or changed): in process
(``Library.search``), warm (one search of each kind first), one question at a time, k=10,
the questions of the query files in one script (``latin``: MiniLM re-reads the hits;
``cjk``: e5 does), over the whole library or, with ``--within-book``, within the
question's own book. For each it runs the plain hybrid search and the same search with
``rerank=True`` and takes the stage's own time (``timings["rerank"]``) and the whole
search's. A question whose hits' windows were all stored reads them back; one with any
missing embeds those now — the run says how many of each. Prints Markdown; ``--json
PATH`` writes the figures too. Quality is measured by ``mindory eval Q.jsonl --mode
hybrid --mode rerank``, not here.
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


def questions(paths: list[Path], script: str, limit: int | None) -> list[tuple[str, str | None]]:
    """``(question, its book's SHA-256)`` of the files' questions in ``script``, once each."""
    out: list[tuple[str, str | None]] = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            q = str(row["query"])
            latin = cjk_share(q) <= CJK_LIMIT
            if (script == "latin") == latin and all(q != seen for seen, _ in out):
                out.append((q, row.get("book_sha256")))
    return out[:limit] if limit else out


def run(db: str, qs: list[tuple[str, str | None]], within_book: bool) -> dict[str, Any]:
    stage: list[float] = []
    reranked: list[float] = []
    plain: list[float] = []
    made = read = 0
    with Library.open(db) as lib:
        first, first_book = qs[0]
        lib.search(first, book=first_book if within_book else None)
        lib.search(first, book=first_book if within_book else None, rerank=True)
        for q, sha in qs:
            book = sha if within_book else None
            plain.append(lib.search(q, book=book).timings["total"])
            result = lib.search(q, book=book, rerank=True)
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
        "within_book": within_book,
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
    ap.add_argument("--script", choices=("latin", "cjk"), default="latin")
    ap.add_argument("--within-book", action="store_true", help="search each question's book")
    ap.add_argument("--limit", type=int, default=None, help="the first N questions")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    figures = run(args.db, questions(args.queries, args.script, args.limit), args.within_book)
    figures["script"] = args.script
    where = "within the book" if args.within_book else "whole library"
    print(f"# rerank cost — {figures['db']}, {args.script} questions, {where}\n")
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
