"""Property-based fuzzing of the HTTP API from its own OpenAPI document (schemathesis).

Runs in-process against the ASGI app over a small real library (the sample EPUB and the
Chinese text). Every generated request — valid and invalid parameters, random book refs,
hrefs and job ids, multipart uploads of random bytes — must get a response that is not a
5xx and conforms to the declared schema (status code, content type, body shape).

Two passes: one where book refs (and highlight ids) are drawn from the real books (so
section, block, chunk, resource, locate, anchor and highlight routes are exercised past
the lookup), one fully random (including DELETE). Search, locate and quote calibration
run over the real texts (the libraries are embedded, so hybrid search fuses both lists).
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

from mindory.server.app import create_app
from mindory.server.guard import LOOPBACK_HOSTS
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
            book = lib.import_book(SAMPLES / f).book
            n = min(1, lib.book(book).section_count - 1)
            base = lib.section(book, n).info.source_start
            for k in range(3):  # a few highlights to read, change (and delete)
                lib.add_highlight(book, section=n, start=base + 100 * k, end=base + 100 * k + 40)
        lib.embed()
    yield
    for app in (_REAL_APP, _RANDOM_APP):
        app.state.jobs.close(wait=True)
        app.state.library.close()
    shutil.rmtree(_ROOT, ignore_errors=True)


@pytest.fixture(scope="module")
def books() -> dict[str, Any]:
    return {b.format: b for b in _REAL_APP.state.library.books()}


@pytest.fixture(scope="module")
def chunk_ids(books: dict[str, Any]) -> dict[str, list[str]]:
    lib = _REAL_APP.state.library
    return {b.id: [c.id[:12] for c in lib.chunks(b.id, limit=50)] for b in books.values()}


@pytest.fixture(scope="module")
def spans(books: dict[str, Any]) -> dict[str, list[tuple[int, int]]]:
    lib = _REAL_APP.state.library
    return {
        b.id: [(x.source_start, x.source_end) for x in lib.sections(b.id)] for b in books.values()
    }


@pytest.fixture(scope="module")
def highlight_ids(books: dict[str, Any]) -> dict[str, list[str]]:
    lib = _REAL_APP.state.library
    return {b.id: [h.annotation_id for h in lib.highlights(b.id)] for b in books.values()}


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
def test_fuzz_with_real_books(
    case: Any,
    data: st.DataObject,
    books: dict[str, Any],
    highlight_ids: dict[str, list[str]],
    chunk_ids: dict[str, list[str]],
    spans: dict[str, list[tuple[int, int]]],
) -> None:
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
            if "highlight" in params and data.draw(st.integers(0, 3), label="real id") > 0:
                params["highlight"] = data.draw(
                    st.sampled_from(highlight_ids[book.id]), label="highlight"
                )
        if case.query and "fingerprint" in case.query and data.draw(st.booleans()):
            del case.query["fingerprint"]
        negative_query = case.meta is not None and case.meta.is_negative_at(ParameterLocation.QUERY)
        if case.path.endswith("/locate") and not negative_query and data.draw(st.booleans()):
            # One of the three valid forms (random queries rarely give exactly one).
            book = next(b for b in books.values() if b.id == params["book"])
            how = data.draw(st.sampled_from(["offset", "chunk"]), label="locate by")
            if how == "offset":
                case.query = {
                    "section": data.draw(st.integers(0, book.section_count - 1)),
                    # book coordinates, or counted from the section's start
                    data.draw(st.sampled_from(["offset", "section_offset"])): data.draw(
                        st.integers(0, 2000)
                    ),
                    "unit": data.draw(st.sampled_from(["codepoint", "utf16"])),
                }
            else:
                case.query = {"chunk": data.draw(st.sampled_from(chunk_ids[book.id]))}
        negative_body = case.meta is not None and case.meta.is_negative_at(ParameterLocation.BODY)
        if (
            case.method.upper() == "POST"
            and case.path.endswith("/highlights")
            and not negative_body
            and data.draw(st.booleans())
        ):
            # A span that exists, now and then (random ones are almost never inside a section).
            book = next(b for b in books.values() if b.id == params["book"])
            n = data.draw(st.integers(0, book.section_count - 1), label="section")
            lo, hi = spans[book.id][n]
            start = data.draw(st.integers(lo, max(lo, hi - 1)), label="start")
            case.body = {
                "section": n,
                "start": start,
                "end": data.draw(st.integers(start, min(hi, start + 500)), label="end"),
                "note": data.draw(st.none() | st.text(max_size=20), label="note"),
            }
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
    for part in (
        "/sections/",
        "/blocks",
        "/chunks",
        "/resources/",
        "/file",
        "/locate",
        "/anchors",
        "/highlights/",
    ):
        assert any(part in p and any(b in p for b in book_ids) for _, p in ok), part
    assert any(p == "/search" for _, p in ok)
    assert any(m == "POST" and "/highlights" in p and status == 201 for m, p, status in seen)
    assert any(m == "POST" and status == 202 for m, _p, status in seen)
    statuses = {status for _m, _p, status in seen}
    assert {200, 202, 404, 422} <= statuses, statuses
