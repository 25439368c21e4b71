"""``make demo``: import the bundled samples into a fresh library, embed them, search
them in English and Chinese, and show where every hit is.

The library lives in a temporary folder and is removed afterwards; nothing in
the user's own library is touched.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from mindory.library import ImportFailure, Library
from mindory.search.hits import Hit, SearchResult

# (query, mode, book filter): questions in a reader's own words (English; Chinese in
# both scripts — the book is Traditional), a quote, and a two-character name.
SEARCHES: tuple[tuple[str, str, str | None], ...] = (
    ("why did the narrator decide to go swimming in the river", "hybrid", None),
    ("what are the Houses of Parliament used for now", "hybrid", None),
    ("April is the cruellest month", "hybrid", None),
    ("新皇帝的年号叫什么", "hybrid", None),
    ("魏忠賢請客氏到私宅吃酒", "hybrid", None),
    ("客氏", "lexical", "qiaoshi"),
)

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def main() -> None:
    console = Console(width=120)
    with tempfile.TemporaryDirectory(prefix="mindory-demo-") as tmp:
        db = Path(tmp) / "library.sqlite"
        console.print(f"[bold]mindory demo[/bold] — a fresh library in {db}")
        with Library.open(db) as lib:
            results = list(lib.import_many([SAMPLES]))
            table = Table("file", "status", "sections", "chunks", "blocks", "seconds")
            for r in results:
                if isinstance(r, ImportFailure):
                    table.add_row(Path(r.path).name, "[red]failed", r.error, "", "", "")
                    continue
                table.add_row(
                    Path(r.path).name,
                    r.status,
                    str(r.sections),
                    str(r.chunks),
                    str(r.blocks),
                    f"{r.timings.get('total', 0.0):.2f}",
                )
            console.print(table)

            again = list(lib.import_many([SAMPLES]))
            ms = sum(r.timings.get("total", 0.0) for r in again if not isinstance(r, ImportFailure))
            statuses = sorted({r.status for r in again})
            console.print(f"importing them again: {', '.join(statuses)} in {1000 * ms:.0f} ms")

            for book in lib.books():
                console.rule(f"{book.title}  ({book.id[:12]})")
                console.print(
                    f"{book.format}, encoding {book.encoding or 'n/a'}, {book.section_count} "
                    f"sections, {book.toc_count} TOC entries, fingerprint "
                    f"{book.current.fingerprint if book.current else '—'}",
                    highlight=False,
                )
                chunks = lib.chunks(book.id, with_cfi=True)
                picks = chunks[:2] + chunks[len(chunks) // 2 : len(chunks) // 2 + 1] + chunks[-1:]
                spans = Table(
                    "§", "#", "normalized", "source (code points)", "UTF-16", "starts with"
                )
                for c in picks:
                    spans.add_row(
                        str(c.section),
                        str(c.index),
                        f"[{c.start}, {c.end})",
                        f"[{c.source_start}, {c.source_end})",
                        f"[{c.utf16_start}, {c.utf16_end})",
                        c.text[:30].replace("\n", "⏎"),
                    )
                console.print(spans)
                if picks and picks[0].cfi:
                    console.print(f"CFI of chunk 0: {picks[0].cfi}", highlight=False)
                if picks and picks[0].byte_start is not None:
                    console.print(
                        f"bytes of chunk 0 in the file: [{picks[0].byte_start}, "
                        f"{picks[0].byte_end})",
                        highlight=False,
                    )

            t = time.perf_counter()
            embedded = lib.embed()
            console.rule("search")
            console.print(
                f"embedded {embedded.embedded} chunks with {embedded.embedding.embedder_id} in "
                f"{time.perf_counter() - t:.2f} s; index: {embedded.index.kind if embedded.index else '—'}",
                highlight=False,
            )
            for query, mode, book_ref in SEARCHES:
                _show(console, lib.search(query, k=3, mode=mode, book=book_ref))

            report = lib.verify()
            verdict = "[green]ok[/green]" if report.ok else f"[red]{len(report.problems)} problems"
            console.print(
                f"verify: {report.books} books, {report.chunks} chunks, {report.blocks} blocks: "
                f"{verdict}"
            )


def _show(console: Console, result: SearchResult) -> None:
    """Each hit: its book and section, its place (CFI or char range), the matched words."""
    where = f" in {result.book[:12]}" if result.book else ""
    console.print(
        f"\n[bold]{result.query}[/bold]  ({result.mode}{where}, "
        f"{result.timings.get('total', 0.0):.1f} ms)",
        highlight=False,
    )
    for hit in result.hits:
        loc = hit.locator
        place = loc.cfi or loc.fragment or f"[{loc.source_start}, {loc.source_end})"
        console.print(
            f"  {hit.rank}. {hit.book_title} §{hit.section} {hit.section_title[:40]}  {place}",
            highlight=False,
            markup=False,
        )
        console.print(f"     “{_around(hit)}”", highlight=False, markup=False)
        words = Text("     matches: ")
        for m in hit.matches[:6]:
            words.append(m.text.replace("\r\n", " ").replace("\n", " "), style="bold yellow")
            words.append(f" [{m.source_start}, {m.source_end}) ")
        if not hit.matches:
            words.append("— (no query word occurs in it)", style="dim")
        console.print(words)


def _around(hit: Hit, width: int = 90) -> str:
    """The hit's reader text around its first matched word, on one line."""
    loc = hit.locator
    text = " ".join(str(getattr(loc, "display", None) or loc.highlight).split())
    first = hit.matches[0].text if hit.matches else ""
    at = max(0, text.find(" ".join(first.split())) - width // 3) if first else 0
    piece = text[at : at + width]
    return ("…" if at else "") + piece + ("…" if at + width < len(text) else "")


if __name__ == "__main__":
    main()
