"""Every mindory strategy side by side with the peers that offer the same idea.

Run: ``.venv/bin/python bench/bench_strategies.py [--runs 5]`` (needs
``pip install -e '.[bench]'``: langchain-text-splitters, chonkie, semchunk; no model
downloads — every peer counts characters).

Texts: News from Nowhere repeated to 6.3 MB (English, CRLF, hard-wrapped) and 三国演义
(1.8 MB, Chinese), as bench_chunk.py builds them, plus a play: the Romeo and Juliet
EPUB's text (speaker names as their own paragraphs) repeated to ~5 MB, where the
``dialogue`` strategy finds turns (on prose it falls back to ``paragraph``).

Throughput is the median CPU time of ``--runs`` interleaved runs, in MB/s of UTF-8 input:

* ``mindory e2e``: raw text → normalize → spans → Chunk records with source and UTF-16
  spans and ids (what ``mindory chunk`` does; the peers get the same raw text);
* ``mindory spans``: spans on the already-normalized text (the strategy's own work).

Peers (character counts, sizes as mindory's): LangChain's RecursiveCharacterTextSplitter
(``add_start_index=True``); LangChain's parent/child pair (a 1,600 splitter, then a 400
splitter over each parent, as ParentDocumentRetriever uses them); chonkie's
RecursiveChunker; semchunk (``offsets=True``). The designated peer of each strategy:
window → LangChain 800/100 (as bench_chunk.py), paragraph → chonkie RecursiveChunker
(paragraphs, then sentences), structured → LangChain recursive 800/0, parent-child →
LangChain parent/child, dialogue → none offers turns: the fastest peer.

The exactness table chunks a text of repeated passages (CRLF, double spaces, identical
paragraphs) and a text of combining marks and ZWJ emoji, and checks each output: are
start offsets reported, does ``text[start:start+len(chunk)] == chunk`` hold, do starts
increase (the right copy of a repeated passage), is every non-whitespace character
covered, is any chunk cut inside a grapheme cluster.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import regex

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_chunk import compiled_loops  # noqa: E402
from bench_chunk import texts as prose_texts  # noqa: E402

from mindory.importers import load_book  # noqa: E402
from mindory.text.chunking import make_chunks  # noqa: E402
from mindory.text.normalize import detect_hard_wrap, normalize  # noqa: E402
from mindory.text.records import ChunkSettings, Section  # noqa: E402
from mindory.text.strategies import plan_section  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
WS = " \t\n\r\f\v\u3000\u00a0"

Spans = list[tuple[int, int, str]]  # start, end, chunk text (peer outputs, in raw text)

SETTINGS = {
    "window": ChunkSettings(strategy="window", size=800, overlap=100, min_size=50),
    "paragraph": ChunkSettings(strategy="paragraph", size=800, min_size=50),
    "structured": ChunkSettings(strategy="structured", size=800, min_size=50),
    "parent-child": ChunkSettings(strategy="parent-child", size=400, parent_size=1600),
    "dialogue": ChunkSettings(strategy="dialogue", size=800, min_size=50),
}
DESIGNATED = {
    "window": "langchain 800/100",
    "paragraph": "chonkie recursive",
    "structured": "langchain recursive",
    "parent-child": "langchain parent/child",
    "dialogue": None,
}


def texts() -> dict[str, str]:
    out = prose_texts()
    book = load_book(CORPUS / "epub2_en_romeo-and-juliet-feedbooks.epub")
    play = "\n\n".join(s.normalized_text for s in book.sections if s.normalized_text)
    out["Play 5 MB (R&J ×35)"] = "\n\n".join([play] * 35)
    return out


# --------------------------------------------------------------------------- mindory


def mindory_e2e(cs: ChunkSettings) -> Callable[[str], list[Any]]:
    def run(text: str) -> list[Any]:
        nt = normalize(text)
        section = Section(0, "", text, nt.text, nt.offset_map, nt.blocks)
        plan = plan_section(nt.text, nt.blocks, cs)
        return make_chunks(
            section, plan.spans, book_sha256="0" * 64, fingerprint="bench", contexts=plan.contexts
        )

    return run


def mindory_spans(cs: ChunkSettings, cache: dict[int, Any]) -> Callable[[str], list[Any]]:
    def run(text: str) -> list[Any]:
        nt = cache.get(id(text))
        if nt is None:
            nt = cache[id(text)] = normalize(text)
        return plan_section(nt.text, nt.blocks, cs).spans

    return run


# --------------------------------------------------------------------------- peers


def langchain(size: int, overlap: int) -> Callable[[str], Spans]:
    def run(text: str) -> Spans:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(
            chunk_size=size, chunk_overlap=overlap, add_start_index=True
        )
        out = []
        for d in splitter.create_documents([text]):
            s = d.metadata["start_index"]
            out.append((s, s + len(d.page_content), d.page_content))
        return out

    return run


def langchain_parent_child(text: str) -> Spans:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    parent = RecursiveCharacterTextSplitter(chunk_size=1600, chunk_overlap=0, add_start_index=True)
    child = RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=0, add_start_index=True)
    out = []
    for p in parent.create_documents([text]):
        base = p.metadata["start_index"]
        for d in child.create_documents([p.page_content]):
            s = base + d.metadata["start_index"]
            out.append((s, s + len(d.page_content), d.page_content))
    return out


def chonkie_recursive(text: str) -> Spans:
    from chonkie import RecursiveChunker

    chunker = RecursiveChunker(tokenizer="character", chunk_size=800)
    return [(c.start_index, c.end_index, c.text) for c in chunker.chunk(text)]


def semchunk_chunks(text: str) -> Spans:
    import semchunk

    chunker = semchunk.chunkerify(len, 800)
    chunks, offsets = chunker(text, offsets=True)
    return [(s, e, c) for c, (s, e) in zip(chunks, offsets)]


PEERS: dict[str, Callable[[str], Spans]] = {
    "langchain 800/100": langchain(800, 100),
    "langchain recursive": langchain(800, 0),
    "langchain parent/child": langchain_parent_child,
    "chonkie recursive": chonkie_recursive,
    "semchunk": semchunk_chunks,
}


# --------------------------------------------------------------------------- timing


def measure(
    fns: dict[str, Callable[[str], Any]], text: str, runs: int
) -> dict[str, tuple[float, int]]:
    """Median CPU seconds and output length of each function, runs interleaved.

    Interleaving (every function once per round) and CPU time (``process_time``;
    every chunker here is single-threaded) keep the ratios fair on a shared machine,
    where other processes come and go.
    """
    counts = {name: len(fn(text)) for name, fn in fns.items()}  # warm up (imports, caches)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.process_time()
            fn(text)
            times[name].append(time.process_time() - t0)
    return {name: (statistics.median(times[name]), counts[name]) for name in fns}


# --------------------------------------------------------------------------- exactness


def repeated_text() -> str:
    a = "The same paragraph, word for word, is here again.  It has two sentences."
    b = "Another passage follows it;  " + "it repeats too, and it is long. " * 12
    c = "\t" + "Short line.\r\nNext line of the same paragraph." * 3
    return "\r\n\r\n".join([a, b, c, a, a, b] * 40)


def cluster_text() -> str:
    piece = "e\u0301" * 7 + "👨\u200d👩\u200d👧" * 3 + "n\u0303" * 5 + "🇯🇵"
    return (piece * 40 + " ") * 30


def boundaries(text: str) -> set[int]:
    out = {0}
    for m in regex.finditer(r"\X", text):
        out.add(m.end())
    return out


def check_spans(text: str, spans: Spans) -> dict[str, Any]:
    has = all(s is not None and s >= 0 for s, _, _ in spans)
    equal = sum(1 for s, e, c in spans if text[s : s + len(c)] == c)
    starts = [s for s, _, _ in spans]
    increasing = all(b > a for a, b in zip(starts, starts[1:]))
    covered = [False] * len(text)
    for s, _, c in spans:
        for i in range(s, min(len(text), s + len(c))):
            covered[i] = True
    missing = sum(1 for i, ch in enumerate(text) if ch not in WS and not covered[i])
    bounds = boundaries(text)
    inside = sum(1 for s, _, c in spans if s not in bounds or s + len(c) not in bounds)
    return {
        "offsets": has,
        "slice_equal": f"{equal}/{len(spans)}",
        "increasing": increasing,
        "missing": missing,
        "grapheme_cuts": inside,
    }


def mindory_check(text: str, cs: ChunkSettings, size: int) -> dict[str, Any]:
    cs = ChunkSettings(
        strategy=cs.strategy,
        size=size,
        overlap=min(cs.overlap, size // 2),
        min_size=min(cs.min_size, size // 2),
        parent_size=size * 4,
    )
    chunks = mindory_e2e(cs)(text)
    # Source spans in the raw text: normalizing the span gives the chunk back.
    spans = [(c.source_start, c.source_end, text[c.source_start : c.source_end]) for c in chunks]
    out = check_spans(text, spans)
    unwrap = detect_hard_wrap(text)
    again = sum(
        1
        for c in chunks
        if normalize(text[c.source_start : c.source_end], unwrap=unwrap).text == c.text
    )
    out["slice_equal"] = f"{again}/{len(chunks)} (normalize(source span) == chunk)"
    return out


def peer_check(fn: Callable[[str], Spans], text: str, size: int) -> dict[str, Any]:
    return check_spans(text, fn(text))


def small_peers(size: int) -> dict[str, Callable[[str], Spans]]:
    def lc(text: str) -> Spans:
        return langchain(size, size // 8)(text)

    def ch(text: str) -> Spans:
        from chonkie import RecursiveChunker

        chunker = RecursiveChunker(tokenizer="character", chunk_size=size)
        return [(c.start_index, c.end_index, c.text) for c in chunker.chunk(text)]

    def sc(text: str) -> Spans:
        import semchunk

        chunks, offsets = semchunk.chunkerify(len, size)(text, offsets=True)
        return [(s, e, c) for c, (s, e) in zip(chunks, offsets)]

    return {"langchain recursive": lc, "chonkie recursive": ch, "semchunk": sc}


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(compiled_loops())
    cache: dict[int, Any] = {}
    rows = []
    for label, text in texts().items():
        mb = len(text.encode("utf-8")) / 1e6
        fns: dict[str, Callable[[str], Any]] = {f"peer: {k}": fn for k, fn in PEERS.items()}
        for strategy, cs in SETTINGS.items():
            fns[f"{strategy} e2e"] = mindory_e2e(cs)
            fns[f"{strategy} spans"] = mindory_spans(cs, cache)
        got = measure(fns, text, args.runs)
        peer_speed = {k: got[f"peer: {k}"] for k in PEERS}
        for name, (seconds, count) in peer_speed.items():
            rows.append(
                f"| {label} | peer: {name} | {count} | {seconds * 1000:.0f} | {mb / seconds:.1f} | | |"
            )
        fastest = min(s for s, _ in peer_speed.values())
        nt = cache[id(text)]
        for strategy, cs in SETTINGS.items():
            e2e, count = got[f"{strategy} e2e"]
            spans, _ = got[f"{strategy} spans"]
            peer = DESIGNATED[strategy]
            ref = peer_speed[peer][0] if peer else fastest
            plan = plan_section(nt.text, nt.blocks, cs)
            note = "" if plan.strategy == strategy else f" (→ {plan.strategy})"
            rows.append(
                f"| {label} | **{strategy}**{note} | {count} | {e2e * 1000:.0f} / {spans * 1000:.0f} "
                f"| {mb / e2e:.1f} / {mb / spans:.1f} | {ref / e2e:.2f}× / {ref / spans:.2f}× "
                f"vs {peer or 'fastest peer'} | {fastest / e2e:.2f}× / {fastest / spans:.2f}× |"
            )
    print(
        "| text | chunker | chunks | CPU ms (e2e / spans) | MB/s (e2e / spans) "
        "| × designated peer (e2e / spans) | × fastest peer |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print(
        "| text | chunker | offsets | slice equal | starts increase | missing chars | cuts in a grapheme |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, text, size in (
        ("repeated passages", repeated_text(), 200),
        ("combining marks + ZWJ emoji", cluster_text(), 100),
    ):
        for strategy, cs in SETTINGS.items():
            r = mindory_check(text, cs, size)
            print(
                f"| {label} | mindory {strategy} | source spans | {r['slice_equal']} "
                f"| {r['increasing']} | {r['missing']} | {r['grapheme_cuts']} |"
            )
        for name, fn in small_peers(size).items():
            try:
                r = peer_check(fn, text, size)
            except Exception as exc:  # a peer crash is a result too
                print(f"| {label} | {name} | crashed: {type(exc).__name__}: {exc} | | | | |")
                continue
            print(
                f"| {label} | {name} | {r['offsets']} | {r['slice_equal']} | {r['increasing']} "
                f"| {r['missing']} | {r['grapheme_cuts']} |"
            )


if __name__ == "__main__":
    main()
