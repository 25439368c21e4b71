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

Chinese is read in Simplified: a text that is mostly Han and holds no kana is folded by
OpenCC ``t2s`` (:func:`mindory.search.words.to_simplified`, as the word index folds it)
before e5 reads it, chunks and questions alike, so the same question typed in either
script has the same vector and 寶玉 meets 宝玉 (issue 26: on the Chinese reader questions,
vectors alone within the book, Traditional questions 0.615 → 0.640 and Simplified ones
0.506 → 0.530). Japanese (kana) is read as written.

Each model is loaded when a text of its script first comes (an English question never
loads e5, a Chinese one never MiniLM: each costs about half a second and 100–200 MB).
The id names both models' files, so it is made from their SHA-256s
(:mod:`mindory.search.file_digest`), not from the loaded models; a model loaded later
must agree with it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from mindory.errors import MindoryError
from mindory.search.minilm import CJK_LIMIT, cjk_share
from mindory.search.words import has_kana

__all__ = ["SPEC", "ScriptRoutedEmbedder", "fold_chinese", "query_block", "says_something"]

SPEC = "minilm+e5"
HALF = 384
# The version of what e5 reads, part of the id: t1 = a CJK chunk behind its section
# title when the title says something (text_for_chunk); t2 = and Chinese in Simplified.
TEXT_RULE = "t2"
EARLIER_RULES = ("t1",)  # their vectors of texts t2 reads unchanged are this id's too
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


def fold_chinese(text: str) -> str:
    """``text`` in Simplified when it is Chinese — mostly Han (:data:`CJK_LIMIT`) and no
    kana — else as it is. OpenCC ``t2s`` keeps the length; only e5 reads the result."""
    if cjk_share(text) <= CJK_LIMIT or has_kana(text):
        return text
    from mindory.search.words import to_simplified

    return to_simplified(text)


def query_block(vector: np.ndarray) -> tuple[int, int] | None:
    """``(first dimension, length)`` of the one half a routed vector fills, else None."""
    v = np.asarray(vector).reshape(-1)
    if v.size != 2 * HALF:
        return None
    latin, cjk = bool(v[:HALF].any()), bool(v[HALF:].any())
    if latin == cjk:
        return None
    return (0, HALF) if latin else (HALF, HALF)


def _latin_part(model: Any) -> str:
    """The MiniLM half's part of the id: its source model's SHA-256, 12 digits."""
    return str(model.id.split("-")[-2])


def _cjk_part(model: Any) -> str:
    """The e5 half's part of the id: its weights file's and built graph's SHA-256s."""
    return "-".join(model.id.split("-")[-3:-1])


def _latin_part_unloaded() -> str:
    """:func:`_latin_part` without loading the model (what ``MiniLMEmbedder.id`` hashes)."""
    from mindory.search import minilm
    from mindory.search.file_digest import sha256_of

    return sha256_of(minilm._source_model())[:12]


def _cjk_part_unloaded() -> str | None:
    """:func:`_cjk_part` without loading the model (what ``E5Embedder.id`` hashes: the
    weights file, and the int8 graph built from it in the cache folder); None while that
    graph is not built yet."""
    from mindory.search import e5
    from mindory.search.file_digest import sha256_of
    from mindory.search.onnx_cache import cache_dir

    try:
        weights = sha256_of(e5._source())
    except OSError as exc:
        raise MindoryError(f"cannot read the multilingual-e5 weights: {exc}") from exc
    graph = cache_dir() / f"e5-{weights[:16]}-v{e5.BUILD_VERSION}.onnx"
    try:
        built = sha256_of(graph)
    except OSError:
        return None  # not built yet: loading the model builds it
    return f"{weights[:12]}-{built[:8]}"


class ScriptRoutedEmbedder:
    """MiniLM ⊕ multilingual-e5, routed by the script of each text (768 dimensions);
    each model loaded on first use (see the module doc)."""

    backend = SPEC

    def __init__(self) -> None:
        self._lock = threading.Lock()  # a server's threads load each model once
        self._loaded: dict[str, Any] = {}
        self._parts: dict[str, str] = {}
        self._id: str | None = None

    def _model(self, half: str) -> Any:
        """The model of ``half`` (``latin`` or ``cjk``), loaded on first use; it must
        name the same files as the id already given out."""
        with self._lock:
            model = self._loaded.get(half)
            if model is None:
                if half == "latin":
                    from mindory.search.minilm import MiniLMEmbedder

                    model = MiniLMEmbedder()
                    part = _latin_part(model)
                else:
                    from mindory.search.e5 import E5Embedder

                    model = E5Embedder()
                    part = _cjk_part(model)
                known = self._parts.setdefault(half, part)
                if known != part:
                    raise MindoryError(
                        f"the {half} model's files changed while mindory ran ({known} → "
                        f"{part}): run the command again"
                    )
                self._loaded[half] = model
            return model

    @property
    def _latin(self) -> Any:
        return self._model("latin")

    @property
    def latin_model(self) -> Any:
        """The Latin half's own model (MiniLM): what re-reads a Latin-script question's
        hits sentence by sentence (:func:`mindory.search.rerank.window_readers`)."""
        return self._latin

    @property
    def _cjk(self) -> Any:
        return self._model("cjk")

    @property
    def id(self) -> str:
        """``minilm+e5-<MiniLM file>-<e5 weights>-<e5 graph>-t2-768``, from the files'
        digests (no model loaded, unless the e5 graph is not built yet)."""
        if self._id is None:
            with self._lock:
                if "latin" not in self._parts:
                    self._parts["latin"] = _latin_part_unloaded()
                if "cjk" not in self._parts:
                    cjk = _cjk_part_unloaded()
                    if cjk is not None:
                        self._parts["cjk"] = cjk
            if "cjk" not in self._parts:
                self._model("cjk")  # builds the graph, then names it
            latin, cjk = self._parts["latin"], self._parts["cjk"]
            self._id = f"{SPEC}-{latin}-{cjk}-{TEXT_RULE}-{2 * HALF}"
        return self._id

    @property
    def earlier_ids(self) -> tuple[str, ...]:
        """The ids this embedder had under earlier text rules (same model files): their
        vector of a text for which :meth:`reads_as_before` holds is this one's, byte for
        byte, so ``embed`` reuses it instead of running the model again."""
        head = self.id[: -len(f"-{TEXT_RULE}-{2 * HALF}")]
        return tuple(f"{head}-{rule}-{2 * HALF}" for rule in EARLIER_RULES)

    def reads_as_before(self, text: str) -> bool:
        """Whether the earlier rules read ``text`` as this one does: anything but a
        Chinese text that folding to Simplified changes."""
        return fold_chinese(text) == text

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

    def embed_cjk_passages(self, texts: Sequence[str]) -> np.ndarray:
        """e5's half alone (``HALF`` numbers) of the texts it reads, as passages, Chinese
        folded to Simplified; a zero row for a text MiniLM would read — the second stage's
        Chinese and Japanese windows (:mod:`mindory.search.rerank`)."""
        out = np.zeros((len(texts), HALF), dtype=np.float32)
        cjk = [i for i, t in enumerate(texts) if cjk_share(t) > CJK_LIMIT]
        if cjk:
            out[cjk] = self._cjk.embed([fold_chinese(texts[i]) for i in cjk])
        return out

    def embed_across(self, texts: Sequence[str]) -> np.ndarray:
        """e5's half alone (``HALF`` numbers) of the texts MiniLM reads (Latin script), as
        passages; a zero row for a Chinese or Japanese text, whose vector e5 made
        already — the reading a Chinese or Japanese question about a Latin-script book
        meets (:mod:`mindory.search.across`)."""
        out = np.zeros((len(texts), HALF), dtype=np.float32)
        latin = [i for i, t in enumerate(texts) if cjk_share(t) <= CJK_LIMIT and t.strip()]
        if latin:
            out[latin] = self._cjk.embed([texts[i] for i in latin])
        return out

    def embed_cjk_question(self, text: str, read_as: str | None) -> np.ndarray:
        """e5's half of a question as the first stage read it (``read_as`` ``ja``: as
        written; otherwise Chinese folded to Simplified)."""
        return self.embed_query_as([text], "ja" if read_as == "ja" else "cjk")[0, HALF:]

    def embed_query_as(self, texts: Sequence[str], half: str) -> np.ndarray:
        """Vectors of questions read by one half's model whatever their script:
        ``cjk`` — multilingual-e5 reads an English question about a Chinese or Japanese
        book (it was trained on many languages; MiniLM's half would never meet the
        book's vectors); ``ja`` — e5 reads a question about Japanese books as written,
        even one without kana (「見物」 is not folded to Chinese 「见物」); ``written``
        — routed by script with nothing folded, as the earlier text rule read questions
        (for vectors made under it, :attr:`earlier_ids`). ``latin`` routes as
        :meth:`embed_query`."""
        if isinstance(texts, str):
            raise TypeError("embed_query_as() takes a sequence of texts, not one str")
        if half == "written":
            return self._route(texts, query=True, fold=False)
        if half not in ("cjk", "ja"):
            return self.embed_query(texts)
        out = np.zeros((len(texts), 2 * HALF), dtype=np.float32)
        if texts:
            read = list(texts) if half == "ja" else [fold_chinese(t) for t in texts]
            out[:, HALF:] = self._cjk.embed_query(read)
        return out

    def _route(self, texts: Sequence[str], *, query: bool, fold: bool = True) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        out = np.zeros((len(texts), 2 * HALF), dtype=np.float32)
        cjk = [i for i, t in enumerate(texts) if cjk_share(t) > CJK_LIMIT]
        latin = sorted(set(range(len(texts))) - set(cjk))
        # Blank texts are zero vectors in MiniLM too: they need no model.
        if any(texts[i].strip() for i in latin):
            out[latin, :HALF] = self._latin.embed([texts[i] for i in latin])
        if cjk:
            part = [fold_chinese(texts[i]) if fold else texts[i] for i in cjk]
            e5 = self._cjk.embed_query(part) if query else self._cjk.embed(part)
            out[cjk, HALF:] = e5
        return out
