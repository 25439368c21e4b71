"""Fusion of ranked lists into one: score fusion (the default) or reciprocal rank fusion.

**Score fusion** adds, per candidate, each list's score divided by that list's best (so
its best is 1, a candidate it lacks 0; negative cosines count 0), times the list's
weight. It
keeps what ranks throw away: a vector neighbour with a clear margin counts more than one
barely ahead. Equal-weight RRF, measured on the reader questions, gave back most of what
the vectors added (docs/search.md), so RRF stays only for callers that ask for it
(``rrf_k``).

**Weights** come from the reader questions (``bench/bench_retrieval.py``), per embedder
and per language of the query:

* the word index is the backbone everywhere (weight 1);
* the trigram index adds exact quotes and substrings in Chinese (0.4; 1 for a name of a
  few characters, which the segmenter may cut into single characters) and costs English
  and Japanese (0): its verbatim-quote promotion (:mod:`mindory.search.structure`) is
  what it contributes there;
* MiniLM's vectors add paraphrase to English questions (1.0: equal to the words; 0.8
  until keyword lists stopped using their vector, whose drop at higher weights had held
  it there: through the pipeline 0.8 → 1.0 took the reader questions from 0.558 to
  0.571, keyword lists unmoved at lexical's 0.904, and 1.2 lost keyword-kind questions
  that are not lists); they know no Chinese or Japanese (0, and such texts have no
  vector);
* multilingual-e5's vectors, the default embedder's Chinese and Japanese half
  (:mod:`mindory.search.routed`), add 0.5 there, counted from the list's last cosine up
  (:func:`floored_lists`): Chinese 0.670 → 0.722, Japanese 0.575 → 0.632;
* the hashed n-grams add nothing on reader questions (0.1 cost paraphrase MRR 0.005
  against lexical alone: 0, so hybrid search with hashed vectors is lexical search);
* a model of the user's own gets 0.5;
* a list of keywords does not use its vector (0): its words are the book's.

After fusion, hybrid search adds a bonus for a phrase of the query the chunk holds
word for word (:mod:`mindory.search.phrases`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from mindory.search.phrases import KEYWORD_VECTOR_WEIGHT

__all__ = [
    "CANDIDATES",
    "DEFAULT_WEIGHTS",
    "MODES",
    "RRF_K",
    "Fused",
    "Mode",
    "floored_lists",
    "fuse",
    "rrf",
    "weights_for",
]

Mode = Literal["hybrid", "vector", "lexical"]
MODES: tuple[Mode, ...] = ("hybrid", "vector", "lexical")

# words = the word index, lexical = the trigram index, vector = the embeddings.
DEFAULT_WEIGHTS: Mapping[str, float] = {"words": 1.0, "lexical": 0.0, "vector": 0.5}
TRIGRAM_WEIGHTS: Mapping[str, float] = {"latin": 0.0, "zh": 0.4, "ja": 0.0}
# A query of a name or two (at most this many Han / kana): the words segmenter may cut
# it into single characters, the trigram index finds the string itself.
SHORT_CJK_CHARS = 4
SHORT_CJK_TRIGRAM_WEIGHT = 1.0
VECTOR_WEIGHTS: Mapping[tuple[str, str], float] = {
    ("minilm", "latin"): 1.0,
    ("minilm", "zh"): 0.0,
    ("minilm", "ja"): 0.0,
    # MiniLM for Latin script, multilingual-e5 for Chinese and Japanese (routed.py): e5's
    # list, floored (see FLOORED), at 0.5 took Chinese 0.670 → 0.682 and Japanese 0.575
    # → 0.632 through Library.search, 0.722 / 0.632 with the section titles routed.py
    # adds (emulated without titles, 0.4: 0.671 / 0.632, 0.6: 0.672 / 0.613).
    ("minilm+e5", "latin"): 1.0,
    ("minilm+e5", "zh"): 0.5,
    ("minilm+e5", "ja"): 0.5,
    # e5 alone: below MiniLM on English questions (hybrid English 0.443 against 0.501).
    ("e5", "latin"): 0.5,
    ("e5", "zh"): 0.5,
    ("e5", "ja"): 0.5,
    ("hashed", "latin"): 0.0,
    ("hashed", "zh"): 0.0,
    ("hashed", "ja"): 0.0,
}
# Lists whose scores count from their last candidate's up (e5's cosines all lie within
# a few hundredths of 0.8: divided by the best alone, every candidate would count ~1).
FLOORED: Mapping[str, frozenset[str]] = {
    "minilm+e5": frozenset({"zh", "ja"}),
    "e5": frozenset({"latin", "zh", "ja"}),
}
OTHER_MODEL_WEIGHT = 0.5  # a model of the user's own (model2vec, fastembed, …)
RRF_K = 10
CANDIDATES = 50  # results taken from each list before fusion


def weights_for(
    embedder_id: str | None,
    language: str = "latin",
    cjk_chars: int = 0,
    keyword_list: bool = False,
) -> dict[str, float]:
    """The fusion weights of a query in ``language`` (``latin``, ``zh`` or ``ja``) with
    ``cjk_chars`` Han / kana characters, whose vectors come from ``embedder_id`` (None:
    no vectors). A ``keyword_list`` (:func:`mindory.search.phrases.is_keyword_list`)
    does not use its vector (:data:`~mindory.search.phrases.KEYWORD_VECTOR_WEIGHT`)."""
    kind = embedder_id.split("-", 1)[0] if embedder_id else ""
    trigram = TRIGRAM_WEIGHTS.get(language, 0.0)
    if language != "latin" and 0 < cjk_chars <= SHORT_CJK_CHARS:
        trigram = SHORT_CJK_TRIGRAM_WEIGHT
    vector = VECTOR_WEIGHTS.get((kind, language), OTHER_MODEL_WEIGHT) if kind else 0.0
    if keyword_list and language == "latin":
        vector = min(vector, KEYWORD_VECTOR_WEIGHT)
    return {"words": 1.0, "lexical": trigram, "vector": vector}


def floored_lists(embedder_id: str | None, language: str = "latin") -> frozenset[str]:
    """The lists whose scores :func:`fuse` counts from the list's last score up: the
    vector list of a query whose vectors come from e5 (:data:`FLOORED`)."""
    kind = embedder_id.split("-", 1)[0] if embedder_id else ""
    return frozenset({"vector"}) if language in FLOORED.get(kind, ()) else frozenset()


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused candidate: its fused score and per-list (rank from 1, raw score)."""

    id: int
    score: float
    ranks: Mapping[str, tuple[int, float]] = field(default_factory=dict)


def _ranks(
    ranked: Mapping[str, Sequence[tuple[int, float]]],
) -> dict[int, dict[str, tuple[int, float]]]:
    ranks: dict[int, dict[str, tuple[int, float]]] = {}
    for mode, items in ranked.items():
        for r, (i, raw) in enumerate(items, start=1):
            ranks.setdefault(i, {}).setdefault(mode, (r, raw))  # a duplicate counts once
    return ranks


def _order(
    scores: Mapping[int, float], ranks: Mapping[int, Mapping[str, tuple[int, float]]]
) -> list[Fused]:
    # Ties go to the better best rank, then the smaller id: the order is deterministic.
    order = sorted(scores, key=lambda i: (-scores[i], min(r for r, _ in ranks[i].values()), i))
    return [Fused(i, scores[i], ranks[i]) for i in order]


def fuse(
    ranked: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float] | None = None,
    floored: frozenset[str] = frozenset(),
) -> list[Fused]:
    """Score fusion of ``{list: [(id, raw score), …] best first}`` (see the module doc).
    A list named in ``floored`` counts ``(score − last) / (best − last)`` instead of
    ``score / best`` (:func:`floored_lists`)."""
    weights = weights if weights is not None else DEFAULT_WEIGHTS
    ranks = _ranks(ranked)
    scores: dict[int, float] = dict.fromkeys(ranks, 0.0)
    for mode, items in ranked.items():
        w = float(weights.get(mode, 0.0))
        if not items or w <= 0:
            continue
        high = max(s for _, s in items)
        # (a cosine of 0 or less is no likeness: e5's half of a vector against a Latin chunk's)
        low = min((s for _, s in items if s > 0), default=0.0) if mode in floored else 0.0
        if high <= low:
            if mode not in floored or high <= 0:
                continue
            low = high - 1.0  # one score (or all equal): each counts fully
        seen: set[int] = set()
        for i, s in items:
            if i not in seen:
                seen.add(i)
                if s > 0:
                    scores[i] += w * max(0.0, s - low) / (high - low)
    return _order(scores, ranks)


def rrf(
    ranked: Mapping[str, Sequence[tuple[int, float]]],
    weights: Mapping[str, float] | None = None,
    k: int = RRF_K,
) -> list[Fused]:
    """Reciprocal rank fusion: ``score = Σ weight / (k + rank)``."""
    weights = weights if weights is not None else DEFAULT_WEIGHTS
    ranks = _ranks(ranked)
    scores: dict[int, float] = dict.fromkeys(ranks, 0.0)
    for i, per_mode in ranks.items():
        for mode, (r, _raw) in per_mode.items():
            scores[i] += float(weights.get(mode, 0.0)) / (k + r)
    return _order(scores, ranks)
