"""Every URL and media type the catalogues write, in one place.

Links are absolute (``base`` is the request's base URL): OPDS clients resolve relative
links unevenly, and an OpenSearch template must be absolute. A book is named by its
full SHA-256. The acquisition link is the book file route (``GET /books/{id}/file``),
the cover the EPUB resource route (``GET /books/{id}/resources/{member}``); the
thumbnail, the entries and the Locators are OPDS routes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import quote, urlencode

NAVIGATION = "application/atom+xml;profile=opds-catalog;kind=navigation"
ACQUISITION = "application/atom+xml;profile=opds-catalog;kind=acquisition"
ATOM_ENTRY = "application/atom+xml;type=entry;profile=opds-catalog"
OPDS2 = "application/opds+json"
OPDS2_PUBLICATION = "application/opds-publication+json"
OPDS2_AUTH = "application/opds-authentication+json"
OPENSEARCH = "application/opensearchdescription+xml"
LOCATOR = "application/vnd.readium.locator+json"
HTML = "text/html"

REL_ACQUISITION = "http://opds-spec.org/acquisition/open-access"
REL_IMAGE = "http://opds-spec.org/image"
REL_THUMBNAIL = "http://opds-spec.org/image/thumbnail"
REL_FACET = "http://opds-spec.org/facet"
REL_NEW = "http://opds-spec.org/sort/new"
REL_AUTH_DOCUMENT = "http://opds-spec.org/auth/document"


@dataclass(frozen=True, slots=True)
class FeedQuery:
    """The parameters of a list of books (what its links repeat)."""

    sort: str = "title"
    author: str | None = None
    language: str | None = None
    format: str | None = None
    q: str | None = None
    page: int = 1
    per_page: int = 50
    default_per_page: int = 50

    def params(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        if self.q is not None:
            out.append(("q", self.q))
        if self.sort != "title":
            out.append(("sort", self.sort))
        for name, value in (
            ("author", self.author),
            ("language", self.language),
            ("format", self.format),
        ):
            if value is not None:
                out.append((name, value))
        if self.per_page != self.default_per_page:
            out.append(("per_page", str(self.per_page)))
        if self.page != 1:
            out.append(("page", str(self.page)))
        return out

    def at(self, page: int) -> FeedQuery:
        return replace(self, page=page)

    def facet(self, group: str, value: str | None) -> FeedQuery:
        """Page 1 of this list narrowed by ``group`` = ``value`` (None: not narrowed)."""
        if group == "language":
            return replace(self, language=value, page=1)
        if group == "format":
            return replace(self, format=value, page=1)
        raise ValueError(f"unknown facet group {group!r}")


def _query(params: list[tuple[str, str]]) -> str:
    return ("?" + urlencode(params, quote_via=quote)) if params else ""


def _plain_type(book_format: str, encoding: str | None) -> str:
    del encoding
    return "application/epub+zip" if book_format == "epub" else "text/plain"


@dataclass(frozen=True, slots=True)
class Urls:
    """The URLs of one catalogue version: ``prefix`` is ``/opds`` or ``/opds/v2``.
    ``file_type(format, encoding)`` is the media type the file route serves a book with
    (the routes pass ``server.params.file_type``; this package does not import it, as
    the guard imports this package for the authentication document)."""

    base: str  # scheme://host[:port][root path], no trailing slash
    prefix: str
    file_type: Callable[[str, str | None], str] = _plain_type

    def feed(self, path: str = "", params: list[tuple[str, str]] | None = None) -> str:
        return f"{self.base}{self.prefix}{path}{_query(params or [])}"

    @property
    def root(self) -> str:
        return self.feed()

    def books(self, q: FeedQuery) -> str:
        path = "/search" if q.q is not None else "/books"
        return self.feed(path, q.params())

    def authors(self, page: int = 1) -> str:
        return self.feed("/authors", [("page", str(page))] if page != 1 else [])

    @property
    def languages(self) -> str:
        return self.feed("/languages")

    def entry(self, book: str) -> str:
        return self.feed(f"/books/{book}")

    def thumbnail(self, book: str) -> str:
        return f"{self.base}/opds/books/{book}/thumbnail"

    def locator(self, book: str, chunk: str) -> str:
        return f"{self.base}/opds/books/{book}/chunks/{quote(chunk, safe='')}/locator"

    def passages(self, query: str) -> str:
        return self.feed("/passages", [("q", query)])

    # ------------------------------------------------------------------ outside /opds

    def file(self, book: str) -> str:
        return f"{self.base}/books/{book}/file"

    def cover(self, book: str, member: str) -> str:
        return f"{self.base}/books/{book}/resources/{quote(member)}"

    def reader(self, book: str, section: int, start: int, end: int) -> str:
        """The web reader's deep link (``mindory/server/static/reader.js``): ``offset``
        and ``end`` in book source coordinates, code points (its default unit)."""
        return f"{self.base}/#book={book}&section={section}&offset={start}&end={end}"

    # ------------------------------------------------------------------ search

    @property
    def opensearch(self) -> str:
        return f"{self.base}/opds/opensearch.xml"

    @property
    def opensearch_passages(self) -> str:
        return f"{self.base}/opds/opensearch-passages.xml"

    @property
    def auth_document(self) -> str:
        return f"{self.base}/opds/v2/auth.json"


def v1(base: str, file_type: Callable[[str, str | None], str] = _plain_type) -> Urls:
    return Urls(base, "/opds", file_type)


def v2(base: str, file_type: Callable[[str, str | None], str] = _plain_type) -> Urls:
    return Urls(base, "/opds/v2", file_type)
