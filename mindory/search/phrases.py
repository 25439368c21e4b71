"""Phrases a query shares with a chunk, and whether a query is a list of keywords.

A reader who half-remembers a line types part of it ("soft what light yonder window",
"what's in a name rose"): not the whole quote (no verbatim match), but runs of three or
more of its words in the book's order. Word analysis drops "what", "in", "a" and
stems the rest; the vectors see a question about a name and a rose and pull in
paraphrases. So the words of the query are compared with a candidate's text as they
stand (case folded, stop words kept), and the longest run of consecutive query words
that also stands consecutively in the text, with at least one content word in it,
earns the candidate a bonus (:data:`PHRASE_BONUS` per word beyond two) in hybrid
search. Measured on the reader questions (docs/search.md): keyword MRR from 0.860 back
to the lexical 0.904 and above, context questions up, paraphrase unchanged within noise.

A **keyword list** ("Nell Gwyn Drury Lane smock") has no stop word, no question mark
and few words: its words are the book's own, and its vector, of a list rather than a
sentence, is weak evidence; such a query gets :data:`KEYWORD_VECTOR_WEIGHT`: none, so
hybrid search of a keyword list is its lexical search. (At 0.2, measured through the
whole pipeline (`mindory eval`) on the reader questions, "Nell Gwyn Drury Lane smock"
fell from rank 2 to 4 and keyword MRR was 0.896 against lexical's 0.904; at 0 both are
0.904 and nothing else moves.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mindory.search.words import ENGLISH_STOP

__all__ = [
    "KEYWORD_VECTOR_WEIGHT",
    "MIN_RUN",
    "PHRASE_BONUS",
    "PHRASE_DEPTH",
    "is_keyword_list",
    "longest_run",
    "with_phrase_bonus",
    "words_of",
]

MIN_RUN = 3  # words in a row that count as a remembered phrase
PHRASE_BONUS = 0.2  # added to the fused score per word of the run beyond MIN_RUN - 1
PHRASE_DEPTH = 30  # fused candidates looked at
KEYWORD_LIST_MAX_WORDS = 6
KEYWORD_VECTOR_WEIGHT = 0.0

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


def words_of(text: str) -> list[str]:
    """The words of ``text``, case folded, with ``’`` as ``'`` (stop words kept)."""
    return [w.replace("\u2019", "'") for w in _WORD.findall(text.casefold())]


def longest_run(query_words: Sequence[str], text: str) -> int:
    """How many consecutive words of the query stand consecutively in ``text`` at most,
    counting only runs that hold a word other than a stop word (0 if none)."""
    if not query_words:
        return 0
    words = words_of(text)
    at: dict[str, list[int]] = {}
    for j, w in enumerate(words):
        at.setdefault(w, []).append(j)
    best = 0
    for i, first in enumerate(query_words):
        for p in at.get(first, ()):
            n = 1
            while (
                i + n < len(query_words)
                and p + n < len(words)
                and words[p + n] == query_words[i + n]
            ):
                n += 1
            if n > best and any(w not in ENGLISH_STOP for w in query_words[i : i + n]):
                best = n
    return best


def with_phrase_bonus(
    scores: Sequence[float], texts: Sequence[str | None], query_words: Sequence[str]
) -> list[int]:
    """The order (indexes into ``scores``, best first) after adding :data:`PHRASE_BONUS`
    per word of the longest shared run beyond two to each of the first
    :data:`PHRASE_DEPTH` candidates (``texts[n]`` None: no bonus). Ties keep the given
    order, so it is deterministic."""
    adjusted = list(scores)
    for n, text in enumerate(texts[:PHRASE_DEPTH]):
        run = longest_run(query_words, text) if text is not None else 0
        if run >= MIN_RUN:
            adjusted[n] += PHRASE_BONUS * (run - MIN_RUN + 1)
    return sorted(range(len(adjusted)), key=lambda n: (-adjusted[n], n))


def is_keyword_list(query: str) -> bool:
    """A few words, none of them stop or question words, and no question mark."""
    words = words_of(query)
    return (
        0 < len(words) <= KEYWORD_LIST_MAX_WORDS
        and not any(w in ENGLISH_STOP for w in words)
        and not query.rstrip().endswith("?")
    )
