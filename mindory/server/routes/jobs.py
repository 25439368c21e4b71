"""Routes over import jobs (state, progress as server-sent events) and the library folder."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    Depends,
    Response,
)
from fastapi import Path as PathParam
from fastapi.sse import EventSourceResponse, ServerSentEvent

from mindory.errors import NotFoundError
from mindory.library import BOOK_SUFFIXES, book_files_in
from mindory.library.resources import DRIVE_RE
from mindory.server.guard import MAX_FOLDER_LISTING, HTTPError
from mindory.server.params import ServerContext, chunk_settings
from mindory.server.shapes import JSON_ERROR_RESPONSES, FolderImportIn, FolderListingOut, JobOut


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add these routes to ``api`` (the order of registration is the order of matching)."""
    lib, jobs, folder = ctx.lib, ctx.jobs, ctx.folder

    # ------------------------------------------------------------------ jobs

    def existing_job(job_id: Annotated[str, PathParam(min_length=1, max_length=64)]) -> str:
        if not jobs.exists(job_id):
            raise NotFoundError(f"no import job {job_id!r}")
        return job_id

    @api.get("/jobs", response_model=list[JobOut], tags=["jobs"])
    def list_jobs() -> list[dict[str, Any]]:
        """The newest import jobs of the library (whichever worker runs them), newest first."""
        return jobs.all_jobs()

    @api.get("/jobs/{job_id}", response_model=JobOut, tags=["jobs"])
    def get_job(job_id: Annotated[str, Depends(existing_job)]) -> dict[str, Any]:
        """One import job: state, phase, progress, and the result or the error."""
        return jobs.get(job_id)

    @api.get(
        "/jobs/{job_id}/events",
        response_class=EventSourceResponse,
        tags=["jobs"],
        responses={
            **JSON_ERROR_RESPONSES,
            200: {
                "description": "Server-sent events: `progress` (the job's JSON) on every "
                "change, then one `done` with the finished job, then the stream ends.",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
        },
    )
    async def job_events(
        job_id: Annotated[str, Depends(existing_job)],
    ) -> AsyncIterator[ServerSentEvent]:
        """Follow a job as server-sent events until it has finished."""
        async for snapshot in jobs.follow(job_id):
            finished = snapshot["state"] in ("succeeded", "failed")
            yield ServerSentEvent(
                data=snapshot,
                event="done" if finished else "progress",
                id=str(snapshot["id"]),
            )

    # ------------------------------------------------------------------ library folder

    def require_folder() -> Path:
        if folder is None:
            raise HTTPError(
                403, "this server has no library folder (start it with --library-folder)"
            )
        return folder

    @api.get("/library-folder", response_model=FolderListingOut, tags=["library folder"])
    def list_folder(root: Annotated[Path, Depends(require_folder)]) -> dict[str, Any]:
        """Importable files (.epub, .txt) under the configured library folder."""
        found: list[str] = []
        truncated = False
        for f in book_files_in([root]):
            if len(found) >= MAX_FOLDER_LISTING:
                truncated = True
                break
            found.append(f.relative_to(root).as_posix())
        return {"folder": str(root), "files": found, "truncated": truncated}

    @api.post(
        "/library-folder/import", status_code=202, response_model=JobOut, tags=["library folder"]
    )
    def import_from_folder(
        body: FolderImportIn,
        response: Response,
        root: Annotated[Path, Depends(require_folder)],
    ) -> dict[str, Any]:
        """Import a file under the library folder (path relative to it) in the background."""
        rel = body.path.replace("\\", "/")
        if "\x00" in rel or rel.startswith("/") or DRIVE_RE.match(rel):
            raise HTTPError(400, f"{body.path!r} is not a path relative to the library folder")
        target = (root / rel).resolve()
        if not target.is_relative_to(root):
            raise HTTPError(400, f"{body.path!r} is outside the library folder")
        if not target.is_file():
            raise NotFoundError(f"no file {body.path!r} in the library folder")
        if target.suffix.lower() not in BOOK_SUFFIXES:
            raise HTTPError(400, f"{body.path!r} is not an .epub or .txt file")
        settings = chunk_settings(
            body.size, body.overlap, body.min_size, body.nfkc, body.strategy, body.parent_size
        )
        old = lib.book(body.replaces).id if body.replaces is not None else None
        job = jobs.submit(
            target,
            file_name=target.relative_to(root).as_posix(),
            kind="folder",
            settings=settings,
            copy=body.copy_file,
            replaces=old,
            embed=body.embed,
        )
        response.headers["Location"] = f"/jobs/{job['id']}"
        return job
