"""KOReader's progress sync at ``/kosync`` (docs/apps.md): a reader enters
``http(s)://HOST:PORT/kosync`` as KOReader's custom sync server and its sync plugin works
unchanged.

The contract is the plugin's ``api.json`` and the reference server
(koreader/koreader-sync-server): ``POST /users/create`` (201 ``{"username"}``; 402 with
code 2002 when taken, 2005 when registration is off), ``GET /users/auth`` (200
``{"authorized": "OK"}``), ``PUT /syncs/progress`` (200 ``{"document", "timestamp"}``),
``GET /syncs/progress/{document}`` (200, ``{}`` when there is none); the user is named by
``x-auth-user`` and ``x-auth-key`` (the MD5 of the password) on every request; errors are
``{"code": N, "message": "…"}`` with the reference server's statuses (401 code 2001; 403
code 2003 for an invalid request — here also a malformed xpointer or a document key no
book has, with a message that says which; 403 code 2004 without a document). Answers are
``Content-Type: application/json`` exactly (older KOReader builds reject a charset).

Without readers (and without a server token) the library is the implicit local reader's,
as for the API: any credentials are accepted. Kosync users are mindory readers.
"""

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from mindory.errors import MindoryError, NotFoundError
from mindory.reading.positions import LOCAL_READER
from mindory.server.params import ServerContext

PREFIX = "/kosync"
MEDIA_TYPE = "application/json"

# The reference server's errors (config/errors.lua): code → (status, message).
ERRORS: dict[int, tuple[int, str]] = {
    2001: (401, "Unauthorized"),
    2002: (402, "Username is already registered."),
    2003: (403, "Invalid request"),
    2004: (403, "Field 'document' not provided."),
    2005: (402, "User registration is disabled."),
}
MAX_BODY = 64 * 1024


class KosyncResponse(JSONResponse):
    media_type = MEDIA_TYPE  # exactly, no charset


def answer(status: int, body: dict[str, Any]) -> KosyncResponse:
    return KosyncResponse(body, status_code=status)


def error(code: int, detail: str | None = None) -> KosyncResponse:
    status, message = ERRORS[code]
    if detail:
        message = f"{message}: {detail}"
    return answer(status, {"code": code, "message": message})


def _valid_key_field(value: object) -> bool:
    """The reference server's rule for user names and document keys: non-empty, no ':'."""
    return isinstance(value, str) and bool(value) and ":" not in value and len(value) <= 256


async def _body(request: Request) -> dict[str, Any] | None:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        return None
    try:
        data = json.loads(raw.decode("utf-8")) if raw else None
    except (UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def add_routes(api: APIRouter, ctx: ServerContext) -> None:
    """Add the kosync routes to ``api`` (outside the OpenAPI document: their shapes are
    KOReader's, not mindory's)."""
    lib = ctx.lib

    async def reader_of(request: Request) -> str | None:
        """The reader the request's x-auth headers name, or None (→ 401)."""
        user = request.headers.get("x-auth-user", "")
        key = request.headers.get("x-auth-key", "")
        if ctx.token is None and not await run_in_threadpool(lib.has_readers):
            return LOCAL_READER
        if not _valid_key_field(user) or not key:
            return None
        return await run_in_threadpool(lib.reader_for_sync_key, user, key)

    @api.post(PREFIX + "/users/create", include_in_schema=False)
    async def create_user(request: Request) -> KosyncResponse:
        if not ctx.kosync_registration:
            return error(2005)
        body = await _body(request)
        if body is None:
            return error(2003, "the body is not a JSON object")
        name, key = body.get("username"), body.get("password")
        if not _valid_key_field(name) or not isinstance(key, str) or not key:
            return error(2003, "username and password are required")
        assert isinstance(name, str)
        if await run_in_threadpool(lambda: name in {r.name for r in lib.readers()}):
            return error(2002)
        try:
            made = await run_in_threadpool(lib.register_sync_reader, name, key)
        except MindoryError as exc:
            if "already" in str(exc):
                return error(2002)
            return error(2003, str(exc))
        return answer(201, {"username": made.name})

    @api.get(PREFIX + "/users/auth", include_in_schema=False)
    async def auth_user(request: Request) -> KosyncResponse:
        if await reader_of(request) is None:
            return error(2001)
        return answer(200, {"authorized": "OK"})

    @api.put(PREFIX + "/syncs/progress", include_in_schema=False)
    async def update_progress(request: Request) -> KosyncResponse:
        reader = await reader_of(request)
        if reader is None:
            return error(2001)
        body = await _body(request)
        if body is None:
            return error(2003, "the body is not a JSON object")
        document = body.get("document")
        if not _valid_key_field(document):
            return error(2004)
        assert isinstance(document, str)
        for field in ("progress", "percentage", "device"):
            if body.get(field) is None:
                return error(2003, f"field {field!r} not provided")
        try:
            pushed = await run_in_threadpool(
                lambda: lib.push_progress(
                    document=document,
                    progress=body.get("progress"),
                    percentage=body.get("percentage"),
                    device=body.get("device"),
                    device_id=body.get("device_id"),
                    reader=reader,
                )
            )
        except NotFoundError as exc:
            return error(2003, str(exc))
        except MindoryError as exc:
            return error(2003, str(exc).strip().splitlines()[0])
        return answer(200, pushed.to_json())

    @api.get(PREFIX + "/syncs/progress/{document}", include_in_schema=False)
    async def get_progress(document: str, request: Request) -> KosyncResponse:
        reader = await reader_of(request)
        if reader is None:
            return error(2001)
        if not _valid_key_field(document):
            return error(2004)
        try:
            found = await run_in_threadpool(lib.pull_progress, document, reader=reader)
        except NotFoundError as exc:
            return error(2003, str(exc))
        except MindoryError as exc:
            return error(2003, str(exc).strip().splitlines()[0])
        return answer(200, found.to_json())

    @api.get(PREFIX + "/healthcheck", include_in_schema=False)
    async def healthcheck() -> KosyncResponse:
        return answer(200, {"state": "OK"})
