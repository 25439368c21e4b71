"""Highlights and annotation files (docs/reading-state.md, "Annotations"):
``mindory highlights``, ``mindory highlight add|delete``, ``mindory annotations
export|import``. Each is a thin door onto one Library method and prints, with ``--json``,
the same shapes as the HTTP API. ``mindory --user NAME`` acts for that reader."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from mindory.cli.common import library, print_json


def _reader(ctx: click.Context) -> str | None:
    """The id of the reader ``--user`` names (None: the implicit local reader)."""
    name = ctx.find_root().ensure_object(dict).get("user")
    return library(ctx).reader_id(name) if name else None


def _flat(text: str, n: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def _line(h: Any) -> str:
    """One highlight for people: id, place, colour, quote (and note)."""
    where = f"§{h.section} [{h.source_start}, {h.source_end})"
    if h.status != "anchored":
        where = f"orphaned (was {where})"
    out = f"{h.id}  {where}  {h.color}  «{_flat(h.exact)}»"
    if h.note:
        out += f"  — {_flat(h.note, 50)}"
    if h.duplicate_of:
        out += f"  (same span as {h.duplicate_of})"
    return out


# --------------------------------------------------------------------------- highlights


@click.command("highlights")
@click.argument("book")
@click.option("--section", type=int, help="Only the anchored highlights of this section.")
@click.option(
    "--status", type=click.Choice(["anchored", "orphaned"]), help="Only highlights with it."
)
@click.option("--json", "as_json", is_flag=True, help="Print W3C Web Annotations as JSON.")
@click.pass_context
def highlights(
    ctx: click.Context, book: str, section: int | None, status: str | None, as_json: bool
) -> None:
    """List your highlights in BOOK, in reading order (orphans last)."""
    found = library(ctx).highlights(book, section=section, status=status, reader=_reader(ctx))
    if as_json:
        print_json([h.to_json() for h in found])
        return
    if not found:
        click.echo("no highlights", err=True)
    for h in found:
        click.echo(_line(h))


@click.group("highlight")
def highlight() -> None:
    """Add a highlight by quote (through quote calibration) or delete one."""


@highlight.command("add")
@click.argument("book")
@click.option("--quote", required=True, help="The text to highlight, as you read it.")
@click.option("--section", type=int, help="Look for the quote in this section only.")
@click.option("--note", help="A note to keep with the highlight.")
@click.option("--color", help="yellow, green, blue, pink, purple, orange or #rrggbb.")
@click.option("--json", "as_json", is_flag=True, help="Print the annotation as JSON.")
@click.pass_context
def highlight_add(
    ctx: click.Context,
    book: str,
    quote: str,
    section: int | None,
    note: str | None,
    color: str | None,
    as_json: bool,
) -> None:
    """Highlight the place QUOTE comes from in BOOK (the whole quote must be found)."""
    made = library(ctx).highlight_quote(
        book, quote, section=section, note=note, color=color, reader=_reader(ctx)
    )
    if as_json:
        print_json(made.to_json())
        return
    h = made.highlight
    click.echo(_line(h))
    m = made.calibration.match
    click.echo(f"mindory: placed by {m.method} match: {m.note}", err=True)


@highlight.command("delete")
@click.argument("book")
@click.argument("highlight_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the deleted annotation as JSON.")
@click.pass_context
def highlight_delete(ctx: click.Context, book: str, highlight_id: str, as_json: bool) -> None:
    """Delete one of your highlights in BOOK by its ID."""
    gone = library(ctx).delete_highlight(book, highlight_id, reader=_reader(ctx))
    if as_json:
        print_json(gone.to_json())
        return
    click.echo(f"deleted {gone.id}  «{_flat(gone.exact)}»")


# --------------------------------------------------------------------------- annotations


@click.group("annotations")
def annotations_group() -> None:
    """Export or import your highlights as W3C Web Annotations (JSON-LD)."""


def _write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed into place."""
    path = path.expanduser()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@annotations_group.command("export")
@click.argument("book", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (- : standard output, the default).",
)
@click.pass_context
def annotations_export(ctx: click.Context, book: str | None, output: Path | None) -> None:
    """Write your highlights of BOOK (default: every book) as one AnnotationCollection."""
    doc = library(ctx).export_annotations(book, reader=_reader(ctx))
    text = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    if output is None or str(output) == "-":  # `-` is standard output, as everywhere
        sys.stdout.write(text)
        return
    if not output.expanduser().parent.is_dir():
        raise click.UsageError(f"no such folder: {output.expanduser().parent}")
    _write(output, text)
    click.echo(f"mindory: wrote {doc['total']} annotation(s) to {output}", err=True)


@annotations_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--book", help="Put every annotation on this book (default: the one it names).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def annotations_import(ctx: click.Context, file: Path, book: str | None, as_json: bool) -> None:
    """Import an AnnotationCollection: each quote is verified against its book."""
    report = library(ctx).import_annotations(file, book=book, reader=_reader(ctx))
    if as_json:
        print_json(report.to_json())
        return
    for item in report.orphans:
        click.echo(f"orphan: «{_flat(item.quote)}» — {item.reason}")
    click.echo(
        f"mindory: {report.count('placed')} placed, {report.count('present')} already there, "
        f"{report.count('orphaned')} orphaned (not written)",
        err=True,
    )
