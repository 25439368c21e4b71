"""HTTP import jobs embed the new chunks with the library's current embedding (issue 13):
after a delete and a re-upload, the book is in hybrid search when its job succeeds, and
the job's progress events show the ``embed`` phase."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mindory.library import Library
from mindory.server.app import create_app
from tests.conftest import SAMPLES

TXT = SAMPLES / "qiaoshi-yanyi.txt"
EPUB = SAMPLES / "wasteland.epub"
LOCAL = "http://127.0.0.1"


@pytest.fixture(params=["thread", "process"])
def embedded_client(
    request: pytest.FixtureRequest, db_url: str, tmp_path: Path
) -> Iterator[TestClient]:
    """A library of two books on each backend, embedded (hashed embedder, tests/conftest.py)."""
    path = db_url
    with Library.open(path) as lib:
        lib.import_book(TXT)
        lib.import_book(EPUB)
        lib.embed()
    app = create_app(path, upload_dir=tmp_path / "uploads", import_isolation=request.param)
    with TestClient(app, base_url=LOCAL) as c:
        yield c


def _events(client: TestClient, job_id: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with client.stream("GET", f"/jobs/{job_id}/events") as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                out.append(json.loads(line.removeprefix("data: ")))
    return out


def test_a_reuploaded_book_is_embedded_by_its_job(embedded_client: TestClient) -> None:
    client = embedded_client
    book = next(b for b in client.get("/books").json() if b["format"] == "txt")
    assert client.delete(f"/books/{book['id']}").status_code == 200
    r = client.post("/books", files={"file": (TXT.name, TXT.read_bytes())})
    assert r.status_code == 202, r.text
    events = _events(client, r.json()["id"])
    job = events[-1]
    assert job["state"] == "succeeded", job
    result = job["result"]
    assert result["status"] == "created"
    assert result["embedded"] == result["chunks"] > 0
    assert result["embedding"] is not None
    phases = [e["phase"] for e in events]
    assert "embed" in phases, phases
    progress = [e["progress"] for e in events]
    assert progress == sorted(progress)
    # hybrid search covers the book, and says nothing is missing
    found = client.get(
        "/search", params={"q": "魏忠賢", "book": result["book"], "mode": "hybrid"}
    ).json()
    assert found["warnings"] == [], found["warnings"]
    assert any(h["scores"].get("vector") for h in found["hits"])
    vector = client.get(
        "/search", params={"q": "魏忠賢", "book": result["book"], "mode": "vector"}
    ).json()
    assert vector["hits"] and vector["warnings"] == []


def test_a_library_never_embedded_stays_lexical_and_says_so(db_url: str, tmp_path: Path) -> None:
    app = create_app(db_url, upload_dir=tmp_path / "up", import_isolation="thread")
    with TestClient(app, base_url=LOCAL) as client:
        r = client.post("/books", files={"file": (TXT.name, TXT.read_bytes())})
        job = _events(client, r.json()["id"])[-1]
        assert job["state"] == "succeeded", job
        assert job["result"]["embedded"] == 0 and job["result"]["embedding"] is None
        found = client.get("/search", params={"q": "魏忠賢"}).json()
        assert any("no vectors yet" in w for w in found["warnings"]), found["warnings"]


def test_embed_false_leaves_the_book_lexical_and_search_warns(
    embedded_client: TestClient,
) -> None:
    client = embedded_client
    book = next(b for b in client.get("/books").json() if b["format"] == "txt")
    assert client.delete(f"/books/{book['id']}").status_code == 200
    r = client.post(
        "/books", files={"file": (TXT.name, TXT.read_bytes())}, params={"embed": "false"}
    )
    assert r.status_code == 202, r.text
    assert r.json()["embed"] is False
    events = _events(client, r.json()["id"])
    job = events[-1]
    assert job["state"] == "succeeded", job
    assert job["result"]["embedded"] == 0 and job["result"]["embedding"] is None
    assert "embed" not in [e["phase"] for e in events]
    found = client.get("/search", params={"q": "魏忠賢", "book": book["id"]}).json()
    assert found["hits"]
    assert any("have no vectors" in w for w in found["warnings"]), found["warnings"]
