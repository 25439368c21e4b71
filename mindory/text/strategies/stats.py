"""Statistics of chunk spans: lengths, how chunks end, why some are over the size.

:func:`span_stats` summarizes given spans, :func:`chunk_stats` plans a book's
sections under each strategy and summarizes them (``mindory stats``), and
:func:`atomic_regions` lists the units no strategy splits.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mindory.text.normalize import BlockTable
from mindory.text.records import STRATEGIES, Block, ChunkSettings, Section
from mindory.text.strategies.plans import _blocks_of, plan_section
from mindory.text.strategies.units import _ATOMIC, Span, _section_units
from mindory.text.windows import _WS

# A chunk that ends a sentence (for statistics).
_ENDS_SENTENCE = re.compile(
    r"(?:[.!?]|[。！？；…．])[\"')\]\u201d\u2019\u00bb」』”’）》〉】〕\u300f\u3011]*$"
)
_ENDS_CLAUSE = re.compile(r"[,;:，、：]$")


def _end_kind(text: str, e: int, block_ends: set[int]) -> str:
    """How a chunk ending at ``e`` ends: end, paragraph, sentence, line, clause, word, inside."""
    n = len(text)
    if e >= n or not text[e:].strip(_WS):
        return "end"
    if e in block_ends or text.startswith("\n\n", e):
        return "paragraph"
    tail = text[max(0, e - 8) : e]
    if _ENDS_SENTENCE.search(tail):
        return "sentence"
    if text[e] == "\n":
        return "line"
    if _ENDS_CLAUSE.search(tail):
        return "clause"
    if text[e] in _WS:
        return "word"
    return "inside word"


def span_stats(
    items: Iterable[tuple[str, Sequence[Block] | None, Sequence[Span], Mapping[int, str]]],
    size: int,
) -> dict[str, Any]:
    """Length and boundary statistics of chunks given as ``(text, blocks, spans, reasons)``.

    ``reasons`` (chunk index → why it exceeds ``size``) may be empty; an
    over-size chunk without one counts as ``"unknown"``.
    """
    lengths: list[int] = []
    ends: Counter[str] = Counter()
    over: Counter[str] = Counter()
    for text, blocks, spans, reasons in items:
        if blocks is not None and len(blocks):
            block_ends = {
                int(x)
                for x in (
                    blocks.ends if isinstance(blocks, BlockTable) else [b.end for b in blocks]
                )
            }
        else:
            block_ends = set()
        for k, (s, e) in enumerate(spans):
            lengths.append(e - s)
            ends[_end_kind(text, e, block_ends)] += 1
            if e - s > size:
                over[reasons.get(k, "unknown")] += 1
    count = len(lengths)
    arr = np.asarray(lengths, dtype=np.float64)
    at_boundary = ends["end"] + ends["paragraph"] + ends["sentence"]
    return {
        "chunks": count,
        "mean": round(float(arr.mean()), 1) if count else 0.0,
        "median": float(np.median(arr)) if count else 0.0,
        "p95": round(float(np.percentile(arr, 95)), 1) if count else 0.0,
        "min": int(arr.min()) if count else 0,
        "max": int(arr.max()) if count else 0,
        "size": size,
        "ends": dict(sorted(ends.items())),
        "boundary_share": round(at_boundary / count, 4) if count else 0.0,
        "cut_inside_sentence": count - at_boundary,
        "over_max": sum(over.values()),
        "over_max_reasons": dict(sorted(over.items())),
    }


def chunk_stats(
    sections: Iterable[Section], settings: ChunkSettings, strategies: Sequence[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Per strategy, ``span_stats`` of every section of a book (``mindory stats``).

    ``strategies`` defaults to all; each runs with ``settings`` but its own
    strategy. A chunk "ends at a boundary" at the end of its section, a block
    end or a sentence end; ``cut_inside_sentence`` counts the rest; ``p95`` is
    numpy's linear-interpolation percentile.
    """
    secs = list(sections)
    out: dict[str, dict[str, Any]] = {}
    for name in strategies or STRATEGIES:
        cs = replace(settings, strategy=name)
        plans = [(s, plan_section(s.normalized_text, s.blocks, cs)) for s in secs]
        stats = span_stats(
            ((s.normalized_text, s.blocks, p.spans, p.reasons) for s, p in plans), cs.size
        )
        stats["fallback_sections"] = sum(1 for _, p in plans if p.strategy != name and p.spans)
        out[name] = stats
    return out


def atomic_regions(text: str, blocks: Sequence[Block] | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, reason)`` of the units no strategy splits (tables, pre, code fences)."""
    return [(s, e, why) for s, e, f, why in _section_units(text, _blocks_of(blocks)) if f & _ATOMIC]
