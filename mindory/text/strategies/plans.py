"""Plans: the spans of one section under one strategy (``plan_section``).

:func:`plan_section` dispatches on ``settings.strategy`` to the packers, the
dialogue turns, the parent-child nesting or the window chunker; the
``*_spans`` functions are its one-strategy shortcuts.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from mindory.text.records import STRATEGIES, Block, Chunk, ChunkSettings, Section
from mindory.text.strategies.dialogue import _dialogue_units, _find_turns
from mindory.text.strategies.packing import _pack, _pack_paragraph
from mindory.text.strategies.units import _HEAD, R_TAIL, Span, _section_units
from mindory.text.windows import _WS, window_spans


@dataclass(frozen=True, slots=True)
class Plan:
    """The spans of one section under one strategy.

    ``reasons[i]`` says why chunk ``i`` is longer than the size (see
    ``REASONS``); ``contexts[i]`` is chunk ``i``'s parent span (parent-child
    only); ``strategy`` is the strategy that made the spans (``dialogue`` falls
    back to ``paragraph``).
    """

    strategy: str
    spans: list[Span]
    reasons: dict[int, str]
    contexts: list[Span] | None = None


def _blocks_of(blocks: Sequence[Block] | None) -> Sequence[Block] | None:
    return blocks if blocks is None or len(blocks) else None


def plan_section(text: str, blocks: Sequence[Block] | None, settings: ChunkSettings) -> Plan:
    """Spans of one section's normalized ``text`` under ``settings.strategy``.

    ``blocks`` are the section's render blocks; ``None`` (or none at all)
    derives paragraph blocks from blank lines.
    """
    strategy = settings.strategy
    if not text.strip(_WS):
        return Plan(strategy, [], {})
    blocks = _blocks_of(blocks)
    size, min_size = settings.size, settings.min_size
    if strategy == "structured":
        out = _pack(text, _section_units(text, blocks), size, min_size)
        return Plan(strategy, out.spans, out.reasons)
    if strategy == "paragraph":
        out = _pack_paragraph(text, _section_units(text, blocks), size, min_size)
        return Plan(strategy, out.spans, out.reasons)
    if strategy == "parent-child":
        return _parent_child(text, blocks, settings)
    if strategy == "dialogue":
        units = _section_units(text, blocks)
        _, turns, ranges = _find_turns(text, units)
        if len(turns) < 3:
            out = _pack_paragraph(text, units, size, min_size)
            return Plan("paragraph", out.spans, out.reasons)
        limit = max(settings.max_turn, size)
        units = _dialogue_units(text, blocks, units, turns, ranges, limit)
        out = _pack(text, units, size, min_size)
        return Plan(strategy, out.spans, out.reasons)
    if strategy == "window":
        spans = window_spans(text, size, settings.overlap, min_size)
        reasons = {k: R_TAIL for k, (s, e) in enumerate(spans) if e - s > size}
        return Plan(strategy, spans, reasons)
    raise ValueError(f"unknown chunking strategy {strategy!r} (one of {', '.join(STRATEGIES)})")


def _parent_child(text: str, blocks: Sequence[Block] | None, settings: ChunkSettings) -> Plan:
    size, min_size = settings.size, settings.min_size
    head_max = size // 2
    # Parents see headings as the children do, so no heading is cut from its text
    # (and a split unit, even one marked as a heading, is text).
    units = [
        (s, e, f & ~_HEAD, w) if f & _HEAD and e - s > head_max else (s, e, f, w)
        for s, e, f, w in _section_units(text, blocks)
    ]
    parents = _pack(text, units, max(settings.parent_size, size), min_size, head_max).spans
    spans: list[Span] = []
    reasons: dict[int, str] = {}
    contexts: list[Span] = []
    unit_starts = [u[0] for u in units]
    unit_ends = [u[1] for u in units]
    for ps, pe in parents:
        i = bisect_right(unit_ends, ps)  # the first unit ending after ps
        j = bisect_left(unit_starts, pe, i)  # the first unit starting at or after pe
        inside = units[i:j]
        if inside:
            us, ue, fl, why = inside[0]
            if us < ps:
                inside[0] = (ps, ue, fl, why)
            us, ue, fl, why = inside[-1]
            if ue > pe:
                inside[-1] = (us, pe, fl, why)
        kids = _pack(text, inside, size, min_size)
        for k, why in kids.reasons.items():
            reasons[len(spans) + k] = why
        spans.extend(kids.spans)
        contexts.extend([(ps, pe)] * len(kids.spans))
    return Plan("parent-child", spans, reasons, contexts)


def paragraph_spans(
    text: str, blocks: Sequence[Block] | None = None, size: int = 800, min_size: int = 50
) -> list[Span]:
    """Spans of the ``paragraph`` strategy (see :mod:`mindory.text.strategies`)."""
    return plan_section(
        text, blocks, ChunkSettings(strategy="paragraph", size=size, min_size=min_size)
    ).spans


def structured_spans(
    text: str, blocks: Sequence[Block] | None = None, size: int = 800, min_size: int = 50
) -> list[Span]:
    """Spans of the ``structured`` strategy (see :mod:`mindory.text.strategies`)."""
    return plan_section(
        text, blocks, ChunkSettings(strategy="structured", size=size, min_size=min_size)
    ).spans


def parent_child_spans(
    text: str,
    blocks: Sequence[Block] | None = None,
    size: int = 400,
    parent_size: int = 1600,
    min_size: int = 50,
) -> list[tuple[Span, Span]]:
    """``(child span, parent span)`` pairs of the ``parent-child`` strategy."""
    plan = plan_section(
        text,
        blocks,
        ChunkSettings(
            strategy="parent-child",
            size=size,
            min_size=min_size,
            overlap=0,
            parent_size=parent_size,
        ),
    )
    return list(zip(plan.spans, plan.contexts or []))


def dialogue_spans(
    text: str,
    blocks: Sequence[Block] | None = None,
    size: int = 800,
    min_size: int = 50,
    max_turn: int = 1600,
) -> list[Span]:
    """Spans of the ``dialogue`` strategy (``paragraph`` below three turns)."""
    return plan_section(
        text,
        blocks,
        ChunkSettings(strategy="dialogue", size=size, min_size=min_size, max_turn=max_turn),
    ).spans


def context_source_span(section: Section, chunk: Chunk) -> Span | None:
    """The source span of a chunk's context (its parent), in book coordinates."""
    if chunk.context is None:
        return None
    s, e = section.offset_map.source_span(*chunk.context)
    return (s + section.source_start, e + section.source_start)
