"""EPUB import (parse, normalize, chunk; no database) vs the naive extraction.

Run: ``.venv/bin/python bench/bench_epub.py``. The naive extraction is what a user would
write: ``ebooklib.epub.read_epub`` + ``BeautifulSoup(item.get_content(), "lxml").get_text()``
per spine item — it keeps no positions at all. mindory keeps exact positions, blocks,
an offset map and CFI tables. Medians of several runs, alternating; peak RSS of a fresh
child process for each side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
BOOKS = ["epub3_en_moby-dick.epub", "epub3_en_pepys-diary-large-endnotes.epub"]
CFI_STRINGS = False


def naive(path: Path) -> int:
    import ebooklib
    from bs4 import BeautifulSoup
    from ebooklib import epub

    warnings.filterwarnings("ignore")
    book = epub.read_epub(str(path), {"ignore_ncx": True})
    total = 0
    for idref, _linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        total += len(BeautifulSoup(item.get_content(), "lxml").get_text())
    return total


def mindory_import(path: Path) -> int:
    from mindory.importers import load_book
    from mindory.text.chunking import chunk_book
    from mindory.text.records import Settings

    settings = Settings()
    book = load_book(path, settings.profile)
    # The CFI table of every section: what the library stores so that any
    # position gets its CFI later without re-parsing (per-chunk CFI strings are
    # made on demand, at search time; `--cfi-strings` times them too).
    for section in book.sections:
        if section.dom is not None:
            section.dom.cfi  # noqa: B018 - built lazily on first access
    chunks = chunk_book(book, settings)
    if CFI_STRINGS:
        for c in chunks:
            book.sections[c.section].dom.cfi.range(c.source_start, c.source_end)
    return len(chunks)


def child(kind: str, path: str) -> None:
    import resource

    import bs4  # noqa: F401

    # Module imports are a constant start-up cost, not import throughput: load first.
    import ebooklib.epub  # noqa: F401

    import mindory.importers.epub  # noqa: F401
    import mindory.text.chunking  # noqa: F401

    t0 = time.perf_counter()
    (naive if kind == "naive" else mindory_import)(Path(path))
    seconds = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "peak_mb": peak_kb / 1024}))


def run(kind: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(path)]
        + (["--cfi-strings"] if CFI_STRINGS else []),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=2)
    parser.add_argument("--cfi-strings", action="store_true", help="also make every chunk's CFI")
    args = parser.parse_args()
    global CFI_STRINGS
    CFI_STRINGS = args.cfi_strings
    if args.child:
        child(*args.child)
        return
    print(
        "| book | naive s | mindory s | ratio (mindory/naive) | naive peak MB | mindory peak MB |"
    )
    print("|---|---|---|---|---|---|")
    for name in BOOKS:
        path = CORPUS / name
        res: dict[str, list[dict[str, float]]] = {"naive": [], "mindory": []}
        for _ in range(args.runs):
            for kind in ("naive", "mindory"):
                res[kind].append(run(kind, path))
        n = statistics.median(r["seconds"] for r in res["naive"])
        m = statistics.median(r["seconds"] for r in res["mindory"])
        npk = max(r["peak_mb"] for r in res["naive"])
        mpk = max(r["peak_mb"] for r in res["mindory"])
        print(f"| {name} | {n:.3f} | {m:.3f} | {m / n:.2f} | {npk:.0f} | {mpk:.0f} |")


if __name__ == "__main__":
    main()
