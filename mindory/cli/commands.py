"""The ``mindory`` command: a thin door over :class:`mindory.library.Library`.

Every library command opens the library given by ``--db`` (or ``MINDORY_DB``,
else ``MINDORY_DATABASE_URL``, else the library in the user data directory),
calls Library methods and prints their results: tables for people, ``--json``
(the same shapes as the HTTP API) for scripts. Errors print one line
``mindory: error: …`` and exit non-zero; ``--debug`` shows the traceback.
``mindory chunk`` runs the pipeline on one file without a library.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text
from rich.tree import Tree
from sqlalchemy.engine import make_url

from mindory.errors import MindoryError
from mindory.importers import load_book
from mindory.library import (
    ImportFailure,
    ImportResult,
    Library,
    ProgressFn,
    TocNode,
    book_files_in,
    resolve_url,
)
from mindory.library.evidence import stats_command, sweep_command
from mindory.server.serve import serve
from mindory.text.chunking import chunk_book
from mindory.text.records import ChunkSettings, NormalizeProfile, Settings
from mindory.text.shapes import chunks_document

console = Console()
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])

# Share of a book's progress bar per import phase.
_PHASE_SPAN = {"read": (0.0, 0.05), "parse": (0.05, 0.6), "chunk": (0.6, 0.7), "write": (0.7, 1.0)}


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    line = text.splitlines()[0] if text else ""
    if isinstance(exc, MindoryError | ValueError):
        return line or type(exc).__name__
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _fail(exc: BaseException, debug: bool) -> None:
    if debug:
        raise exc
    click.echo(f"mindory: error: {_first_line(exc)}", err=True)
    sys.exit(1 if isinstance(exc, MindoryError) else 2)


class _Main(click.Group):
    """Turns every uncaught error into one line (or a traceback with --debug)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("mindory: interrupted", err=True)
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - the one place errors become messages
            _fail(exc, bool(ctx.params.get("debug")))


@click.group(cls=_Main)
@click.option(
    "--db",
    "db",
    envvar="MINDORY_DB",
    metavar="PATH",
    help="The library (a SQLite file or a database URL). Default: MINDORY_DB, else "
    "MINDORY_DATABASE_URL, else a library in the user data directory.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.pass_context
def main(ctx: click.Context, db: str | None, debug: bool) -> None:
    """mindory: exact places for every search hit in your books."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["db"] = db


def _library(ctx: click.Context) -> Library:
    obj = ctx.find_root().obj
    if "library" not in obj:
        obj["library"] = Library.open(obj.get("db"))
        ctx.find_root().call_on_close(obj["library"].close)
    lib: Library = obj["library"]
    return lib


def _print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False))


def _settings(size: int, overlap: int, min_size: int, nfkc: bool) -> Settings:
    return Settings(
        profile=NormalizeProfile(unicode_form="NFKC" if nfkc else "NFC"),
        chunking=ChunkSettings(size=size, overlap=overlap, min_size=min_size),
    )


def _settings_options(fn: F) -> F:
    fn = click.option("--nfkc", is_flag=True, help="Normalize with NFKC instead of NFC.")(fn)
    fn = click.option(
        "--min", "min_size", default=50, show_default=True, help="Shortest tail chunk."
    )(fn)
    fn = click.option("--overlap", default=100, show_default=True, help="Overlap (characters).")(fn)
    fn = click.option("--size", default=800, show_default=True, help="Window size (characters).")(
        fn
    )
    return fn


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


def _snippet(text: str, width: int = 40) -> str:
    flat = text[:width].replace("\n", "⏎")
    return flat + ("…" if len(text) > width else "")


# --------------------------------------------------------------------------- chunk


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@_settings_options
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
    """Chunk one book (EPUB or plain text) without a library and print the chunks."""
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
        table.add_row(
            str(c.index),
            str(c.section),
            f"{c.start}–{c.end}",
            f"{c.source_start}–{c.source_end}",
            f"{c.utf16_start}–{c.utf16_end}",
            _snippet(c.text),
        )
    console.print(table)


# --------------------------------------------------------------------------- import


@contextmanager
def _import_progress(
    enabled: bool, total_files: int
) -> Iterator[Callable[[Path], ProgressFn | None]]:
    """Per-book and overall progress bars (on stderr, gone when done)."""
    if not enabled:
        yield lambda _path: None
        return
    progress = Progress(
        TextColumn("{task.description}", table_column=None),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
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
                lo, hi = _PHASE_SPAN.get(phase, (0.0, 1.0))
                share = done / total if total else 1.0
                progress.update(
                    task,
                    completed=round(100 * (lo + (hi - lo) * share)),
                    description=f"{path.name[:40]}: {phase}",
                )

            return report

        yield for_book


def _say(line: str) -> None:
    err_console.print(line, markup=False, highlight=False, soft_wrap=True)


def _say_reanchored(result: ImportResult) -> None:
    """What a new edition did to the old one's highlights: counts, and every orphan."""
    if not result.replaces:
        return
    counts: dict[str, int] = {}
    for r in result.reanchored:
        counts[r.status] = counts.get(r.status, 0) + 1
    told = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "none"
    olds = ", ".join(sha[:12] for sha in result.replaces)
    _say(f"mindory: new edition of {olds}: highlights re-anchored: {told}")
    for r in result.reanchored:
        if r.status == "orphaned":
            _say(f"mindory: orphaned: {r.old_exact[:60]!r} (section {r.old_section}): {r.note}")


def _status_style(status: str) -> str:
    return {"created": "green", "rederived": "cyan", "unchanged": "dim", "failed": "red"}.get(
        status, ""
    )


@main.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@_settings_options
@click.option("--no-copy", is_flag=True, help="Store the files' paths, not their bytes.")
@click.option(
    "--replaces",
    metavar="BOOK",
    help="The file is a new edition of BOOK: re-anchor BOOK's highlights onto it.",
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
    no_copy: bool,
    replaces: str | None,
    as_json: bool,
) -> None:
    """Import books: files, or folders searched recursively for .txt and .epub.

    A bad file is reported by name and skipped; the others are imported. Exits
    with 1 if any file failed. With --replaces (one file), the highlights of the
    old edition move to the new one; each is reported (placed, or orphaned).
    """
    settings = _settings(size, overlap, min_size, nfkc)
    missing = [p for p in paths if not p.exists()]
    if missing:
        raise MindoryError("no such file or folder", path=str(missing[0]))
    files = book_files_in(paths)
    if replaces is not None and len(files) != 1:
        raise click.UsageError(f"--replaces takes one file, not {len(files)}")
    lib = _library(ctx)
    results: list[ImportResult | ImportFailure] = []
    show_progress = not as_json and err_console.is_terminal
    with _import_progress(show_progress, len(files)) as progress:
        for item in lib.import_many(
            files, settings, copy=not no_copy, progress=progress, replaces=replaces
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
        _print_json(
            {
                "results": [r.to_json() for r in results],
                "imported": len(results) - failed,
                "failed": failed,
            }
        )
    else:
        table = Table("file", "status", "title", "sections", "chunks", "seconds", title="import")
        for r in results:
            style = _status_style(r.status)
            if isinstance(r, ImportFailure):
                problem = r.error.removeprefix(f"{r.path}: ")
                table.add_row(Path(r.path).name, f"[{style}]failed", problem, "", "", "")
            else:
                table.add_row(
                    Path(r.path).name,
                    f"[{style}]{r.status}",
                    r.title,
                    str(r.sections),
                    str(r.chunks),
                    f"{r.timings.get('total', 0.0):.2f}",
                )
        console.print(table)
        console.print(f"{len(results) - failed} imported, {failed} failed")
    if failed:
        sys.exit(1)


# --------------------------------------------------------------------------- reading


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def books(ctx: click.Context, as_json: bool) -> None:
    """List the books in the library."""
    items = _library(ctx).books()
    if as_json:
        _print_json([b.to_json() for b in items])
        return
    if not items:
        console.print("no books yet: mindory import PATH")
        return
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
    console.print(table)


def _toc_tree(tree: Tree, nodes: Sequence[TocNode]) -> None:
    for node in nodes:
        where = f"§{node.section} @{node.source_offset}" if node.section is not None else "?"
        branch = tree.add(f"{node.title}  [dim]{where}[/dim]")
        _toc_tree(branch, node.children)


@main.command()
@click.argument("book")
@click.option("--toc", is_flag=True, help="Show the table of contents.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def show(ctx: click.Context, book: str, toc: bool, as_json: bool) -> None:
    """Show a book: metadata, derivations and sections (BOOK: id, id prefix or title)."""
    lib = _library(ctx)
    info = lib.book(book)
    sections = lib.sections(info.id)
    nodes = lib.toc(info.id) if toc else ()
    if as_json:
        doc = {**info.to_json(), "sections": [s.to_json() for s in sections]}
        if toc:
            doc["toc"] = [n.to_json() for n in nodes]
        _print_json(doc)
        return
    console.print(f"[bold]{info.title}[/bold]  {info.id}")
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
    console.print("  ".join(facts))
    for d in info.derivations:
        mark = "*" if d.current else " "
        console.print(
            f"{mark} derivation {d.fingerprint}: {d.chunk_count} chunks, "
            f"{json.dumps(d.settings, sort_keys=True)}",
            markup=False,
            highlight=False,
        )
    for warning in info.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
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
    console.print(table)
    if toc:
        tree = Tree("[bold]contents[/bold]")
        _toc_tree(tree, nodes)
        console.print(tree)


@main.command()
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
    lib = _library(ctx)
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
        _print_json(
            {
                "book": info.id,
                "fingerprint": fingerprint or (current.fingerprint if current else None),
                "chunks": [c.to_json() for c in items],
            }
        )
        return
    table = Table("§", "#", "id", "normalized", "source", "UTF-16", "text")
    for c in items:
        table.add_row(
            str(c.section),
            str(c.index),
            c.id[:12],
            f"{c.start}–{c.end}",
            f"{c.source_start}–{c.source_end}",
            f"{c.utf16_start}–{c.utf16_end}",
            _snippet(c.text),
        )
    console.print(table)


@main.command()
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
    result = _library(ctx).blocks(book, section, page, page_size)
    if as_json:
        _print_json(result.to_json())
        return
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
            _snippet(b.text, 60),
        )
    console.print(table)


@main.command()
@click.argument("book", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def verify(ctx: click.Context, book: str | None, as_json: bool) -> None:
    """Check every stored invariant (all books, or one); exit 1 naming the first violations."""
    report = _library(ctx).verify(book)
    if as_json:
        _print_json(report.to_json())
    else:
        console.print(
            f"checked {report.books} book(s), {report.sections} sections, "
            f"{report.section_texts} section texts, {report.blocks} blocks, {report.chunks} chunks"
        )
    if report.ok:
        if not as_json:
            console.print("[green]ok[/green]")
        return
    for problem in report.problems[:20]:
        click.echo(f"mindory: violation: {problem}", err=True)
    more = len(report.problems) - 20
    if more > 0 or report.truncated:
        click.echo(f"mindory: … and {'more' if report.truncated else more} more", err=True)
    click.echo(f"mindory: error: verify found {len(report.problems)} violation(s)", err=True)
    sys.exit(1)


@main.command()
@click.argument("book")
@click.option("--jsonl", is_flag=True, help="JSON lines (the only format so far; the default).")
@click.option("--fingerprint", help="A derivation other than the current one.")
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), help="Write to a file, not stdout."
)
@click.pass_context
def export(
    ctx: click.Context, book: str, jsonl: bool, fingerprint: str | None, output: Path | None
) -> None:
    """Export a book as JSON lines: book, TOC, sections (texts and maps), blocks, chunks.

    The output is byte-identical for the same file and settings, in any library.
    """
    lines = _library(ctx).export(book, fingerprint=fingerprint)
    if output is not None:
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


@main.command()
@click.argument("book")
@click.option("--json", "as_json", is_flag=True, help="Print the deleted book as JSON.")
@click.pass_context
def delete(ctx: click.Context, book: str, as_json: bool) -> None:
    """Delete a book and everything derived from it."""
    info = _library(ctx).delete_book(book)
    if as_json:
        _print_json(info.to_json())
    else:
        console.print(f"deleted {info.title} ({info.id[:12]})", highlight=False)


# --------------------------------------------------------------------------- search


@main.command()
@click.option(
    "--embedder",
    "embedder",
    metavar="SPEC",
    help="hashed (default), hashed:768, model2vec:/path, fastembed:/path, "
    "sentence-transformers:/path. Default: the current embedding's.",
)
@click.option(
    "--context-header/--no-context-header",
    default=None,
    help="Embed 'Book › Section' before each chunk's text (default: as before, else off).",
)
@click.option("--batch", default=256, show_default=True, help="Chunks per batch.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def embed(
    ctx: click.Context,
    embedder: str | None,
    context_header: bool | None,
    batch: int,
    as_json: bool,
) -> None:
    """Embed the chunks that have no vector yet (current derivations), then update the index."""
    lib = _library(ctx)
    show = not as_json and err_console.is_terminal
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not show,
    )
    with progress:
        task = progress.add_task("embedding", total=None)

        def report(_phase: str, done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        result = lib.embed(
            embedder, context_header=context_header, batch_size=batch, progress=report
        )
    if as_json:
        _print_json(result.to_json())
        return
    e = result.embedding
    rate = result.to_json()["chunks_per_second"]
    console.print(
        f"embedded {result.embedded} chunk(s) with {e.embedder_id}"
        + (" + context header" if e.context_header else "")
        + f" in {result.seconds:.2f} s"
        + (f" ({rate:,.0f} chunks/s in the embedder)" if rate else "")
        + f"; {e.vectors} vectors for {result.total} current chunks",
        highlight=False,
    )
    if result.index is not None:
        _print_index(result.index)


def _print_index(info: Any) -> None:
    console.print(
        f"index {info.status}: {info.kind}, {info.count} vectors × {info.dim} "
        f"({info.embedder}) in {info.seconds:.2f} s → {info.path or 'memory only'}",
        highlight=False,
    )


@main.command()
@click.option("--rebuild", is_flag=True, help="Rebuild from the stored vectors.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def index(ctx: click.Context, rebuild: bool, as_json: bool) -> None:
    """Check the vector index against the database; repair or rebuild it when they differ."""
    info = _library(ctx).index(rebuild=rebuild)
    if as_json:
        _print_json(info.to_json())
    else:
        _print_index(info)


_SNIPPET = 240


def _flat(text: str) -> str:
    return " ".join(text.split())


def _snippet_text(hit: Any) -> Text:
    """The hit's source text around its first match, matched words highlighted."""
    loc = hit.locator
    chunk = loc.highlight
    spans = [
        (m.source_start - loc.source_start, m.source_end - loc.source_start) for m in hit.matches
    ]
    anchor = spans[0][0] if spans else 0
    lo = max(0, anchor - _SNIPPET // 3)
    hi = min(len(chunk), lo + _SNIPPET)
    lo = max(0, hi - _SNIPPET)
    out = Text("…" if lo > 0 else "")
    pos = lo
    for a, b in spans:
        a, b = max(a, lo), min(b, hi)
        if b <= a or a < pos:
            continue
        out.append(_flat_keep_edges(chunk[pos:a]))
        out.append(_flat(chunk[a:b]), style="bold black on yellow")
        pos = b
    out.append(_flat_keep_edges(chunk[pos:hi]))
    if hi < len(chunk):
        out.append("…")
    return out


def _flat_keep_edges(text: str) -> str:
    """Whitespace runs → one space, keeping a space at either edge."""
    if not text:
        return ""
    core = _flat(text)
    lead = " " if text[0].isspace() and core else ""
    trail = " " if text[-1].isspace() else ""
    return lead + core + trail if core else (" " if text.isspace() else "")


def _place_of(loc: Any) -> str:
    if loc.cfi is not None:
        return loc.cfi
    if loc.fragment is not None:
        return loc.fragment
    return f"source [{loc.source_start}, {loc.source_end})"


@main.command()
@click.argument("query")
@click.option("--book", help="Only this book (id, id prefix or title).")
@click.option("--section", type=int, help="Only this section of the book (its number).")
@click.option("--k", "k", default=10, show_default=True, help="Number of hits.")
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "vector", "lexical"]),
    default="hybrid",
    show_default=True,
    help="Fused ranks, vectors alone, or full-text search alone.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    book: str | None,
    section: int | None,
    k: int,
    mode: str,
    as_json: bool,
) -> None:
    """Search the library; every hit comes with its exact place."""
    result = _library(ctx).search(query, k=k, mode=mode, book=book, section=section)
    if as_json:
        _print_json(result.to_json())
        return
    for warning in result.warnings:
        click.echo(f"mindory: warning: {warning}", err=True)
    if not result.hits:
        console.print("no hits")
        return
    for hit in result.hits:
        loc = hit.locator
        why = ", ".join(
            f"{mode_name} #{s.rank}" for mode_name, s in hit.scores.items() if s is not None
        )
        head = Text(f"{hit.rank:>2}. ", style="bold")
        head.append(hit.book_title, style="bold")
        if hit.section_title and hit.section_title != hit.book_title:
            head.append(f" › {hit.section_title}")
        head.append(f"   {hit.score:.4f} ({why})", style="dim")
        console.print(head)
        where = f"    §{hit.section}  {_place_of(loc)}"
        if loc.blocks is not None:
            where += f"  block {loc.blocks.first}–{loc.blocks.last}, page {loc.blocks.page}"
        console.print(where, style="cyan", highlight=False, markup=False)
        console.print(Text("    ").append(_snippet_text(hit)))
    timing = result.timings.get("total", 0.0)
    console.print(f"{len(result.hits)} hit(s) in {timing:.1f} ms ({result.mode})", style="dim")


@main.command()
@click.argument("book")
@click.option("--cfi", help="An EPUB CFI (a point, or a range: its start).")
@click.option("--section", type=int, help="A section number (with --offset).")
@click.option("--offset", type=int, help="A position in the section's source text.")
@click.option("--utf16", is_flag=True, help="--offset counts UTF-16 units, not code points.")
@click.option("--chunk", "chunk", help="Print the Locator of this chunk (id or prefix).")
@click.option("--page-size", default=20, show_default=True, help="Render blocks per page.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def locate(
    ctx: click.Context,
    book: str,
    cfi: str | None,
    section: int | None,
    offset: int | None,
    utf16: bool,
    chunk: str | None,
    page_size: int,
    as_json: bool,
) -> None:
    """Where a place is: a CFI or a section offset → section, block, page, chunks.

    With --chunk, the full Locator (Readium + W3C selectors) of one chunk.
    """
    lib = _library(ctx)
    if chunk is not None:
        loc = lib.locate_chunk(book, chunk, page_size=page_size)
        if as_json:
            _print_json(loc.to_json())
            return
        console.print(
            f"[bold]{escape(loc.title)}[/bold]  §{loc.section}  {escape(_place_of(loc))}",
            highlight=False,
        )
        console.print(
            f"source [{loc.source_start}, {loc.source_end}) · UTF-16 [{loc.utf16_start}, "
            f"{loc.utf16_end}) · normalized [{loc.normalized_start}, {loc.normalized_end}) · "
            f"position {loc.position} · progression {loc.progression:.3f}",
            highlight=False,
        )
        console.print(_flat(loc.highlight)[:300], highlight=False, markup=False)
        return
    if cfi is None and (section is None or offset is None):
        raise click.UsageError("give --cfi, or --section and --offset (or --chunk)")
    result = lib.locate(
        book, cfi=cfi, section=section, offset=offset, utf16=utf16, page_size=page_size
    )
    if as_json:
        _print_json(result.to_json())
        return
    pos = result.position
    locs = pos["locations"]
    console.print(
        f"[bold]{escape(result.title)}[/bold] › {escape(pos['title'])}  (§{pos['section']})",
        highlight=False,
    )
    src = pos["source"]
    line = (
        f"source {src['position']} · UTF-16 {src['utf16Position']}"
        + (f" · byte {src['bytePosition']}" if "bytePosition" in src else "")
        + f" · normalized {pos['normalized']['position']}"
        + f" · block {pos['block']} (page {pos['page']} of {pos['pageSize']}-block pages)"
        + f" · position {locs['position']}"
    )
    console.print(line, highlight=False)
    if "cfi" in locs:
        console.print(f"cfi {locs['cfi']}", highlight=False, markup=False)
    for fragment in locs.get("fragments", []):
        console.print(fragment, highlight=False, markup=False)
    table = Table("chunk", "#", "source", "UTF-16", title="chunks containing it")
    for c in result.chunks:
        table.add_row(
            c.id[:12],
            str(c.index),
            f"{c.source_start}–{c.source_end}",
            f"{c.utf16_start}–{c.utf16_end}",
        )
    console.print(table)


@main.command("eval")
@click.argument("queries", type=click.Path(path_type=Path))
@click.option("--k", "k", default=10, show_default=True, help="MRR counts ranks up to k.")
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(["hybrid", "vector", "lexical"]),
    help="Modes to evaluate (repeat; default: all three).",
)
@click.option("--details", is_flag=True, help="Show each query's ranks.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def eval_(
    ctx: click.Context,
    queries: Path,
    k: int,
    modes: Sequence[str],
    details: bool,
    as_json: bool,
) -> None:
    """Retrieval quality on a query set: recall@1/5/10 and MRR per mode, completeness."""
    from mindory.search.evaluation import evaluate, load_queries
    from mindory.search.fusion import MODES

    report = evaluate(_library(ctx), load_queries(queries), k=k, modes=tuple(modes) or MODES)
    if as_json:
        _print_json(report.to_json())
        return
    for problem in report.missing:
        click.echo(f"mindory: warning: {problem}", err=True)
    table = Table("group", "mode", "n", "R@1", "R@5", "R@10", f"MRR@{k}", title=str(queries))
    for name, metrics in report.groups.items():
        for mode_name, m in metrics.items():
            table.add_row(
                name,
                mode_name,
                str(m.n),
                f"{m.recall[1]:.3f}",
                f"{m.recall[5]:.3f}",
                f"{m.recall[10]:.3f}",
                f"{m.mrr:.3f}",
            )
        table.add_section()
    console.print(table)
    console.print(
        f"answer completeness: {report.completeness:.3f} of the answers lie entirely "
        "inside one chunk",
        highlight=False,
    )
    if details:
        rows = Table("line", "query", *report.modes, "complete")
        for o in report.outcomes:
            rows.add_row(
                str(o.query.line),
                o.query.query[:60],
                *(str(o.ranks[m] or "—") for m in report.modes),
                "yes" if o.complete else "no",
            )
        console.print(rows)


@main.command()
def where() -> None:
    """Print which library the other commands use."""
    ctx = click.get_current_context()
    url, path = resolve_url(ctx.find_root().obj.get("db"))
    click.echo(str(path) if path is not None else make_url(url).render_as_string())


# mindory stats / mindory sweep: the evidence for choosing chunk settings (docs/evidence.md).
main.add_command(stats_command)
main.add_command(sweep_command)

# mindory serve: the HTTP API and the reader page (mindory/serve.py, docs/api.md).
main.add_command(serve)


if __name__ == "__main__":  # pragma: no cover
    main()
