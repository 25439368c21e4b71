"""Routes over books: health, the list, upload, one book, its file and EPUB resources,
and imports from the library folder."""

import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    File,
    Form,
    Query,
    Request,
    Response,
    UploadFile,
)
from fastapi import Path as PathParam

from mindory.errors import LimitError
from mindory.server.guard import RESOURCE_CSP, VERSION, MiB
from mindory.server.params import (
    BookRef,
    ServerContext,
    Strategy,
    chunk_settings,
    content_disposition,
    file_type,
    not_modified,
    safe_file_name,
)
from mindory.server.routes.readium import CORS_HEADERS
from mindory.server.shapes import BookDetailOut, BookOut, HealthOut, JobOut


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api`` (the order of registration is the order of matching)."""
    lib, jobs, token, folder = ctx.lib, ctx.jobs, ctx.token, ctx.folder
    uploads, max_upload_bytes = ctx.uploads, ctx.max_upload_bytes

    # ------------------------------------------------------------------ health

    @api.get("/health", response_model=HealthOut, tags=["server"])
    def health() -> dict[str, Any]:
        """Liveness and a few facts (also checks the database answers)."""
        return {
            "status": "ok",
            "version": VERSION,
            "books": len(lib.books()),
            "jobs_active": jobs.active(),
            "auth": token is not None,
            "max_upload_bytes": max_upload_bytes,
            "library_folder": folder is not None,
        }

    # ------------------------------------------------------------------ books

    @api.get(
        "/books", response_model=list[BookOut], response_model_exclude_unset=True, tags=["books"]
    )
    def list_books() -> list[dict[str, Any]]:
        """Every book, by title (`mindory books --json`)."""
        return [b.to_json() for b in lib.books()]

    @api.post(
        "/books",
        status_code=202,
        response_model=JobOut,
        tags=["books"],
        openapi_extra={"x-max-upload-bytes": max_upload_bytes},
    )
    def upload_book(
        response: Response,
        file: Annotated[UploadFile, File(description="An .epub or a plain-text file.")],
        size: Annotated[int, Query(ge=20, le=100_000, description="Window size.")] = 800,
        overlap: Annotated[int, Query(ge=0, le=50_000)] = 100,
        min_size: Annotated[int, Query(ge=0, le=100_000, description="Shortest tail.")] = 50,
        nfkc: Annotated[bool, Query(description="Normalize with NFKC, not NFC.")] = False,
        strategy: Annotated[
            Strategy, Query(description="How to cut chunks (docs/chunking.md).")
        ] = "window",
        parent_size: Annotated[
            int, Query(ge=20, le=100_000, description="parent-child: the parents' size.")
        ] = 1600,
        embed: Annotated[
            bool,
            Query(
                description="Embed the new chunks with the library's current embedding as "
                "part of the job (false: lexical only until `mindory embed`)."
            ),
        ] = True,
        replaces: Annotated[
            str | None,
            Form(
                min_length=1,
                max_length=512,
                description="A book (ref) this file is a new edition of: every highlight "
                "of that book is re-anchored onto the new one (the job's result reports "
                "each under `reanchored`).",
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Upload a book and import it in the background.

        Returns 202 and the job (`Location: /jobs/{id}`); follow it with
        `GET /jobs/{id}` or `GET /jobs/{id}/events`. A file mindory refuses
        ends the job `failed`, naming the file; nothing is written then.
        """
        settings = chunk_settings(size, overlap, min_size, nfkc, strategy, parent_size)
        old = lib.book(replaces).id if replaces is not None else None
        name = safe_file_name(file.filename)
        if uploads is not None:
            uploads.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="mindory-upload-", dir=uploads))
        try:
            dest = tmp / name
            written = 0
            with dest.open("wb") as out:
                while block := file.file.read(1 * MiB):
                    written += len(block)
                    if written > max_upload_bytes:
                        raise LimitError(
                            f"the upload is over the limit of {max_upload_bytes:,} bytes",
                            path=name,
                        )
                    out.write(block)
            job = jobs.submit(
                dest,
                file_name=name,
                kind="upload",
                settings=settings,
                copy=True,
                cleanup=tmp,
                replaces=old,
                embed=embed,
            )
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        response.headers["Location"] = f"/jobs/{job['id']}"
        return job

    @api.get(
        "/books/{book}",
        response_model=BookDetailOut,
        response_model_exclude_unset=True,
        tags=["books"],
    )
    def get_book(book: BookRef) -> dict[str, Any]:
        """Metadata, sections and the nested table of contents with jump positions
        (`mindory show BOOK --toc --json`)."""
        info = lib.book(book)
        sections = lib.sections(info.id)
        toc = lib.toc(info.id)
        return {
            **info.to_json(),
            "sections": [s.to_json() for s in sections],
            "toc": [n.to_json() for n in toc],
        }

    @api.delete(
        "/books/{book}", response_model=BookOut, response_model_exclude_unset=True, tags=["books"]
    )
    def delete_book(book: BookRef) -> dict[str, Any]:
        """Delete a book and everything derived from it; returns what was deleted."""
        info = lib.delete_book(book)
        return info.to_json()

    @api.get(
        "/books/{book}/file",
        tags=["books"],
        response_class=Response,
        responses={
            200: {
                "description": "The original file's bytes.",
                "content": {
                    "application/epub+zip": {"schema": {"type": "string", "format": "binary"}},
                    "text/plain": {"schema": {"type": "string", "format": "binary"}},
                },
            },
            304: {"description": "Not modified (If-None-Match)."},
        },
    )
    def book_file(book: BookRef, request: Request) -> Response:
        """The original file, byte for byte (EPUB, or the text in its own encoding)."""
        info = lib.book(book)
        etag = f'"{info.id}"'
        # readable from any origin: a Readium manifest's reading order (routes/readium.py)
        headers = {"ETag": etag, "Cache-Control": "private, no-cache", **CORS_HEADERS}
        if not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        data = lib.book_file(info.id)
        headers["Content-Disposition"] = content_disposition(info.file_name)
        return Response(data, media_type=file_type(info.format, info.encoding), headers=headers)

    @api.get(
        "/books/{book}/resources/{href:path}",
        tags=["books"],
        response_class=Response,
        responses={
            200: {
                "description": "The member's bytes, with its manifest media type.",
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            },
            304: {"description": "Not modified (If-None-Match)."},
        },
    )
    def book_resource(
        book: BookRef,
        href: Annotated[str, PathParam(description="ZIP path inside the EPUB.")],
        request: Request,
    ) -> Response:
        """Any file inside an EPUB by its ZIP path (XHTML, CSS, images, fonts).

        Paths that would leave the book (`..`, absolute, backslashes) are 400;
        names not in the archive are 404. Served with a sandboxing CSP.
        """
        found = lib.resource(book, href)
        data, media_type, etag = found.data, found.media_type, found.etag
        headers = {
            "ETag": etag,
            "Cache-Control": "private, no-cache",
            "Content-Security-Policy": RESOURCE_CSP,
            **CORS_HEADERS,  # readable from any origin: a Readium manifest links it
        }
        if not_modified(request, etag):
            return Response(status_code=304, headers=headers)
        return Response(data, media_type=media_type, headers=headers)
