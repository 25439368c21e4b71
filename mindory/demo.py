"""``make demo``: run the main job on the bundled samples and show the places it finds."""

from __future__ import annotations

import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from .chunking import chunk_book
from .errors import MindoryError
from .importers import load_book
from .records import Settings

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def main() -> None:
    console = Console(width=120)
    settings = Settings()
    console.print(f"[bold]mindory demo[/bold] — settings fingerprint {settings.fingerprint}")
    for path in sorted(SAMPLES.iterdir()):
        if path.suffix not in (".txt", ".epub"):
            continue
        try:
            book = load_book(path, settings.profile)
        except MindoryError as exc:
            console.print(f"[red]{exc}[/red]")
            continue
        chunks = chunk_book(book, settings)
        lengths = [c.end - c.start for c in chunks]
        console.rule(f"{path.name}: {book.title}")
        console.print(
            f"{book.format}, encoding {book.encoding or 'n/a'}, {len(book.sections)} sections, "
            f"{len(chunks)} chunks, length median {statistics.median(lengths):.0f}"
        )
        table = Table(
            "section", "chunk", "normalized", "source (code points)", "UTF-16", "starts with"
        )
        picks = chunks[:2] + chunks[len(chunks) // 2 : len(chunks) // 2 + 1] + chunks[-1:]
        for c in picks:
            table.add_row(
                f"{c.section} {book.sections[c.section].title[:24]}",
                str(c.index),
                f"[{c.start}, {c.end})",
                f"[{c.source_start}, {c.source_end})",
                f"[{c.utf16_start}, {c.utf16_end})",
                c.text[:30].replace("\n", "⏎"),
            )
        console.print(table)


if __name__ == "__main__":
    main()
