"""The default embedder: MiniLM for English and other Latin-script text, multilingual-e5
for Chinese and Japanese — each in its own half of one vector.

MiniLM (:mod:`mindory.search.minilm`) knows no Chinese or Japanese; multilingual-e5-small
(:mod:`mindory.search.e5`) does, but ranks English questions below MiniLM (hybrid English
MRR 0.443 against 0.501 on the reader questions) and costs several times more per chunk.
So a text that is mostly Han or kana (:data:`~mindory.search.minilm.CJK_LIMIT`) goes to
e5, any other to MiniLM, and a question the same way.

The two models' vectors are not comparable, so they never meet: a vector is 768 numbers,
MiniLM's in the first 384 and zero in the rest, e5's the other way round. Between the
halves the cosine is exactly 0, so an English question never ranks a Chinese chunk by a
meaningless cosine, and each half keeps its model's cosines exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from mindory.search.minilm import CJK_LIMIT, cjk_share

__all__ = ["SPEC", "ScriptRoutedEmbedder", "query_block", "says_something"]

SPEC = "minilm+e5"
HALF = 384
TITLES = "t1"  # the version of text_for_chunk's rule, part of the id
# What a title says beyond its number: ordinals (第一回, 十二, Chapter 3, IV) and marks.
_NUMBERING = re.compile(
    r"\b(?:chapter|book|part|volume|canto|act|scene|[ivxlc]+)\b"
    r"|[\s\d０-９一二三四五六七八九十百千零〇两兩第回章卷節节部篇上中下之序終终.\-–—:：,，、。]+",
    re.IGNORECASE,
)


def says_something(section_title: str | None) -> bool:
    """Whether a section title holds words beyond its numbering (two characters or more):
    「第八回 王司徒巧使連環計 董太師大鬧鳳儀亭」 does, 「十二」 or "Chapter 3" does not."""
    return len(_NUMBERING.sub("", section_title or "")) >= 2


def query_block(vector: np.ndarray) -> tuple[int, int] | None:
    """``(first dimension, length)`` of the one half a routed vector fills, else None."""
    v = np.asarray(vector).reshape(-1)
    if v.size != 2 * HALF:
        return None
    latin, cjk = bool(v[:HALF].any()), bool(v[HALF:].any())
    if latin == cjk:
        return None
    return (0, HALF) if latin else (HALF, HALF)


class ScriptRoutedEmbedder:
    """MiniLM ⊕ multilingual-e5, routed by the script of each text (768 dimensions)."""

    backend = SPEC

    def __init__(self) -> None:
        from mindory.search.e5 import E5Embedder
        from mindory.search.minilm import MiniLMEmbedder

        self._latin = MiniLMEmbedder()
        self._cjk = E5Embedder()
        latin_sha = self._latin.id.split("-")[-2]
        cjk_sha = "-".join(self._cjk.id.split("-")[-3:-1])  # weights file, built graph
        self._id = f"{SPEC}-{latin_sha}-{cjk_sha}-{TITLES}-{2 * HALF}"

    @property
    def id(self) -> str:
        return self._id

    @property
    def dim(self) -> int:
        return 2 * HALF

    @property
    def spec(self) -> str:
        return SPEC

    def __repr__(self) -> str:
        return "ScriptRoutedEmbedder()"

    def text_for_chunk(self, text: str, section_title: str | None) -> str:
        """A Chinese or Japanese chunk is read with its section's title before it when the
        title says something (a chapter's couplet summarises the chapter); any other
        chunk as it is (the rule was measured for e5 on the Chinese and Japanese reader
        questions; MiniLM's English vectors stay as they were measured, without it)."""
        if cjk_share(text) > CJK_LIMIT and section_title and says_something(section_title):
            return f"{section_title.strip()}\n\n{text}"
        return text

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of chunks (e5 reads them as passages)."""
        return self._route(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of questions (e5 reads them as queries)."""
        return self._route(texts, query=True)

    def _route(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        out = np.zeros((len(texts), 2 * HALF), dtype=np.float32)
        cjk = [i for i, t in enumerate(texts) if cjk_share(t) > CJK_LIMIT]
        latin = sorted(set(range(len(texts))) - set(cjk))
        if latin:
            out[latin, :HALF] = self._latin.embed([texts[i] for i in latin])
        if cjk:
            part = [texts[i] for i in cjk]
            e5 = self._cjk.embed_query(part) if query else self._cjk.embed(part)
            out[cjk, HALF:] = e5
        return out
