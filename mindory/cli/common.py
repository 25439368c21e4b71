"""What every command shares: the library of ``--db``, JSON output, chunk settings
options, consoles and one-line errors."""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mindory.errors import MindoryError

if TYPE_CHECKING:
    from rich.console import Console

    from mindory.library import Library
    from mindory.text.records import Settings

F = TypeVar("F", bound=Callable[..., Any])

# Share of a book's progress bar per import phase.
# Share of the progress bar per import phase; ``embed`` (the new chunks' vectors in the
# library's current embedding) is the last one (server/jobs.py uses the same split).
PHASE_SPAN = {
    "read": (0.0, 0.05),
    "parse": (0.05, 0.5),
    "chunk": (0.5, 0.6),
    "write": (0.6, 0.8),
    "embed": (0.8, 1.0),
}

_consoles: dict[str, Console] = {}


def console() -> Console:
    """The stdout console (rich, made on first use: importing rich costs ~50 ms)."""
    if "out" not in _consoles:
        from rich.console import Console

        _consoles["out"] = Console()
    return _consoles["out"]


def err_console() -> Console:
    if "err" not in _consoles:
        from rich.console import Console

        _consoles["err"] = Console(stderr=True)
    return _consoles["err"]


def first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    line = text.splitlines()[0] if text else ""
    if isinstance(exc, MindoryError | ValueError):
        return line or type(exc).__name__
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def fail(exc: BaseException, debug: bool) -> None:
    if debug:
        raise exc
    click.echo(f"mindory: error: {first_line(exc)}", err=True)
    sys.exit(1 if isinstance(exc, MindoryError) else 2)


def library(ctx: click.Context) -> Library:
    """The library of ``--db``, opened once per command and closed with it."""
    from mindory.library import Library

    root = ctx.find_root()
    obj = root.ensure_object(dict)
    if "library" not in obj:
        obj["library"] = Library.open(obj.get("db"))
        root.call_on_close(obj["library"].close)
    lib: Library = obj["library"]
    return lib


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False))


STRATEGY_NAMES = ("window", "paragraph", "structured", "parent-child", "dialogue")


def make_settings(
    size: int,
    overlap: int,
    min_size: int,
    nfkc: bool,
    strategy: str = "window",
    parent_size: int = 1600,
) -> Settings:
    from mindory.text.records import ChunkSettings, NormalizeProfile, Settings

    chunking = ChunkSettings(  # a bad value raises ValueError: one line, exit 2
        strategy=strategy,
        size=size,
        overlap=overlap,
        min_size=min_size,
        parent_size=parent_size,
    )
    return Settings(
        profile=NormalizeProfile(unicode_form="NFKC" if nfkc else "NFC"), chunking=chunking
    )


def settings_options(fn: F) -> F:
    fn = click.option(
        "--parent-size",
        default=1600,
        show_default=True,
        help="parent-child: the parents' size (the text a hit is read in).",
    )(fn)
    fn = click.option(
        "--strategy",
        type=click.Choice(STRATEGY_NAMES),
        default="window",
        show_default=True,
        help="How to cut chunks (docs/chunking.md).",
    )(fn)
    fn = click.option("--nfkc", is_flag=True, help="Normalize with NFKC instead of NFC.")(fn)
    fn = click.option(
        "--min", "min_size", default=50, show_default=True, help="Shortest tail chunk."
    )(fn)
    fn = click.option("--overlap", default=100, show_default=True, help="Overlap (characters).")(fn)
    fn = click.option("--size", default=800, show_default=True, help="Window size (characters).")(
        fn
    )
    return fn


def length_summary(lengths: list[int]) -> dict[str, Any]:
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


def snippet(text: str, width: int = 40) -> str:
    flat = text[:width].replace("\n", "⏎")
    return flat + ("…" if len(text) > width else "")
