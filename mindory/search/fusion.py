"""Fusion of ranked lists: reciprocal rank fusion, ``score = Σ_mode weight_mode / (k + rank_mode)``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CANDIDATES", "DEFAULT_WEIGHTS", "MODES", "RRF_K", "Fused", "Mode", "rrf"]


Mode = Literal["hybrid", "vector", "lexical"]


MODES: tuple[Mode, ...] = ("hybrid", "vector", "lexical")


# Set on the shipped eval sets (samples/queries, docs/search.md) with the built-in
# hashed embedder: lexical is the backbone, vectors break its ties and add what it
# misses. A heavier vector weight (0.5, k=60) lowered MRR in both languages.
DEFAULT_WEIGHTS: Mapping[str, float] = {"lexical": 1.0, "vector": 0.2}


RRF_K = 10


CANDIDATES = 50  # results taken from each mode before fusion


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused candidate: its RRF score and per-mode (rank from 1, raw score)."""

    id: int
    score: float
    ranks: Mapping[str, tuple[int, float]] = field(default_factory=dict)


def rrf(
    ranked: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float] | None = None,
    k: int = RRF_K,
) -> list[Fused]:
    """Reciprocal rank fusion of ``{mode: [(id, raw score), …] best first}``.

    ``score = Σ weight / (k + rank)``; ties go to the better best rank, then the
    smaller id, so the order is deterministic.
    """
    weights = weights if weights is not None else DEFAULT_WEIGHTS
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, tuple[int, float]]] = {}
    for mode, items in ranked.items():
        w = float(weights.get(mode, 0.0))
        for r, (i, raw) in enumerate(items, start=1):
            if i in ranks and mode in ranks[i]:
                continue  # a duplicate id in one list counts once, at its best rank
            scores[i] = scores.get(i, 0.0) + w / (k + r)
            ranks.setdefault(i, {})[mode] = (r, raw)
    order = sorted(scores, key=lambda i: (-scores[i], min(r for r, _ in ranks[i].values()), i))
    return [Fused(i, scores[i], ranks[i]) for i in order]
