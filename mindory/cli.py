"""The ``mindory`` command: a thin door over the pipeline (and, later, Library).

Errors print one clear line and exit non-zero; ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from .chunking import chunk_book
from .errors import MindoryError
from .importers import load_book
from .records import ChunkSettings, NormalizeProfile, Settings
from .shapes import chunks_document

console = Console()


def _fail(exc: Exception, debug: bool) -> None:
    if debug:
        raise exc
    click.echo(f"mindory: error: {exc}", err=True)
    sys.exit(1 if isinstance(exc, MindoryError) else 2)


@click.group()
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """mindory: exact places for every search hit in your books."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _settings(size: int, overlap: int, min_size: int, nfkc: bool) -> Settings:
    return Settings(
        profile=NormalizeProfile(unicode_form="NFKC" if nfkc else "NFC"),
        chunking=ChunkSettings(size=size, overlap=overlap, min_size=min_size),
    )


def _length_summary(lengths: list[int]) -> dict[str, Any]:
    if not lengths:
        return {"count": 0}
    ordered = sorted(lengths)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "count": len(lengths),
        "mean": round(statistics.fmean(lengths), 1),
        "median": statistics.median(lengths),
        "p95": p95,
    }


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--size", default=800, show_default=True, help="Window size (characters).")
@click.option("--overlap", default=100, show_default=True, help="Overlap (characters).")
@click.option("--min", "min_size", default=50, show_default=True, help="Shortest tail chunk.")
@click.option("--nfkc", is_flag=True, help="Normalize with NFKC instead of NFC.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--with-text", is_flag=True, help="Include section source and normalized text.")
@click.pass_context
def chunk(
    ctx: click.Context,
    path: Path,
    size: int,
    overlap: int,
    min_size: int,
    nfkc: bool,
    as_json: bool,
    with_text: bool,
) -> None:
    """Chunk one book (EPUB or plain text) and print the chunks with exact spans."""
    try:
        settings = _settings(size, overlap, min_size, nfkc)
        book = load_book(path, settings.profile)
        chunks = chunk_book(book, settings)
    except (MindoryError, ValueError) as exc:
        _fail(exc, ctx.obj["debug"])
        return
    for warning in book.warnings:
        click.echo(f"mindory: warning: {warning}", err=True)
    if as_json:
        doc = chunks_document(book, settings, chunks, with_text=with_text)
        click.echo(json.dumps(doc, ensure_ascii=False))
        return
    summary = _length_summary([c.end - c.start for c in chunks])
    console.print(f"[bold]{book.title}[/bold]  ({book.format}, {book.encoding or 'n/a'})")
    console.print(
        f"sha256 {book.sha256[:16]}…  sections {len(book.sections)}  chunks {summary['count']}  "
        f"length mean {summary.get('mean')} median {summary.get('median')} p95 {summary.get('p95')}"
    )
    if book.lossy:
        console.print(f"[yellow]lossy decoding: {book.bad_bytes} bad byte(s)[/yellow]")
    table = Table("#", "section", "normalized", "source (code points)", "UTF-16", "text")
    for c in chunks[:5] + (chunks[-2:] if len(chunks) > 7 else chunks[5:]):
        snippet = c.text[:40].replace("\n", "⏎")
        table.add_row(
            str(c.index),
            str(c.section),
            f"{c.start}–{c.end}",
            f"{c.source_start}–{c.source_end}",
            f"{c.utf16_start}–{c.utf16_end}",
            snippet + ("…" if len(c.text) > 40 else ""),
        )
    console.print(table)


if __name__ == "__main__":  # pragma: no cover
    main()
