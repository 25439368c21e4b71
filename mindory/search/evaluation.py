"""Retrieval quality on hand-written query sets: recall@1/5/10, MRR, answer completeness.

A query set is JSON lines, one query each::

    {"query": "what are the Houses of Parliament used for now",
     "book": "news-from-nowhere.txt",                 # the book's file name (or title / id)
     "answer": "the high tower of the Parliament House, or Dung Market",
     "kind": "paraphrase"}                             # optional label, reported per kind

``answer`` is a short text of the book that answers the query. It is looked up in the
sections' *normalized* text (NFC, whitespace runs collapsed, so it may cross a line
break of the file) and mapped to source through the offset map; every occurrence
counts. Instead of ``answer`` a line may give ``"span": [start, end]`` (book source
coordinates, code points) and, for EPUB, ``"section": N``.

**Relevance.** A hit is relevant when it is in the answer's book and section and its
chunk's source span covers at least half of the answer's source span (rounded up) —
so a chunk that holds the whole answer always counts, and so does one that holds
most of an answer cut by a chunk boundary.

**Metrics** (per mode, per book and per ``kind``): recall@1/5/10 — the share of
queries with a relevant hit among the first 1/5/10; MRR — the mean of 1/rank of the
first relevant hit within ``k`` (0 when there is none). **Answer completeness** is the
share of answers that lie entirely inside one chunk of the current derivation.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mindory.errors import MindoryError, NotFoundError
from mindory.search.fusion import MODES

if TYPE_CHECKING:
    from mindory.search.hits import Hit, SearchResult
    from mindory.store.records import BookInfo, ChunkInfo, SectionDetail, SectionInfo


class Library(Protocol):
    """What an evaluation asks of a library (:class:`mindory.library.Library` is one)."""

    def books(self) -> list[BookInfo]: ...

    def book(self, ref: str) -> BookInfo: ...

    def sections(self, ref: str) -> list[SectionInfo]: ...

    def section(self, ref: str, ordinal: int) -> SectionDetail: ...

    def chunks(self, ref: str, *, section: int | None = None) -> list[ChunkInfo]: ...

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        mode: str = "hybrid",
        weights: Mapping[str, float] | None = None,
        rrf_k: int | None = None,
        book: str | None = None,
        rerank: bool = False,
    ) -> SearchResult: ...


__all__ = [
    "AnswerPlace",
    "EvalQuery",
    "EvalReport",
    "ModeMetrics",
    "evaluate",
    "load_queries",
]

RECALL_AT = (1, 5, 10)


@dataclass(frozen=True, slots=True)
class EvalQuery:
    query: str
    book: str
    answer: str | None = None
    span: tuple[int, int] | None = None
    section: int | None = None
    kind: str | None = None
    line: int = 0
    book_sha256: str | None = None  # the book by content, whatever its file is called
    lang: str | None = None  # the query's language (reported per language)
    id: str | None = None
    pair: str | None = None  # the id of the same question in the other script or language


def load_queries(path: str | os.PathLike[str]) -> list[EvalQuery]:
    """Read a JSON-lines query set; errors name the file and line."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise MindoryError(
            f"cannot read the query set: {exc.strerror or exc}", path=str(p)
        ) from exc
    out: list[EvalQuery] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        where = f"{p}:{n}"
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise MindoryError(f"{where}: not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise MindoryError(f"{where}: a query line is a JSON object")
        query, book = doc.get("query"), doc.get("book")
        if not isinstance(query, str) or not query.strip():
            raise MindoryError(f"{where}: 'query' must be a non-empty string")
        if not isinstance(book, str) or not book.strip():
            raise MindoryError(f"{where}: 'book' must name the book (its file name)")
        answer, span, section = doc.get("answer"), doc.get("span"), doc.get("section")
        if (answer is None) == (span is None):
            raise MindoryError(f"{where}: give either 'answer' (text) or 'span' ([start, end])")
        if answer is not None and (not isinstance(answer, str) or not answer.strip()):
            raise MindoryError(f"{where}: 'answer' must be a non-empty string")
        parsed_span: tuple[int, int] | None = None
        if span is not None:
            if (
                not isinstance(span, list)
                or len(span) != 2
                or not all(isinstance(x, int) for x in span)
                or not 0 <= span[0] < span[1]
            ):
                raise MindoryError(f"{where}: 'span' must be [start, end] with 0 <= start < end")
            parsed_span = (int(span[0]), int(span[1]))
        if section is not None and not isinstance(section, int):
            raise MindoryError(f"{where}: 'section' must be an integer")
        kind = doc.get("kind")
        sha, lang, qid = doc.get("book_sha256"), doc.get("lang"), doc.get("id")
        if sha is not None and (
            not isinstance(sha, str) or len(sha) != 64 or not set(sha) <= set("0123456789abcdef")
        ):
            raise MindoryError(f"{where}: 'book_sha256' must be 64 lower-case hex digits")
        out.append(
            EvalQuery(
                query=query,
                book=book,
                answer=answer,
                span=parsed_span,
                section=section,
                kind=str(kind) if kind is not None else None,
                line=n,
                book_sha256=sha,
                lang=str(lang) if lang is not None else None,
                id=str(qid) if qid is not None else None,
                pair=str(doc["pair"]) if doc.get("pair") is not None else None,
            )
        )
    if not out:
        raise MindoryError("the query set holds no queries", path=str(p))
    return out


@dataclass(frozen=True, slots=True)
class AnswerPlace:
    """Where an answer is: book, section ordinal, book source span (code points)."""

    book: str
    section: int
    source_start: int
    source_end: int

    def covered_by(self, section: int, start: int, end: int) -> bool:
        """True when ``[start, end)`` in ``section`` covers at least half of the answer."""
        if section != self.section:
            return False
        need = max(1, math.ceil((self.source_end - self.source_start) / 2))
        return min(end, self.source_end) - max(start, self.source_start) >= need

    def inside(self, start: int, end: int) -> bool:
        return start <= self.source_start and self.source_end <= end


@dataclass(frozen=True, slots=True)
class ModeMetrics:
    mode: str
    n: int
    recall: Mapping[int, float]
    mrr: float

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n}
        for at, value in self.recall.items():
            out[f"recall@{at}"] = round(value, 4)
        out["mrr"] = round(self.mrr, 4)
        return out


def _metrics(mode: str, ranks: Sequence[int | None], k: int) -> ModeMetrics:
    n = len(ranks)
    recall = {
        at: (sum(1 for r in ranks if r is not None and r <= at) / n if n else 0.0)
        for at in RECALL_AT
    }
    mrr = sum(1.0 / r for r in ranks if r is not None and r <= k) / n if n else 0.0
    return ModeMetrics(mode, n, recall, mrr)


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    query: EvalQuery
    places: tuple[AnswerPlace, ...]
    complete: bool
    ranks: Mapping[str, int | None]  # first relevant rank per mode (None: not in the list)

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.query.line,
            "query": self.query.query,
            "book": self.query.book,
            "kind": self.query.kind,
            "lang": self.query.lang,
            "id": self.query.id,
            "answers": [[p.section, p.source_start, p.source_end] for p in self.places],
            "complete": self.complete,
            "ranks": dict(self.ranks),
        }


@dataclass(frozen=True)
class EvalReport:
    k: int
    modes: tuple[str, ...]
    outcomes: tuple[QueryOutcome, ...]
    missing: tuple[str, ...] = ()  # answers that were not found in their books
    groups: Mapping[str, Mapping[str, ModeMetrics]] = field(default_factory=dict)

    @property
    def overall(self) -> Mapping[str, ModeMetrics]:
        return self.groups["all"]

    @property
    def completeness(self) -> float:
        found = [o for o in self.outcomes if o.places]
        return sum(o.complete for o in found) / len(found) if found else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "queries": len(self.outcomes),
            "answers_found": sum(1 for o in self.outcomes if o.places),
            "missing": list(self.missing),
            "completeness": round(self.completeness, 4),
            "groups": {
                name: {mode: m.to_json() for mode, m in metrics.items()}
                for name, metrics in self.groups.items()
            },
            "details": [o.to_json() for o in self.outcomes],
        }


def _collapse(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def locate_answer(
    lib: Library, q: EvalQuery, sections: Sequence[SectionDetail]
) -> list[AnswerPlace]:
    """Every place of the query's answer in the book (see the module doc)."""
    book = sections[0].book if sections else ""
    if q.span is not None:
        start, end = q.span
        for sec in sections:
            if q.section is not None and sec.info.ordinal != q.section:
                continue
            if sec.info.source_start <= start and end <= sec.info.source_end:
                return [AnswerPlace(book, sec.info.ordinal, start, end)]
        return []
    assert q.answer is not None
    # The answer's words in order with any whitespace between them: a quote typed on
    # one line still finds verse kept line by line in the normalized text.
    pattern = re.compile(r"\s+".join(re.escape(w) for w in _collapse(q.answer).split(" ")))
    places: list[AnswerPlace] = []
    for sec in sections:
        for m in pattern.finditer(sec.normalized_text):
            ls, le = sec.offset_map.source_span(m.start(), m.end())
            shift = sec.info.source_start
            places.append(AnswerPlace(book, sec.info.ordinal, ls + shift, le + shift))
    return places


def _first_relevant(hits: Iterable[Hit], places: Sequence[AnswerPlace]) -> int | None:
    for hit in hits:
        loc = hit.locator
        if any(
            hit.book == p.book and p.covered_by(hit.section, loc.source_start, loc.source_end)
            for p in places
        ):
            return int(hit.rank)
    return None


def evaluate(
    lib: Library,
    queries: Sequence[EvalQuery],
    *,
    k: int = 10,
    modes: Sequence[str] = MODES,
    weights: Mapping[str, float] | None = None,
    rrf_k: int | None = None,
    within_book: bool = False,
) -> EvalReport:
    """Run every query in every mode over the whole library (``within_book``: over its
    own book only) and score the hits."""
    depth = max(k, max(RECALL_AT))
    sections_of: dict[str, list[SectionDetail]] = {}
    spans_of: dict[tuple[str, int], list[tuple[int, int]]] = {}
    outcomes: list[QueryOutcome] = []
    missing: list[str] = []
    book_ids: dict[str, str] = {}
    for q in queries:
        ref = q.book_sha256 or q.book
        if ref not in book_ids:
            try:
                book_ids[ref] = _book_for(lib, q.book, q.book_sha256)
            except (NotFoundError, MindoryError) as exc:
                raise MindoryError(f"line {q.line}: {exc} (import the book first)") from exc
        info = book_ids[ref]
        if info not in sections_of:
            sections_of[info] = [lib.section(info, s.ordinal) for s in lib.sections(info)]
        places = locate_answer(lib, q, sections_of[info])
        if not places:
            missing.append(f"line {q.line}: answer not found in {q.book}: {q.answer or q.span}")
        complete = False
        for p in places:
            key = (info, p.section)
            if key not in spans_of:
                spans_of[key] = [
                    (c.source_start, c.source_end) for c in lib.chunks(info, section=p.section)
                ]
            if any(p.inside(a, b) for a, b in spans_of[key]):
                complete = True
                break
        ranks: dict[str, int | None] = {}
        for mode in modes:
            # "rerank": hybrid with the second stage (mindory.search.rerank).
            result = lib.search(
                q.query,
                k=depth,
                mode="hybrid" if mode == "rerank" else mode,
                weights=weights,
                rrf_k=rrf_k,
                book=info if within_book else None,
                rerank=mode == "rerank",
            )
            ranks[mode] = _first_relevant(result.hits, places) if places else None
        outcomes.append(QueryOutcome(q, tuple(places), complete, ranks))
    groups: dict[str, dict[str, ModeMetrics]] = {}
    labels: dict[str, list[QueryOutcome]] = {"all": outcomes}
    for o in outcomes:
        labels.setdefault(f"book:{o.query.book}", []).append(o)
        if o.query.kind:
            labels.setdefault(f"kind:{o.query.kind}", []).append(o)
        if o.query.lang:
            labels.setdefault(f"lang:{o.query.lang}", []).append(o)
    for name, items in labels.items():
        groups[name] = {mode: _metrics(mode, [o.ranks[mode] for o in items], k) for mode in modes}
    return EvalReport(k, tuple(modes), tuple(outcomes), tuple(missing), groups)


def _book_for(lib: Library, ref: str, sha256: str | None = None) -> str:
    """A book's id: by its content hash when the query gives one (the same bytes under
    another file name are the same book), else by file name (as the query sets name
    books), else by any reference."""
    if sha256 is not None:
        with contextlib.suppress(NotFoundError):
            return lib.book(sha256).id
    matches = [b.id for b in lib.books() if b.file_name == ref or Path(b.file_name).name == ref]
    if len(matches) == 1:
        return matches[0]
    return lib.book(ref).id
