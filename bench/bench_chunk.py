"""Normalize + chunk with exact source spans, side by side with LangChain and a plain loop.

Run: ``.venv/bin/python bench/bench_chunk.py`` (needs ``pip install -e '.[bench]'``).
Texts: News from Nowhere repeated to ≥ 6 MB (English, CRLF, hard-wrapped) and
三国演义 (1.8 MB UTF-8, Chinese). Reports the median of several runs in MB/s of UTF-8
input, the ratio to LangChain's RecursiveCharacterTextSplitter (800/100,
add_start_index=True), peak traced memory, and the stored offset-map size. Each
chunker runs once untimed first (imports; numba loads its compiled loops once
per process).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mindory.text import kernels
from mindory.text.chunking import make_chunks, window_span_array
from mindory.text.normalize import normalize
from mindory.text.records import Section

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"


def texts() -> dict[str, str]:
    en = (CORPUS / "txt_en_news-from-nowhere_ascii_crlf.txt").read_text(encoding="ascii")
    en = (en * 14)[:6_300_000]
    zh = (CORPUS / "txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt").read_bytes().decode("utf-8")
    return {"English 6.3 MB": en, "Chinese 1.8 MB": zh}


def mindory_chunks(text: str) -> Any:
    """Normalized text + offset map + blocks, window spans, and the chunk table:
    normalized, source and UTF-16 spans and the text of every chunk."""
    nt = normalize(text)
    section = Section(0, "", text, nt.text, nt.offset_map, nt.blocks)
    spans = window_span_array(nt.text, 800, 100, 50)
    return make_chunks(section, spans, book_sha256="0" * 64, fingerprint="bench")


def mindory_chunks_with_ids(text: str) -> Any:
    """Also every chunk's id (sha256 of book, section, settings and span)."""
    chunks = mindory_chunks(text)
    chunks.ids  # noqa: B018 - computed on first read
    return chunks


def langchain_chunks(text: str) -> list[Any]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=800, chunk_overlap=100, add_start_index=True
    )
    return splitter.create_documents([text])


def plain_loop(text: str) -> list[tuple[int, int, str]]:
    step = 700
    return [(i, i + 800, text[i : i + 800]) for i in range(0, len(text), step)]


def timed(fn: Callable[[str], Any], text: str, runs: int) -> tuple[float, int]:
    times = []
    out: Any = fn(text)  # warm-up: imports, numba's cached machine code
    for _ in range(runs):
        gc.collect()
        t0 = time.perf_counter()
        out = fn(text)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(out)


def peak_mb(fn: Callable[[str], Any], text: str) -> float:
    gc.collect()
    tracemalloc.start()
    fn(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1e6


def compiled_loops() -> str:
    """Load the compiled loops first: this measures a long-running process (a library
    import or the server loads them after its first LOAD_AFTER characters); with
    MINDORY_NO_JIT=1 it measures the references, as a one-off job runs."""
    if kernels.AVAILABLE:
        kernels.jit()
        return "compiled loops: loaded (a long-running process)\n"
    return "compiled loops: off (MINDORY_NO_JIT=1 or no numba): the references run\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(compiled_loops())
    rows = []
    for label, text in texts().items():
        mb = len(text.encode("utf-8")) / 1e6
        results = {}
        for name, fn in (
            ("mindory", mindory_chunks),
            ("mindory + ids", mindory_chunks_with_ids),
            ("langchain", langchain_chunks),
            ("plain loop", plain_loop),
        ):
            seconds, count = timed(fn, text, args.runs)
            results[name] = (seconds, count, peak_mb(fn, text))
        nt = normalize(text)
        map_bytes = len(nt.offset_map.to_bytes())
        lc = results["langchain"][0]
        for name, (seconds, count, peak) in results.items():
            rows.append(
                f"| {label} | {name} | {count} | {seconds * 1000:.0f} | {mb / seconds:.1f} "
                f"| {lc / seconds:.2f} | {peak:.0f} |"
            )
        rows.append(
            f"| {label} | offset map | {nt.offset_map.edit_count} edits | | "
            f"{map_bytes:,} bytes stored | {map_bytes / len(text):.4f} bytes/char | |"
        )
    print("| text | chunker | chunks | ms (median) | MB/s | × LangChain | peak MB |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
