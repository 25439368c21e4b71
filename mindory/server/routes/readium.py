"""Routes for Readium apps (docs/readium.md): a book's Web Publication Manifest and its
positions list, readable from another origin (CORS), so a web Readium app can open a
book served by mindory and count positions as the toolkits do."""

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from mindory.reading.readium import POSITION_LIST_TYPE, WEBPUB_TYPE
from mindory.server.params import BookRef, ServerContext, file_type

# Any origin may read these (a web Readium app lives on its own origin). Only reads: the
# guard still refuses every cross-origin write.
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": "ETag, Content-Type, Content-Length",
}
PREFLIGHT_HEADERS = {
    **CORS_HEADERS,
    "Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, If-None-Match, Range",
    "Access-Control-Max-Age": "600",
}


def _json(data: dict[str, Any], media_type: str) -> JSONResponse:
    return JSONResponse(
        data, media_type=media_type, headers={**CORS_HEADERS, "Cache-Control": "no-cache"}
    )


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api``."""
    lib = ctx.lib

    @api.get(
        "/books/{book}/manifest.json",
        tags=["readium"],
        response_class=JSONResponse,
        responses={200: {"content": {WEBPUB_TYPE: {}}, "description": "The manifest."}},
    )
    def readium_manifest(book: BookRef, request: Request) -> JSONResponse:
        """The book as a Readium Web Publication Manifest: metadata, the reading order
        (the spine's linear documents, or the plain-text file), the other resources, the
        table of contents and a link to the positions list. Hrefs are relative to the
        manifest (mindory's resource route); the `self` link is absolute."""
        info = lib.book(book)
        self_url = str(request.url.replace(query="", fragment=""))
        found = lib.readium_manifest(
            info.id, self_url=self_url, text_type=file_type(info.format, info.encoding)
        )
        return _json(found.to_json(), WEBPUB_TYPE)

    @api.get(
        "/books/{book}/positions",
        tags=["readium"],
        response_class=JSONResponse,
        responses={200: {"content": {POSITION_LIST_TYPE: {}}, "description": "Positions."}},
    )
    def readium_positions(book: BookRef) -> JSONResponse:
        """Every Readium position of the book (`{total, positions: [Locator]}`), counted as
        Readium's toolkits count them; each Locator also carries mindory's exact place
        (`section`, `source.start` / `source.utf16Start`, `locations.cfi` /
        `cfi_epubjs` / `partialCfi`, or `fragments` for plain text)."""
        info = lib.book(book)
        found = lib.readium_positions(info.id, text_type=file_type(info.format, info.encoding))
        return _json(found.to_json(), POSITION_LIST_TYPE)

    def preflight() -> Response:
        """A CORS preflight: GET is allowed from any origin."""
        return Response(status_code=204, headers=PREFLIGHT_HEADERS)

    for path in (
        "/books/{book}/manifest.json",
        "/books/{book}/positions",
        "/books/{book}/resources/{href:path}",
        "/books/{book}/file",
    ):
        api.add_api_route(path, preflight, methods=["OPTIONS"], include_in_schema=False)
