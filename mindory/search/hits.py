"""Search results: a hit per chunk with why it ranked where it did and where it is
(its Locator and word matches, exact source spans)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sqlalchemy.engine import Connection

from mindory.reading.display import DisplayText, display_text
from mindory.reading.locate import Locator, SectionPlace, locate_span
from mindory.search.analysis import QueryTerms
from mindory.search.fusion import Fused
from mindory.search.matches import Match, find_matches
from mindory.store.places import HIT_ROWS_STMT, ByteOffsets, PlaceCache, Places

__all__ = [
    "AlsoIn",
    "Hit",
    "ModeScore",
    "SearchResult",
    "build_hits",
    "chunk_locator",
    "source_matches",
]


@dataclass(frozen=True, slots=True)
class ModeScore:
    """A hit's place in one mode's list: rank (from 1) and that mode's raw score
    (lexical: ``-bm25``, or the scan score; vector: cosine similarity)."""

    rank: int
    score: float

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "score": round(self.score, 6)}


@dataclass(frozen=True, slots=True)
class AlsoIn:
    """The same text elsewhere: a chunk of another book (or a repeat in the same one)."""

    book: str
    book_title: str
    section: int
    chunk: str

    def to_json(self) -> dict[str, Any]:
        return {
            "book": {"id": self.book, "title": self.book_title},
            "section": self.section,
            "chunk": self.chunk,
        }


@dataclass(frozen=True, slots=True)
class Hit:
    """One search hit: a chunk, why it ranked where it did, and where it is."""

    rank: int
    score: float  # hybrid: the RRF score; lexical / vector: that mode's raw score
    scores: Mapping[str, ModeScore | None]
    chunk: str  # the stable chunk id
    book: str  # the book's SHA-256
    book_title: str
    section: int
    section_title: str
    locator: Any  # mindory.reading.locate.Locator
    matches: tuple[Match, ...] = ()
    row_id: int | None = None  # library-local, never exported
    also_in: tuple[AlsoIn, ...] = ()  # the same text in other books (not repeated as hits)
    apparatus: str | None = None  # contents / front / licence: ranked after the body
    display: DisplayText | None = None  # the locator's text without ruby annotations

    def to_json(self) -> dict[str, Any]:
        locator = self.locator.to_json()
        if self.display is not None:
            # Beside the raw DOM text (Readium's text.highlight): what a reader sees.
            locator["text"].update(self.display.to_json())
        return {
            "rank": self.rank,
            "score": round(self.score, 6),
            "scores": {m: (s.to_json() if s else None) for m, s in self.scores.items()},
            "chunk": self.chunk,
            "book": {"id": self.book, "title": self.book_title},
            "section": {"ordinal": self.section, "title": self.section_title},
            "locator": locator,
            "matches": [m.to_json() for m in self.matches],
            "also_in": [a.to_json() for a in self.also_in],
            "apparatus": self.apparatus,
        }


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    mode: str
    k: int
    hits: tuple[Hit, ...]
    terms: QueryTerms
    book: str | None = None
    section: int | None = None
    embedding: str | None = None  # the embedding's fingerprint (vector / hybrid)
    embedder_id: str | None = None
    warnings: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)  # milliseconds

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "k": self.k,
            "filters": {"book": self.book, "section": self.section},
            "terms": self.terms.to_json(),
            "embedding": (
                {"fingerprint": self.embedding, "embedder": self.embedder_id}
                if self.embedding
                else None
            ),
            "hits": [h.to_json() for h in self.hits],
            "warnings": list(self.warnings),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }


def chunk_locator(place: SectionPlace, c: Any, page_size: int) -> Locator:
    """The Locator of a stored chunk row (with its parent span, if it has one)."""
    context: tuple[int, int] | None = None
    if c.context_start is not None and c.context_end is not None:
        ls, le = place.offset_map.source_span(int(c.context_start), int(c.context_end))
        context = (ls + place.source_start, le + place.source_start)
    bytes_fn = place.byte_offset
    if isinstance(bytes_fn, ByteOffsets):
        wanted = [int(c.source_start), int(c.source_end), *(context or ())]
        if not bytes_fn.can(wanted):
            place = replace(place, byte_offset=None)
    return locate_span(
        place,
        int(c.source_start),
        int(c.source_end),
        normalized=(int(c.start), int(c.end)),
        page_size=page_size,
        chunk_id=str(c.chunk_id),
        context=context,
    )


def source_matches(
    place: SectionPlace, start: int, end: int, terms: QueryTerms
) -> tuple[Match, ...]:
    found = find_matches(place.normalized_text, start, end, terms)
    if not found:
        return ()
    shift = place.source_start
    starts = np.fromiter((a for a, _, _ in found), dtype=np.int64, count=len(found))
    ends = np.fromiter((b for _, b, _ in found), dtype=np.int64, count=len(found))
    src_s, src_e = place.offset_map.source_spans(starts, ends)
    out: list[Match] = []
    for (a, b, words), ls, le in zip(found, src_s.tolist(), src_e.tolist()):
        out.append(
            Match(
                terms=words,
                text=place.source_text[ls:le],
                source_start=ls + shift,
                source_end=le + shift,
                utf16_start=place.to_utf16(ls + shift),
                utf16_end=place.to_utf16(le + shift),
                normalized_start=a,
                normalized_end=b,
            )
        )
    return tuple(out)


def build_hits(
    places_cache: PlaceCache,
    read_book: Callable[[str], bytes],
    conn: Connection,
    top: Sequence[Fused],
    terms: QueryTerms,
    page_size: int,
    also: Mapping[int, Sequence[AlsoIn]] | None = None,
    apparatus: Mapping[int, str | None] | None = None,
    modes: Sequence[str] = ("words", "lexical", "vector"),
) -> list[Hit]:
    """The hits of the ranked candidates ``top``: Locator, word matches, scores per mode."""
    if not top:
        return []
    rows = conn.execute(HIT_ROWS_STMT, {"ids": [f.id for f in top]}).all()
    by_id = {int(r.id): r for r in rows}
    places = Places(places_cache, conn, read_book)
    places.prefetch((int(r.section_id), int(r.normalization_id)) for r in rows)
    for r in rows:
        places.know_bytes(int(r.book_id), r)
    hits: list[Hit] = []
    for f in top:
        found = by_id.get(f.id)
        if found is None:
            continue  # deleted since it was ranked
        r = found
        place = places.get(int(r.section_id), int(r.normalization_id))
        facts = places.book(int(r.book_id))
        scores = {m: (ModeScore(*f.ranks[m]) if m in f.ranks else None) for m in modes}
        locator = chunk_locator(place, r, page_size)
        hits.append(
            Hit(
                rank=len(hits) + 1,
                score=f.score,
                scores=scores,
                chunk=str(r.chunk_id),
                book=facts.sha,
                book_title=facts.title,
                section=place.ordinal,
                section_title=place.title,
                locator=locator,
                matches=source_matches(place, int(r.start), int(r.end), terms),
                row_id=int(r.id),
                also_in=tuple((also or {}).get(f.id, ())),
                apparatus=(apparatus or {}).get(f.id),
                display=display_text(place, locator.source_start, locator.source_end),
            )
        )
    return hits
