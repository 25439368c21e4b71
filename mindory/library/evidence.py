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
  (:mod:`mindory.library.plot`; matplotlib, Agg backend, the ``plot`` extra).

``mindory stats`` and ``mindory sweep`` (:mod:`mindory.cli.evidence`) print them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any

from mindory.errors import MindoryError
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
    "queries_for",
    "run_sweep",
    "stats_document",
    "stored_sections",
    "sweep_settings",
]

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
