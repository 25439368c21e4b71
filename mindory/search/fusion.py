"""Fusion of ranked lists: reciprocal rank fusion, ``score = Σ_mode weight_mode / (k + rank_mode)``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "CANDIDATES",
    "DEFAULT_WEIGHTS",
    "MODES",
    "RRF_K",
    "Fused",
    "Mode",
    "rrf",
    "weights_for",
]


Mode = Literal["hybrid", "vector", "lexical"]


MODES: tuple[Mode, ...] = ("hybrid", "vector", "lexical")


# words = the word index, lexical = the trigram index, vector = the embeddings. Set on
# the reader questions (samples/queries/reader-questions.jsonl, bench/bench_retrieval.py):
# the word index is the backbone; the trigram index adds exact quotes and substrings
# (keyword and Chinese queries gain, nothing loses at half weight); the hashed vectors
# only break ties (docs/search.md).
DEFAULT_WEIGHTS: Mapping[str, float] = {"words": 1.0, "lexical": 0.5, "vector": 0.1}
# The vector list's weight by embedder (its id's first word) and the query's script:
# what each earned on the reader questions (docs/search.md). The hashed n-grams only
# break ties in alphabetic text and lose to the word index in Chinese; MiniLM knows
# English only (it gives Chinese and Japanese text no vector at all).
VECTOR_WEIGHTS: Mapping[tuple[str, str], float] = {
    ("hashed", "latin"): 0.1,
    ("hashed", "cjk"): 0.0,
    ("minilm", "latin"): 0.6,
    ("minilm", "cjk"): 0.0,
}
OTHER_MODEL_WEIGHT = 0.5  # a model of the user's own (model2vec, fastembed, …)


def weights_for(embedder_id: str | None, script: str = "latin") -> dict[str, float]:
    """The fusion weights of a search whose vectors come from ``embedder_id``, for a
    query mostly in ``script`` (``latin`` or ``cjk``)."""
    out = dict(DEFAULT_WEIGHTS)
    if embedder_id:
        kind = embedder_id.split("-", 1)[0]
        out["vector"] = VECTOR_WEIGHTS.get((kind, script), OTHER_MODEL_WEIGHT)
    return out


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
