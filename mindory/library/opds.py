"""The catalogue a reading app browses (OPDS, docs/opds.md): pages of books with their
details and facet counts, authors and languages, a thumbnail per cover, and the books
whose passages match a search.

Rows come from :mod:`mindory.store.catalogue`; this module fills the two caches of
revision 0009 on first need:

* ``book_details`` is read **lazily**, the first time a page (or an entry) shows a book:
  the stored EPUB's OPF is read once (:mod:`mindory.importers.epub_meta`), so libraries
  imported before the catalogue existed get their details too, and an import does not
  pay for it. A plain-text book, or a file that cannot be read any more, gets a row of
  NULLs, so it is never tried again (``refresh_details`` reads every book again).
* the thumbnail (``book_images``, kind ``thumbnail``) is made with Pillow the first time
  it is asked for, from the cover member the details name, and kept.

The feeds themselves (Atom, JSON) are drawn by ``mindory.server.opds``.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mindory.errors import MindoryError, NotFoundError
from mindory.library.state import State
from mindory.store.catalogue import (
    NO_LANGUAGE,
    BookFilters,
    DetailsRow,
    Sort,
    author_counts,
    book_rows,
    books_by_sha,
    count_authors,
    count_books,
    facet_counts,
    facet_grid,
    image_row,
    latest_import,
    save_details,
    save_image,
)
from mindory.store.records import iso

if TYPE_CHECKING:
    from mindory.reading.locate import Locator

__all__ = [
    "DEFAULT_PER_PAGE",
    "NO_LANGUAGE",
    "CatalogueEntry",
    "CataloguePage",
    "CatalogueSummary",
    "FacetValue",
    "Image",
    "NameCount",
    "NamePage",
    "Passage",
    "PassageBook",
    "PassageResult",
]

DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 200
MAX_QUERY_WORDS = 16
SORTS = ("title", "new")
# Pillow opens these; a cover of another type (SVG) gets no thumbnail.
RASTER_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
THUMBNAIL_BOX = (240, 360)  # pixels: width, height the thumbnail fits in
THUMBNAIL_QUALITY = 85
MAX_COVER_PIXELS = 50_000_000  # a decompression bomb is refused, not thumbnailed
PASSAGE_HITS = 50  # search hits asked for; grouped by book
HITS_PER_BOOK = 5


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """A book as a catalogue shows it. ``updated``: when it was imported (ISO 8601)."""

    id: str  # SHA-256 of the file
    title: str
    authors: tuple[str, ...]
    language: str | None
    identifiers: tuple[str, ...]
    format: str  # "epub" | "txt"
    encoding: str | None
    file_name: str
    file_size: int
    updated: str
    description: str | None
    publisher: str | None
    published: str | None
    subjects: tuple[str, ...]
    cover_href: str | None  # the cover's ZIP member (EPUB), served as a resource
    cover_type: str | None

    @property
    def has_thumbnail(self) -> bool:
        """A thumbnail can be made (the cover is an image Pillow reads)."""
        return self.cover_href is not None and self.cover_type in RASTER_TYPES

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "authors": list(self.authors),
            "language": self.language,
            "identifiers": list(self.identifiers),
            "format": self.format,
            "file_name": self.file_name,
            "file_size": self.file_size,
            "updated": self.updated,
            "description": self.description,
            "publisher": self.publisher,
            "published": self.published,
            "subjects": list(self.subjects),
            "cover": {"href": self.cover_href, "type": self.cover_type}
            if self.cover_href
            else None,
        }


@dataclass(frozen=True, slots=True)
class FacetValue:
    """One facet: ``group`` (language | format), its value, the books it would show and
    whether the page is narrowed by it."""

    group: str
    value: str
    count: int
    active: bool


@dataclass(frozen=True, slots=True)
class CataloguePage:
    """One page of a list of books. ``page`` counts from 1."""

    entries: tuple[CatalogueEntry, ...]
    total: int
    page: int
    per_page: int
    sort: str
    filters: BookFilters
    query: str | None
    facets: tuple[FacetValue, ...]

    @property
    def last_page(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))


@dataclass(frozen=True, slots=True)
class NameCount:
    name: str
    count: int


@dataclass(frozen=True, slots=True)
class NamePage:
    """One page of authors (or all languages) with the books of each."""

    names: tuple[NameCount, ...]
    total: int
    page: int
    per_page: int

    @property
    def last_page(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))


@dataclass(frozen=True, slots=True)
class CatalogueSummary:
    books: int
    authors: int
    languages: int
    updated: str | None  # when the newest book was imported (ISO 8601)


@dataclass(frozen=True, slots=True)
class Image:
    data: bytes
    media_type: str
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class Passage:
    """A search hit in a book: its section and book source span (code points; the
    web reader's ``offset``/``end``), its chunk and its Locator."""

    rank: int
    section: int
    section_title: str
    source_start: int
    source_end: int
    chunk: str
    text: str
    locator: Locator


@dataclass(frozen=True, slots=True)
class PassageBook:
    entry: CatalogueEntry
    passages: tuple[Passage, ...]


@dataclass(frozen=True, slots=True)
class PassageResult:
    query: str
    books: tuple[PassageBook, ...]
    warnings: tuple[str, ...]


# --------------------------------------------------------------------------- pages


def query_words(query: str | None) -> tuple[str, ...]:
    """The words of a title/author search (at most MAX_QUERY_WORDS, duplicates dropped)."""
    if query is None:
        return ()
    words: list[str] = []
    for word in query.split():
        if word not in words:
            words.append(word)
    return tuple(words[:MAX_QUERY_WORDS])


def check_paging(page: int, per_page: int) -> None:
    if page < 1:
        raise MindoryError(f"page must be 1 or more, not {page}")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise MindoryError(f"per_page must be between 1 and {MAX_PER_PAGE}, not {per_page}")


def _past_end(page: int, last: int, what: str) -> NotFoundError:
    pages = "1 page" if last == 1 else f"{last} pages"
    return NotFoundError(f"page {page} is past the end: {what} has {pages}")


def page(
    st: State,
    *,
    sort: str = "title",
    author: str | None = None,
    language: str | None = None,
    book_format: str | None = None,
    query: str | None = None,
    page_no: int = 1,
    per_page: int = DEFAULT_PER_PAGE,
) -> CataloguePage:
    """One page of books, sorted by title or newest first, narrowed by the filters, with
    the language and format facets' counts. A page past the end is a NotFoundError, and
    so is page 1 of filters no book matches (an empty library has an empty page 1)."""
    check_paging(page_no, per_page)
    if sort not in SORTS:
        raise MindoryError(f"unknown sort {sort!r}: use title or new")
    order: Sort = "new" if sort == "new" else "title"
    words = query_words(query)
    if query is not None and not words:
        raise MindoryError("the search is empty: give a word of a title or an author")
    filters = BookFilters(author, language, book_format, words)
    with st.engine.connect() as conn:
        facets, total = _facets_and_total(conn, filters)
        last = max(1, math.ceil(total / per_page))
        narrowed = author is not None or language is not None or book_format is not None
        if total == 0 and narrowed and not words:  # a search may find nothing: that's a page
            raise NotFoundError(f"no book matches {_describe(filters)}")
        if page_no > last:
            raise _past_end(page_no, last, "this list")
        rows = book_rows(conn, filters, sort=order, limit=per_page, offset=(page_no - 1) * per_page)
    rows = _with_details(st, rows)
    return CataloguePage(
        entries=tuple(_entry(r) for r in rows),
        total=total,
        page=page_no,
        per_page=per_page,
        sort=sort,
        filters=filters,
        query=" ".join(words) if words else None,
        facets=facets,
    )


def _describe(filters: BookFilters) -> str:
    parts = [
        f"{name}={value!r}"
        for name, value in (
            ("author", filters.author),
            ("language", filters.language),
            ("format", filters.format),
        )
        if value is not None
    ]
    if filters.words:
        parts.append(f"the words {' '.join(filters.words)!r}")
    return ", ".join(parts)


def _matches(value: str, wanted: str | None) -> bool:
    return wanted is None or value == wanted


def _facets_and_total(conn: Any, filters: BookFilters) -> tuple[tuple[FacetValue, ...], int]:
    """The language and format facets (each counted under the other group's filter) and
    the books the filters let through, from one (language, format) grid."""
    grid = facet_grid(conn, filters)
    languages: dict[str, int] = {}
    formats: dict[str, int] = {}
    total = 0
    for lang, fmt, n in grid:
        if _matches(fmt, filters.format):
            languages[lang] = languages.get(lang, 0) + n
        if _matches(lang, filters.language):
            formats[fmt] = formats.get(fmt, 0) + n
        if _matches(fmt, filters.format) and _matches(lang, filters.language):
            total += n
    out = [
        FacetValue("language", v, n, v == filters.language) for v, n in sorted(languages.items())
    ]
    out += [FacetValue("format", v, n, v == filters.format) for v, n in sorted(formats.items())]
    return tuple(out), total


def entry(st: State, book_id: str) -> CatalogueEntry:
    """One book by its full id (SHA-256), with its details."""
    with st.engine.connect() as conn:
        found = books_by_sha(conn, [book_id]).get(book_id)
    if found is None:
        raise NotFoundError(f"no book with id {book_id!r} (the catalogue names books by SHA-256)")
    return _entry(_with_details(st, [found])[0])


def authors(st: State, *, page_no: int = 1, per_page: int = DEFAULT_PER_PAGE) -> NamePage:
    """One page of authors by name, with the books of each."""
    check_paging(page_no, per_page)
    with st.engine.connect() as conn:
        total = count_authors(conn)
        last = max(1, math.ceil(total / per_page))
        if page_no > last:
            raise _past_end(page_no, last, "the list of authors")
        names = author_counts(conn, limit=per_page, offset=(page_no - 1) * per_page)
    return NamePage(tuple(NameCount(n, c) for n, c in names), total, page_no, per_page)


def languages(st: State) -> tuple[NameCount, ...]:
    """Every language with its books (books without one under ``und``)."""
    with st.engine.connect() as conn:
        return tuple(NameCount(v, n) for v, n in facet_counts(conn, "language", BookFilters()))


def summary(st: State) -> CatalogueSummary:
    with st.engine.connect() as conn:
        books = count_books(conn, BookFilters())
        return CatalogueSummary(
            books,
            count_authors(conn),
            len(facet_counts(conn, "language", BookFilters())),
            iso(latest_import(conn)),
        )


def _entry(r: Any) -> CatalogueEntry:
    return CatalogueEntry(
        id=r.sha256,
        title=r.title,
        authors=tuple(r.creators or ()),
        language=r.language,
        identifiers=tuple(r.identifiers or ()),
        format=r.format,
        encoding=r.encoding,
        file_name=r.file_name,
        file_size=int(r.file_size),
        updated=iso(r.imported_at) or "",
        description=r.description,
        publisher=r.publisher,
        published=r.published,
        subjects=tuple(r.subjects or ()),
        cover_href=r.cover_href,
        cover_type=r.cover_type,
    )


# --------------------------------------------------------------------------- details


def _with_details(st: State, rows: list[Any]) -> list[Any]:
    """``rows`` with the details of those that had none read now and kept."""
    missing = [r for r in rows if not r.has_details]
    if not missing:
        return rows
    found = {r.id: _read_details(st, r) for r in missing}
    save_details(st.writer, list(found.values()))
    out = []
    for r in rows:
        details = found.get(r.id)
        if details is None:
            out.append(r)
            continue
        values = r._asdict()
        values.update(
            has_details=True,
            description=details.description,
            publisher=details.publisher,
            published=details.published,
            subjects=list(details.subjects),
            cover_href=details.cover_href,
            cover_type=details.cover_type,
        )
        out.append(_Row(values))
    return out


class _Row:
    """A row's fields as attributes (an entry row with its details filled in)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:  # pragma: no cover - mypy's view of a Row
        raise AttributeError(name)


def _read_details(st: State, row: Any) -> DetailsRow:
    """The details of one book from its stored file (NULLs when there are none)."""
    empty = DetailsRow(int(row.id), None, None, None, (), None, None)
    if row.format != "epub":
        return empty
    from mindory.importers.epub_meta import read_epub_details

    try:
        data = st.read_book(row.sha256)
        got = read_epub_details(data, row.file_name)
    except (MindoryError, OSError):
        return empty  # a file that cannot be read any more: shown without details
    return DetailsRow(
        int(row.id),
        got.description,
        got.publisher,
        got.published,
        got.subjects,
        got.cover_href,
        got.cover_type,
    )


def refresh_details(st: State, batch: int = 100) -> int:
    """Read the details of every book that has none yet; returns how many were read."""
    with st.engine.connect() as conn:
        total = count_books(conn, BookFilters())
        rows = [
            r
            for r in book_rows(conn, BookFilters(), sort="title", limit=max(1, total), offset=0)
            if not r.has_details
        ]
    for i in range(0, len(rows), batch):
        _with_details(st, rows[i : i + batch])
    return len(rows)


# --------------------------------------------------------------------------- images


def thumbnail(st: State, book_id: str) -> Image:
    """The book's cover as a thumbnail (made once with Pillow, then kept)."""
    book = entry(st, book_id)
    if not book.has_thumbnail or book.cover_href is None:
        raise NotFoundError(f"{book.title!r} has no cover image to make a thumbnail of")
    with st.engine.connect() as conn:
        row_id = books_by_sha(conn, [book.id])[book.id].id
        kept = image_row(conn, row_id, "thumbnail")
    if kept is not None:
        return Image(bytes(kept.data), kept.media_type, int(kept.width), int(kept.height))
    from mindory.library import catalogue

    cover = catalogue.resource(st, book.id, book.cover_href)
    made = make_thumbnail(cover.data, book.title)
    save_image(st.writer, row_id, "thumbnail", made.media_type, made.width, made.height, made.data)
    return made


def make_thumbnail(data: bytes, title: str = "") -> Image:
    """A JPEG that fits in THUMBNAIL_BOX (aspect kept; transparency on white)."""
    from PIL import Image as PilImage
    from PIL import UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PilImage.DecompressionBombWarning)
            with PilImage.open(io.BytesIO(data)) as img:
                if img.width * img.height > MAX_COVER_PIXELS:
                    raise MindoryError(
                        f"the cover of {title!r} is {img.width}x{img.height} pixels, over the "
                        f"limit of {MAX_COVER_PIXELS:,}"
                    )
                img.draft("RGB", THUMBNAIL_BOX)  # JPEG: decode at a reduced size
                rgba = img.convert("RGBA")
    except (
        UnidentifiedImageError,
        OSError,
        ValueError,
        SyntaxError,
        PilImage.DecompressionBombError,
        PilImage.DecompressionBombWarning,
    ) as exc:
        raise MindoryError(f"the cover of {title!r} is not a readable image: {exc}") from exc
    rgba.thumbnail(THUMBNAIL_BOX)
    flat = PilImage.new("RGB", rgba.size, (255, 255, 255))
    flat.paste(rgba, mask=rgba.getchannel("A"))
    out = io.BytesIO()
    flat.save(out, format="JPEG", quality=THUMBNAIL_QUALITY, optimize=True)
    return Image(out.getvalue(), "image/jpeg", flat.width, flat.height)


# --------------------------------------------------------------------------- passages


def passages(st: State, search: Any, query: str, *, k: int = PASSAGE_HITS) -> PassageResult:
    """The books whose passages match ``query`` (``search``: ``Library.search``), best
    first, each with its best HITS_PER_BOOK passages."""
    if not query.strip():
        raise MindoryError("the search is empty: give words of the passage to find")
    result = search(query, k=k)
    by_book: dict[str, list[Passage]] = {}
    for hit in result.hits:
        found = by_book.setdefault(hit.book, [])
        if len(found) >= HITS_PER_BOOK:
            continue
        loc = hit.locator
        found.append(
            Passage(
                rank=hit.rank,
                section=hit.section,
                section_title=hit.section_title,
                source_start=loc.source_start,
                source_end=loc.source_end,
                chunk=hit.chunk,
                text=hit.display.highlight if hit.display is not None else loc.highlight,
                locator=loc,
            )
        )
    with st.engine.connect() as conn:
        rows = books_by_sha(conn, list(by_book))
    filled = {r.sha256: r for r in _with_details(st, list(rows.values()))}
    books = tuple(
        PassageBook(_entry(filled[sha]), tuple(hits))
        for sha, hits in by_book.items()
        if sha in filled
    )
    return PassageResult(query, books, tuple(result.warnings))
