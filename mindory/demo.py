"""``make demo``: import the bundled samples into a fresh library and show the places found.

The library lives in a temporary folder and is removed afterwards; nothing in
the user's own library is touched.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .library import ImportFailure, Library

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


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

            report = lib.verify()
            verdict = "[green]ok[/green]" if report.ok else f"[red]{len(report.problems)} problems"
            console.print(
                f"verify: {report.books} books, {report.chunks} chunks, {report.blocks} blocks: "
                f"{verdict}"
            )


if __name__ == "__main__":
    main()
