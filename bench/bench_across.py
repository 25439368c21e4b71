"""Benchmark: what a question across languages costs — a Chinese or Japanese question about
a Latin-script book, met by e5's stored reading of its chunks (``mindory embed
--cross-language``; :mod:`mindory.search.across`).

    .venv/bin/python bench/bench_across.py --db LIB
    .venv/bin/python bench/bench_across.py --db LIB --rounds 3 --json out.json

A library as it is: in process (``Library.search``), warm (one search first), k=10,
within each question's book, the Chinese and Japanese lines of
``samples/queries/cross-language.jsonl`` about Latin-script books, each asked ``--rounds``
times. Prints, per book and overall, p50 / p90 of the whole search and of its parts:
reading the book's stored rows (``timings["index"]``), embedding the question
(``embed``) and the product (``vector``). Quality is ``mindory eval
samples/queries/cross-language.jsonl --within-book``, not here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mindory.library import Library  # noqa: E402
from mindory.search.minilm import CJK_LIMIT, cjk_share  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "samples/queries/cross-language.jsonl"
PARTS = ("index", "embed", "vector", "total")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def questions(path: Path) -> list[dict[str, Any]]:
    """The CJK questions about books whose answer is in a Latin script."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if cjk_share(row["query"]) > CJK_LIMIT and cjk_share(row["answer"]) <= CJK_LIMIT:
                out.append(row)
    return out


def run(db: str, rows: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    per_book: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    warnings: set[str] = set()
    with Library.open(db) as lib:
        lib.search(rows[0]["query"], book=rows[0]["book_sha256"])
        for _ in range(rounds):
            for row in rows:
                result = lib.search(row["query"], book=row["book_sha256"])
                warnings.update(result.warnings)
                for part in PARTS:
                    per_book[row["book"]][part].append(result.timings.get(part, 0.0))
    everything: dict[str, list[float]] = defaultdict(list)
    figures: dict[str, Any] = {"db": db, "questions": len(rows), "rounds": rounds, "books": {}}
    for book, parts in sorted(per_book.items()):
        figures["books"][book] = {
            p: {"p50": _pct(v, 0.5), "p90": _pct(v, 0.9)} for p, v in parts.items()
        }
        for p, v in parts.items():
            everything[p] += v
    figures["all"] = {p: {"p50": _pct(v, 0.5), "p90": _pct(v, 0.9)} for p, v in everything.items()}
    figures["warnings"] = sorted(warnings)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="a library (path or URL)")
    ap.add_argument("--queries", type=Path, default=QUERIES)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    figures = run(args.db, questions(args.queries), args.rounds)
    print(f"# a question across languages — {figures['db']}\n")
    print(f"{figures['questions']} questions × {figures['rounds']} rounds, within the book\n")
    print("| book | " + " | ".join(f"{p} p50 / p90 ms" for p in PARTS) + " |")
    print("|---|" + "---:|" * len(PARTS))
    for book, parts in [*figures["books"].items(), ("all", figures["all"])]:
        cells = " | ".join(f"{parts[p]['p50']:.1f} / {parts[p]['p90']:.1f}" for p in PARTS)
        print(f"| {book} | {cells} |")
    for warning in figures["warnings"]:
        print(f"\nwarning: {warning}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
