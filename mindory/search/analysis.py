"""Query and text analysis: what a query is searched and highlighted by.

A query is NFC-normalized and cut into *words* (runs of letters, digits and marks of
alphabetic scripts, lower-cased) and *CJK runs* (Han, kana, Hangul — scripts written
without spaces). English stop words are dropped while other words remain. The trigram
phrases of :meth:`QueryTerms.fts_terms` are what :mod:`mindory.search.lexical` asks the
full-text index for (docs/search.md).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import regex

__all__ = ["STOPWORDS", "QueryTerms", "analyze", "light_stem", "unique"]


_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u30fc\u3005-\u3007"


_TOKEN_RE = regex.compile(
    rf"(?P<cjk>[{_CJK}]+)|(?P<word>[[\p{{L}}\p{{N}}\p{{M}}]--[{_CJK}]]+)", regex.V1
)


WORD_CHAR = r"[\p{L}\p{N}\p{M}]"


# Measured on the shipped eval sets (docs/search.md): stems lift English lexical MRR
# 0.800 -> 0.820; expanding every CJK bigram of longer runs lifts Chinese lexical MRR
# 0.783 -> 0.852 but costs a vocabulary scan per bigram (0.6-8.5 ms each at 100k
# chunks), so it is off and the vectors (CJK 1-2 gram features) cover that ground.
STEMS = True


CJK_BIGRAMS = False


WORD_PREFIX = 6


_SUFFIXES = ("ings", "ing", "edly", "ed", "ies", "es", "s", "ly")


def light_stem(word: str) -> str:
    """A crude English stem (swimming → swim, disappeared → disappear, lives → live)
    so that a query word also finds its other forms; the full word stays a term too."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            if suffix == "ies":
                stem += "y"
            elif len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
                stem = stem[:-1]  # swimm → swim, but keep "fall", "press"
            return stem
    return word


# Words too common to find anything by (they still count in a phrase-free query
# made only of them).
# fmt: off
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
    "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same",
    "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself",
    "yourselves", "upon", "shall", "may", "might", "must", "said", "says", "say", "thee",
    "thou", "thy", "one",
))


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """What a query is searched and highlighted by (see the module doc)."""

    query: str
    words: tuple[str, ...]  # lower-cased, in query order, no duplicates
    cjk_runs: tuple[str, ...]

    @property
    def content_words(self) -> tuple[str, ...]:
        """Words that are not stop words (all words if every one is a stop word)."""
        kept = tuple(w for w in self.words if w not in STOPWORDS)
        return kept or self.words

    def fts_terms(self) -> list[str]:
        """Phrases for the FTS query: words ≥ 3 characters (and their stems), CJK
        trigrams and whole runs."""
        out: list[str] = []
        for w in self.content_words:
            if len(w) >= 3:
                if WORD_PREFIX and len(w) > WORD_PREFIX:
                    # A long word by its first characters: fewer trigrams to intersect
                    # (each common one has a doclist as long as the library), and it
                    # finds the word's other endings too.
                    out.append(light_stem(w)[:WORD_PREFIX] if STEMS else w[:WORD_PREFIX])
                    continue
                out.append(w)
                if STEMS:
                    stem = light_stem(w)
                    if stem != w and len(stem) >= 4:
                        out.append(stem)
        for run in self.cjk_runs:
            if len(run) >= 3:
                out.extend(run[i : i + 3] for i in range(len(run) - 2))
                if len(run) > 3:
                    out.append(run)
        return unique(out)

    def short_terms(self) -> list[str]:
        """CJK bigrams: two-character runs, and (CJK_BIGRAMS) every bigram of the
        longer runs — no trigram of their own (see the module doc)."""
        out = [r for r in self.cjk_runs if len(r) == 2]
        if CJK_BIGRAMS:
            for run in self.cjk_runs:
                if len(run) > 2:
                    out.extend(run[i : i + 2] for i in range(len(run) - 1))
        return unique(out)

    def scan_terms(self) -> list[str]:
        """Terms for a plain scan: every content word and CJK run."""
        return unique([*self.content_words, *self.cjk_runs])

    def highlight_words(self) -> tuple[str, ...]:
        return self.content_words

    @property
    def empty(self) -> bool:
        return not self.words and not self.cjk_runs

    def to_json(self) -> dict[str, Any]:
        return {"words": list(self.words), "cjk": list(self.cjk_runs)}


def unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            out.append(item)
    return out


def analyze(query: str) -> QueryTerms:
    """Words and CJK runs of a query (NFC, words lower-cased)."""
    q = unicodedata.normalize("NFC", query)
    words: list[str] = []
    runs: list[str] = []
    for m in _TOKEN_RE.finditer(q):
        if m.group("cjk"):
            runs.append(m.group("cjk"))
        else:
            words.append(m.group("word").lower())
    return QueryTerms(query=q, words=tuple(unique(words)), cjk_runs=tuple(unique(runs)))
