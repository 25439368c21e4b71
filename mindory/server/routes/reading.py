"""Routes for reading and finding: sections, render blocks, chunks, search and locate."""

from typing import Annotated, Any, Literal

from fastapi import (
    APIRouter,
    Query,
)
from fastapi.responses import JSONResponse

from mindory.server.guard import HTTPError
from mindory.server.params import MAX_SEARCH_K, BookRef, Fingerprint, SectionNo, ServerContext
from mindory.server.shapes import (
    BlockPageOut,
    ChunkPageOut,
    LocateOut,
    LocatorOut,
    SearchOut,
    SectionDetailOut,
    SectionOut,
)


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api`` (the order of registration is the order of matching)."""
    lib = ctx.lib

    # ------------------------------------------------------------------ reading

    @api.get("/books/{book}/sections", response_model=list[SectionOut], tags=["reading"])
    def list_sections(book: BookRef, fingerprint: Fingerprint = None) -> list[dict[str, Any]]:
        """The book's sections (spine items / chapters) without their texts."""
        return [s.to_json() for s in lib.sections(book, fingerprint=fingerprint)]

    @api.get("/books/{book}/sections/{n}", response_model=SectionDetailOut, tags=["reading"])
    def get_section(book: BookRef, n: SectionNo, fingerprint: Fingerprint = None) -> dict[str, Any]:
        """One section: source text (exactly what a DOM holds / the decoded file slice),
        normalized text, offset map, href and title."""
        return lib.section(book, n, fingerprint=fingerprint).to_json()

    @api.get("/books/{book}/sections/{n}/blocks", response_model=BlockPageOut, tags=["reading"])
    def get_blocks(
        book: BookRef,
        n: SectionNo,
        page: Annotated[int, Query(ge=1, le=1_000_000, description="From 1.")] = 1,
        page_size: Annotated[int, Query(ge=1, le=1000)] = 50,
        fingerprint: Fingerprint = None,
    ) -> dict[str, Any]:
        """One page of a section's render blocks (`mindory blocks --json`)."""
        return lib.blocks(book, n, page, page_size, fingerprint=fingerprint).to_json()

    @api.get(
        "/books/{book}/chunks",
        response_model=ChunkPageOut,
        response_model_exclude_unset=True,
        tags=["reading"],
    )
    def get_chunks(
        book: BookRef,
        section: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
        offset: Annotated[int, Query(ge=0, le=1_000_000_000, description="Skip this many.")] = 0,
        limit: Annotated[int, Query(ge=1, le=5000)] = 200,
        fingerprint: Fingerprint = None,
    ) -> dict[str, Any]:
        """Chunks in reading order with exact spans, and CFIs for EPUB
        (`mindory chunks --json`)."""
        info = lib.book(book)
        items = lib.chunks(
            info.id,
            section=section,
            fingerprint=fingerprint,
            offset=offset,
            limit=limit,
            with_cfi=True,
        )
        current = info.current
        return {
            "book": info.id,
            "fingerprint": fingerprint or (current.fingerprint if current else None),
            "chunks": [c.to_json() for c in items],
        }

    # ------------------------------------------------------------------ search, locate

    @api.get("/search", response_model=SearchOut, tags=["search"])
    def search(
        q: Annotated[str, Query(min_length=1, max_length=2000, description="The query.")],
        book: Annotated[
            str | None, Query(min_length=1, max_length=512, description="Only this book.")
        ] = None,
        section: Annotated[
            int | None, Query(ge=0, le=1_000_000, description="Only this section (needs book).")
        ] = None,
        k: Annotated[int, Query(ge=1, le=MAX_SEARCH_K, description="Number of hits.")] = 10,
        mode: Annotated[
            Literal["hybrid", "lexical", "vector"],
            Query(description="Fused ranks (default), full-text alone, or vectors alone."),
        ] = "hybrid",
        page_size: Annotated[int, Query(ge=1, le=1000, description="Blocks per page.")] = 20,
        rerank: Annotated[
            bool,
            Query(
                description="Re-read the first 10 hits sentence by sentence (a second "
                "stage): milliseconds once `mindory embed --windows` has stored the windows, "
                "~1-10 s without (docs/search.md)."
            ),
        ] = False,
    ) -> JSONResponse:
        """Search the library; every hit is a chunk with its Locator and the source spans
        of the query's words in it (`mindory search --json`)."""
        found = lib.search(
            q, k=k, mode=mode, book=book, section=section, page_size=page_size, rerank=rerank
        )
        # Sent as made (SearchOut documents it, extra keys allowed): validating ten hits'
        # Locators through the model cost ~8–16 ms a request, more than the search's parts.
        return JSONResponse(found.to_json())

    @api.get(
        "/books/{book}/locate",
        response_model=LocateOut | LocatorOut,
        response_model_exclude_unset=True,
        tags=["search"],
    )
    def locate(
        book: BookRef,
        cfi: Annotated[
            str | None, Query(min_length=1, max_length=8192, description="An EPUB CFI.")
        ] = None,
        section: Annotated[int | None, Query(ge=0, le=1_000_000)] = None,
        offset: Annotated[
            int | None,
            Query(
                ge=0,
                le=10**12,
                description="Book source coordinates: plain text from the file's start (a "
                "chunk's `source_start`, a hit's `char=N`), EPUB from the section's start.",
            ),
        ] = None,
        section_offset: Annotated[
            int | None,
            Query(ge=0, le=10**12, description="From the start of `section`'s source text."),
        ] = None,
        unit: Annotated[
            Literal["codepoint", "utf16"],
            Query(description="What `offset` / `section_offset` count."),
        ] = "codepoint",
        chunk: Annotated[
            str | None, Query(min_length=1, max_length=64, description="A chunk id or prefix.")
        ] = None,
        page_size: Annotated[int, Query(ge=1, le=1000, description="Blocks per page.")] = 20,
    ) -> dict[str, Any]:
        """Where a place is (`mindory locate --json`): a CFI, or an `offset` in book source
        coordinates (with its `section`; a plain-text book may leave the section out), or a
        `section` and a `section_offset` → section, block, page, both CFIs or the `char=`
        fragment, and the chunks containing it. With `chunk`: that chunk's Locator instead."""
        given = [x is not None for x in (cfi, offset, section_offset)]
        if chunk is not None:
            if any(given) or section is not None:
                raise HTTPError(422, "give a chunk, or a CFI, or an offset — one of them")
            return lib.locate_chunk(book, chunk, page_size=page_size).to_json()
        if sum(given) != 1 or (cfi is not None and section is not None):
            raise HTTPError(
                422,
                "give a CFI, or an offset (book coordinates, with its section), or a section "
                "and a section_offset (or a chunk)",
            )
        if section_offset is not None and section is None:
            raise HTTPError(422, "section_offset counts from a section's start: give the section")
        return lib.locate(
            book,
            cfi=cfi,
            section=section,
            offset=offset,
            section_offset=section_offset,
            utf16=unit == "utf16",
            page_size=page_size,
        ).to_json()
