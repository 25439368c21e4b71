"""Commands over the catalogue: import, books, show, chunks, blocks, verify, export,
delete, where."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mindory.cli.common import (
    PHASE_SPAN,
    console,
    err_console,
    library,
    make_settings,
    middle_ellipsis,
    print_json,
    settings_options,
    snippet,
)
from mindory.errors import MindoryError

if TYPE_CHECKING:
    from rich.progress import TaskID
    from rich.table import Table
    from rich.tree import Tree

    from mindory.library import ImportFailure, ImportResult, ProgressFn, TocNode
    from mindory.reading.highlights import ReanchorReport


@contextmanager
def _import_progress(
    enabled: bool, total_files: int
) -> Iterator[Callable[[Path], ProgressFn | None]]:
    """Per-book and overall progress bars (on stderr, gone when done)."""
    if not enabled:
        yield lambda _path: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(
        TextColumn("{task.description}", table_column=None),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console(),
        transient=True,
    )
    with progress:
        overall = progress.add_task("all books", total=total_files)
        current: dict[str, TaskID] = {}

        def for_book(path: Path) -> ProgressFn:
            if "task" in current:
                progress.remove_task(current["task"])
                progress.advance(overall)
            task = progress.add_task(f"{path.name[:40]}: read", total=100)
            current["task"] = task

            def report(phase: str, done: int, total: int) -> None:
                lo, hi = PHASE_SPAN.get(phase, (0.0, 1.0))
                share = done / total if total else 1.0
                progress.update(
                    task,
                    completed=round(100 * (lo + (hi - lo) * share)),
                    description=f"{path.name[:40]}: {phase}",
                )

            return report

        yield for_book


def _say(line: str) -> None:
    err_console().print(line, markup=False, highlight=False, soft_wrap=True)


# What a new edition did to each kind of reading state, in the order people read them.
_KINDS = {
    "highlight": ("highlight", "highlights"),
    "position": ("reading position", "reading positions"),
    "bookmark": ("bookmark", "bookmarks"),
}
_HOW = {
    "position": "by position",
    "exact": "by exact quote",
    "normalized": "by normalized quote",
    "fuzzy": "by fuzzy match",
}


def _reanchored_counts(reports: Sequence[ReanchorReport]) -> str:
    """``1 highlight (1 by exact quote), 2 reading positions (1 by position, 1 orphaned)``:
    each kind counted apart (a status is how a thing was placed, not what it is)."""
    parts = []
    for kind in [*_KINDS, *sorted({r.kind for r in reports} - set(_KINDS))]:
        of_kind = [r for r in reports if r.kind == kind]
        if not of_kind:
            continue
        one, many = _KINDS.get(kind, (kind, kind + "s"))
        statuses: dict[str, int] = {}
        for r in of_kind:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        how = ", ".join(
            f"{n} {_HOW.get(status, status)}"
            for status, n in sorted(statuses.items(), key=lambda item: item[0] == "orphaned")
        )
        parts.append(f"{len(of_kind)} {one if len(of_kind) == 1 else many} ({how})")
    return ", ".join(parts)


def _say_reanchored(result: ImportResult) -> None:
    """What a new edition did to the old one's highlights, reading positions and
    bookmarks: counts per kind, and every orphan."""
    if not result.replaces:
        return
    olds = ", ".join(sha[:12] for sha in result.replaces)
    told = _reanchored_counts(result.reanchored)
    _say(
        f"mindory: new edition of {olds}: "
        + (f"re-anchored {told}" if told else "nothing to re-anchor")
    )
    for r in result.reanchored:
        if r.status == "orphaned":
            _say(
                f"mindory: orphaned {_KINDS.get(r.kind, (r.kind,))[0]}: {r.old_exact[:60]!r} "
                f"(section {r.old_section}): {r.note}"
            )


# The import table's columns after the file name and their widths in characters (the
# title wraps, never narrower than this; the others never wrap).
_COLUMNS = {"status": 9, "title": 10, "sections": 8, "chunks": 6, "embedded": 8, "seconds": 7}


def _import_table(names: Sequence[str], console_width: int) -> tuple[Table, int, bool]:
    """The empty import table for a console this wide, the width of its file names
    (cut in the middle to fit: the ends of `txt_zh-Hant_honglou-meng_gbk_crlf.txt`
    tell files apart, not their starts), and whether it has the seconds column (not
    under 100 columns: it is in --json)."""
    from rich.table import Table

    timed = console_width >= 100
    columns = {k: v for k, v in _COLUMNS.items() if timed or k != "seconds"}
    frame = 3 * (len(columns) + 1) + 1  # each column's padding and border, the edges
    room = console_width - sum(columns.values()) - frame
    width = max(12, min(max(map(len, names), default=4), 40, room))
    table = Table(title="import")
    table.add_column("file", no_wrap=True, min_width=width, max_width=width)
    for name in columns:
        wraps = name == "title"
        table.add_column(name, no_wrap=not wraps, min_width=_COLUMNS[name] if wraps else None)
    return table, width, timed


def _status_style(status: str) -> str:
    return {"created": "green", "rederived": "cyan", "unchanged": "dim", "failed": "red"}.get(
        status, ""
    )


@click.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@settings_options
@click.option("--no-copy", is_flag=True, help="Store the files' paths, not their bytes.")
@click.option(
    "--replaces",
    metavar="BOOK",
    help="The file is a new edition of BOOK: re-anchor BOOK's highlights onto it.",
)
@click.option(
    "--no-embed",
    is_flag=True,
    help="Do not embed the new chunks (faster; hybrid search warns until mindory embed).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.pass_context
def import_(
    ctx: click.Context,
    paths: Sequence[Path],
    size: int,
    overlap: int,
    min_size: int,
    nfkc: bool,
    strategy: str,
    parent_size: int,
    no_copy: bool,
    replaces: str | None,
    no_embed: bool,
    as_json: bool,
) -> None:
    """Import books: files, or folders searched recursively for .txt and .epub.

    A bad file is reported by name and skipped; the others are imported. Exits
    with 1 if any file failed. With --replaces (one file), the highlights of the
    old edition move to the new one; each is reported (placed, or orphaned).
    New chunks are embedded with the library's current embedding (the one
    `mindory embed` made; none yet: nothing is embedded), unless --no-embed.
    """
    settings = make_settings(size, overlap, min_size, nfkc, strategy, parent_size)
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise MindoryError("no such file or folder", path=str(missing[0]))
    from mindory.library import ImportFailure, book_files_in

    files = book_files_in(paths)
    if replaces is not None and len(files) != 1:
        raise click.UsageError(f"--replaces takes one file, not {len(files)}")
    lib = library(ctx)
    results: list[ImportResult | ImportFailure] = []
    show_progress = not as_json and err_console().is_terminal
    with _import_progress(show_progress, len(files)) as progress:
        for item in lib.import_many(
            files,
            settings,
            copy=not no_copy,
            progress=progress,
            replaces=replaces,
            embed=not no_embed,
        ):
            results.append(item)
            # One line each (soft wrap), above the progress bars.
            if isinstance(item, ImportFailure):
                _say(f"mindory: failed: {item.error}")
            else:
                for warning in item.warnings:
                    _say(f"mindory: warning: {item.path}: {warning}")
                if not as_json:
                    _say_reanchored(item)
    failed = sum(isinstance(r, ImportFailure) for r in results)
    if as_json:
        print_json(
            {
                "results": [r.to_json() for r in results],
                "imported": len(results) - failed,
                "failed": failed,
            }
        )
    else:
        from rich.markup import escape  # rich loads only to draw a table

        table, width, timed = _import_table([Path(r.path).name for r in results], console().width)
        for r in results:
            style = _status_style(r.status)
            shown = escape(middle_ellipsis(Path(r.path).name, width))
            if isinstance(r, ImportFailure):
                problem = escape(r.error.removeprefix(f"{r.path}: "))
                blanks = [""] * (len(table.columns) - 3)
                table.add_row(shown, f"[{style}]failed", problem, *blanks)
                continue
            cells = [
                shown,
                f"[{style}]{r.status}",
                escape(r.title),
                str(r.sections),
                str(r.chunks),
                str(r.embedded) if r.embedding is not None else "–",
            ]
            table.add_row(*cells, *([f"{r.timings.get('total', 0.0):.2f}"] if timed else []))
        console().print(table)
        console().print(f"{len(results) - failed} imported, {failed} failed")
    if failed:
        sys.exit(1)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def books(ctx: click.Context, as_json: bool) -> None:
    """List the books in the library."""
    from mindory.library.shelf import books_of_file

    # A SQLite library at the newest schema is read with sqlite3 alone (no SQLAlchemy
    # import: most of this command's time); anything else is opened as usual.
    obj = ctx.find_root().ensure_object(dict)
    found = None if "library" in obj else books_of_file(obj.get("db"))
    items = found if found is not None else library(ctx).books()
    if as_json:
        print_json([b.to_json() for b in items])
        return
    if not items:
        click.echo("no books yet: mindory import PATH")  # one line needs no rich
        return
    from rich.table import Table  # rich loads only to draw a table

    table = Table("id", "title", "format", "sections", "chunks", "size", "encoding")
    for b in items:
        current = b.current
        table.add_row(
            b.id[:12],
            b.title,
            b.format,
            str(b.section_count),
            str(current.chunk_count if current else 0),
            f"{b.file_size / 1e6:.2f} MB",
            (b.encoding or "") + (" (lossy)" if b.lossy else ""),
        )
    console().print(table)


# What `show --toc` prints after each entry, and the legend line under the tree.
TOC_LEGEND = "§N @M: the entry opens section N at source offset M (book source coordinates)"
TOC_NOT_IN_SPINE = "— (not in the spine)"
TOC_NO_LINK = "— (no link)"
TOC_LEGEND_NOT_IN_SPINE = (
    "—: the entry has no section to open: it points outside the book's reading order "
    "(not in the spine: another file, a web address, a missing file; the import warned), "
    "or it is a heading without a link (no link)"
)


def _toc_tree(tree: Tree, nodes: Sequence[TocNode]) -> bool:
    """Add the entries to ``tree``; True if any has no section (not in the spine)."""
    from rich.markup import escape

    unplaced = False
    for node in nodes:
        if node.section is not None:
            where = f"§{node.section} @{node.source_offset}"
        else:
            where = f"{TOC_NOT_IN_SPINE} {node.href}" if node.href else TOC_NO_LINK
            unplaced = True
        branch = tree.add(f"{escape(node.title)}  [dim]{escape(where)}[/dim]")
        unplaced = _toc_tree(branch, node.children) or unplaced
    return unplaced


@click.command()
@click.argument("book")
@click.option("--toc", is_flag=True, help="Show the table of contents.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def show(ctx: click.Context, book: str, toc: bool, as_json: bool) -> None:
    """Show a book: metadata, derivations and sections (BOOK: id, id prefix or title)."""
    from rich.markup import escape

    lib = library(ctx)
    info = lib.book(book)
    sections = lib.sections(info.id)
    nodes = lib.toc(info.id) if toc else ()
    if as_json:
        doc = {**info.to_json(), "sections": [s.to_json() for s in sections]}
        if toc:
            doc["toc"] = [n.to_json() for n in nodes]
        print_json(doc)
        return
    # Both are hex digests: each says what it is (the book's id is its file's SHA-256; a
    # derivation's fingerprint hashes its settings).
    console().print(f"[bold]{escape(info.title)}[/bold]  book id {info.id}", highlight=False)
    facts = [
        f"format {info.format}",
        f"file {info.file_name} ({info.file_size:,} bytes, {info.stored})",
    ]
    if info.encoding:
        facts.append(f"encoding {info.encoding}" + (" LOSSY" if info.lossy else ""))
    if info.creators:
        facts.append("by " + ", ".join(info.creators))
    if info.language:
        facts.append(f"language {info.language}")
    console().print("  ".join(facts))
    for d in info.derivations:
        mark = "*" if d.current else " "
        console().print(
            f"{mark} derivation, settings fingerprint {d.fingerprint}: {d.chunk_count} chunks, "
            f"{json.dumps(d.settings, sort_keys=True)}",
            markup=False,
            highlight=False,
        )
    for warning in info.warnings:
        console().print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    from rich.table import Table  # rich loads only to draw a table

    table = Table("§", "title", "href", "source", "normalized", "blocks", "chunks")
    for s in sections:
        table.add_row(
            str(s.ordinal),
            s.title[:50],
            s.href or "",
            f"{s.source_start}–{s.source_end}",
            str(s.normalized_length),
            str(s.block_count),
            str(s.chunk_count),
        )
    console().print(table)
    if toc:
        from rich.tree import Tree

        tree = Tree("[bold]contents[/bold]")
        unplaced = _toc_tree(tree, nodes)
        console().print(tree)
        console().print(TOC_LEGEND, style="dim", markup=False, highlight=False)
        if unplaced:
            console().print(TOC_LEGEND_NOT_IN_SPINE, style="dim", markup=False, highlight=False)


@click.command()
@click.argument("book")
@click.option("--section", type=int, help="Only this section.")
@click.option("--offset", default=0, show_default=True, help="Skip this many chunks.")
@click.option("--limit", type=int, help="At most this many chunks.")
@click.option("--fingerprint", help="A derivation other than the current one.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with CFIs for EPUB).")
@click.pass_context
def chunks(
    ctx: click.Context,
    book: str,
    section: int | None,
    offset: int,
    limit: int | None,
    fingerprint: str | None,
    as_json: bool,
) -> None:
    """List a book's chunks with their exact spans."""
    lib = library(ctx)
    info = lib.book(book)
    items = lib.chunks(
        info.id,
        section=section,
        fingerprint=fingerprint,
        offset=offset,
        limit=limit,
        with_cfi=as_json,
    )
    if as_json:
        current = info.current
        print_json(
            {
                "book": info.id,
                "fingerprint": fingerprint or (current.fingerprint if current else None),
                "chunks": [c.to_json() for c in items],
            }
        )
        return
    from rich.table import Table  # rich loads only to draw a table

    table = Table("§", "#", "id", "normalized", "source", "UTF-16", "text")
    for c in items:
        table.add_row(
            str(c.section),
            str(c.index),
            c.id[:12],
            f"{c.start}–{c.end}",
            f"{c.source_start}–{c.source_end}",
            f"{c.utf16_start}–{c.utf16_end}",
            snippet(c.text),
        )
    console().print(table)


@click.command()
@click.argument("book")
@click.argument("section", type=int)
@click.option("--page", default=1, show_default=True, help="Page number (from 1).")
@click.option("--page-size", default=50, show_default=True, help="Blocks per page.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def blocks(
    ctx: click.Context, book: str, section: int, page: int, page_size: int, as_json: bool
) -> None:
    """Show a section's render blocks (paragraphs, headings, ...), a page at a time."""
    result = library(ctx).blocks(book, section, page, page_size)
    if as_json:
        print_json(result.to_json())
        return
    from rich.table import Table  # rich loads only to draw a table

    table = Table(
        "#",
        "kind",
        "normalized",
        "source",
        "text",
        title=f"section {section}, page {result.page} of {result.pages} ({result.total} blocks)",
    )
    for b in result.blocks:
        kind = b.kind + (f" {b.level}" if b.level else "")
        table.add_row(
            str(b.index),
            kind,
            f"{b.start}–{b.end}",
            f"{b.source_start}–{b.source_end}",
            snippet(b.text, 60),
        )
    console().print(table)


@click.command()
@click.argument("book", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def verify(ctx: click.Context, book: str | None, as_json: bool) -> None:
    """Check every stored invariant (all books, or one); exit 1 naming the first violations."""
    report = library(ctx).verify(book)
    if as_json:
        print_json(report.to_json())
    else:
        console().print(
            f"checked {report.books} book(s), {report.sections} sections, "
            f"{report.section_texts} section texts, {report.blocks} blocks, {report.chunks} chunks"
        )
    if report.ok:
        if not as_json:
            console().print("[green]ok[/green]")
        return
    for problem in report.problems[:20]:
        click.echo(f"mindory: violation: {problem}", err=True)
    more = len(report.problems) - 20
    if more > 0 or report.truncated:
        click.echo(f"mindory: … and {'more' if report.truncated else more} more", err=True)
    click.echo(f"mindory: error: verify found {len(report.problems)} violation(s)", err=True)
    sys.exit(1)


@click.command()
@click.argument("book")
@click.option("--jsonl", is_flag=True, help="JSON lines (the only format so far; the default).")
@click.option("--fingerprint", help="A derivation other than the current one.")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Write to a file, not stdout (- : stdout).",
)
@click.option(
    "--annotations/--no-annotations",
    default=True,
    show_default=True,
    help="End with your highlights as W3C Web Annotations (one line each).",
)
@click.pass_context
def export(
    ctx: click.Context,
    book: str,
    jsonl: bool,
    fingerprint: str | None,
    output: Path | None,
    annotations: bool,
) -> None:
    """Export a book as JSON lines: book, TOC, sections (texts and maps), blocks, chunks.

    Then your annotations ({"type": "annotation", ...} lines; --no-annotations leaves
    them out). The book's lines are byte-identical for the same file and settings, in
    any library.
    """
    from mindory.cli.annotations import _reader

    lines = library(ctx).export(
        book, fingerprint=fingerprint, annotations=annotations, reader=_reader(ctx)
    )
    if output is not None and str(output) != "-":  # `-` is standard output, as everywhere
        tmp = output.with_name(output.name + ".part")
        with tmp.open("wb") as fh:
            for line in lines:
                fh.write(line.encode("utf-8") + b"\n")
        tmp.replace(output)
        return
    out = sys.stdout.buffer
    for line in lines:
        out.write(line.encode("utf-8") + b"\n")
    out.flush()


@click.command()
@click.argument("book")
@click.option("--yes", "-y", is_flag=True, help="Delete without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print the deleted book as JSON.")
@click.pass_context
def delete(ctx: click.Context, book: str, yes: bool, as_json: bool) -> None:
    """Delete a book and everything derived from it.

    Chunks, vectors and highlights go with it. On a terminal it asks first, unless --yes. Without a terminal (a script, a pipe)
    it refuses unless --yes: nothing could confirm it.
    """
    lib = library(ctx)
    if not yes:
        found = lib.book(book)  # a missing book is an error before any question
        what = f"{found.title!r} ({found.id[:12]}, {found.section_count} sections)"
        if not sys.stdin.isatty():
            raise click.UsageError(
                f"not deleting {what}: stdin is not a terminal, so nothing can confirm it; "
                "add --yes to delete without asking"
            )
        if not click.confirm(
            f"Delete {what} and everything derived from it, highlights included?",
            default=False,
            err=True,
        ):
            click.echo("mindory: nothing deleted", err=True)
            sys.exit(1)
        book = found.id
    info = lib.delete_book(book)
    if as_json:
        print_json(info.to_json())
    else:
        console().print(f"deleted {info.title} ({info.id[:12]})", highlight=False)


@click.command()
def where() -> None:
    """Print which library the other commands use."""
    ctx = click.get_current_context()
    from mindory.library import resolve_url

    url, path = resolve_url(ctx.find_root().obj.get("db"))
    from sqlalchemy.engine import make_url

    click.echo(str(path) if path is not None else make_url(url).render_as_string())
