"""``mindory chunk``: the pipeline on one file, no library."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from mindory.cli.common import (
    console,
    fail,
    length_summary,
    make_settings,
    settings_options,
    snippet,
)
from mindory.errors import MindoryError
from mindory.library.pipeline import chunk_file
from mindory.text.shapes import chunks_document


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@settings_options
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
    strategy: str,
    parent_size: int,
    as_json: bool,
    with_text: bool,
) -> None:
    """Chunk one book (EPUB or plain text) without a library and print the chunks."""
    try:
        settings = make_settings(size, overlap, min_size, nfkc, strategy, parent_size)
        book, chunks = chunk_file(path, settings)
    except (MindoryError, ValueError) as exc:
        fail(exc, ctx.obj["debug"])
        return
    for warning in book.warnings:
        click.echo(f"mindory: warning: {warning}", err=True)
    if as_json:
        doc = chunks_document(book, settings, chunks, with_text=with_text)
        click.echo(json.dumps(doc, ensure_ascii=False))
        return
    summary = length_summary([c.end - c.start for c in chunks])
    console().print(f"[bold]{book.title}[/bold]  ({book.format}, {book.encoding or 'n/a'})")
    console().print(
        f"sha256 {book.sha256[:16]}…  sections {len(book.sections)}  chunks {summary['count']}  "
        f"length mean {summary.get('mean')} median {summary.get('median')} p95 {summary.get('p95')}"
    )
    if book.lossy:
        console().print(f"[yellow]lossy decoding: {book.bad_bytes} bad byte(s)[/yellow]")
    table = Table("#", "section", "normalized", "source (code points)", "UTF-16", "text")
    for c in chunks[:5] + (chunks[-2:] if len(chunks) > 7 else chunks[5:]):
        table.add_row(
            str(c.index),
            str(c.section),
            f"{c.start}–{c.end}",
            f"{c.source_start}–{c.source_end}",
            f"{c.utf16_start}–{c.utf16_end}",
            snippet(c.text),
        )
    console().print(table)
