"""Ranking that knows a book's structure: apparatus after the body, one hit per text.

**Apparatus** — contents pages and navigation documents, title and copyright pages, the
Project Gutenberg header and licence — holds the same words as the body (every chapter
title, the book's name) but never answers a question about the book. A fused candidate
list is stably partitioned: every body chunk before any apparatus chunk, each part in
its fused order. So a contents page can still be found (when nothing else matches) but
never outranks body text the query also matched.

**Quotes** — a chunk that holds the whole query verbatim (a quote the reader copied or
remembers exactly) comes before everything else: the words themselves are the answer.

**Duplicates** — the same normalized chunk text in two books (one novel in two
encodings, two editions) — come back once: the best-ranked, with the others named in
``also_in``.

Both look only at a candidate's own text and its section's title: no stored flag, so a
library imported before these rules ranks the same way.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import regex

__all__ = ["Candidate", "apparatus_kind", "arrange"]

_CONTENTS_TITLE = regex.compile(
    r"^\s*(?:table\s+of\s+contents|contents|index|目[錄录次]|目次|总目|總目)\s*$",
    regex.IGNORECASE,
)
_FRONT_TITLE = regex.compile(
    r"^\s*(?:title\s*page|cover|copyright|colophon|imprint|封面|版权|版權|奥付|表紙|扉)\s*$",
    regex.IGNORECASE,
)
# A line of a contents page: a chapter label, a roman or arabic number, or a CJK
# chapter / hui / juan heading, short, optionally ending in a page number.
_TOC_LINE = regex.compile(
    r"^\s*(?:(?:chapter|book|part|act|scene|canto|letter|section)\b[^\n]{0,60}"
    r"|[IVXLCDM]+\.?\s[^\n]{0,60}|\d{1,3}\.?\s[^\n]{0,60}"
    r"|第[\p{Han}\d０-９]{1,6}[回章卷節节篇部幕]\s*[^\n]{0,40}"
    r"|[^\n]{1,60}\s\.{2,}\s*\d+|[^\n]{1,60}\s\d{1,4})\s*$",
    regex.IGNORECASE | regex.MULTILINE,
)
_GUTENBERG = re.compile(
    r"project gutenberg|gutenberg-tm|gutenberg\.org|\*\*\* ?(?:start|end) of (?:the|this) project",
    re.IGNORECASE,
)
_LICENSE_WORDS = re.compile(
    r"licen[cs]e|trademark|copyright|royalt|donation|warrant|liabilit|refund|\bebook",
    re.IGNORECASE,
)


_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where splitlines() splits


def apparatus_kind(text: str, section_title: str = "") -> str | None:
    """``contents``, ``front`` or ``licence`` for apparatus, None for body text."""
    if _CONTENTS_TITLE.match(section_title or ""):
        return "contents"
    if _FRONT_TITLE.match(section_title or ""):
        return "front"
    if _GUTENBERG.search(text) and len(_LICENSE_WORDS.findall(text)) >= 2:
        return "licence"
    if sum(text.count(c) for c in _LINE_BREAKS) < 4:
        return None  # fewer than five lines: no contents page (and no splitting)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) >= 5:
        toc = sum(1 for line in lines if len(line) <= 80 and _TOC_LINE.match(line))
        if toc >= 0.6 * len(lines):
            return "contents"
    return None


@dataclass(frozen=True)
class Candidate:
    """What arranging needs of one fused candidate (a chunk row)."""

    id: int
    book: str  # the book's SHA-256
    text: str  # normalized chunk text
    section_title: str = ""
    apparatus: str | None = None
    digest: str = field(default="", compare=False)

    @classmethod
    def of(cls, id: int, book: str, text: str, section_title: str = "") -> Candidate:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return cls(
            id=id,
            book=book,
            text=text,
            section_title=section_title,
            apparatus=_apparatus(digest, section_title, text),
            digest=digest,
        )


_APPARATUS: OrderedDict[tuple[str, str], str | None] = OrderedDict()
_APPARATUS_MAX = 8192  # (64-character keys: under 2 MB)
_APPARATUS_LOCK = threading.Lock()


def _apparatus(digest: str, section_title: str, text: str) -> str | None:
    """:func:`apparatus_kind`, remembered by the text's digest and the title (content,
    never stale): the same chunks come back search after search, and testing 50
    candidates for a contents page cost ~2 ms a search."""
    key = (digest, section_title)
    with _APPARATUS_LOCK:
        if key in _APPARATUS:
            _APPARATUS.move_to_end(key)
            return _APPARATUS[key]
    kind = apparatus_kind(text, section_title)
    with _APPARATUS_LOCK:
        _APPARATUS[key] = kind
        while len(_APPARATUS) > _APPARATUS_MAX:
            _APPARATUS.popitem(last=False)
    return kind


def arrange(
    order: Sequence[int],
    candidates: Mapping[int, Candidate],
    quotes: Sequence[int] = (),
) -> tuple[list[int], dict[int, list[int]]]:
    """Chunks holding the query verbatim (``quotes``) first, then the body, then the
    apparatus, each part in the fused order; duplicates folded into their best-ranked
    copy: ``(row ids in their new order, {kept id: [ids of the same text elsewhere]})``.
    Ids without a candidate (deleted meanwhile) keep their place among the body."""
    held = set(quotes)
    first = [i for i in order if i in held] + [i for i in quotes if i not in set(order)]
    order = [i for i in order if i not in held]
    body = [i for i in order if candidates.get(i) is None or candidates[i].apparatus is None]
    rest = [i for i in order if candidates.get(i) is not None and candidates[i].apparatus]
    body = first + body
    kept: list[int] = []
    first_of: dict[str, int] = {}
    also: dict[int, list[int]] = {}
    for i in body + rest:
        c = candidates.get(i)
        if c is None:
            kept.append(i)
            continue
        owner = first_of.get(c.digest)
        if owner is None:
            first_of[c.digest] = i
            kept.append(i)
        else:  # another book, or the same text twice in one book (a repeated chapter)
            also.setdefault(owner, []).append(i)
    return kept, also
