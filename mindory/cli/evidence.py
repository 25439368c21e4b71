"""``mindory stats`` and ``mindory sweep``: the evidence for choosing chunk settings
(:mod:`mindory.library.evidence`, docs/evidence.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from mindory.cli.common import library, print_json
from mindory.errors import MindoryError, NotFoundError
from mindory.library import plot
from mindory.library.evidence import (
    BookSource,
    SweepResult,
    book_stats,
    load_query_sets,
    looks_like_path,
    parse_sizes,
    parse_strategies,
    queries_for,
    reasons_text,
    run_sweep,
    stats_document,
    sweep_settings,
)
from mindory.search.evaluation import EvalQuery
from mindory.text.records import STRATEGIES


def resolve_book(ctx: click.Context, ref: str) -> BookSource:
    """A file path (read directly) or a library reference (id, id prefix, title)."""
    p = Path(ref)
    if p.is_file():
        return BookSource.from_file(p)
    if p.is_dir():
        raise MindoryError("a folder, not a book file", path=ref)
    try:
        return BookSource.from_library(library(ctx), ref)
    except NotFoundError:
        if looks_like_path(ref):
            raise NotFoundError(
                f"{ref}: no such file, and no book of the library by that name"
            ) from None
        raise


@click.command("stats")
@click.argument("book")
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    metavar="NAME",
    help=f"Strategy to measure (repeat or comma-separate; default all: {', '.join(STRATEGIES)}).",
)
@click.option(
    "--size",
    type=int,
    default=None,
    help="Chunk size (characters). Default: the size the book was imported with (file: 800).",
)
@click.option("--overlap", type=int, default=None, help="Window overlap (default: as imported).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
def stats_command(
    ctx: click.Context,
    book: str,
    strategies: Sequence[str],
    size: int | None,
    overlap: int | None,
    as_json: bool,
) -> None:
    """Chunk statistics of BOOK (a library book or a file) under each strategy.

    Length (mean, median, P95, min, max), the share of chunks ending at a sentence or
    paragraph boundary, chunks cut inside a sentence, and chunks over the size with the
    reason. Computed in memory; nothing is written.
    """
    from rich import box
    from rich.console import Console
    from rich.table import Table

    names = parse_strategies(strategies)
    source = resolve_book(ctx, book)
    base = source.settings.chunking
    size = size if size is not None else base.size
    try:
        # The window overlap as given (checked), else as imported but at most half the size.
        settings = replace(
            base,
            strategy="window",
            size=size,
            overlap=overlap if overlap is not None else min(base.overlap, max(0, size // 2)),
            min_size=min(base.min_size, max(0, size // 2)),
        )
    except ValueError as exc:
        raise MindoryError(str(exc)) from None
    stats = book_stats(source.sections(), settings, names)
    if as_json:
        print_json(stats_document(source, settings, stats))
        return
    table = Table(
        title=f"{source.title}: chunk lengths at size {settings.size} "
        f"(window overlap {min(settings.overlap, settings.size // 2)})",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("strategy", no_wrap=True)
    for header in (
        "chunks",
        "mean",
        "median",
        "P95",
        "min",
        "max",
        "boundary",
        "mid-sent.",
        "over",
    ):
        table.add_column(header, justify="right", no_wrap=True)
    notes = [
        "boundary: ends at a paragraph, sentence or section end · mid-sent.: cut inside "
        "a sentence · over: longer than the size"
    ]
    for name, st in stats.items():
        table.add_row(
            name,
            str(st["chunks"]),
            f"{st['mean']:.1f}",
            f"{st['median']:.0f}",
            f"{st['p95']:.0f}",
            str(st["min"]),
            str(st["max"]),
            f"{100 * st['boundary_share']:.1f} %",
            str(st["cut_inside_sentence"]),
            str(st["over_max"]),
        )
        if st["over_max"]:
            notes.append(f"{name}: over the size: {reasons_text(st['over_max_reasons'])}")
        if st.get("fallback_sections"):
            notes.append(
                f"{name}: {st['fallback_sections']} section(s) had fewer than three turns "
                "(chunked by paragraph)"
            )
    console = Console()
    if not console.is_terminal:
        console.width = 120
    console.print(table)
    for note in notes:
        console.print(note, highlight=False)


@click.command("sweep")
@click.argument("books", nargs=-1, required=True, metavar="BOOK...")
@click.option(
    "--queries",
    "query_paths",
    multiple=True,
    required=True,
    metavar="Q.jsonl",
    help="Query set (JSON lines; repeat, or a folder of *.jsonl). Each book gets the "
    "queries whose 'book' is its file name, title or id.",
)
@click.option("--sizes", default="300,500,800,1200", show_default=True, help="Chunk sizes to try.")
@click.option("--overlaps", default="0,50,100", show_default=True, help="Window overlaps to try.")
@click.option(
    "--strategies",
    "strategy_args",
    multiple=True,
    metavar="NAMES",
    help="Comma-separated strategies (default all).",
)
@click.option("--k", "k", default=10, show_default=True, help="Recall@k and MRR@k.")
@click.option(
    "--mode",
    default="hybrid",
    show_default=True,
    type=click.Choice(["hybrid", "vector", "lexical"]),
    help="Search mode.",
)
@click.option(
    "--embedder", default="hashed", show_default=True, metavar="SPEC", help="Embedder spec."
)
@click.option("--context-header", is_flag=True, help="Embed with the 'Book › Section' header.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=Path("sweep.png"),
    show_default=True,
    help="The PNG plot.",
)
@click.option("--no-plot", is_flag=True, help="Do not draw the plot (no matplotlib needed).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
def sweep_command(
    ctx: click.Context,
    books: Sequence[str],
    query_paths: Sequence[Path],
    sizes: str,
    overlaps: str,
    strategy_args: Sequence[str],
    k: int,
    mode: str,
    embedder: str,
    context_header: bool,
    out: Path,
    no_plot: bool,
    as_json: bool,
) -> None:
    """Measure recall@k, MRR and answer completeness for each chunking setting.

    Every setting (strategy × size × overlap; overlap only for window) imports BOOK
    into a temporary library, embeds it and runs the query set through search. Prints
    a table and writes a PNG plot (matplotlib: the 'plot' extra).
    """
    from rich import box
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    names = parse_strategies(strategy_args)
    size_list = parse_sizes(sizes, "--sizes", minimum=20)
    overlap_list = parse_sizes(overlaps, "--overlaps", minimum=0)
    if k < 1:
        raise MindoryError(f"--k must be 1 or more, not {k}")
    if not no_plot:
        plot.require_matplotlib()
    queries = load_query_sets([Path(p) for p in query_paths])
    sources = [resolve_book(ctx, ref) for ref in books]
    plan: list[tuple[BookSource, list[EvalQuery]]] = []
    for source in sources:
        mine = queries_for(source, queries)
        if not mine:
            named = sorted({q.book for q in queries})
            raise MindoryError(
                f"no query is about {source.file_name} (the query sets name: {', '.join(named)})"
            )
        plan.append((source, mine))
    err = Console(stderr=True)
    results: list[SweepResult] = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
        disable=as_json or not err.is_terminal,
    ) as bar:
        for source, mine in plan:
            settings, skipped = sweep_settings(
                names, size_list, overlap_list, source.settings.chunking
            )
            task = bar.add_task(source.file_name, total=len(settings))

            def report(
                done: int, _total: int, label: str, task: Any = task, name: str = source.file_name
            ) -> None:
                bar.update(task, completed=done, description=f"{name}: {label}")

            results.append(
                run_sweep(
                    source,
                    mine,
                    settings,
                    k=k,
                    mode=mode,
                    embedder=embedder,
                    context_header=context_header,
                    skipped=skipped,
                    progress=report,
                )
            )
    figure: Path | None = None if no_plot else plot.plot_sweep(results, out)
    if as_json:
        print_json(
            {"books": [r.to_json() for r in results], "plot": str(figure) if figure else None}
        )
        return
    console = Console()
    if not console.is_terminal:
        console.width = 120  # a file or pipe: do not squeeze the table into 80 columns
    for res in results:
        for problem in res.missing:
            click.echo(f"mindory: warning: {problem}", err=True)
        best = res.best()
        table = Table(
            title=f"{res.book['title']}: {res.queries} queries ({res.answers_found} answers "
            f"found), {res.mode}, {res.embedder}",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        table.add_column("strategy", no_wrap=True)
        for header in ("size", "overlap", "chunks", "mean len", f"R@{res.k}", f"MRR@{res.k}"):
            table.add_column(header, justify="right", no_wrap=True)
        table.add_column("complete", justify="right", no_wrap=True)
        deltas = res.deltas()
        if deltas:
            table.add_column("ΔMRR", justify="right", no_wrap=True)
        table.add_column("note")
        for i, r in enumerate(res.rows):
            note = f"= {r.same_as}" if r.same_as else ("best MRR" if r is best else "")
            extra: list[str] = []
            if deltas:
                d, lo, hi = deltas.get(i, (0.0, 0.0, 0.0))
                extra.append(f"{d:+.3f}" + ("*" if lo > 0 or hi < 0 else " "))
            table.add_row(
                r.strategy,
                str(r.size),
                "—" if r.overlap is None else str(r.overlap),
                str(r.chunks),
                f"{r.mean_length:.0f}",
                f"{r.recall_k:.3f}",
                f"{r.mrr:.3f}",
                f"{r.completeness:.3f}",
                *extra,
                note,
                style="bold" if r is best else None,
            )
        console.print(table)
        base = res.baseline()
        if deltas and base is not None:
            console.print(
                f"ΔMRR: MRR minus the default's ({base.label}), paired per query; "
                "* where the 95 % bootstrap interval excludes 0",
                highlight=False,
            )
        for note in res.skipped:
            console.print(f"skipped {note}", highlight=False)
    if figure is not None:
        console.print(f"plot → {figure}", highlight=False)
