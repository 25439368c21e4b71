"""The sweep's plot: MRR and recall per setting, one panel per book (matplotlib, Agg
backend; the ``plot`` extra). Written small: a PNG quantized to 128 colours."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mindory.errors import MindoryError
from mindory.library.evidence import SweepResult, SweepRow

__all__ = ["PLOT_EXTRA", "plot_sweep", "require_matplotlib"]

PLOT_EXTRA = "plot"


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
