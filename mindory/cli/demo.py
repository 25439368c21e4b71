"""``make demo``: import the bundled samples into the demo library, embed them, search
them in English and Chinese, show where every hit is, and say what to try next.

The demo library is a file of its own beside the default library, in the user data
directory (:func:`demo_db_path`: ``…/mindory/demo.sqlite``), so the reader's own library
(the one ``mindory where`` prints) is never touched. It is kept: running the demo again
re-uses it (the imports are ``unchanged``, the vectors are there), an interrupted run picks
up where it stopped, and ``mindory --db PATH …`` (or ``MINDORY_DB=PATH``) explores it.
``python -m mindory.cli.demo --db PATH`` puts it elsewhere.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
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


def data_dir() -> Path:
    """The user data directory of mindory (where the default library lives)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("mindory", appauthor=False))


def demo_db_path() -> Path:
    """The demo's own library: beside the default one, never the same file."""
    return data_dir() / "demo.sqlite"


@dataclass(frozen=True, slots=True)
class DemoRun:
    db: Path
    reused: bool  # the library was there before this run
    statuses: tuple[str, ...]  # of the first import of every sample ("created", "unchanged", ...)
    embedded: int  # vectors made by this run
    ok: bool  # verify found no problem


def main(argv: Sequence[str] | None = None) -> DemoRun:
    parser = argparse.ArgumentParser(
        prog="python -m mindory.cli.demo",
        description="Import, embed and search the bundled samples in a library that is kept.",
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"the demo library (default: {demo_db_path()})",
    )
    args = parser.parse_args(argv)
    db = (args.db or demo_db_path()).expanduser().resolve()
    return run(db, Console(width=120))


def run(db: Path, console: Console) -> DemoRun:
    reused = db.exists()
    db.parent.mkdir(parents=True, exist_ok=True)
    if reused:
        console.print(
            f"[bold]mindory demo[/bold] — the demo library in {escape(str(db))} (kept from the "
            "last run: what is there already is not imported or embedded again)",
            highlight=False,
            soft_wrap=True,
        )
    else:
        console.print(
            f"[bold]mindory demo[/bold] — a new demo library in {escape(str(db))} (kept "
            "afterwards; your own library is not touched)",
            highlight=False,
            soft_wrap=True,
        )
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
        statuses = tuple("failed" if isinstance(r, ImportFailure) else r.status for r in results)

        again = list(lib.import_many([SAMPLES]))
        ms = sum(r.timings.get("total", 0.0) for r in again if not isinstance(r, ImportFailure))
        seen = sorted({"failed" if isinstance(r, ImportFailure) else r.status for r in again})
        console.print(f"importing them again: {', '.join(seen)} in {1000 * ms:.0f} ms")

        books = lib.books()
        for book in books:
            console.rule(f"{book.title}  ({book.id[:12]})")
            console.print(
                f"{book.format}, encoding {book.encoding or 'n/a'}, {book.section_count} "
                f"sections, {book.toc_count} TOC entries, fingerprint "
                f"{book.current.fingerprint if book.current else '—'}",
                highlight=False,
            )
            chunks = lib.chunks(book.id, with_cfi=True)
            picks = chunks[:2] + chunks[len(chunks) // 2 : len(chunks) // 2 + 1] + chunks[-1:]
            spans = Table("§", "#", "normalized", "source (code points)", "UTF-16", "starts with")
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
                    f"bytes of chunk 0 in the file: [{picks[0].byte_start}, {picks[0].byte_end})",
                    highlight=False,
                )

        t = time.perf_counter()
        embedded = lib.embed()
        console.rule("search")
        had = embedded.total - embedded.embedded
        console.print(
            f"embedded {embedded.embedded} chunks with {embedded.embedding.embedder_id} in "
            f"{time.perf_counter() - t:.2f} s"
            + (f" ({had} had their vectors from an earlier run)" if had else "")
            + f"; index: {embedded.index.kind if embedded.index else '—'}",
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
        first = next((b.id[:12] for b in books if b.format == "epub"), None)
    _next_steps(console, db, first)
    return DemoRun(db, reused, statuses, embedded.embedded, report.ok)


def _next_steps(console: Console, db: Path, book: str | None) -> None:
    """What to try next: the demo library from the ``mindory`` command and the server."""
    from sqlalchemy.engine import make_url

    from mindory.library import resolve_url

    here = Path(sys.executable).parent / "mindory"
    exe = "mindory"
    if here.is_file():
        try:
            exe = os.path.relpath(here)
        except ValueError:  # another drive (Windows)
            exe = str(here)
        if exe.startswith(".."):
            exe = str(here)
    # the library `mindory where` prints without the export below (as `where` does)
    url, path = resolve_url(os.environ.get("MINDORY_DB") or None)
    own = str(path) if path is not None else make_url(url).render_as_string()
    q = shlex.quote
    steps = [
        (f"export MINDORY_DB={q(str(db))}", "the commands below use the demo library (or: --db)"),
        (f"{exe} where", "prints the library the commands use"),
        (f"{exe} books", ""),
        (f'{exe} search "why did the narrator go swimming" --k 3', ""),
    ]
    if book:
        steps.append((f"{exe} show {book} --toc", "a book, by an id prefix or a title prefix"))
    steps += [
        (f"{exe} serve", "the reader page on http://127.0.0.1:8765/ (Ctrl-C stops it)"),
        ("unset MINDORY_DB", f"back to your own library: {own}"),
        (f"{exe} import ~/Books/", "your own books (EPUB, plain text) into it"),
    ]
    console.rule("what to try next")
    console.print(
        f"The demo library stays in {db}: `make demo` again re-uses it (nothing is imported "
        "or embedded twice). Your own library is not touched by the demo.",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    width = min(32, max(len(cmd) for cmd, _ in steps))
    for cmd, why in steps:
        line = f"  {cmd:<{width}}   # {why}" if why else f"  {cmd}"
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print(
        f"To start the demo over: rm {q(str(db))}*  (the library and the files beside it)",
        highlight=False,
        markup=False,
        soft_wrap=True,
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
