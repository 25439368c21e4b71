"""Questions across languages (issue 26): a Chinese or Japanese question about books in a
Latin script, met by multilingual-e5's reading of their chunks.

The default embedder (:mod:`mindory.search.routed`) gives a Latin-script chunk MiniLM's
half of the vector only; MiniLM knows no Chinese, so a Chinese question about an English
book had no vector part and was found by names alone. ``mindory embed --cross-language``
has e5 read each Latin-script chunk once more, as a passage, and stores the vector
beside the chunk (``chunk_windows`` under the rule :data:`ACROSS_RULE`: one window, the
whole chunk). A question in Chinese or Japanese over Latin-script books only (a
``--book`` search, or a library of such books) is read by e5 and ranked against those
vectors: e5's own query–passage cosines, one model on both sides. The opposite way (an
English question about a Chinese book) needs nothing stored: the Chinese chunks' vectors
are e5's already (``read_as="cjk"`` in the pipeline).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mindory.search.rerank import WindowReader

__all__ = ["ACROSS_RULE", "across_list", "across_reader"]

ACROSS_RULE = "across-e5"  # the tail of the windows key: the chunk, read whole by e5


def across_reader(model: Any) -> WindowReader | None:
    """How a library's model reads Latin-script chunks for questions in Chinese and
    Japanese: the default embedder's e5 half (``embed_across``), the question as the
    first stage reads it; None for a model without a multilingual half."""
    passages = getattr(model, "embed_across", None)
    question = getattr(model, "embed_cjk_question", None)
    if passages is None or question is None:
        return None
    return WindowReader(
        key=f"{model.id}/{ACROSS_RULE}", cjk=False, embed=passages, question=question, whole=True
    )


def across_list(
    question: np.ndarray, ids: np.ndarray, rows: np.ndarray, n: int
) -> list[tuple[int, float]]:
    """``(chunk row id, cosine)`` of the ``n`` chunks whose stored reading (``rows[j]``, a
    unit row, of chunk ``ids[j]``) is nearest ``question``, best first; equal cosines in
    row-id order. A zero question, or no readings, finds nothing."""
    q = np.asarray(question, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(q))
    if norm == 0.0 or len(ids) == 0 or n < 1:
        return []
    cosines = (np.asarray(rows, dtype=np.float32) @ q).astype(np.float64) / norm
    order = np.lexsort((np.asarray(ids), -cosines))[:n]
    return [(int(ids[j]), float(cosines[j])) for j in order]
