"""Where the query's words occur inside a hit.

They are found in the chunk's *normalized* text and mapped to source through the
offset map (:func:`mindory.search.hits.source_matches`), so a reader can highlight the
words themselves — never a ``str.find`` over the source text.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import regex

from mindory.search.analysis import WORD_CHAR, QueryTerms

__all__ = ["Match", "find_matches"]


@functools.lru_cache(maxsize=4096)
def _word_pattern(word: str) -> Any:
    # At a word start; a word of three or more letters may continue (whale → whales),
    # a shorter one must end there.
    tail = rf"{WORD_CHAR}*" if len(word) >= 3 else rf"(?!{WORD_CHAR})"
    return regex.compile(rf"(?<!{WORD_CHAR}){regex.escape(word)}{tail}", regex.IGNORECASE)


def _cjk_pieces(run: str, haystack: str) -> list[str]:
    """Greedy longest pieces (≥ 2 characters, or the whole run if shorter) of a CJK run
    that occur in ``haystack``."""
    if len(run) < 2:
        return [run] if run in haystack else []
    pieces: list[str] = []
    i = 0
    while i < len(run) - 1:
        j = i + 2
        if run[i:j] not in haystack:
            i += 1
            continue
        while j < len(run) and run[i : j + 1] in haystack:
            j += 1
        pieces.append(run[i:j])
        i = j
    return pieces


def find_matches(
    normalized: str, start: int, end: int, terms: QueryTerms
) -> list[tuple[int, int, tuple[str, ...]]]:
    """Where the query's words occur in ``normalized[start:end]``: ``(a, b, terms)``
    in normalized positions, sorted, overlapping occurrences merged."""
    window = normalized[start:end]
    found: list[tuple[int, int, str]] = []
    for word in terms.highlight_words():
        for m in _word_pattern(word).finditer(window):
            found.append((start + m.start(), start + m.end(), word))
    for run in terms.cjk_runs:
        for piece in _cjk_pieces(run, window):
            pos = window.find(piece)
            while pos >= 0:
                found.append((start + pos, start + pos + len(piece), piece))
                pos = window.find(piece, pos + len(piece))
    found.sort()
    merged: list[tuple[int, int, tuple[str, ...]]] = []
    for a, b, t in found:
        if merged and a < merged[-1][1]:
            pa, pb, pt = merged[-1]
            merged[-1] = (pa, max(pb, b), pt if t in pt else (*pt, t))
        else:
            merged.append((a, b, (t,)))
    return merged


@dataclass(frozen=True, slots=True)
class Match:
    """An occurrence of query words inside a hit: exact source span (code points and
    UTF-16, book source coordinates), the normalized span, and the source text."""

    terms: tuple[str, ...]
    text: str
    source_start: int
    source_end: int
    utf16_start: int
    utf16_end: int
    normalized_start: int
    normalized_end: int

    def to_json(self) -> dict[str, Any]:
        return {
            "terms": list(self.terms),
            "text": self.text,
            "source": {
                "start": self.source_start,
                "end": self.source_end,
                "utf16Start": self.utf16_start,
                "utf16End": self.utf16_end,
            },
            "normalized": {"start": self.normalized_start, "end": self.normalized_end},
        }
