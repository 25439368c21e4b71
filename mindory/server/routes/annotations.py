"""Routes for annotation files (docs/reading-state.md, "Annotations"): the request's
reader's highlights out as one W3C Web Annotation ``AnnotationCollection`` (JSON-LD), and
such a collection in, every quote re-verified against its book."""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse

from mindory.server.params import ReaderId, ServerContext

JSONLD = 'application/ld+json; profile="http://www.w3.org/ns/anno.jsonld"'


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api`` (the order of registration is the order of matching)."""
    lib = ctx.lib

    @api.get(
        "/annotations",
        tags=["highlights"],
        response_class=JSONResponse,
        responses={
            200: {
                "description": "A W3C AnnotationCollection (JSON-LD).",
                "content": {JSONLD: {"schema": {"type": "object"}}},
            }
        },
    )
    def export_annotations(
        reader: ReaderId,
        book: Annotated[
            str | None,
            Query(min_length=1, max_length=512, description="Only this book (default: all)."),
        ] = None,
    ) -> JSONResponse:
        """The reader's highlights as one W3C `AnnotationCollection` (JSON-LD; each
        annotation with its TextQuoteSelector, TextPositionSelector and FragmentSelector):
        `mindory annotations export [BOOK]`."""
        doc = lib.export_annotations(book, reader=reader)
        return JSONResponse(doc, media_type=JSONLD)

    @api.post("/annotations", tags=["highlights"])
    def import_annotations(
        reader: ReaderId,
        body: Annotated[Any, Body(description="A W3C AnnotationCollection (JSON-LD).")],
        book: Annotated[
            str | None,
            Query(
                min_length=1,
                max_length=512,
                description="Put every annotation on this book (default: the one it names).",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Import an `AnnotationCollection` as the reader's highlights: each is placed where
        its position still holds its quote, else where quote calibration finds the whole
        quote; the others are reported as orphans, by quote, and not written. A body that
        is not a JSON-LD AnnotationCollection is 400 and writes nothing:
        `mindory annotations import FILE`."""
        return lib.import_annotations(body, book=book, reader=reader).to_json()
