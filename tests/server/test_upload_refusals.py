"""What cannot be a book is refused at the door (415, nothing queued or written), and the
HTTP API's messages say what they mean: malformed JSON names its character, a point
CFI is not a highlight (issue 24, "The doors")."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mindory.server.app import create_app
from tests.conftest import SAMPLES

EPUB = SAMPLES / "wasteland.epub"
LOCAL = "http://127.0.0.1"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, Path]]:
    """A library with the EPUB sample; uploads go to a folder we can look into."""
    tmp = tmp_path_factory.mktemp("refusals")
    app = create_app(str(tmp / "lib.sqlite"), upload_dir=tmp / "uploads", import_isolation="thread")
    with TestClient(app, base_url=LOCAL) as client:
        r = client.post("/books", files={"file": ("wasteland.epub", EPUB.read_bytes())})
        assert r.status_code == 202, r.text
        job = r.json()
        while job["state"] not in ("succeeded", "failed"):
            job = client.get(f"/jobs/{job['id']}").json()
        assert job["state"] == "succeeded", job
        yield client, tmp / "uploads"


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return buf.getvalue()


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 40
REFUSED = [
    ("paper.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n", "PDF"),
    ("renamed.txt", b"%PDF-1.4\n1 0 obj\n", "PDF"),  # the bytes decide, not the name
    ("cover.png", PNG, "PNG image"),
    ("photo.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 40, "JPEG image"),
    ("tool.exe", b"MZ\x90\x00\x03\x00\x00\x00" + b"\x00" * 60, "executable"),
    ("prog", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 60, "executable"),
    (
        "letter.docx",
        _zip({"[Content_Types].xml": b"<Types/>", "word/document.xml": b"<w/>"}),
        "ZIP",
    ),
    ("archive.zip", _zip({"a.txt": b"hello"}), "ZIP"),
    ("fake.epub", b"Just some text that is not a ZIP archive.\n", ".epub"),
    ("book.mobi", b"some bytes" * 10, ".mobi"),
    ("book.azw3", b"\x00" * 60 + b"BOOKMOBI" + b"\x00" * 20, "Kindle"),
]


@pytest.mark.parametrize(("name", "data", "words"), REFUSED, ids=[n for n, _, _ in REFUSED])
def test_what_cannot_be_a_book_is_refused_up_front(
    served: tuple[TestClient, Path], name: str, data: bytes, words: str
) -> None:
    client, uploads = served
    jobs_before = client.get("/jobs").json()
    r = client.post("/books", files={"file": (name, data)})
    assert r.status_code == 415, (r.status_code, r.text)
    body: dict[str, Any] = r.json()
    assert set(body) == {"error", "detail"}
    assert words in body["error"], body
    assert "EPUB" in body["error"] and "plain text" in body["error"]
    detail = body["detail"]
    assert detail["kind"] == "UnsupportedMediaType" and detail["file"] == name
    assert detail["accepted"] == ["application/epub+zip", "text/plain"]
    assert client.get("/jobs").json() == jobs_before  # nothing queued
    assert not uploads.exists() or list(uploads.iterdir()) == []  # nothing left
    assert len(client.get("/books").json()) == 1


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("notes.txt", b"A tiny book.\n\nWith two paragraphs.\n"),
        ("noext", b"Another tiny book.\n"),
        ("utf16.txt", "\ufeffA book in UTF-16.\n".encode("utf-16-le")),
        (
            "other.epub",
            _zip({"mimetype": b"application/epub+zip", "META-INF/container.xml": b"<x/>"}),
        ),
        ("MZungu.txt", b"MZungu is a word that starts this text.\n"),  # MZ but text
    ],
)
def test_what_may_be_a_book_is_still_queued(
    served: tuple[TestClient, Path], name: str, data: bytes
) -> None:
    client, _uploads = served
    r = client.post("/books", files={"file": (name, data)})
    assert r.status_code == 202, r.text


def test_malformed_json_names_its_character(served: tuple[TestClient, Path]) -> None:
    client, _uploads = served
    book = client.get("/books").json()[0]["id"]
    body = '{"section": 0, "start": 1,, "end": 5}'
    r = client.post(
        f"/books/{book}/highlights",
        content=body.encode(),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    message = r.json()["error"]
    assert message.startswith("the body is not valid JSON: "), message
    assert f"at character {body.index(',,') + 1}" in message, message
    assert "body.26" not in message


def test_a_point_cfi_is_not_a_highlight(served: tuple[TestClient, Path]) -> None:
    client, _uploads = served
    book = client.get("/books").json()[0]["id"]
    chunk = client.get(f"/books/{book}/chunks", params={"limit": 1}).json()["chunks"][0]
    inner = chunk["cfi"].removeprefix("epubcfi(").removesuffix(")")
    parent, start, _end = inner.split(",")
    point = f"epubcfi({parent}{start})"
    r = client.post(f"/books/{book}/highlights", json={"cfi": point})
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    assert "is empty" not in message, message
    assert "a highlight needs a range" in message, message
