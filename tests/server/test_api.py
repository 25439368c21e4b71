"""The HTTP API (mindory.server.app): thin doors with the CLI's JSON, safety, jobs, errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi import FastAPI
from fastapi.testclient import TestClient

from mindory.cli import main as cli_main
from mindory.errors import MindoryError
from mindory.library import Library
from mindory.server.app import create_app
from mindory.server.guard import is_loopback
from mindory.server.serve import check_bind, serve
from tests.api_server import ServerThread, upload_and_wait
from tests.conftest import ROOT, SAMPLES

EPUB = SAMPLES / "wasteland.epub"
TXT = SAMPLES / "qiaoshi-yanyi.txt"
LOCAL = "http://127.0.0.1"
TOKEN = "t0ken-for-the-tests-0123456789"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def library_path(module_db_url: str) -> str:
    """The module's library, once on SQLite and once on PostgreSQL."""
    with Library.open(module_db_url) as lib:
        for f in (EPUB, TXT):
            lib.import_book(f)
    return module_db_url


@pytest.fixture(scope="module")
def client(library_path: str) -> Iterator[TestClient]:
    app = create_app(library_path)
    with TestClient(app, base_url=LOCAL) as c:
        yield c


@pytest.fixture(scope="module")
def ids(client: TestClient) -> dict[str, str]:
    books = client.get("/books").json()
    return {b["format"]: b["id"] for b in books}


@pytest.fixture(params=["thread"])
def fresh(
    request: pytest.FixtureRequest, db_url: str, tmp_path: Path
) -> Iterator[tuple[TestClient, FastAPI, Path]]:
    """An empty library (on each backend) with an upload folder we can look into. Imports
    run in a thread (fast); tests parametrized with "process" run them as the server does
    by default."""
    app = create_app(db_url, upload_dir=tmp_path / "uploads", import_isolation=request.param)
    assert app.state.jobs.isolation == request.param
    with TestClient(app, base_url=LOCAL) as c:
        yield c, app, tmp_path


both_isolations = pytest.mark.parametrize("fresh", ["thread", "process"], indirect=True)


def _cli_json(library_path: str, *args: str) -> Any:
    result = CliRunner().invoke(cli_main, ["--db", str(library_path), *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    body: dict[str, Any] = r.json()
    assert set(body) == {"error", "detail"}, body
    assert isinstance(body["error"], str) and body["error"]
    return body


def _wait(client: TestClient, job: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while job["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
        job = client.get(f"/jobs/{job['id']}").json()
    return job


def _upload(client: TestClient, name: str, data: bytes, **params: Any) -> dict[str, Any]:
    r = client.post("/books", files={"file": (name, data)}, params=params)
    assert r.status_code == 202, r.text
    assert r.headers["location"] == f"/jobs/{r.json()['id']}"
    return _wait(client, r.json())


# --------------------------------------------------------------------------- same JSON as the CLI


def test_health(client: TestClient) -> None:
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["books"] == 2 and h["auth"] is False
    assert h["max_upload_bytes"] == 256 * 1024 * 1024


def test_routes_return_the_cli_json(
    client: TestClient, library_path: str, ids: dict[str, str]
) -> None:
    assert client.get("/books").json() == _cli_json(library_path, "books", "--json")
    for book in ids.values():
        shown = _cli_json(library_path, "show", book, "--toc", "--json")
        assert client.get(f"/books/{book}").json() == shown
        assert client.get(f"/books/{book}/sections").json() == shown["sections"]
        chunks = _cli_json(library_path, "chunks", book, "--section", "1", "--json")
        r = client.get(f"/books/{book}/chunks", params={"section": 1, "limit": 5000})
        if book == ids["epub"]:  # one section only
            assert r.json()["chunks"] == [] == chunks["chunks"]
        else:
            assert r.json() == chunks
        blocks = _cli_json(
            library_path, "blocks", book, "0", "--page", "2", "--page-size", "7", "--json"
        )
        r = client.get(f"/books/{book}/sections/0/blocks", params={"page": 2, "page_size": 7})
        assert r.json() == blocks
    # EPUB chunks carry both CFI flavors, plain text byte spans, exactly as the CLI prints.
    epub = client.get(f"/books/{ids['epub']}/chunks").json()
    assert epub == _cli_json(library_path, "chunks", ids["epub"], "--json")
    assert all(c["cfi"].startswith("epubcfi(") and "byte_start" not in c for c in epub["chunks"])
    txt = client.get(f"/books/{ids['txt']}/chunks", params={"offset": 10, "limit": 3}).json()
    assert [c["index"] for c in txt["chunks"]] and all("cfi" not in c for c in txt["chunks"])
    assert all(c["byte_end"] > c["byte_start"] for c in txt["chunks"])


def test_section_texts(client: TestClient, library_path: str, ids: dict[str, str]) -> None:
    with Library.open(library_path) as lib:
        for book in ids.values():
            expected = lib.section(book, 0).to_json()
            got = client.get(f"/books/{book}/sections/0").json()
            assert got == expected
            assert got["source_text"] and got["normalized_text"]
            assert {"href", "title", "offset_map", "utf16_start"} <= set(got)


def test_nested_toc_with_jump_positions(client: TestClient, ids: dict[str, str]) -> None:
    book = client.get(f"/books/{ids['epub']}").json()
    toc = book["toc"]
    assert [n["title"] for n in toc][:2] == ["I. THE BURIAL OF THE DEAD", "II. A GAME OF CHESS"]
    section = client.get(f"/books/{ids['epub']}/sections/0").json()
    for node in toc:
        assert node["section"] == 0 and isinstance(node["children"], list)
        # The jump position is where the heading's text starts in the DOM text.
        assert (
            section["source_text"][node["source_offset"] :].lstrip().startswith(node["title"][:5])
        )


def test_book_refs_by_title_and_prefix(client: TestClient, ids: dict[str, str]) -> None:
    assert client.get("/books/waste").json()["id"] == ids["epub"]
    assert client.get(f"/books/{ids['txt'][:8]}").json()["id"] == ids["txt"]


# --------------------------------------------------------------------------- files and resources


def test_book_file_bytes_and_types(client: TestClient, ids: dict[str, str]) -> None:
    r = client.get(f"/books/{ids['epub']}/file")
    assert r.status_code == 200 and r.content == EPUB.read_bytes()
    assert r.headers["content-type"] == "application/epub+zip"
    assert r.headers["content-disposition"].startswith('inline; filename="wasteland.epub"')
    r = client.get(f"/books/{ids['txt']}/file")
    assert r.content == TXT.read_bytes()
    assert r.headers["content-type"] == "text/plain; charset=big5-hkscs"
    again = client.get(f"/books/{ids['txt']}/file", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


def test_epub_resources(client: TestClient, ids: dict[str, str]) -> None:
    base = f"/books/{ids['epub']}/resources"
    with zipfile.ZipFile(EPUB) as z:
        for name, ctype in [
            ("EPUB/wasteland-content.xhtml", "application/xhtml+xml"),
            ("EPUB/wasteland.css", "text/css; charset=utf-8"),
            ("EPUB/wasteland-cover.jpg", "image/jpeg"),
            ("EPUB/wasteland.opf", "application/oebps-package+xml"),
        ]:
            r = client.get(f"{base}/{name}")
            assert r.status_code == 200, (name, r.text)
            assert r.content == z.read(name)
            assert r.headers["content-type"] == ctype
            assert "sandbox" in r.headers["content-security-policy"]
            assert "script-src 'none'" in r.headers["content-security-policy"]
    # "./" segments and a differently cased name (books made on case-insensitive disks)
    assert client.get(f"{base}/./EPUB/./wasteland.css").status_code == 200
    assert client.get(f"{base}/epub/WASTELAND.CSS").status_code == 200
    r = client.get(f"{base}/EPUB/wasteland.css")
    assert (
        client.get(
            f"{base}/EPUB/wasteland.css", headers={"If-None-Match": r.headers["etag"]}
        ).status_code
        == 304
    )


@pytest.mark.parametrize(
    ("href", "status"),
    [
        ("%2e%2e/%2e%2e/etc/passwd", 400),
        ("EPUB/%2e%2e/%2e%2e/mindory.sqlite", 400),
        ("..%2fsecret", 400),
        ("%2fetc/passwd", 400),
        ("..%5c..%5cwindows", 400),
        ("C:%5cboot.ini", 400),
        ("EPUB/a%00b", 400),
        ("EPUB/nope.xhtml", 404),
        ("EPUB", 404),
        ("EPUB/", 404),
        ("META-INF/", 404),
    ],
)
def test_resource_paths_cannot_escape(
    client: TestClient, ids: dict[str, str], href: str, status: int
) -> None:
    _error(client.get(f"/books/{ids['epub']}/resources/{href}"), status)


def test_plain_text_has_no_resources(client: TestClient, ids: dict[str, str]) -> None:
    body = _error(client.get(f"/books/{ids['txt']}/resources/anything.xhtml"), 404)
    assert "plain-text" in body["error"]


# --------------------------------------------------------------------------- errors are 4xx JSON


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("/books/nosuchbook", 404, "no book"),
        ("/books/{epub}/sections/99", 404, "no section 99"),
        ("/books/{epub}/sections/-1", 422, "greater than or equal"),
        ("/books/{epub}/sections/99999999999999999999", 422, "less than or equal"),
        ("/books/{epub}/sections/x", 422, "valid integer"),
        ("/books/{epub}/sections/0/blocks?page=0", 422, "page"),
        ("/books/{epub}/sections/0/blocks?page_size=100000", 422, "page_size"),
        ("/books/{epub}/chunks?limit=0", 422, "limit"),
        ("/books/{epub}/chunks?fingerprint=ffffffff", 404, "no derivation"),
        ("/books/%20/chunks", 404, "empty"),
        ("/jobs/nope", 404, "no import job"),
        ("/nowhere", 404, "Not Found"),
    ],
)
def test_bad_requests_are_4xx_json(
    client: TestClient, ids: dict[str, str], path: str, status: int, words: str
) -> None:
    body = _error(client.get(path.format(**ids)), status)
    assert words.lower() in json.dumps(body).lower()


def test_wrong_method_is_405_json(client: TestClient, ids: dict[str, str]) -> None:
    r = client.put(f"/books/{ids['epub']}")
    _error(r, 405)
    assert "GET" in r.headers["allow"]


# --------------------------------------------------------------------------- uploads and jobs


def _drm_epub() -> bytes:
    from io import BytesIO

    out = BytesIO()
    enc = (
        '<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        '<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
        '<enc:CipherData><enc:CipherReference URI="EPUB/wasteland-content.xhtml"/></enc:CipherData>'
        "</enc:EncryptedData></encryption>"
    )
    with zipfile.ZipFile(EPUB) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr("META-INF/encryption.xml", enc)
    return out.getvalue()


def _uploads_left(folder: Path) -> list[Path]:
    """What is left in the upload folder once the workers are done: a worker deletes a
    job's folder just after it writes the job's outcome, which a poll may see first, so
    wait for it (boundedly)."""
    deadline = time.monotonic() + 10
    while list(folder.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return list(folder.iterdir())


@both_isolations
def test_upload_imports_in_the_background(fresh: tuple[TestClient, FastAPI, Path]) -> None:
    client, _app, tmp = fresh
    job = _upload(client, "wasteland.epub", EPUB.read_bytes())
    assert job["state"] == "succeeded", job
    assert job["kind"] == "upload" and job["file_name"] == "wasteland.epub"
    assert job["progress"] == 1.0 and job["error"] is None
    result = job["result"]
    assert result["status"] == "created" and result["path"] == "wasteland.epub"
    assert result["chunks"] == 41
    books = client.get("/books").json()
    assert [b["id"] for b in books] == [result["book"]]
    assert books[0]["file_name"] == "wasteland.epub"
    # The same bytes again: nothing new, and it says so.
    again = _upload(client, "copy.epub", EPUB.read_bytes())
    assert again["result"]["status"] == "unchanged"
    # Other settings: a new derivation.
    other = _upload(client, "wasteland.epub", EPUB.read_bytes(), size=400, overlap=50)
    assert other["result"]["status"] == "rederived"
    assert other["fingerprint"] == other["result"]["fingerprint"] != result["fingerprint"]
    # The temporary upload folders are gone.
    assert _uploads_left(tmp / "uploads") == []
    jobs = client.get("/jobs").json()
    assert [j["id"] for j in jobs] == [other["id"], again["id"], job["id"]]


@pytest.mark.parametrize(
    ("name", "data", "kind", "words"),
    [
        ("garbage.epub", b"PK\x03\x04 this is not a zip", "BookFormatError", "not a ZIP"),
        ("drm.epub", None, "DrmError", "DRM"),
        ("empty.txt", b"", "DecodeError", "empty"),
        ("binary.txt", bytes(range(256)) * 64, "DecodeError", ""),
        ("noext", b"PK\x05\x06" + b"\x00" * 18, "BookFormatError", ""),
    ],
)
def test_bad_upload_fails_by_name_and_writes_nothing(
    fresh: tuple[TestClient, FastAPI, Path], name: str, data: bytes | None, kind: str, words: str
) -> None:
    client, _app, tmp = fresh
    job = _upload(client, name, _drm_epub() if data is None else data)
    assert job["state"] == "failed", job
    assert job["result"] is None
    error = job["error"]
    assert error["error"].startswith(f"{name}: "), error
    assert words in error["error"]
    assert error["detail"]["kind"] == kind and error["detail"]["file"] == name
    assert str(tmp) not in json.dumps(job)  # the temporary path never shows
    assert client.get("/books").json() == []
    assert _uploads_left(tmp / "uploads") == []
    assert client.get("/health").json()["books"] == 0


@pytest.mark.parametrize("fresh", ["process"], indirect=True)
def test_bad_uploads_in_the_child_process(fresh: tuple[TestClient, FastAPI, Path]) -> None:
    client, _app, tmp = fresh
    for name, data, kind in [
        ("drm.epub", _drm_epub(), "DrmError"),
        ("garbage.epub", b"PK\x03\x04 not a zip", "BookFormatError"),
        ("empty.txt", b"", "DecodeError"),
    ]:
        job = _upload(client, name, data)
        assert job["state"] == "failed" and job["error"]["detail"]["kind"] == kind, job
        assert job["error"]["error"].startswith(f"{name}: ")
        assert str(tmp) not in json.dumps(job)
    assert client.get("/books").json() == []
    assert _uploads_left(tmp / "uploads") == []


def test_upload_file_names_are_tamed(fresh: tuple[TestClient, FastAPI, Path]) -> None:
    client, _app, _tmp = fresh
    job = _upload(client, "../../etc/evil\u202e.txt", b"Hello there.\n\nA tiny book.\n")
    assert job["state"] == "succeeded", job
    assert job["file_name"] == "evil.txt"
    job = _upload(client, "..", b"Another tiny book.\n")
    assert job["file_name"] == "upload"


def test_upload_needs_a_file(client: TestClient) -> None:
    body = _error(client.post("/books"), 422)
    assert "file" in body["error"]
    _error(client.post("/books", files={"nofile": ("a.txt", b"x")}), 422)
    _error(client.post("/books", json={"file": "x"}), 422)


def test_upload_settings_are_checked(client: TestClient) -> None:
    r = client.post("/books", files={"file": ("a.txt", b"hi")}, params={"size": 100, "overlap": 60})
    assert "overlap" in _error(r, 422)["error"]
    _error(client.post("/books", files={"file": ("a.txt", b"hi")}, params={"size": 5}), 422)


def test_upload_size_limit(tmp_path: Path) -> None:
    app = create_app(
        tmp_path / "lib.sqlite",
        max_upload_bytes=10_000,
        upload_dir=tmp_path / "up",
        import_isolation="thread",
    )
    with TestClient(app, base_url=LOCAL) as client:
        ok = client.post("/books", files={"file": ("a.txt", b"word " * 2000)})
        assert ok.status_code == 202
        # Over the limit, within the multipart slack: counted while copying.
        body = _error(client.post("/books", files={"file": ("b.txt", b"x" * 10_001)}), 413)
        assert "b.txt" in body["error"] and "10,000" in body["error"]
        # Far over: the body itself is refused while it streams in (and by Content-Length).
        big = b"y" * (2 * 1024 * 1024)
        _error(client.post("/books", files={"file": ("c.txt", big)}), 413)

        def chunks() -> Iterator[bytes]:
            yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="d.txt"\r\n\r\n'
            for _ in range(40):
                yield b"z" * 65536

        r = client.post(
            "/books", content=chunks(), headers={"content-type": "multipart/form-data; boundary=b"}
        )
        _error(r, 413)
        app.state.jobs.wait(ok.json()["id"], 30)
    assert list((tmp_path / "up").iterdir()) == []


def test_json_bodies_are_limited(client: TestClient) -> None:
    r = client.post(
        "/library-folder/import",
        content=b"{" + b" " * (2 * 1024 * 1024) + b"}",
        headers={"content-type": "application/json"},
    )
    assert r.status_code in (403, 413)  # no library folder here; either refusal is fine
    assert set(r.json()) == {"error", "detail"}


@both_isolations
def test_job_events_stream(fresh: tuple[TestClient, FastAPI, Path]) -> None:
    client, _app, _tmp = fresh
    r = client.post("/books", files={"file": ("qiaoshi-yanyi.txt", TXT.read_bytes())})
    job_id = r.json()["id"]
    events: list[tuple[str, dict[str, Any]]] = []
    with client.stream("GET", f"/jobs/{job_id}/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                assert name is not None
                events.append((name, json.loads(line.removeprefix("data: "))))
    assert events, "no events"
    assert [n for n, _ in events[:-1]] == ["progress"] * (len(events) - 1)
    last_name, last = events[-1]
    assert last_name == "done" and last["state"] == "succeeded"
    assert last["result"]["title"] == "qiaoshi-yanyi"
    progress = [e["progress"] for _, e in events]
    assert progress == sorted(progress)  # monotone
    # A finished job still answers, once, with its final state.
    with client.stream("GET", f"/jobs/{job_id}/events") as stream:
        lines = [x for x in stream.iter_lines() if x.startswith("event: ")]
    assert lines == ["event: done"]


def test_default_isolation(tmp_path: Path) -> None:
    assert create_app(tmp_path / "a.sqlite").state.jobs.isolation == "process"
    with pytest.raises(MindoryError, match="in-memory"):
        create_app("sqlite://")


def test_a_crashed_import_fails_its_job_only(tmp_path: Path) -> None:
    """The child importing a book dies (killed, out of memory): the job fails by name,
    nothing is written, the server and the next import carry on."""
    big = tmp_path / "big.txt"
    paragraph = ("All work and no play makes Jack a dull boy. " * 12 + "\n\n").encode()
    big.write_bytes(paragraph * 40_000)  # ~21 MB: seconds of parsing
    app = create_app(tmp_path / "lib.sqlite", upload_dir=tmp_path / "up")
    with TestClient(app, base_url=LOCAL) as client:
        r = client.post("/books", files={"file": ("big.txt", big.read_bytes())})
        job_id = r.json()["id"]
        deadline = time.monotonic() + 30
        while client.get(f"/jobs/{job_id}").json()["phase"] in (None, "read"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        pids = app.state.jobs.child_pids()
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        job = app.state.jobs.wait(job_id, 60)
        assert job["state"] == "failed", job
        assert job["error"]["detail"]["kind"] == "ImportCrashed"
        assert job["error"]["error"].startswith("big.txt: the import process died")
        assert client.get("/books").json() == []
        after = _upload(client, "wasteland.epub", EPUB.read_bytes())
        assert after["state"] == "succeeded", after
        assert set(app.state.jobs.child_pids()).isdisjoint(pids)
    with Library.open(tmp_path / "lib.sqlite") as lib:
        assert [b.title for b in lib.books()] == ["The Waste Land"]
        assert lib.verify().ok


def test_delete_book(fresh: tuple[TestClient, FastAPI, Path]) -> None:
    client, _app, _tmp = fresh
    job = _upload(client, "wasteland.epub", EPUB.read_bytes())
    book = job["result"]["book"]
    assert client.get(f"/books/{book}/resources/EPUB/wasteland.css").status_code == 200
    deleted = client.delete(f"/books/{book}")
    assert deleted.status_code == 200 and deleted.json()["id"] == book
    _error(client.get(f"/books/{book}"), 404)
    _error(client.get(f"/books/{book}/resources/EPUB/wasteland.css"), 404)
    _error(client.delete(f"/books/{book}"), 404)


# --------------------------------------------------------------------------- safety


def test_token_is_required_everywhere_but_the_page(library_path: str) -> None:
    app = create_app(library_path, token=TOKEN)
    with TestClient(app, base_url="http://reader.example.org") as client:
        for path in ("/health", "/books", "/jobs", "/books/waste/file"):
            r = client.get(path)
            body = _error(r, 401)
            assert "token" in body["error"]
            assert r.headers["www-authenticate"].startswith("Bearer")
            _error(client.get(path, headers={"Authorization": "Bearer wrong"}), 401)
            _error(client.get(path, headers={"Authorization": TOKEN}), 401)
            assert client.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
            assert client.get(path, headers={"Cookie": f"mindory_token={TOKEN}"}).status_code == 200
        _error(client.post("/books", files={"file": ("a.txt", b"x")}), 401)
        for public in ("/", "/static/reader.js", "/static/reader.css", "/openapi.json", "/docs"):
            assert client.get(public).status_code == 200, public
        spec = client.get("/openapi.json").json()
        assert "HTTPBearer" in spec["components"]["securitySchemes"]


def test_loopback_names_only_without_a_token(client: TestClient) -> None:
    for host in ("127.0.0.1", "127.0.0.1:8765", "localhost:1", "[::1]:8765"):
        assert client.get("/health", headers={"host": host}).status_code == 200, host
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", ""):
        assert "loopback" in _error(client.get("/health", headers={"host": host}), 400)["error"]


def test_cross_origin_writes_are_refused(client: TestClient, ids: dict[str, str]) -> None:
    r = client.delete(f"/books/{ids['epub']}", headers={"Origin": "http://evil.example"})
    assert "cross-origin" in _error(r, 403)["error"]
    r = client.post("/books", headers={"Origin": "null"}, files={"file": ("a.txt", b"x")})
    _error(r, 403)
    # Reading from elsewhere is not refused by the guard (no CORS headers: browsers block it).
    r = client.get("/books", headers={"Origin": "http://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_security_headers(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "SAMEORIGIN"


def test_mindory_serve_is_a_command() -> None:
    result = CliRunner().invoke(cli_main, ["serve", "--help"])
    assert result.exit_code == 0, result.output
    assert "--host" in result.output and "--library-folder" in result.output


def test_serve_refuses_public_bind_without_token(tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.3.4.5") and is_loopback("::1")
    assert is_loopback("localhost") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("::")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(MindoryError, match="MINDORY_TOKEN"):
        check_bind("0.0.0.0", None)
    with pytest.raises(MindoryError, match="too short"):
        check_bind("127.0.0.1", "short")
    result = CliRunner().invoke(
        serve, ["--host", "0.0.0.0", "--db", str(tmp_path / "x.sqlite")], env={"MINDORY_TOKEN": ""}
    )
    assert result.exit_code == 1
    assert "refusing to serve on 0.0.0.0" in result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_python_m_mindory_serve(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "MINDORY_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mindory.server.serve",
            "--db",
            str(tmp_path / "lib.sqlite"),
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(
                    f"http://127.0.0.1:{port}/health",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    timeout=2,
                )
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["auth"] is True
        assert httpx.get(f"http://127.0.0.1:{port}/books").status_code == 401
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert b"serving on http://127.0.0.1" in err


def test_real_socket_upload_and_read(tmp_path: Path) -> None:
    app = create_app(tmp_path / "lib.sqlite")
    with ServerThread(app) as server, httpx.Client(base_url=server.url) as c:
        job = upload_and_wait(c, TXT)
        assert job["state"] == "succeeded"
        book = job["result"]["book"]
        r = c.get(f"/books/{book}/sections/5/blocks", params={"page": 1, "page_size": 3})
        assert r.status_code == 200 and len(r.json()["blocks"]) == 3


# --------------------------------------------------------------------------- library folder


def test_library_folder(tmp_path: Path) -> None:
    folder = tmp_path / "books"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "wasteland.epub").write_bytes(EPUB.read_bytes())
    (folder / "notes.md").write_text("not a book")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret text outside the folder\n")
    (folder / "link.txt").symlink_to(outside)
    app = create_app(tmp_path / "lib.sqlite", library_folder=folder, import_isolation="thread")
    with TestClient(app, base_url=LOCAL) as client:
        listing = client.get("/library-folder").json()
        assert listing["files"] == ["link.txt", "sub/wasteland.epub"]
        r = client.post("/library-folder/import", json={"path": "sub/wasteland.epub"})
        assert r.status_code == 202, r.text
        job = _wait(client, r.json())
        assert job["state"] == "succeeded" and job["kind"] == "folder"
        assert job["file_name"] == "sub/wasteland.epub"
        for path, status in [
            ("../outside.txt", 400),
            ("link.txt", 400),  # a symlink out of the folder
            (str(outside), 400),
            ("sub/../../outside.txt", 400),
            ("missing.epub", 404),
            ("notes.md", 400),
            ("sub", 404),
        ]:
            _error(client.post("/library-folder/import", json={"path": path}), status)
        _error(client.post("/library-folder/import", json={"path": "x.txt", "bogus": 1}), 422)
        assert [b["file_name"] for b in client.get("/books").json()] == ["wasteland.epub"]


def test_no_library_folder_means_403(client: TestClient) -> None:
    _error(client.get("/library-folder"), 403)
    _error(client.post("/library-folder/import", json={"path": "a.txt"}), 403)


# --------------------------------------------------------------------------- documents


def test_openapi_and_docs(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/health",
        "/books",
        "/books/{book}",
        "/books/{book}/file",
        "/books/{book}/resources/{href}",
        "/books/{book}/sections",
        "/books/{book}/sections/{n}",
        "/books/{book}/sections/{n}/blocks",
        "/books/{book}/chunks",
        "/jobs",
        "/jobs/{job_id}",
        "/jobs/{job_id}/events",
        "/library-folder",
        "/library-folder/import",
    ):
        assert path in paths, path
    assert set(paths["/books"]) == {"get", "post"}
    # Errors are declared with our shape (schemathesis checks responses against these).
    assert paths["/books/{book}"]["get"]["responses"]["404"]["content"]["application/json"][
        "schema"
    ] == {"$ref": "#/components/schemas/ErrorOut"}
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    reader = client.get("/")
    assert 'src="/static/reader.js"' in reader.text
