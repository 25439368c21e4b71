"""Routes for reading apps: the OPDS catalogues (docs/opds.md).

OPDS 1.2 (Atom) under ``/opds``, OPDS 2.0 (JSON) under ``/opds/v2``, over the same
library calls (``Library.catalogue_*``). Both list books by title or newest first,
narrowed by author, language, format (facets) or words of a title/author (search), a
page at a time; a page past the end is a 404 naming the last page, a malformed
parameter a 422. The thumbnail and a search hit's Locator are shared by both.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from fastapi import Path as PathParam

from mindory.server.opds import atom
from mindory.server.opds import v2 as json2
from mindory.server.opds.auth import authentication_document
from mindory.server.opds.urls import (
    ACQUISITION,
    ATOM_ENTRY,
    LOCATOR,
    NAVIGATION,
    OPDS2,
    OPDS2_AUTH,
    OPDS2_PUBLICATION,
    OPENSEARCH,
    Urls,
    v1,
    v2,
)
from mindory.server.params import ServerContext, file_type

PER_PAGE = 50
TAGS: list[str | Enum] = ["opds"]

Page = Annotated[int, Query(ge=1, le=10_000_000, description="Page number, from 1.")]
PerPage = Annotated[int, Query(ge=1, le=200, description="Books per page.")]
Sort = Annotated[Literal["title", "new"], Query(description="By title, or newest first.")]
Author = Annotated[str | None, Query(min_length=1, max_length=512, description="An author.")]
Language = Annotated[
    str | None,
    Query(min_length=1, max_length=64, description="A language tag (`und`: none given)."),
]
Format = Annotated[Literal["epub", "txt"] | None, Query(description="The file format.")]
Words = Annotated[
    str, Query(min_length=1, max_length=500, description="Words of a title or an author.")
]
BookId = Annotated[
    str,
    PathParam(
        min_length=64, max_length=64, pattern="^[0-9a-f]{64}$", description="The book's SHA-256."
    ),
]
ChunkId = Annotated[str, PathParam(min_length=4, max_length=128, description="A chunk id.")]


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _v1(request: Request) -> Urls:
    return v1(_base(request), file_type)


def _v2(request: Request) -> Urls:
    return v2(_base(request), file_type)


def _xml(body: bytes, media_type: str) -> Response:
    return Response(body, media_type=media_type, headers={"Cache-Control": "private, no-cache"})


def _json(body: Any, media_type: str = OPDS2) -> Response:
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(data, media_type=media_type, headers={"Cache-Control": "private, no-cache"})


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api``."""
    lib = ctx.lib

    def books_page(
        sort: str,
        author: str | None,
        language: str | None,
        book_format: str | None,
        q: str | None,
        page: int,
        per_page: int,
    ) -> Any:
        return lib.catalogue_page(
            sort=sort,
            author=author,
            language=language,
            book_format=book_format,
            query=q,
            page=page,
            per_page=per_page,
        )

    # ------------------------------------------------------------------ OPDS 1.2 (Atom)

    @api.get("/opds", tags=TAGS, response_class=Response)
    def opds_root(request: Request) -> Response:
        """The root navigation feed (OPDS 1.2): recently added, all books by title, by
        author, by language; search links."""
        return _xml(atom.root_feed(_v1(request), lib.catalogue_summary()), NAVIGATION)

    @api.get("/opds/books", tags=TAGS, response_class=Response)
    def opds_books(
        request: Request,
        sort: Sort = "title",
        author: Author = None,
        language: Language = None,
        format: Format = None,  # noqa: A002 - the facet's name in the URL
        page: Page = 1,
        per_page: PerPage = PER_PAGE,
    ) -> Response:
        """An acquisition feed of books, a page at a time, with language and format facets."""
        found = books_page(sort, author, language, format, None, page, per_page)
        return _xml(atom.acquisition_feed(_v1(request), found, PER_PAGE), ACQUISITION)

    @api.get("/opds/search", tags=TAGS, response_class=Response)
    def opds_search(
        request: Request,
        q: Words,
        sort: Sort = "title",
        author: Author = None,
        language: Language = None,
        format: Format = None,  # noqa: A002
        page: Page = 1,
        per_page: PerPage = PER_PAGE,
    ) -> Response:
        """Books whose title or author holds every word of `q` (OpenSearch results)."""
        found = books_page(sort, author, language, format, q, page, per_page)
        return _xml(atom.acquisition_feed(_v1(request), found, PER_PAGE), ACQUISITION)

    @api.get("/opds/passages", tags=TAGS, response_class=Response)
    def opds_passages(request: Request, q: Words) -> Response:
        """Books whose passages match `q` (mindory's search), each entry linking to its
        passages: the web reader's deep link and the hit's Locator."""
        result = lib.catalogue_passages(q)
        return _xml(atom.passages_feed(_v1(request), result), ACQUISITION)

    @api.get("/opds/authors", tags=TAGS, response_class=Response)
    def opds_authors(request: Request, page: Page = 1, per_page: PerPage = PER_PAGE) -> Response:
        """A navigation feed of authors (a page at a time), each with its books."""
        names = lib.catalogue_authors(page=page, per_page=per_page)
        return _xml(atom.authors_feed(_v1(request), names), NAVIGATION)

    @api.get("/opds/languages", tags=TAGS, response_class=Response)
    def opds_languages(request: Request) -> Response:
        """A navigation feed of languages, each with its books."""
        langs = lib.catalogue_languages()
        return _xml(atom.languages_feed(_v1(request), langs), NAVIGATION)

    @api.get("/opds/books/{book}", tags=TAGS, response_class=Response)
    def opds_entry(request: Request, book: BookId) -> Response:
        """One book as a complete OPDS 1.2 entry."""
        found = lib.catalogue_entry(book)
        return _xml(atom.entry_document(_v1(request), found), ATOM_ENTRY)

    @api.get("/opds/opensearch.xml", tags=TAGS, response_class=Response)
    def opds_opensearch(request: Request) -> Response:
        """The OpenSearch description of the title/author search."""
        urls = _v1(request)
        body = atom.opensearch_description(
            urls.feed("/search") + "?q={searchTerms}",
            "mindory",
            "Search the books of this mindory library by title or author",
            urls.opensearch,
        )
        return _xml(body, OPENSEARCH)

    @api.get("/opds/opensearch-passages.xml", tags=TAGS, response_class=Response)
    def opds_opensearch_passages(request: Request) -> Response:
        """The OpenSearch description of the passage search."""
        urls = _v1(request)
        body = atom.opensearch_description(
            urls.feed("/passages") + "?q={searchTerms}",
            "mindory passages",
            "Find passages in the books of this mindory library: the books that hold "
            "them, with links to each passage",
            urls.opensearch_passages,
        )
        return _xml(body, OPENSEARCH)

    # ------------------------------------------------------------------ shared

    @api.get(
        "/opds/books/{book}/thumbnail",
        tags=TAGS,
        response_class=Response,
        responses={200: {"content": {"image/jpeg": {}}, "description": "A JPEG thumbnail."}},
    )
    def opds_thumbnail(book: BookId) -> Response:
        """The book's cover as a small JPEG (made once, then kept)."""
        image = lib.catalogue_thumbnail(book)
        return Response(
            image.data,
            media_type=image.media_type,
            headers={"Cache-Control": "private, max-age=86400", "ETag": f'"t-{book[:32]}"'},
        )

    @api.get("/opds/books/{book}/chunks/{chunk}/locator", tags=TAGS, response_class=Response)
    def opds_locator(book: BookId, chunk: ChunkId) -> Response:
        """A search hit's Locator (the chunk's), as `application/vnd.readium.locator+json`."""
        return _json(lib.locate_chunk(book, chunk).to_json(), LOCATOR)

    # ------------------------------------------------------------------ OPDS 2.0 (JSON)

    @api.get("/opds/v2", tags=TAGS, response_class=Response)
    def opds2_root(request: Request) -> Response:
        """The root navigation feed (OPDS 2.0)."""
        return _json(json2.root_feed(_v2(request), lib.catalogue_summary()))

    @api.get("/opds/v2/books", tags=TAGS, response_class=Response)
    def opds2_books(
        request: Request,
        sort: Sort = "title",
        author: Author = None,
        language: Language = None,
        format: Format = None,  # noqa: A002
        page: Page = 1,
        per_page: PerPage = PER_PAGE,
    ) -> Response:
        """A feed of publications, a page at a time, with language and format facets."""
        found = books_page(sort, author, language, format, None, page, per_page)
        return _json(json2.acquisition_feed(_v2(request), found, PER_PAGE))

    @api.get("/opds/v2/search", tags=TAGS, response_class=Response)
    def opds2_search(
        request: Request,
        query: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
        q: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
        sort: Sort = "title",
        author: Author = None,
        language: Language = None,
        format: Format = None,  # noqa: A002
        page: Page = 1,
        per_page: PerPage = PER_PAGE,
    ) -> Response:
        """Publications whose title or author holds every word of `query` (or `q`)."""
        words = _words(query, q)
        found = books_page(sort, author, language, format, words, page, per_page)
        return _json(json2.acquisition_feed(_v2(request), found, PER_PAGE))

    @api.get("/opds/v2/passages", tags=TAGS, response_class=Response)
    def opds2_passages(
        request: Request,
        query: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
        q: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
    ) -> Response:
        """Publications whose passages match `query` (or `q`), each linking to its
        passages: the web reader's deep link and the hit's Locator."""
        result = lib.catalogue_passages(_words(query, q))
        return _json(json2.passages_feed(_v2(request), result))

    @api.get("/opds/v2/authors", tags=TAGS, response_class=Response)
    def opds2_authors(request: Request, page: Page = 1, per_page: PerPage = PER_PAGE) -> Response:
        """A navigation feed of authors (a page at a time)."""
        names = lib.catalogue_authors(page=page, per_page=per_page)
        return _json(json2.authors_feed(_v2(request), names))

    @api.get("/opds/v2/languages", tags=TAGS, response_class=Response)
    def opds2_languages(request: Request) -> Response:
        """A navigation feed of languages."""
        return _json(json2.languages_feed(_v2(request), lib.catalogue_languages()))

    @api.get("/opds/v2/books/{book}", tags=TAGS, response_class=Response)
    def opds2_publication(request: Request, book: BookId) -> Response:
        """One book as an OPDS 2 publication."""
        found = lib.catalogue_entry(book)
        return _json(json2.publication(_v2(request), found), OPDS2_PUBLICATION)

    @api.get("/opds/v2/auth.json", tags=TAGS, response_class=Response)
    def opds2_auth(request: Request) -> Response:
        """The OPDS authentication document (HTTP Basic with a reader's name and password)."""
        return _json(authentication_document(_base(request)), OPDS2_AUTH)


def _words(query: str | None, q: str | None) -> str:
    from mindory.server.guard import HTTPError

    words = query if query is not None else q
    if words is None or not words.strip():
        raise HTTPError(422, "give the words to search for in query= (or q=)")
    return words


__all__ = ["Urls", "add_routes"]
