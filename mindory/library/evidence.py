"""The evidence for choosing a chunking strategy: ``mindory stats`` and ``mindory sweep``.

* **Stats** (:func:`book_stats`): per strategy, the length and boundary statistics of
  :func:`mindory.text.strategies.chunk_stats` over a book's sections — computed in memory
  from the stored section texts, offset maps and render blocks (or from a file), never
  written anywhere.
* **Sweep** (:func:`run_sweep`): for every setting (strategy × size × overlap; overlap
  only for ``window``), the book is imported with that setting into a temporary library,
  embedded (the built-in ``hashed`` embedder unless told otherwise), and the query set
  is run through :func:`mindory.search.evaluation.evaluate` — the same ``Library.search`` a
  reader uses. Each setting gives recall@k, MRR@k and answer completeness (the share
  of found answers that lie entirely inside one chunk). :func:`plot_sweep` draws them
  (matplotlib, Agg backend; the ``plot`` extra).

The click commands at the end are registered on ``mindory.cli.main``.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

import click

from mindory.errors import MindoryError, NotFoundError
from mindory.text.records import (
    STRATEGIES,
    Block,
    Book,
    ChunkSettings,
    NormalizeProfile,
    Section,
    Settings,
)
from mindory.text.strategies import chunk_stats

if TYPE_CHECKING:
    from mindory.library import BookInfo, Library
    from mindory.search.evaluation import EvalQuery

__all__ = [
    "BookSource",
    "SweepResult",
    "SweepRow",
    "book_stats",
    "load_query_sets",
    "parse_sizes",
    "parse_strategies",
    "plot_sweep",
    "queries_for",
    "require_matplotlib",
    "run_sweep",
    "stats_document",
    "stored_sections",
    "sweep_settings",
]

PLOT_EXTRA = "plot"
DEFAULT_SIZES = (300, 500, 800, 1200)
DEFAULT_OVERLAPS = (0, 50, 100)
SweepProgress = Callable[[int, int, str], None]


# --------------------------------------------------------------------------- arguments


def parse_strategies(values: Iterable[str]) -> tuple[str, ...]:
    """Strategy names from repeated and/or comma-separated values, checked, in order.

    Empty means all strategies.
    """
    out: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if not name:
                continue
            if name not in STRATEGIES:
                raise MindoryError(
                    f"unknown chunking strategy {name!r} (one of {', '.join(STRATEGIES)})"
                )
            if name not in out:
                out.append(name)
    return tuple(out) or STRATEGIES


def parse_sizes(text: str, what: str, *, minimum: int = 0) -> tuple[int, ...]:
    """``"300,500,800"`` → ``(300, 500, 800)``: distinct integers, in the given order."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise MindoryError(f"{what} must be comma-separated integers, not {text!r}") from None
        if value < minimum:
            raise MindoryError(f"{what} must be at least {minimum}, not {value}")
        if value not in out:
            out.append(value)
    if not out:
        raise MindoryError(f"{what}: give at least one value")
    return tuple(out)


def setting_for(base: ChunkSettings, strategy: str, size: int, overlap: int) -> ChunkSettings:
    """``base`` with a strategy, size and overlap; ``min_size`` shrinks for small sizes."""
    return replace(
        base,
        strategy=strategy,
        size=size,
        overlap=overlap if strategy == "window" else 0,
        min_size=min(base.min_size, size // 2),
    )


def setting_label(cs: ChunkSettings) -> str:
    """``window 800/100``, ``structured 800``, ``parent-child 400 (in 1600)``."""
    if cs.strategy == "window":
        return f"window {cs.size}/{cs.overlap}"
    if cs.strategy == "parent-child":
        return f"parent-child {cs.size} (in {max(cs.parent_size, cs.size)})"
    return f"{cs.strategy} {cs.size}"


def sweep_settings(
    strategies: Sequence[str],
    sizes: Sequence[int],
    overlaps: Sequence[int],
    base: ChunkSettings | None = None,
) -> tuple[list[ChunkSettings], list[str]]:
    """The distinct settings of a sweep, and why any combination was left out.

    Overlap only matters for ``window``: every other strategy runs once per size. A
    window overlap over half the size is left out (``ChunkSettings`` refuses it).
    Strategies come in ``STRATEGIES`` order, sizes and overlaps as given.
    """
    base = base or ChunkSettings()
    out: list[ChunkSettings] = []
    skipped: list[str] = []
    seen: set[str] = set()
    # In STRATEGIES order: dialogue (which may fall back to paragraph) comes last.
    for strategy in sorted(set(strategies), key=STRATEGIES.index):
        for size in sizes:
            for overlap in overlaps if strategy == "window" else (0,):
                if strategy == "window" and overlap > size // 2:
                    note = f"window {size}/{overlap}: the overlap is over half the size"
                    if note not in skipped:
                        skipped.append(note)
                    continue
                try:
                    cs = setting_for(base, strategy, size, overlap)
                except ValueError as exc:
                    skipped.append(f"{strategy} {size}/{overlap}: {exc}")
                    continue
                key = Settings(chunking=cs).canonical_json()
                if key not in seen:
                    seen.add(key)
                    out.append(cs)
    if not out:
        raise MindoryError("no valid setting to sweep: " + "; ".join(skipped))
    return out, skipped


# --------------------------------------------------------------------------- books


@dataclass(frozen=True)
class BookSource:
    """A book to measure: a file, or a book of a library (read from its stored rows)."""

    title: str
    file_name: str
    sha256: str
    settings: Settings  # the profile and chunk settings it was imported with (or defaults)
    path: Path | None = None  # a file given directly
    library: Library | None = field(default=None, repr=False, compare=False)
    ref: str | None = None  # the book's id in ``library``
    loaded: Book | None = field(default=None, repr=False, compare=False)  # a file, parsed

    def to_json(self) -> dict[str, Any]:
        return {"id": self.sha256, "title": self.title, "file_name": self.file_name}

    def sections(self) -> list[Section]:
        """The book's sections with texts, offset maps and blocks."""
        if self.library is not None and self.ref is not None:
            return stored_sections(self.library, self.ref)
        assert self.loaded is not None
        return list(self.loaded.sections)

    def write_file(self, folder: Path) -> Path:
        """The original file, in ``folder`` under the book's file name (a given file as is)."""
        if self.path is not None:
            return self.path
        assert self.library is not None and self.ref is not None
        name = Path(self.file_name).name or f"book-{self.sha256[:12]}"
        target = folder / name
        target.write_bytes(self.library.book_file(self.ref))
        return target

    @classmethod
    def from_file(cls, path: Path, profile: NormalizeProfile | None = None) -> BookSource:
        from mindory.importers import load_book

        settings = Settings(profile=profile or NormalizeProfile())
        book = load_book(path, settings.profile)
        return cls(
            title=book.title,
            file_name=book.file_name,
            sha256=book.sha256,
            settings=settings,
            path=path,
            loaded=book,
        )

    @classmethod
    def from_library(cls, lib: Library, ref: str) -> BookSource:
        info = lib.book(ref)
        return cls(
            title=info.title,
            file_name=info.file_name,
            sha256=info.id,
            settings=_stored_settings(info),
            library=lib,
            ref=info.id,
        )


def _stored_settings(info: BookInfo) -> Settings:
    current = info.current
    if current is None:
        return Settings()
    try:
        return Settings.from_dict(dict(current.settings))
    except (TypeError, ValueError):
        return Settings()


def looks_like_path(ref: str) -> bool:
    return "/" in ref or "\\" in ref or Path(ref).suffix.lower() in (".txt", ".epub", ".text")


def stored_sections(lib: Library, ref: str) -> list[Section]:
    """A stored book's sections (current derivation) as records, with their blocks."""
    out: list[Section] = []
    for info in lib.sections(ref):
        detail = lib.section(ref, info.ordinal)
        blocks: list[Block] = []
        if info.block_count:
            page = lib.blocks(ref, info.ordinal, 1, info.block_count)
            blocks = [
                Block(b.index, b.kind, b.start, b.end, b.source_start, b.source_end, b.level)
                for b in page.blocks
            ]
        out.append(
            Section(
                ordinal=info.ordinal,
                title=info.title,
                source_text=detail.source_text,
                normalized_text=detail.normalized_text,
                offset_map=detail.offset_map,
                blocks=tuple(blocks),
                source_start=info.source_start,
                href=info.href,
                media_type=info.media_type,
                parser=info.parser,
                linear=info.linear,
            )
        )
    return out


# --------------------------------------------------------------------------- stats


def book_stats(
    sections: Sequence[Section], settings: ChunkSettings, strategies: Sequence[str] = STRATEGIES
) -> dict[str, dict[str, Any]]:
    """Per strategy, :func:`mindory.text.strategies.chunk_stats` of the sections at ``settings``.

    The window overlap is capped at half the size, so any size works for every strategy.
    """
    cs = replace(settings, overlap=min(settings.overlap, settings.size // 2))
    return chunk_stats(sections, cs, strategies)


def stats_document(
    book: BookSource, settings: ChunkSettings, stats: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The JSON of ``mindory stats --json``."""
    return {
        "book": book.to_json(),
        "settings": {
            "size": settings.size,
            "overlap": min(settings.overlap, settings.size // 2),
            "min_size": settings.min_size,
            "parent_size": settings.parent_size,
            "max_turn": settings.max_turn,
        },
        "strategies": stats,
    }


def reasons_text(reasons: dict[str, int]) -> str:
    """``{"table": 2, "heading": 1}`` → ``"2 table, 1 heading"``."""
    return ", ".join(f"{n} {why}" for why, n in sorted(reasons.items(), key=lambda x: -x[1]))


# --------------------------------------------------------------------------- sweep


@dataclass(frozen=True, slots=True)
class SweepRow:
    """One setting's measurements on one book."""

    strategy: str
    size: int
    overlap: int | None  # None: the strategy has no overlap
    parent_size: int | None
    chunks: int
    mean_length: float
    recall_k: float
    recall: dict[int, float]  # recall@1/5/10
    mrr: float
    completeness: float
    seconds: float
    ranks: tuple[int | None, ...] = ()  # per query: the first relevant hit's rank (None: none)
    same_as: str | None = None  # made exactly the chunks of this earlier setting

    @property
    def label(self) -> str:
        if self.strategy == "window":
            return f"window {self.size}/{self.overlap}"
        return f"{self.strategy} {self.size}"

    @property
    def series(self) -> str:
        """The plot line this row belongs to (a strategy; window: per overlap)."""
        if self.strategy == "window":
            return f"window, overlap {self.overlap}"
        return self.strategy

    def to_json(self, k: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "size": self.size,
            "overlap": self.overlap,
        }
        if self.parent_size is not None:
            out["parent_size"] = self.parent_size
        out["chunks"] = self.chunks
        out["mean_length"] = round(self.mean_length, 1)
        out[f"recall@{k}"] = round(self.recall_k, 4)
        for at, value in self.recall.items():
            out[f"recall@{at}"] = round(value, 4)
        out["mrr"] = round(self.mrr, 4)
        out["completeness"] = round(self.completeness, 4)
        out["seconds"] = round(self.seconds, 3)
        out["same_as"] = self.same_as
        out["ranks"] = list(self.ranks)
        return out


@dataclass(frozen=True)
class SweepResult:
    """A sweep of one book: a row per setting."""

    book: dict[str, Any]
    k: int
    mode: str
    embedder: str
    context_header: bool
    queries: int
    answers_found: int
    rows: tuple[SweepRow, ...]
    skipped: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    seconds: float = 0.0

    def best(self) -> SweepRow | None:
        """The row with the highest MRR (then recall@k, completeness, smaller size)."""
        if not self.rows:
            return None
        return max(self.rows, key=lambda r: (r.mrr, r.recall_k, r.completeness, -r.size))

    def baseline(self) -> SweepRow | None:
        """The row of the default setting (``ChunkSettings()``: window 800/100), if swept."""
        d = ChunkSettings()
        return next(
            (
                r
                for r in self.rows
                if r.strategy == d.strategy and r.size == d.size and r.overlap == d.overlap
            ),
            None,
        )

    def deltas(self) -> dict[int, tuple[float, float, float]]:
        """Row index → MRR minus the default's, with a 95 % paired bootstrap interval."""
        base = self.baseline()
        if base is None or not base.ranks:
            return {}
        return {
            i: paired_mrr_delta(r.ranks, base.ranks, self.k)
            for i, r in enumerate(self.rows)
            if len(r.ranks) == len(base.ranks)
        }

    def to_json(self) -> dict[str, Any]:
        best = self.best()
        base = self.baseline()
        deltas = self.deltas()
        rows = []
        for i, r in enumerate(self.rows):
            row = r.to_json(self.k)
            if i in deltas:
                d, lo, hi = deltas[i]
                row["mrr_vs_default"] = {
                    "delta": round(d, 4),
                    "low": round(lo, 4),
                    "high": round(hi, 4),
                }
            rows.append(row)
        return {
            "book": self.book,
            "k": self.k,
            "mode": self.mode,
            "embedder": self.embedder,
            "context_header": self.context_header,
            "queries": self.queries,
            "answers_found": self.answers_found,
            "missing": list(self.missing),
            "skipped": list(self.skipped),
            "best": best.label if best else None,
            "default": base.label if base else None,
            "seconds": round(self.seconds, 2),
            "rows": rows,
        }


def paired_mrr_delta(
    ranks: Sequence[int | None],
    base: Sequence[int | None],
    k: int,
    *,
    rounds: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean of per-query reciprocal-rank differences (``ranks`` − ``base``) and its
    95 % interval from a paired bootstrap over the queries (deterministic seed)."""
    import numpy as np

    def rr(r: int | None) -> float:
        return 1.0 / r if r is not None and r <= k else 0.0

    diffs = np.asarray([rr(a) - rr(b) for a, b in zip(ranks, base)], dtype=np.float64)
    if not len(diffs):
        return (0.0, 0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(rounds, len(diffs)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (float(diffs.mean()), float(lo), float(hi))


def load_query_sets(paths: Sequence[Path]) -> list[EvalQuery]:
    """Queries of every file (a folder: its ``*.jsonl`` files, by name)."""
    from mindory.search.evaluation import load_queries

    out: list[EvalQuery] = []
    for p in paths:
        if p.is_dir():
            files = sorted(p.glob("*.jsonl"))
            if not files:
                raise MindoryError("no *.jsonl query set in this folder", path=str(p))
            for f in files:
                out.extend(load_queries(f))
        else:
            out.extend(load_queries(p))
    return out


def queries_for(book: BookSource, queries: Sequence[EvalQuery]) -> list[EvalQuery]:
    """The queries about ``book``: their ``book`` is its file name, title or id (4+ digits)."""
    title = book.title.casefold()

    def ours(ref: str) -> bool:
        ref = ref.strip()
        low = ref.lower()
        return (
            ref == book.file_name
            or ref.casefold() == title
            or (len(low) >= 4 and book.sha256.startswith(low))
        )

    return [q for q in queries if ours(q.book)]


def run_sweep(
    book: BookSource,
    queries: Sequence[EvalQuery],
    settings: Sequence[ChunkSettings],
    *,
    k: int = 10,
    mode: str = "hybrid",
    embedder: str = "hashed",
    context_header: bool = False,
    skipped: Sequence[str] = (),
    progress: SweepProgress | None = None,
    workdir: Path | None = None,
) -> SweepResult:
    """Measure every setting on ``book`` with a temporary library each (see module doc).

    ``queries`` must be about this book (see :func:`queries_for`).
    """
    from mindory.library import Library
    from mindory.search.evaluation import evaluate
    from mindory.search.fusion import MODES

    if mode not in MODES:
        raise MindoryError(f"unknown search mode {mode!r}: use {', '.join(MODES)}")
    if k < 1:
        raise MindoryError(f"k must be 1 or more, not {k}")
    if not queries:
        raise MindoryError(f"no query is about {book.file_name}")
    t_start = perf_counter()
    rows: list[SweepRow] = []
    missing: tuple[str, ...] = ()
    answers_found = 0
    folder = Path(tempfile.mkdtemp(prefix="mindory-sweep-", dir=workdir))
    try:
        path = book.write_file(folder)
        measured: dict[
            tuple[Any, ...], SweepRow
        ] = {}  # chunking (its spans) → the row that measured it
        for i, cs in enumerate(settings):
            if progress is not None:
                progress(i, len(settings), setting_label(cs))
            t = perf_counter()
            db = folder / f"setting-{i}.sqlite"
            with Library.open(db) as lib:
                result = lib.import_book(
                    path, Settings(profile=book.settings.profile, chunking=cs), copy=False
                )
                chunks = lib.chunks(result.book)
                key = tuple(
                    (c.section, c.start, c.end, c.context_start, c.context_end) for c in chunks
                )
                same = measured.get(key)
                if same is None:
                    if mode != "lexical":
                        lib.embed(embedder, context_header=context_header)
                    report = evaluate(lib, queries, k=k, modes=(mode,))
            for f in folder.glob(f"setting-{i}.sqlite*"):
                f.unlink()
            lengths = [c.end - c.start for c in chunks]
            row = SweepRow(
                strategy=cs.strategy,
                size=cs.size,
                overlap=cs.overlap if cs.strategy == "window" else None,
                parent_size=max(cs.parent_size, cs.size) if cs.strategy == "parent-child" else None,
                chunks=len(lengths),
                mean_length=sum(lengths) / len(lengths) if lengths else 0.0,
                recall_k=0.0,
                recall={},
                mrr=0.0,
                completeness=0.0,
                seconds=0.0,
            )
            if same is not None:
                # The very same chunks: the same search results, measured once.
                row = replace(
                    same,
                    strategy=row.strategy,
                    size=row.size,
                    overlap=row.overlap,
                    parent_size=row.parent_size,
                    same_as=same.same_as or same.label,
                )
            else:
                metrics = report.overall[mode]
                ranks = tuple(o.ranks[mode] for o in report.outcomes)
                missing = report.missing
                answers_found = sum(1 for o in report.outcomes if o.places)
                row = replace(
                    row,
                    recall_k=sum(1 for r in ranks if r is not None and r <= k) / len(ranks),
                    recall=dict(metrics.recall),
                    mrr=metrics.mrr,
                    completeness=report.completeness,
                    ranks=ranks,
                )
                measured[key] = row
            rows.append(replace(row, seconds=perf_counter() - t))
        if progress is not None:
            progress(len(settings), len(settings), "done")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return SweepResult(
        book=book.to_json(),
        k=k,
        mode=mode,
        embedder=embedder,
        context_header=context_header,
        queries=len(queries),
        answers_found=answers_found,
        rows=tuple(rows),
        skipped=tuple(skipped),
        missing=missing,
        seconds=perf_counter() - t_start,
    )


# --------------------------------------------------------------------------- plot


def require_matplotlib() -> None:
    """Raise a one-line error naming the extra when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MindoryError(
            "the sweep plot needs matplotlib: pip install 'mindory[plot]' (or use --no-plot)"
        ) from None


_STRATEGY_COLORS = {
    "paragraph": "#2ca02c",
    "structured": "#d62728",
    "parent-child": "#9467bd",
    "dialogue": "#8c564b",
}
_WINDOW_COLORS = ("#aec7e8", "#4f8fd1", "#1f4e99", "#0b2a5c", "#17becf", "#7f7f7f")
_MARKERS = ("o", "s", "^", "D", "v", "P")


def plot_sweep(results: Sequence[SweepResult], out: Path, *, dpi: int = 90) -> Path:
    """One row of panels per book — recall@k, MRR@k and completeness against size,
    a line per strategy (``window``: per overlap) — written as a PNG."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not results:
        raise MindoryError("nothing to plot")
    metrics = (
        ("recall_k", "recall@{k}"),
        ("mrr", "MRR@{k}"),
        ("completeness", "answer completeness"),
    )
    fig, axes = plt.subplots(
        len(results), 3, figsize=(12.5, 3.4 * len(results) + 0.6), squeeze=False
    )
    handles: dict[str, Any] = {}
    notes: list[str] = []
    for row, res in enumerate(results):
        series: dict[str, list[SweepRow]] = {}
        for r in res.rows:
            series.setdefault(r.series, []).append(r)
        for name, items in list(series.items()):
            if all(r.same_as for r in items):
                # The same chunks as another line at every size: drawn once.
                del series[name]
                twins = sorted({(r.same_as or "").rsplit(" ", 1)[0] for r in items})
                notes.append(f"{name} = {', '.join(twins)} ({res.book.get('file_name')})")
        sizes = sorted({r.size for r in res.rows})
        window_series = sorted(
            (s for s in series if s.startswith("window")), key=lambda s: series[s][0].overlap or 0
        )
        for col, (attr, title) in enumerate(metrics):
            ax = axes[row][col]
            for j, (name, items) in enumerate(series.items()):
                items = sorted(items, key=lambda r: r.size)
                if name in window_series:
                    w = window_series.index(name)
                    color = _WINDOW_COLORS[w % len(_WINDOW_COLORS)]
                    style = "-"
                else:
                    color = _STRATEGY_COLORS.get(name, f"C{j}")
                    style = "--"
                (line,) = ax.plot(
                    [r.size for r in items],
                    [getattr(r, attr) for r in items],
                    style,
                    marker=_MARKERS[j % len(_MARKERS)],
                    color=color,
                    label=name,
                    linewidth=1.6,
                    markersize=5,
                )
                handles.setdefault(name, line)
            base = res.baseline()
            if base is not None:
                (ring,) = ax.plot(
                    [base.size],
                    [getattr(base, attr)],
                    "o",
                    markersize=13,
                    markerfacecolor="none",
                    markeredgecolor="black",
                    markeredgewidth=1.2,
                    label=f"default ({base.label})",
                )
                handles.setdefault(f"default ({base.label})", ring)
            ax.set_xticks(sizes)
            ax.set_xlabel("chunk size (characters)")
            ax.set_title(title.format(k=res.k), fontsize=10)
            ax.grid(True, alpha=0.3)
            lo = min(getattr(r, attr) for r in res.rows)
            ax.set_ylim(max(0.0, min(lo, 0.9) - 0.05), 1.02)
        book_title = str(res.book.get("title") or res.book.get("file_name"))
        axes[row][0].set_ylabel(
            f"{book_title}\n{res.queries} queries, {res.mode}, {res.embedder}", fontsize=9
        )
    labels = {"parent-child": "parent-child (size = child)"}
    fig.legend(
        list(handles.values()),
        [labels.get(name, name) for name in handles],
        loc="lower center",
        bbox_to_anchor=(0.5, 0.025 if notes else 0.0),
        ncol=min(len(handles), 8),
        fontsize=9,
        frameon=False,
    )
    if notes:
        fig.text(
            0.5,
            0.005,
            "same chunks, not drawn: " + "; ".join(notes),
            ha="center",
            va="bottom",
            fontsize=8,
            color="#555555",
        )
    bottom = (0.09 if notes else 0.06) / (len(results) ** 0.5)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    out.write_bytes(_small_png(buffer.getvalue()))
    return out


def _small_png(data: bytes) -> bytes:
    """A 128-colour palette PNG (a third of the size; a line plot looks the same)."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        return data
    with Image.open(io.BytesIO(data)) as image:
        small = image.convert("RGB").quantize(colors=128, dither=Image.Dither.NONE)
        out = io.BytesIO()
        small.save(out, format="PNG", optimize=True)
    return out.getvalue()


# --------------------------------------------------------------------------- commands


def _library(ctx: click.Context) -> Library:
    """The library of ``--db`` (shared with mindory.cli through the root context)."""
    from mindory.library import Library

    obj = ctx.find_root().ensure_object(dict)
    if "library" not in obj:
        obj["library"] = Library.open(obj.get("db"))
        ctx.find_root().call_on_close(obj["library"].close)
    lib: Library = obj["library"]
    return lib


def resolve_book(ctx: click.Context, ref: str) -> BookSource:
    """A file path (read directly) or a library reference (id, id prefix, title)."""
    p = Path(ref)
    if p.is_file():
        return BookSource.from_file(p)
    if p.is_dir():
        raise MindoryError("a folder, not a book file", path=ref)
    try:
        return BookSource.from_library(_library(ctx), ref)
    except NotFoundError:
        if looks_like_path(ref):
            raise NotFoundError(
                f"{ref}: no such file, and no book of the library by that name"
            ) from None
        raise


def _print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False))


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
        _print_json(stats_document(source, settings, stats))
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
        require_matplotlib()
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
    plot: Path | None = None if no_plot else plot_sweep(results, out)
    if as_json:
        _print_json({"books": [r.to_json() for r in results], "plot": str(plot) if plot else None})
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
    if plot is not None:
        console.print(f"plot → {plot}", highlight=False)
