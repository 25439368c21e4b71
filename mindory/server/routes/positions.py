"""Routes for reading positions and bookmarks (docs/reading-state.md): every one acts for
the request's reader only; another reader's bookmark is 404, as a missing one."""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from mindory.errors import MindoryError
from mindory.reading.positions import PlaceIn, parse_time
from mindory.server.guard import HTTPError
from mindory.server.params import BookmarkRef, BookRef, ReaderId, ServerContext
from mindory.server.shapes import BookmarkIn, BookmarkOut, PlaceFields, PositionIn, PositionOut


def _place(body: PlaceFields) -> PlaceIn:
    """The place a body names; a malformed one is 422 (nothing is written)."""
    try:
        return PlaceIn.from_json(body.place_json())
    except (MindoryError, ValueError) as exc:
        raise HTTPError(422, f"invalid locator: {exc}", {"kind": "LocatorError"}) from exc


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api`` (the order of registration is the order of matching)."""
    lib = ctx.lib

    @api.put("/books/{book}/position", response_model=PositionOut, tags=["reading state"])
    def put_position(book: BookRef, body: PositionIn, reader: ReaderId) -> dict[str, Any]:
        """Keep where the reader is: a place (a CFI, `section` + `offset`, a `progression`,
        `totalProgression` or a whole Locator), the `device` and the client's `modified`
        time. The answer is the full Locator kept. The newest `modified` wins: an older
        one is 409 with the current position in `detail.current`, and nothing is written.
        A place outside the book is 400; a malformed one 422."""
        place = _place(body)
        try:
            modified = parse_time(body.modified)
        except MindoryError as exc:
            raise HTTPError(422, str(exc), {"kind": "MindoryError"}) from exc
        return lib.set_position(
            book, place, device=body.device, modified=modified, reader=reader
        ).to_json()

    @api.get("/books/{book}/position", response_model=PositionOut, tags=["reading state"])
    def get_position(book: BookRef, reader: ReaderId) -> dict[str, Any]:
        """The reader's newest position in the book (404: none yet)."""
        return lib.position(book, reader=reader).to_json()

    @api.get(
        "/books/{book}/position/history",
        response_model=list[PositionOut],
        tags=["reading state"],
    )
    def position_history(
        book: BookRef,
        reader: ReaderId,
        device: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[dict[str, Any]]:
        """The reader's kept positions in the book, newest first (one `device`'s, or all)."""
        return [
            p.to_json()
            for p in lib.position_history(book, device=device, limit=limit, reader=reader)
        ]

    @api.get("/books/{book}/bookmarks", response_model=list[BookmarkOut], tags=["reading state"])
    def list_bookmarks(book: BookRef, reader: ReaderId) -> list[dict[str, Any]]:
        """The reader's bookmarks in the book, in reading order (orphans last)."""
        return [b.to_json() for b in lib.bookmarks(book, reader=reader)]

    @api.post(
        "/books/{book}/bookmarks",
        status_code=201,
        response_model=BookmarkOut,
        tags=["reading state"],
    )
    def add_bookmark(
        book: BookRef, body: BookmarkIn, response: Response, reader: ReaderId
    ) -> dict[str, Any]:
        """Bookmark a place (as for a position) with an optional `title`. 201 and
        `Location`; the same place again is the same bookmark: 200."""
        made = lib.add_bookmark(book, _place(body), title=body.title, reader=reader)
        if not made.new:
            response.status_code = 200
        response.headers["Location"] = f"/books/{made.book}/bookmarks/{made.id}"
        return made.to_json()

    @api.get(
        "/books/{book}/bookmarks/{bookmark}", response_model=BookmarkOut, tags=["reading state"]
    )
    def get_bookmark(book: BookRef, bookmark: BookmarkRef, reader: ReaderId) -> dict[str, Any]:
        """One of the reader's bookmarks."""
        return lib.bookmark(book, bookmark, reader=reader).to_json()

    @api.delete(
        "/books/{book}/bookmarks/{bookmark}", response_model=BookmarkOut, tags=["reading state"]
    )
    def delete_bookmark(book: BookRef, bookmark: BookmarkRef, reader: ReaderId) -> dict[str, Any]:
        """Delete one of the reader's bookmarks; returns it as it was."""
        return lib.delete_bookmark(book, bookmark, reader=reader).to_json()
