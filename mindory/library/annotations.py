"""Annotations: a highlight made from a quote, and W3C Web Annotation export / import.

Everything here goes through the Library's highlight methods (``calibrate_quote``,
``add_highlight``, ``highlights``), so what those do — per-reader scoping included —
holds here too. The JSON-LD mapping is :mod:`mindory.reading.webannotation`.

Import never invents a place: each annotation is placed where its
``TextPositionSelector`` (with mindory's ``section``) still holds exactly its quote, else
where quote calibration finds the quote (``exact`` or ``normalized``; a prefix is not
the quote). What is neither is reported as an orphan, by its quote, and not written.
The whole file is read and checked, and every annotation placed, before the first one
is written: a file that is not an ``AnnotationCollection`` writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mindory.errors import MindoryError, NotFoundError
from mindory.library import highlights as highlight_store
from mindory.reading.highlights import Calibration, Highlight
from mindory.reading.webannotation import (
    AnnotationFileError,
    AnnotationIn,
    collection,
    parse_collection,
)

if TYPE_CHECKING:
    from mindory.library.state import State
    from mindory.store.records import BookInfo


class Library(Protocol):
    """The Library methods this module goes through (it never imports the Library:
    the Library imports it)."""

    @property
    def state(self) -> State: ...

    def book(self, ref: str) -> BookInfo: ...

    def books(self) -> list[BookInfo]: ...

    def highlights(
        self,
        ref: str,
        *,
        section: int | None = None,
        status: str | None = None,
        reader: str | None = None,
    ) -> list[Highlight]: ...

    def calibrate_quote(
        self,
        ref: str,
        quote: str,
        *,
        section: int | None = None,
        chunk: str | None = None,
        min_prefix: int | None = None,
    ) -> Calibration: ...

    def add_highlight(
        self,
        ref: str,
        *,
        section: int | None = None,
        start: int | None = None,
        end: int | None = None,
        exact: str | None = None,
        note: str | None = None,
        color: str | None = None,
        reader: str | None = None,
    ) -> Highlight: ...


__all__ = [
    "AnnotationImport",
    "ImportedAnnotation",
    "QuotedHighlight",
    "export_annotations",
    "highlight_quote",
    "import_annotations",
]

MAX_FILE_BYTES = 256 * 1024 * 1024
PLACED_BY = ("exact", "normalized")  # calibration methods that found the whole quote


def _clip(text: str, n: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


# --------------------------------------------------------------------------- from a quote


@dataclass(frozen=True, slots=True)
class QuotedHighlight:
    """A highlight made from a quote, and the calibration that placed it."""

    highlight: Highlight
    calibration: Calibration

    def to_json(self) -> dict[str, Any]:
        out = self.highlight.to_json()
        m = self.calibration.match
        out["calibration"] = {
            "method": m.method,
            "quote": m.quote,
            "note": m.note,
            "rubyIgnored": m.ruby_ignored,
            "occurrences": m.occurrences,
        }
        return out


def highlight_quote(
    lib: Library,
    ref: str,
    quote: str,
    *,
    section: int | None = None,
    note: str | None = None,
    color: str | None = None,
    reader: str | None = None,
) -> QuotedHighlight:
    """Highlight the place a quote comes from (quote calibration decides where; only a
    match of the whole quote — exact or normalized — is highlighted)."""
    cal = lib.calibrate_quote(ref, quote, section=section)
    m = cal.match
    if m.method not in PLACED_BY or m.section is None or m.source_start is None:
        where = f"section {section}" if section is not None else "the book"
        raise MindoryError(
            f"the quote {_clip(quote)!r} is not in {where} ({m.method}: {m.note}); nothing "
            "highlighted"
        )
    assert m.source_end is not None
    h = lib.add_highlight(
        ref,
        section=m.section,
        start=m.source_start,
        end=m.source_end,
        exact=m.exact,
        note=note,
        color=color,
        reader=reader,
    )
    return QuotedHighlight(h, cal)


# --------------------------------------------------------------------------- export


def export_annotations(
    lib: Library, ref: str | None = None, *, reader: str | None = None
) -> dict[str, Any]:
    """The reader's highlights of one book (or of every book) as one JSON-LD
    ``AnnotationCollection``."""
    books = [lib.book(ref)] if ref is not None else lib.books()
    found: list[Highlight] = []
    for info in books:
        found.extend(lib.highlights(info.id, reader=reader))
    label = (
        f"mindory annotations of {books[0].title!r}"
        if ref is not None
        else f"mindory annotations ({len(books)} books)"
    )
    return collection(found, label=label)


# --------------------------------------------------------------------------- import

ImportStatus = Literal["placed", "present", "orphaned"]


@dataclass(frozen=True, slots=True)
class ImportedAnnotation:
    """What became of one annotation of the file.

    ``placed``: written (``method``: ``position`` — its stored place still holds the
    quote — or the calibration method); ``present``: this reader already has a highlight
    of that span with the same note and colour (nothing written); ``orphaned``: the
    quote is not in the book (``reason``), nothing written.
    """

    index: int
    quote: str
    status: ImportStatus
    was: str | None  # the annotation's id in the file
    book: str | None
    method: str | None = None
    reason: str | None = None
    highlight: Highlight | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "quote": self.quote,
            "status": self.status,
            "was": self.was,
            "book": self.book,
            "method": self.method,
            "reason": self.reason,
            "highlight": self.highlight.to_json() if self.highlight is not None else None,
        }


@dataclass(frozen=True, slots=True)
class AnnotationImport:
    """The outcome of importing one annotation file."""

    source: str | None
    items: tuple[ImportedAnnotation, ...]

    def count(self, status: ImportStatus) -> int:
        return sum(1 for i in self.items if i.status == status)

    @property
    def orphans(self) -> list[ImportedAnnotation]:
        return [i for i in self.items if i.status == "orphaned"]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "total": len(self.items),
            "placed": self.count("placed"),
            "present": self.count("present"),
            "orphaned": self.count("orphaned"),
            "items": [i.to_json() for i in self.items],
        }


@dataclass(frozen=True, slots=True)
class _Plan:
    item: AnnotationIn
    book: BookInfo | None
    section: int | None = None
    start: int | None = None
    end: int | None = None
    method: str | None = None
    reason: str | None = None


def _read(source: Any) -> tuple[Any, str | None]:
    """The parsed document: a :class:`~pathlib.Path` is a file to read; anything else is
    already parsed JSON (a string is never taken for a file name)."""
    if not isinstance(source, Path):
        return source, None
    path = source
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise AnnotationFileError(f"{size:,} bytes; at most {MAX_FILE_BYTES:,}", path=str(path))
        data = path.read_bytes()
    except OSError as exc:
        raise MindoryError(f"cannot read file: {exc.strerror or exc}", path=str(path)) from exc
    try:
        return json.loads(data.decode("utf-8-sig")), str(path)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AnnotationFileError(
            f"not a JSON-LD AnnotationCollection: not JSON ({exc})", path=str(path)
        ) from exc


def _place(lib: Library, a: AnnotationIn, info: BookInfo) -> _Plan:
    """Where annotation ``a`` goes in book ``info`` (or why it cannot)."""
    known = a.section is not None and 0 <= a.section < info.section_count
    if known and a.section is not None and a.start is not None and a.end is not None:
        (text,) = highlight_store.section_texts(lib.state, info.id, [a.section])
        ls, le = a.start - text.source_start, a.end - text.source_start
        if 0 <= ls < le <= len(text.source_text) and text.source_text[ls:le] == a.exact:
            return _Plan(a, info, a.section, a.start, a.end, "position")
    section = a.section if known else None
    cal = lib.calibrate_quote(info.id, a.exact, section=section)
    if cal.match.method not in PLACED_BY and section is not None:
        cal = lib.calibrate_quote(info.id, a.exact)
    m = cal.match
    if m.method in PLACED_BY and m.section is not None and m.source_start is not None:
        return _Plan(a, info, m.section, m.source_start, m.source_end, m.method)
    return _Plan(a, info, reason=f"the quote is not in {info.title!r} ({m.method}: {m.note})")


def import_annotations(
    lib: Library,
    source: Path | Mapping[str, Any] | Any,
    *,
    book: str | None = None,
    reader: str | None = None,
) -> AnnotationImport:
    """Import a W3C ``AnnotationCollection`` (a file given as a :class:`~pathlib.Path`,
    or its parsed JSON) as the reader's
    highlights; ``book`` puts every annotation on that book instead of the one it names.
    See the module doc."""
    doc, name = _read(source)
    try:
        items = parse_collection(doc)
    except AnnotationFileError as exc:
        if name is not None and exc.path is None:
            raise AnnotationFileError(exc.message, path=name) from exc
        raise
    target = lib.book(book) if book is not None else None
    books: dict[str, BookInfo | None] = {}
    plans: list[_Plan] = []
    for a in items:
        info = target
        if info is None:
            if a.book is None:
                plans.append(_Plan(a, None, reason="the annotation names no book (give --book)"))
                continue
            if a.book not in books:
                try:
                    books[a.book] = lib.book(a.book)
                except NotFoundError:
                    books[a.book] = None
            info = books[a.book]
            if info is None:
                plans.append(_Plan(a, None, reason=f"no book {a.book[:12]}… in this library"))
                continue
        plans.append(_place(lib, a, info))
    # Everything is placed or refused: now write.
    have: dict[str, list[Highlight]] = {}
    out: list[ImportedAnnotation] = []
    for p in plans:
        a = p.item
        sha = p.book.id if p.book is not None else a.book
        if p.book is None or p.section is None or p.start is None or p.end is None:
            out.append(ImportedAnnotation(a.index, a.exact, "orphaned", a.id, sha, reason=p.reason))
            continue
        # What the reader had before this import; each one answers for one annotation.
        mine = have.setdefault(p.book.id, lib.highlights(p.book.id, reader=reader))
        same = next(
            (
                h
                for h in mine
                if h.status == "anchored"
                and (h.section, h.source_start, h.source_end) == (p.section, p.start, p.end)
                and h.note == a.note
                and (a.color is None or h.color == a.color)
            ),
            None,
        )
        if same is not None:
            mine.remove(same)
            out.append(
                ImportedAnnotation(a.index, a.exact, "present", a.id, sha, p.method, None, same)
            )
            continue
        h = lib.add_highlight(
            p.book.id,
            section=p.section,
            start=p.start,
            end=p.end,
            note=a.note,
            color=a.color,
            reader=reader,
        )
        out.append(ImportedAnnotation(a.index, a.exact, "placed", a.id, sha, p.method, None, h))
    return AnnotationImport(name, tuple(out))
