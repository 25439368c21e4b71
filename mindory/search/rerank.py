"""A second stage (issue 26): the first candidates re-read sentence by sentence.

A chunk's vector is one average over ~800 characters; a reader's question is usually
answered by one or two sentences of it. The second stage cuts each of the first
:data:`RERANK_DEPTH` hits into windows that start at a sentence and run to about
:data:`WINDOW_CHARS` characters (:data:`CJK_WINDOW_CHARS` in Chinese and Japanese),
embeds them with the library's own models (MiniLM for a Latin-script question, the
default embedder's multilingual-e5 for a Chinese or Japanese one: nothing to download)
and moves each hit by its best window's cosine to the question:

    score = (1 − i / n) + RERANK_WEIGHT × (best − lowest) / (highest − lowest)

for the hit at place ``i`` of the ``n`` re-read (the first stage's order is the prior).
Quotes found word for word and apparatus keep their places; only the ids move, so every
hit keeps the Locator the first stage computed for its chunk.

The windows are embedded once by ``mindory embed --windows`` (``chunk_windows``, as
float16 unit rows) and read back in milliseconds; without them the stage embeds them
when the question comes (~0.9 s for English on two cores, ~10 s for Chinese), to the
same bits. Measured in docs/search.md (English MRR@10 0.430 → 0.448, mixed held out;
Chinese and Japanese 0.665 → 0.723, though 樵史演義 does not gain): it is a named mode
(``rerank=true``, ``mindory search --rerank``), not the default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mindory.search.embedders import embed_queries

__all__ = [
    "CJK_WINDOW_CHARS",
    "RERANK_DEPTH",
    "RERANK_WEIGHT",
    "WINDOW_CHARS",
    "WindowReader",
    "best_cosines",
    "rerank_order",
    "sentence_windows",
    "window_readers",
    "window_scores",
    "window_vectors",
    "whole_window",
]

RERANK_DEPTH = 10  # hits re-read (~70 English windows, ~280 Chinese)
RERANK_WEIGHT = 1.0  # the best window's cosine, min–max over the hits, against the prior
WINDOW_CHARS = 250  # a window grows by whole sentences while it stays below this
# Chinese and Japanese say as much in fewer characters: their windows are shorter (one
# width, chosen before measuring, not fitted on the questions).
CJK_WINDOW_CHARS = 100

# A sentence ends at . ! ? ; : and any closing quotes or brackets after it, before white
# space, or at a line break; the next starts at the first character after that space.
_BOUNDARY = re.compile(r"(?<=[.!?;:])[\"'”’)\]]*(\s+)|(\n+)")
# In Chinese and Japanese: at 。！？； (or ! ? ;) and any closing quotes after it, with or
# without white space, or at a line break.
_CJK_BOUNDARY = re.compile(r"(?<=[。！？；!?;])[」』”’）)]*(\s*)|(\n+)")


def sentences(text: str, *, cjk: bool = False) -> list[tuple[int, int]]:
    """``[start, end)`` code-point spans of ``text``'s sentences, stripped of white space,
    in order; a text without a boundary is one sentence. ``cjk``: Chinese and Japanese
    sentence ends."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in (_CJK_BOUNDARY if cjk else _BOUNDARY).finditer(text):
        space = 1 if m.group(1) is not None else 2
        spans.append((start, m.start(space)))
        start = m.end(space)
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
    return out


def sentence_windows(
    text: str, width: int | None = None, *, cjk: bool = False
) -> list[tuple[int, int]]:
    """``[start, end)`` spans of ``text`` to re-read: one from each sentence, taking the
    following sentences while the window stays within ``width`` characters (a longer
    sentence is a window alone), until a window reaches the text's last sentence. Every
    sentence is in some window; a blank text has none. ``width`` None: the script's."""
    if width is None:
        width = CJK_WINDOW_CHARS if cjk else WINDOW_CHARS
    spans = sentences(text, cjk=cjk)
    out: list[tuple[int, int]] = []
    for i, (a, b) in enumerate(spans):
        j = i + 1
        while j < len(spans) and spans[j][1] - a < width:
            b = spans[j][1]
            j += 1
        out.append((a, b))
        if j >= len(spans):
            break
    return out


@dataclass(frozen=True)
class WindowReader:
    """How the hits of one script's questions are re-read: the window rule and the model.

    ``key`` names both (``chunk_windows.windows_key``: stored windows are a function of
    it and the chunk's text); ``embed`` reads windows (zero rows for what it does not
    read); ``question`` reads a question (with the pipeline's ``read_as``)."""

    key: str
    cjk: bool
    embed: Callable[[list[str]], np.ndarray]
    question: Callable[[str, str | None], np.ndarray]
    whole: bool = False  # one window, the whole chunk (the cross-language reading)


def window_readers(model: Any) -> dict[str, WindowReader]:
    """The readers a library's model offers: ``latin`` always — the default embedder's
    Latin half (MiniLM), else the model itself; ``cjk`` when the model has a Chinese and
    Japanese half (the default embedder's multilingual-e5)."""
    latin = getattr(model, "latin_model", model)
    readers = {
        "latin": WindowReader(
            key=f"{latin.id}/windows-{WINDOW_CHARS}",
            cjk=False,
            embed=latin.embed,
            question=lambda q, _read_as: embed_queries(latin, [q])[0],
        )
    }
    passages = getattr(model, "embed_cjk_passages", None)
    question = getattr(model, "embed_cjk_question", None)
    if passages is not None and question is not None:
        readers["cjk"] = WindowReader(
            key=f"{model.id}/cjk-windows-{CJK_WINDOW_CHARS}",
            cjk=True,
            embed=passages,
            question=question,
        )
    return readers


def whole_window(text: str) -> list[tuple[int, int]]:
    """The text as one window, stripped of white space; a blank text has none."""
    start, end = len(text) - len(text.lstrip()), len(text.rstrip())
    return [(start, end)] if end > start else []


def window_vectors(
    texts: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
    *,
    cjk: bool = False,
    whole: bool = False,
) -> list[np.ndarray]:
    """Each text's sentence windows (``whole``: the text as one window) embedded: a
    ``(count, dim)`` float16 array of unit rows, in window order, without the windows
    the model reads as nothing (a zero vector: blank, or another script's). Stored as
    they are (``mindory embed --windows``) or made at question time, they score alike,
    to the bit."""
    owners: list[int] = []
    windows: list[str] = []
    for n, text in enumerate(texts):
        for a, b in whole_window(text) if whole else sentence_windows(text, cjk=cjk):
            owners.append(n)
            windows.append(text[a:b])
    if not windows:
        return [np.zeros((0, 0), dtype=np.float16) for _ in texts]
    vectors = np.asarray(embed(windows), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1)
    keep = np.isfinite(norms) & (norms > 0)
    unit = np.zeros_like(vectors)
    unit[keep] = vectors[keep] / norms[keep, None]
    half = unit.astype(np.float16)
    mine = np.asarray(owners)
    return [half[(mine == n) & keep] for n in range(len(texts))]


def best_cosines(question: np.ndarray, per_text: Sequence[np.ndarray]) -> list[float]:
    """The best cosine between ``question`` (a vector) and a window of each text's
    (:func:`window_vectors`); a text without windows, or a zero question, scores 0."""
    q = np.asarray(question, dtype=np.float32).reshape(-1)
    q_norm = float(np.linalg.norm(q))
    best = [0.0] * len(per_text)
    if q_norm == 0.0:
        return best
    for n, rows in enumerate(per_text):
        if rows.size == 0:
            continue
        v = rows.astype(np.float32)
        cosines = (v @ q) / (np.linalg.norm(v, axis=1) * q_norm)
        best[n] = float(cosines.max())
    return best


def window_scores(
    question: np.ndarray,
    texts: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
) -> list[float]:
    """The best cosine between ``question`` (a vector) and a window of each text; a
    text without windows (blank), or one the model reads as nothing, scores 0."""
    return best_cosines(question, window_vectors(texts, embed))


def rerank_order(
    order: Sequence[int],
    movable: Sequence[bool],
    scores: Sequence[float],
    weight: float = RERANK_WEIGHT,
) -> list[int]:
    """``order`` with its movable items re-ordered among their own places by prior +
    ``weight`` × min–max(score); ``scores[i]`` belongs to ``order[i]``. Items that are not
    movable (quotes, apparatus) keep their places; ties keep the first stage's order."""
    if len(order) != len(movable) or len(order) != len(scores):
        raise ValueError("order, movable and scores must be as long as each other")
    places = [i for i, m in enumerate(movable) if m]
    n = len(places)
    if n < 2:
        return list(order)
    picked = [float(scores[i]) for i in places]
    low, high = min(picked), max(picked)
    spread = high - low
    combined = [
        (1.0 - rank / n) + (weight * (s - low) / spread if spread > 0 else 0.0)
        for rank, s in enumerate(picked)
    ]
    moved = sorted(range(n), key=lambda r: (-combined[r], r))
    out = list(order)
    for slot, r in zip(places, moved, strict=True):
        out[slot] = order[places[r]]
    return out
