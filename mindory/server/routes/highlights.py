"""Routes for quotes and highlights: calibration and highlights as W3C Web Annotations."""

from typing import Annotated, Any, Literal

from fastapi import (
    APIRouter,
    Query,
    Response,
)

from mindory.reading.highlights import UNSET, Unset
from mindory.server.guard import HTTPError
from mindory.server.params import BookRef, HighlightRef, ReaderId, ServerContext, locator_span
from mindory.server.shapes import (
    AnchorIn,
    AnnotationOut,
    CalibrationOut,
    HighlightIn,
    HighlightPatch,
)


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api`` (the order of registration is the order of matching)."""
    lib = ctx.lib

    # ------------------------------------------------------------------ anchors, highlights

    @api.post("/books/{book}/anchors", response_model=CalibrationOut, tags=["highlights"])
    def calibrate(book: BookRef, body: AnchorIn) -> dict[str, Any]:
        """Quote calibration: where in the book a quote (an assistant's citation) is.

        `method`: `exact` (it occurs literally), `normalized` (it occurs once whitespace,
        line breaks, full/half width, quote marks, dashes and then case are folded),
        `prefix` (only its longest prefix of at least `minPrefix` folded code points
        occurs — 16, or 5 for mostly-CJK quotes), `rejected` (`exact`, `source` and
        `locator` null). `exact` is always text of the book, never the quote; `quote` is
        the quote as sent. A `chunk` is searched first, then its section; a `section`
        alone; else the whole book.
        """
        return lib.calibrate_quote(
            book, body.quote, section=body.section, chunk=body.chunk, min_prefix=body.min_prefix
        ).to_json()

    @api.get("/books/{book}/highlights", response_model=list[AnnotationOut], tags=["highlights"])
    def list_highlights(
        book: BookRef,
        reader: ReaderId,
        section: Annotated[
            int | None, Query(ge=0, le=1_000_000, description="Anchored ones in this section.")
        ] = None,
        status: Annotated[Literal["anchored", "orphaned"] | None, Query()] = None,
    ) -> list[dict[str, Any]]:
        """The book's highlights as W3C Web Annotations, in reading order (orphans last)."""
        return [
            h.to_json() for h in lib.highlights(book, section=section, status=status, reader=reader)
        ]

    @api.post(
        "/books/{book}/highlights",
        status_code=201,
        response_model=AnnotationOut,
        tags=["highlights"],
    )
    def create_highlight(
        book: BookRef, body: HighlightIn, response: Response, reader: ReaderId
    ) -> dict[str, Any]:
        """Store a highlight: `section` + `start`/`end` (book source coordinates in `unit`
        code points or UTF-16 units — as a chunk's `source_start` / `utf16_start`), or a
        range `cfi` (EPUB), or a `locator`. `exact`, if sent, must be the text there.
        Returns 201, the annotation and `Location`."""
        section, start, end, exact = body.section, body.start, body.end, body.exact
        unit = body.unit
        if body.locator is not None:
            if start is not None or end is not None or body.cfi is not None:
                raise HTTPError(422, "give a locator, or a span, or a CFI — one of them")
            section, start, end, quoted = locator_span(body.locator)
            unit = "codepoint"
            exact = exact if exact is not None else quoted
        made = lib.add_highlight(
            book,
            section=section,
            start=start,
            end=end,
            unit=unit,
            cfi=body.cfi,
            exact=exact,
            note=body.note,
            color=body.color,
            reader=reader,
        )
        response.headers["Location"] = f"/books/{made.book}/highlights/{made.id}"
        return made.to_json()

    @api.get(
        "/books/{book}/highlights/{highlight}",
        response_model=AnnotationOut,
        tags=["highlights"],
    )
    def get_highlight(book: BookRef, highlight: HighlightRef, reader: ReaderId) -> dict[str, Any]:
        """One highlight (of this reader's: another's is 404, as a missing one)."""
        return lib.highlight(book, highlight, reader=reader).to_json()

    @api.patch(
        "/books/{book}/highlights/{highlight}",
        response_model=AnnotationOut,
        tags=["highlights"],
    )
    def update_highlight(
        book: BookRef, highlight: HighlightRef, body: HighlightPatch, reader: ReaderId
    ) -> dict[str, Any]:
        """Change the note and/or colour (absent: unchanged; `"note": null`: no note)."""
        given = body.model_fields_set
        if "color" in given and body.color is None:
            raise HTTPError(422, "a highlight always has a colour; send one, or leave it out")
        note: str | None | Unset = body.note if "note" in given else UNSET
        color: str | Unset = body.color if body.color is not None else UNSET
        return lib.update_highlight(
            book, highlight, note=note, color=color, reader=reader
        ).to_json()

    @api.delete(
        "/books/{book}/highlights/{highlight}",
        response_model=AnnotationOut,
        tags=["highlights"],
    )
    def delete_highlight(
        book: BookRef, highlight: HighlightRef, reader: ReaderId
    ) -> dict[str, Any]:
        """Delete a highlight; returns it as it was."""
        return lib.delete_highlight(book, highlight, reader=reader).to_json()
