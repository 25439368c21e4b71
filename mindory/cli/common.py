"""What every command shares: the library of ``--db``, JSON output, chunk settings
options, consoles and one-line errors."""

from __future__ import annotations

import functools
import json
import os
import sys
import time
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


def _time_left(seconds: float) -> str:
    if seconds < 60:
        return f"about {max(1, round(seconds))} s left"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min left"
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"about {hours} h {minutes} min left"


class ProgressLines:
    """Progress for logs (stderr is not a terminal: no bar can redraw itself there), as
    pip and llm print it: a line at the start, then whenever ``every`` seconds have passed
    or another ``step`` of the total is done, and once at the end —
    ``embedded 1200/25506 chunks (4.7 %), 14.2 chunks/s, about 29 min left``."""

    def __init__(
        self,
        verb: str,
        unit: str,
        *,
        every: float = 10.0,
        step: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self.verb, self.unit, self.every, self.step, self.clock = verb, unit, every, step, clock
        self.echo = echo or (lambda line: click.echo(line, err=True))
        self.start: tuple[float, int] | None = None  # (time, done) of the first report
        self.last: tuple[float, int] = (0.0, -1)  # (time, step number) of the last line
        self.finished = False

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.start is None:
            self.start = (now, done)
        share = done / total if total else 1.0
        step_no = int(share / self.step) if self.step > 0 else 0
        end = done >= total
        if end and self.finished:
            return
        quiet = now - self.last[0] < self.every and step_no == self.last[1]
        if not end and self.last[1] >= 0 and quiet:
            return
        self.last = (now, step_no)
        self.finished = end
        line = f"{self.verb} {done}/{total} {self.unit} ({100 * share:.1f} %)"
        elapsed, gained = now - self.start[0], done - self.start[1]
        if elapsed > 0 and gained > 0:
            rate = gained / elapsed
            line += f", {rate:,.1f} {self.unit}/s, "
            line += "done" if end else _time_left((total - done) / rate)
        elif end:
            line += ", done"
        self.echo(line)


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


_IMPORTED = time.perf_counter()  # the fallback start where /proc is not there


@functools.cache
def process_started() -> float:
    """When this process started, on :func:`time.perf_counter`'s clock (Linux: from
    ``/proc/self/stat``, to a clock tick; elsewhere when this module was imported)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
    return time.perf_counter() - age if 0 <= age < 3600 else _IMPORTED


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
    import statistics  # here: it loads fractions and decimal, which no other command needs

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


def middle_ellipsis(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle: a third of the room
    for its start, the rest for its end (where file names differ: editions, encodings,
    extensions)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1) // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def snippet(text: str, width: int = 40) -> str:
    flat = text[:width].replace("\n", "⏎")
    return flat + ("…" if len(text) > width else "")
