"""Property-based fuzzing of the HTTP API from its own OpenAPI document (schemathesis).

Runs in-process against the ASGI app over a small real library (the sample EPUB and the
Chinese text). Every generated request — valid and invalid parameters, random book refs,
hrefs and job ids, multipart uploads of random bytes — must get a response that is not a
5xx and conforms to the declared schema (status code, content type, body shape).

Two passes: one where book refs are drawn from the real books (so section, block, chunk
and resource routes are exercised past the lookup), one fully random (including DELETE).
Bounded by MINDORY_FUZZ_EXAMPLES (default 25) examples per operation and phase.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from mindory.api import LOOPBACK_HOSTS, create_app
from tests.conftest import SAMPLES

# Every built-in check runs except "schema-valid data is never refused": some refusals
# depend on more than one value or on the library's state, which a schema cannot say —
# overlap over half the size (422), a ref or fingerprint prefix that matches several
# (400). Those are documented 4xx answers with the error shape, and are checked as such.
#
# And for the upload's multipart body, "schema-violating data is refused" does not apply:
# a mutated `file` field (a number, an object) still reaches the server as a file part
# holding those bytes — a valid upload, which the import job then judges.
EXCLUDED = [positive_data_acceptance]


def excluded(case: Any) -> list[Any]:
    upload = case.operation.method.upper() == "POST" and case.operation.path == "/books"
    if upload and case.meta is not None and case.meta.is_negative_at(ParameterLocation.BODY):
        return [*EXCLUDED, negative_data_rejection]
    return EXCLUDED


EXAMPLES = int(os.environ.get("MINDORY_FUZZ_EXAMPLES", "25"))
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _make_app(root: Path) -> FastAPI:
    # schemathesis' ASGI client sends Host: testserver.
    return create_app(
        root / "library.sqlite",
        allowed_hosts=LOOPBACK_HOSTS | {"testserver"},
        upload_dir=root / "uploads",
        max_upload_bytes=1024 * 1024,
        import_isolation="thread",
    )


class _Recorder:
    """Passes requests to the app and remembers (method, path, status) of each."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.seen: list[tuple[str, str, int]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def recording_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.seen.append((scope["method"], scope["path"], message["status"]))
            await send(message)

        await self.app(scope, receive, recording_send)


# The schemas are loaded at collection time (schemathesis' lazy fixture loader does not
# work with this pytest), from apps over empty libraries; the books come in by fixture.
_ROOT = Path(tempfile.mkdtemp(prefix="mindory-fuzz-"))
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)  # also when the tests are deselected
_REAL_APP = _make_app(_ROOT / "real")
_RANDOM_APP = _make_app(_ROOT / "random")
# Deleting would empty the library the first pass reads; the random pass covers DELETE.
_REAL = _Recorder(_REAL_APP)
_RANDOM = _Recorder(_RANDOM_APP)
real = schemathesis.openapi.from_asgi("/openapi.json", _REAL).exclude(method="DELETE")
random = schemathesis.openapi.from_asgi("/openapi.json", _RANDOM)


@pytest.fixture(scope="module", autouse=True)
def _libraries() -> Iterator[None]:
    for app in (_REAL_APP, _RANDOM_APP):
        lib = app.state.library
        for f in ("wasteland.epub", "qiaoshi-yanyi.txt"):
            lib.import_book(SAMPLES / f)
    yield
    for app in (_REAL_APP, _RANDOM_APP):
        app.state.jobs.close(wait=True)
        app.state.library.close()
    shutil.rmtree(_ROOT, ignore_errors=True)


@pytest.fixture(scope="module")
def books() -> dict[str, Any]:
    return {b.format: b for b in _REAL_APP.state.library.books()}


HREFS = st.sampled_from(
    [
        "EPUB/wasteland-content.xhtml",
        "EPUB/wasteland.css",
        "EPUB/wasteland-cover.jpg",
        "META-INF/container.xml",
        "EPUB/wasteland-nav.xhtml",
        "EPUB/../mimetype",
    ]
)


@real.parametrize()
@real.given(data=st.data())
@FUZZ_SETTINGS
def test_fuzz_with_real_books(case: Any, data: st.DataObject, books: dict[str, Any]) -> None:
    negative_path = case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH)
    params = case.path_parameters
    if params and "book" in params and not negative_path:
        if "href" in params:  # resources: the EPUB, real members most of the time
            params["book"] = books["epub"].id
            if data.draw(st.integers(0, 3), label="real href") > 0:
                params["href"] = data.draw(HREFS, label="href")
        else:
            book = books[data.draw(st.sampled_from(sorted(books)), label="book")]
            params["book"] = book.id
            if "n" in params and data.draw(st.integers(0, 3), label="real section") > 0:
                params["n"] = data.draw(st.integers(0, book.section_count - 1), label="section")
        if case.query and "fingerprint" in case.query and data.draw(st.booleans()):
            del case.query["fingerprint"]
    case.call_and_validate(excluded_checks=excluded(case))


@random.parametrize()
@FUZZ_SETTINGS
def test_fuzz_random(case: Any) -> None:
    case.call_and_validate(excluded_checks=excluded(case))


def test_fuzzing_reached_the_library(books: dict[str, Any]) -> None:
    """The passes above really ran, and got past the lookups into the books."""
    seen = _REAL.seen + _RANDOM.seen
    assert len(seen) > 200, len(seen)
    assert not [s for s in seen if s[2] >= 500]
    book_ids = [b.id for b in books.values()]
    ok = [(m, p) for m, p, status in _REAL.seen if status == 200]
    for part in ("/sections/", "/blocks", "/chunks", "/resources/", "/file"):
        assert any(part in p and any(b in p for b in book_ids) for _, p in ok), part
    assert any(m == "POST" and status == 202 for m, _p, status in seen)
    statuses = {status for _m, _p, status in seen}
    assert {200, 202, 404, 422} <= statuses, statuses
