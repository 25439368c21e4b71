"""Word analysis per language: the terms of the word index, the same for text and queries.

A text is cut into runs by script, and each run goes to the analyser of its language:

* **Latin and other alphabetic scripts** (English and the other Snowball languages):
  case-folded words, stop words and question words out, stemmed by the Snowball stemmer
  of the book's language (``PyStemmer``; English when the language is unknown or has no
  stemmer). *carved*, *carving* and *carves* are one term; so are *whale* and *whales*.
* **Chinese** (Han runs of a book that is not Japanese): Traditional folded to
  Simplified (OpenCC ``t2s`` through ``opencc-pyo3``: 寶玉 and 宝玉 are one term), then
  segmented into words in jieba's search mode (``rjieba``: the same dictionary and the
  same output as ``jieba.cut_for_search``, measured on every paragraph of 水滸傳, at about
  17 times its speed, and it writes no cache file), function words out.
* **Japanese** (runs with kana, or any CJK run of a Japanese book): SudachiPy with
  ``sudachidict-small`` (``sudachidict-core`` when the ``japanese-full`` extra installed
  it: 83 MB more, and on the reader questions it ranked the same — :func:`sudachi_dictionary_name`),
  split mode C with the mode-A parts of compounds, each as its
  *normalized form* (働けば, 働いた → 働く; 生れて → 生まれる), particles, auxiliary
  verbs and symbols out. Chosen over fugashi + unidic-lite: unidic-lite has no wheel,
  gives proper nouns katakana lemmas, and a shared tagger mixes results across threads;
  Sudachi's normalized forms also merge spelling variants.

A query is analysed like a text, with the languages of the books it searches (a Han-only
query over a library with Chinese and Japanese books gets both analyses' terms).

:func:`fingerprint` names the analysers and their package versions: the word index of a
library records the fingerprint it was built with (never the chunk ids: changing the
analysis re-indexes, it never re-chunks).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import regex

from mindory.errors import MindoryError
from mindory.search.analysis import STOPWORDS

__all__ = [
    "ANALYSIS_VERSION",
    "fingerprint",
    "has_kana",
    "language_of",
    "query_terms",
    "text_terms",
]

ANALYSIS_VERSION = 1  # bump when the rules below change what a text's terms are

# Snowball stemmers by ISO 639-1 code (PyStemmer names).
SNOWBALL = {
    "ar": "arabic", "ca": "catalan", "cs": "czech", "da": "danish", "de": "german",
    "el": "greek", "en": "english", "es": "spanish", "et": "estonian", "eu": "basque",
    "fi": "finnish", "fr": "french", "ga": "irish", "hi": "hindi", "hu": "hungarian",
    "hy": "armenian", "id": "indonesian", "it": "italian", "lt": "lithuanian",
    "ne": "nepali", "nl": "dutch", "no": "norwegian", "nb": "norwegian", "nn": "norwegian",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian",
    "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish", "eo": "esperanto",
}  # fmt: skip

# English stop words (the trigram index's list, :data:`mindory.search.analysis.STOPWORDS`,
# less "one", which a question may be about) and the words questions are made of ("why
# did", "the passage where"): too common to find anything by, and never the answer's own.
# fmt: off
ENGLISH_STOP = (STOPWORDS - {"one"}) | frozenset((
    "whose", "also", "ever", "ye", "unto", "hath", "doth", "art",
    # question furniture
    "passage", "scene", "moment", "part", "describe", "describes", "described", "explain",
    "tell", "tells", "happen", "happens", "happened", "mention", "mentions", "mentioned",
    "line", "lines", "book", "story", "someone", "something",
    "kind", "sort", "thing", "things", "whats", "anything", "way",
))
# Chinese function words and question words (Simplified: compared after t2s).
CHINESE_STOP = frozenset((
    "的", "了", "是", "在", "和", "与", "及", "也", "就", "都", "而", "之", "其", "着", "过",
    "把", "被", "给", "对", "向", "从", "于", "以", "为", "因为", "所以", "但", "但是", "却",
    "这", "那", "这个", "那个", "这些", "那些", "这里", "那里", "哪里", "哪", "谁", "什么",
    "为什么", "怎么", "怎么样", "怎样", "如何", "多少", "几", "吗", "呢", "吧", "啊", "呀",
    "么", "么样", "有", "没有", "没", "一个", "他", "她", "它", "他们", "她们", "我", "你",
    "我们", "你们", "自己", "时候", "的话", "后来", "然后", "还是", "或者", "是否", "还",
    "又", "很", "最", "会", "要", "能", "可以", "说", "道", "得", "地", "所", "则", "乃",
    "矣", "焉", "也", "者", "哉", "乎", "耶", "曰",
))
# Japanese question words and light verbs (normalized forms; particles go by POS).
JAPANESE_STOP = frozenset((
    "何", "なに", "なぜ", "何故", "どう", "どの", "どこ", "誰", "だれ", "いつ", "どんな",
    "どれ", "どういう", "する", "ある", "居る", "いる", "成る", "なる", "言う", "いう",
    "こと", "事", "もの", "物", "よう", "様", "ところ", "所", "場面", "とき", "時",
    "これ", "それ", "あれ", "この", "その", "あの", "彼", "彼女", "自分", "私",
))
# fmt: on

_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\u30fc\u3005-\u3007\uff66-\uff9f]+")
_KANA = regex.compile(r"[\p{Hiragana}\p{Katakana}\u30fc\uff66-\uff9f]")
_WORD = regex.compile(r"[\p{L}\p{N}\p{M}]+", regex.V1)
_HAS_WORD = re.compile(r"\w")
_JA_DROP_POS = frozenset({"助詞", "助動詞", "補助記号", "空白", "記号"})
_JA_MAX_CHARS = 12_000  # Sudachi refuses one input over 49,149 UTF-8 bytes


def has_kana(text: str) -> bool:
    """True when the text holds hiragana or katakana (Japanese, not Chinese)."""
    return _KANA.search(text) is not None


def language_of(tag: str | None, text: str = "") -> str:
    """A book's analysis language from its language tag (``en-US`` → ``en``,
    ``zh-TW`` → ``zh``, ``ja-jp`` → ``ja``); without one, from the script of its text
    (kana → ``ja``, mostly Han → ``zh``, else ``en``)."""
    if tag:
        primary = tag.strip().lower().replace("_", "-").split("-")[0]
        if primary:
            return primary
    sample = text[:20_000]
    if _KANA.search(sample):
        return "ja"
    han = sum(1 for _ in _CJK_RUN.finditer(sample))
    words = sum(1 for _ in _WORD.finditer(sample))
    return "zh" if han and han * 2 >= words else "en"


# --------------------------------------------------------------------------- analysers


@functools.cache
def _stemmer(language: str) -> Any:
    import Stemmer

    return Stemmer.Stemmer(SNOWBALL.get(language, "english"))


_STEM_LOCK = threading.Lock()  # PyStemmer objects keep state between calls


def _latin_terms(words: list[str], language: str) -> list[str]:
    stop = ENGLISH_STOP if SNOWBALL.get(language, "english") == "english" else frozenset()
    kept = [w for w in words if w not in stop and (len(w) > 1 or w.isdigit())]
    if not kept:
        return []
    with _STEM_LOCK:
        return list(_stemmer(language).stemWords(kept))


@functools.cache
def _t2s() -> Any:
    import opencc_pyo3

    return opencc_pyo3.OpenCC("t2s").convert


def to_simplified(text: str) -> str:
    """Traditional → Simplified Chinese (OpenCC t2s; it keeps the length)."""
    return str(_t2s()(text))


@functools.cache
def _s2t() -> Any:
    import opencc_pyo3

    return opencc_pyo3.OpenCC("s2t").convert


def both_scripts(text: str) -> tuple[str, ...]:
    """A Chinese text in Simplified, then that in Traditional (OpenCC ``t2s``, ``s2t``),
    without repeats: the same for a question typed in either script, so what is searched
    with them does not depend on the script typed."""
    simplified = to_simplified(text)
    traditional = str(_s2t()(simplified))
    return (simplified,) if traditional == simplified else (simplified, traditional)


def _chinese_terms(run: str) -> list[str]:
    import rjieba

    words = rjieba.cut_for_search(to_simplified(run), False)
    return [w for w in words if w not in CHINESE_STOP and _HAS_WORD.search(w)]


_JA = threading.local()  # a Sudachi tokenizer must not be shared by two threads


def sudachi_dictionary_name() -> str:
    """``core`` when installed (the ``japanese-full`` extra), else ``small`` (the default
    install's). The small one is 110 MB against 193; on the 26 Japanese reader questions,
    words MRR 0.680 against 0.696 (one question up a rank, one down), so it ships."""
    return "core" if importlib.util.find_spec("sudachidict_core") is not None else "small"


@functools.cache
def _sudachi_dictionary() -> Any:
    from sudachipy import Dictionary

    name = sudachi_dictionary_name()
    if importlib.util.find_spec(f"sudachidict_{name}") is None:
        raise MindoryError(
            "Japanese word analysis needs a Sudachi dictionary: "
            "pip install sudachidict-small (or mindory[japanese-full] for the full one)"
        )
    return Dictionary(dict=name)


def _japanese_tokenizer() -> Any:
    tok = getattr(_JA, "tokenizer", None)
    if tok is None:
        from sudachipy import SplitMode

        tok = _JA.tokenizer = _sudachi_dictionary().tokenizer(SplitMode.C)
    return tok


def _japanese_pieces(run: str) -> Iterable[str]:
    while len(run) > _JA_MAX_CHARS:
        cut = run.rfind("。", 0, _JA_MAX_CHARS)
        cut = cut + 1 if cut > 0 else _JA_MAX_CHARS
        yield run[:cut]
        run = run[cut:]
    if run:
        yield run


def _japanese_terms(text: str) -> list[str]:
    from sudachipy import SplitMode

    out: list[str] = []
    tok = _japanese_tokenizer()
    for piece in _japanese_pieces(text):
        for m in tok.tokenize(piece):
            if m.part_of_speech()[0] in _JA_DROP_POS:
                continue
            form = m.normalized_form()
            if form not in JAPANESE_STOP and _HAS_WORD.search(form):
                out.append(form)
            subs = m.split(SplitMode.A)
            if len(subs) > 1:
                out.extend(
                    s.normalized_form()
                    for s in subs
                    if s.part_of_speech()[0] not in _JA_DROP_POS
                    and s.normalized_form() not in JAPANESE_STOP
                    and _HAS_WORD.search(s.normalized_form())
                )
    return out


# --------------------------------------------------------------------------- texts, queries


def _split(text: str) -> tuple[list[str], list[str]]:
    """(CJK runs, the words of everything else, case-folded) of an NFKC'd text."""
    runs = [m.group() for m in _CJK_RUN.finditer(text)]
    rest = _CJK_RUN.sub(" ", text)
    return runs, [w.casefold() for w in _WORD.findall(rest)]


def _normal(text: str) -> str:
    # Full-width letters and digits as ASCII (ＡＢＣ１２３ → ABC123): NFKC, for terms only.
    return unicodedata.normalize("NFKC", text)


def text_terms(text: str, language: str) -> list[str]:
    """The index terms of a text of a book in ``language`` (see :func:`language_of`)."""
    text = _normal(text)
    runs, words = _split(text)
    terms = _latin_terms(words, language)
    if not runs:
        return terms
    if language == "ja":
        terms.extend(_japanese_terms(text if not words else " ".join(runs)))
    else:
        for run in runs:
            if _KANA.search(run):
                terms.extend(_japanese_terms(run))
            else:
                terms.extend(_chinese_terms(run))
    return terms


def query_terms(query: str, languages: Sequence[str] = ("en",)) -> list[str]:
    """The terms a query is searched by, for books in ``languages``; no duplicates, in
    query order."""
    text = _normal(query)
    runs, words = _split(text)
    latin = [lang for lang in languages if lang not in ("zh", "ja")] or ["en"]
    out: list[str] = []
    for lang in dict.fromkeys(latin):
        out.extend(_latin_terms(words, lang))
    for run in runs:
        if _KANA.search(run) or (languages and set(languages) <= {"ja"}):
            out.extend(_japanese_terms(run))
            continue
        out.extend(_chinese_terms(run))
        if "ja" in languages:
            # Kanji shared with the Japanese books, asked in both scripts so that the
            # terms do not depend on the script the question was typed in.
            for variant in both_scripts(run):
                out.extend(_japanese_terms(variant))
    return list(dict.fromkeys(out))


@functools.cache
def fingerprint() -> str:
    """The analysis and the versions of the packages doing it (what a word index was
    built with)."""

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "missing"

    parts = [
        f"mindory-words-{ANALYSIS_VERSION}",
        f"PyStemmer-{version('PyStemmer')}",
        f"opencc-pyo3-{version('opencc-pyo3')}",
        f"rjieba-{version('rjieba')}",
        f"SudachiPy-{version('SudachiPy')}",
        f"sudachidict-{sudachi_dictionary_name()}-{version(f'sudachidict-{sudachi_dictionary_name()}')}",
    ]
    return "+".join(parts)
