"""Commands over vectors and search: embed, index, search, locate, eval."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

import click

from mindory.cli.common import (
    ProgressLines,
    console,
    err_console,
    library,
    print_json,
    process_started,
)

if TYPE_CHECKING:
    from rich.text import Text

# rich is imported inside the commands that draw with it: ~50 ms a search need not wait for
# before its first hit (the commands of this module share one import of it).


@click.command()
@click.option(
    "--embedder",
    "embedder",
    metavar="SPEC",
    help="minilm+e5 (MiniLM for Latin script, multilingual-e5 for Chinese and Japanese), "
    "minilm, e5, hashed, hashed:768, model2vec:/path, fastembed:/path, "
    "sentence-transformers:/path. Default: the current embedding's, else minilm+e5.",
)
@click.option(
    "--context-header/--no-context-header",
    default=None,
    help="Embed 'Book › Section' before each chunk's text (default: as before, else off).",
)
@click.option("--batch", default=256, show_default=True, help="Chunks per batch.")
@click.option(
    "--windows",
    is_flag=True,
    default=None,
    help="Also embed each chunk's sentence windows once, so search --rerank reads them "
    "back in milliseconds (kept up to date from then on).",
)
@click.option(
    "--cross-language",
    is_flag=True,
    default=None,
    help="Also have multilingual-e5 read each Latin-script chunk, so a question in Chinese "
    "or Japanese about such a book is found by meaning (kept up to date from then on).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def embed(
    ctx: click.Context,
    embedder: str | None,
    context_header: bool | None,
    batch: int,
    windows: bool | None,
    cross_language: bool | None,
    as_json: bool,
) -> None:
    """Embed the chunks that have no vector yet (current derivations), then update the index."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    lib = library(ctx)
    show = not as_json and err_console().is_terminal
    # Not a terminal (a log, a pipe, --json): lines now and then instead of a bar that
    # draws nothing there for the whole run.
    lines = None if show else ProgressLines("embedded", "chunks")
    window_lines = None if show else ProgressLines("embedded the windows of", "chunks")
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console(),
        transient=True,
        disable=not show,
    )
    with progress:
        task = progress.add_task("embedding", total=None)

        def report(phase: str, done: int, total: int) -> None:
            log = window_lines if phase == "windows" else lines
            if log is not None:
                log(done, total)
            name = "windows" if phase == "windows" else "embedding"
            progress.update(task, completed=done, total=total, description=name)

        result = lib.embed(
            embedder,
            context_header=context_header,
            batch_size=batch,
            progress=report,
            windows=windows or None,
            cross_language=cross_language or None,
        )
    if as_json:
        print_json(result.to_json())
        return
    e = result.embedding
    rate = result.to_json()["chunks_per_second"]
    console().print(
        f"embedded {result.embedded} chunk(s) with {e.embedder_id}"
        + (" + context header" if e.context_header else "")
        + f" in {result.seconds:.2f} s"
        + (f" ({rate:,.0f} chunks/s in the embedder)" if rate else "")
        + f"; {e.vectors} vectors for {result.total} current chunks",
        highlight=False,
    )
    if result.windows is not None:
        w = result.windows
        console().print(
            f"windows: {w.windows} for {w.chunks} chunk(s) in {w.seconds:.2f} s "
            f"({', '.join(w.windows_keys)})",
            highlight=False,
        )
    if result.index is not None:
        _print_index(result.index)


def _print_index(info: Any) -> None:
    console().print(
        f"index {info.status}: {info.kind}, {info.count} vectors × {info.dim} "
        f"({info.embedder}) in {info.seconds:.2f} s → {info.path or 'memory only'}",
        highlight=False,
    )


@click.command()
@click.option(
    "--rebuild", is_flag=True, help="Analyse every chunk again; rebuild the vectors' index."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def index(ctx: click.Context, rebuild: bool, as_json: bool) -> None:
    """Bring the word index and the vector index up to date (repair or rebuild them)."""
    report = library(ctx).reindex(rebuild=rebuild)
    if as_json:
        print_json(report.to_json())
        return
    w = report.words
    console().print(
        f"word index: {w.chunks} chunks, {w.added} analysed now"
        + (" (rebuilt)" if w.rebuilt else "")
        + f" in {w.seconds:.2f} s",
        highlight=False,
    )
    if report.vectors is None:
        console().print("no vectors yet (mindory embed)", highlight=False)
    else:
        _print_index(report.vectors)


_SNIPPET = 240


def _flat(text: str) -> str:
    return " ".join(text.split())


def _snippet_text(hit: Any) -> Text:
    """The hit's text as a reader sees it (without ruby annotations: the display text)
    around its first match, matched words highlighted."""
    from rich.text import Text

    loc = hit.locator
    chunk = loc.highlight
    spans = [
        (m.source_start - loc.source_start, m.source_end - loc.source_start) for m in hit.matches
    ]
    display = getattr(hit, "display", None)
    if display is not None:
        chunk = display.highlight
        spans = [(display.position(a), display.position(b)) for a, b in spans]
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


@click.command()
@click.argument("query")
@click.option("--book", help="Only this book (id, id prefix or title).")
@click.option("--section", type=int, help="Only this section of the book (its number).")
@click.option("--k", "k", default=10, show_default=True, help="Number of hits.")
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "vector", "lexical", "words", "trigram"]),
    default="hybrid",
    show_default=True,
    help="Fused ranks; vectors alone; the two text indexes fused; the word index or the "
    "trigram index alone.",
)
@click.option(
    "--rerank",
    is_flag=True,
    help="Re-read the first 10 hits sentence by sentence (a second stage): milliseconds "
    "once embed --windows has stored the windows, ~1-10 s without (docs/search.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Say what each part cost (also in --json's timings, in milliseconds).",
)
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    book: str | None,
    section: int | None,
    k: int,
    mode: str,
    rerank: bool,
    as_json: bool,
    verbose: bool,
) -> None:
    """Search the library; every hit comes with its exact place."""
    import dataclasses

    t0 = perf_counter()
    lib = library(ctx)
    t1 = perf_counter()
    result = lib.search(query, k=k, mode=mode, book=book, section=section, rerank=rerank)
    # The command's own parts before the library's: the process's start (interpreter,
    # click, this module) and opening the library; "command" is all of it until now.
    timings = {
        "start": 1000 * (t0 - process_started()),
        "open": 1000 * (t1 - t0),
        **result.timings,
        "command": 1000 * (perf_counter() - process_started()),
    }
    result = dataclasses.replace(result, timings=timings)
    if as_json:
        print_json(result.to_json())
        return
    for warning in result.warnings:
        click.echo(f"mindory: warning: {warning}", err=True)
    if not result.hits:
        console().print("no hits")
    _print_hits(result)
    if verbose:
        click.echo(_timings_line(result.timings), err=True)


def _print_hits(result: Any) -> None:
    from rich.text import Text

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
        console().print(head)
        where = f"    §{hit.section}  {_place_of(loc)}"
        if loc.blocks is not None:
            where += f"  block {loc.blocks.first}–{loc.blocks.last}, page {loc.blocks.page}"
        console().print(where, style="cyan", highlight=False, markup=False)
        console().print(Text("    ").append(_snippet_text(hit)))
    if result.hits:
        timing = result.timings.get("total", 0.0)
        console().print(
            f"{len(result.hits)} hit(s) in {timing:.1f} ms ({_ran(result)})",
            style="dim",
            highlight=False,
        )


# What each timing measures, in the order a search runs (--verbose; docs/search.md).
TIMING_NAMES = {
    "start": "start (interpreter, click, command)",
    "open": "open library",
    "imports": "search code",
    "analysis": "query analysis",
    "words": "word list",
    "lexical": "trigram list",
    "embed": "query vector (model load included)",
    "index": "vector index",
    "vector": "vector list",
    "wait": "waited for vectors",
    "fuse": "fusion",
    "arrange": "arrange",
    "locate": "locate",
    "total": "search",
    "command": "whole command",
}


def _timings_line(timings: Any) -> str:
    """``timings (ms): start 95 · open library 40 · …``: the known parts in order, then
    any others."""
    names = [n for n in TIMING_NAMES if n in timings] + [
        n for n in timings if n not in TIMING_NAMES
    ]
    parts = [f"{TIMING_NAMES.get(n, n)} {timings[n]:.0f}" for n in names]
    return "timings (ms): " + " · ".join(parts)


def _ran(result: Any) -> str:
    """The search that ran: hybrid without vectors is the two text indexes alone, and
    the footer says so (the warning above says why)."""
    if result.mode == "hybrid" and result.embedding is None:
        return "words and trigram: no vectors yet"
    return str(result.mode)


@click.command()
@click.argument("book")
@click.option("--cfi", help="An EPUB CFI (a point, or a range: its start).")
@click.option("--section", type=int, help="A section number (with --offset or --section-offset).")
@click.option(
    "--offset",
    type=int,
    help="A position in book source coordinates: plain text from the file's start "
    "(as search's char=N and a chunk's source span), EPUB from the section's start.",
)
@click.option(
    "--section-offset",
    type=int,
    help="A position counted from the start of --section's source text.",
)
@click.option("--utf16", is_flag=True, help="The offsets count UTF-16 units, not code points.")
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
    section_offset: int | None,
    utf16: bool,
    chunk: str | None,
    page_size: int,
    as_json: bool,
) -> None:
    """Where a place is: a CFI or an offset → section, block, page, chunks.

    --offset is in book source coordinates (docs/coordinates.md): for plain text the
    file-global number search prints as char=N (--section may then be left out); for
    EPUB the section's own. --section N --section-offset M counts from section N's start.
    With --chunk, the full Locator (Readium + W3C selectors) of one chunk.
    """
    from rich.markup import escape
    from rich.table import Table

    lib = library(ctx)
    if chunk is not None:
        loc = lib.locate_chunk(book, chunk, page_size=page_size)
        if as_json:
            print_json(loc.to_json())
            return
        console().print(
            f"[bold]{escape(loc.title)}[/bold]  §{loc.section}  {escape(_place_of(loc))}",
            highlight=False,
        )
        console().print(
            f"source [{loc.source_start}, {loc.source_end}) · UTF-16 [{loc.utf16_start}, "
            f"{loc.utf16_end}) · normalized [{loc.normalized_start}, {loc.normalized_end}) · "
            f"position {loc.position} · progression {loc.progression:.3f}",
            highlight=False,
        )
        console().print(_flat(loc.highlight)[:300], highlight=False, markup=False)
        return
    if offset is not None and section_offset is not None:
        raise click.UsageError("give --offset (book coordinates) or --section-offset, not both")
    if section_offset is not None and section is None:
        raise click.UsageError("--section-offset counts from a section's start: give --section")
    if (cfi is None) == (offset is None and section_offset is None):
        raise click.UsageError(
            "give --cfi, or --offset [--section N], or --section N --section-offset M (or --chunk)"
        )
    result = lib.locate(
        book,
        cfi=cfi,
        section=section,
        offset=offset,
        section_offset=section_offset,
        utf16=utf16,
        page_size=page_size,
    )
    if as_json:
        print_json(result.to_json())
        return
    pos = result.position
    locs = pos["locations"]
    console().print(
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
    console().print(line, highlight=False)
    if "cfi" in locs:
        console().print(f"cfi {locs['cfi']}", highlight=False, markup=False)
    for fragment in locs.get("fragments", []):
        console().print(fragment, highlight=False, markup=False)
    table = Table("chunk", "#", "source", "UTF-16", title="chunks containing it")
    for c in result.chunks:
        table.add_row(
            c.id[:12],
            str(c.index),
            f"{c.source_start}–{c.source_end}",
            f"{c.utf16_start}–{c.utf16_end}",
        )
    console().print(table)


@click.command("eval")
@click.argument("queries", type=click.Path(path_type=Path))
@click.option("--k", "k", default=10, show_default=True, help="MRR counts ranks up to k.")
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(["hybrid", "vector", "lexical", "words", "trigram", "rerank"]),
    help="Modes to evaluate (repeat; default: hybrid, vector and lexical; rerank: hybrid "
    "with the second stage).",
)
@click.option(
    "--within-book", is_flag=True, help="Search each query's own book only (not the library)."
)
@click.option("--details", is_flag=True, help="Show each query's ranks.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def eval_(
    ctx: click.Context,
    queries: Path,
    k: int,
    modes: Sequence[str],
    within_book: bool,
    details: bool,
    as_json: bool,
) -> None:
    """Retrieval quality on a query set: recall@1/5/10 and MRR per mode, completeness."""
    from rich.table import Table

    from mindory.search.evaluation import evaluate, load_queries
    from mindory.search.fusion import MODES

    report = evaluate(
        library(ctx),
        load_queries(queries),
        k=k,
        modes=tuple(modes) or MODES,
        within_book=within_book,
    )
    if as_json:
        print_json(report.to_json())
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
    console().print(table)
    console().print(
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
        console().print(rows)
