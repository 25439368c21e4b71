"""Readium over HTTP: the manifest and the positions list (media types, CORS, preflight),
the resources they link readable from another origin, and a reading position sent as a
Readium position or a progression in a manifest href — bad ones 4xx, nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from mindory.library import Library
from mindory.server.app import create_app
from tests.conftest import SAMPLES

EPUB = SAMPLES / "wasteland.epub"
NEWS = SAMPLES / "news-from-nowhere.txt"
LOCAL = "http://127.0.0.1"
ORIGIN = {"Origin": "https://reader.example"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    path: Path = tmp_path_factory.mktemp("readium-http") / "lib.db"
    with Library.open(path) as lib:
        for f in (EPUB, NEWS):
            lib.import_book(f, embed=False)
    app = create_app(path, import_isolation="thread")
    with TestClient(app, base_url=LOCAL) as c:
        yield c


@pytest.fixture(scope="module")
def ids(client: TestClient) -> dict[str, str]:
    return {b["format"]: b["id"] for b in client.get("/books").json()}


def _error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    body: dict[str, Any] = r.json()
    assert set(body) == {"error", "detail"}, body
    return body


def _put(client: TestClient, book: str, modified: str, **place: Any) -> httpx.Response:
    body = {"device": "readium", "modified": modified, **place}
    return client.put(f"/books/{book}/position", json=body)


def test_manifest_links_what_it_serves(client: TestClient, ids: dict[str, str]) -> None:
    epub = ids["epub"]
    r = client.get(f"/books/{epub}/manifest.json", headers=ORIGIN)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/webpub+json")
    assert r.headers["access-control-allow-origin"] == "*"
    m = r.json()
    links = {link.get("rel"): link for link in m["links"]}
    assert links["self"]["href"] == f"{LOCAL}/books/{epub}/manifest.json"
    positions_link = next(
        link for link in m["links"] if link["type"] == "application/vnd.readium.position-list+json"
    )
    # every href is relative to the manifest and served, readable from another origin
    base = httpx.URL(links["self"]["href"])
    for link in [*m["readingOrder"], *m.get("resources", []), positions_link]:
        got = client.get(str(base.join(link["href"])), headers=ORIGIN)
        assert got.status_code == 200, (link, got.text)
        assert got.headers["access-control-allow-origin"] == "*"
    first = client.get(str(base.join(m["readingOrder"][0]["href"])))
    assert first.headers["content-type"].split(";")[0] == m["readingOrder"][0]["type"]
    assert m["toc"] and all(t["href"].startswith("resources/") for t in m["toc"])


def test_plain_text_manifest_is_its_file(client: TestClient, ids: dict[str, str]) -> None:
    txt = ids["txt"]
    m = client.get(f"/books/{txt}/manifest.json").json()
    (only,) = m["readingOrder"]
    assert only["href"] == "file" and only["type"].startswith("text/plain; charset=")
    got = client.get(f"/books/{txt}/file", headers=ORIGIN)
    assert got.headers["content-type"] == only["type"]
    assert got.headers["access-control-allow-origin"] == "*"
    plist = client.get(f"/books/{txt}/positions").json()
    assert plist["positions"][0]["type"] == only["type"]
    assert plist["positions"][0]["locations"]["fragments"] == ["char=0"]


def test_positions_list(client: TestClient, ids: dict[str, str]) -> None:
    epub = ids["epub"]
    r = client.get(f"/books/{epub}/positions", headers=ORIGIN)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/vnd.readium.position-list+json")
    assert r.headers["access-control-allow-origin"] == "*"
    body = r.json()
    assert body["total"] == len(body["positions"]) >= 1
    assert [p["locations"]["position"] for p in body["positions"]] == list(
        range(1, body["total"] + 1)
    )
    one = body["positions"][-1]
    assert {"partialCfi", "cfi", "cfi_epubjs"} <= set(one["locations"])
    assert {"start", "utf16Start"} <= set(one["source"])


def test_preflight(client: TestClient, ids: dict[str, str]) -> None:
    epub = ids["epub"]
    ask = {**ORIGIN, "Access-Control-Request-Method": "GET"}
    for path in ("manifest.json", "positions", "resources/EPUB/wasteland-content.xhtml", "file"):
        r = client.options(f"/books/{epub}/{path}", headers=ask)
        assert r.status_code == 204, (path, r.text)
        assert r.headers["access-control-allow-origin"] == "*"
        assert "GET" in r.headers["access-control-allow-methods"]
    # writes stay same-origin: a cross-origin PUT is refused
    put = client.put(
        f"/books/{epub}/position",
        json={"device": "x", "modified": "2026-12-01T00:00:00Z", "position": 1},
        headers=ORIGIN,
    )
    assert put.status_code == 403


def test_put_a_readium_position(client: TestClient, ids: dict[str, str]) -> None:
    for fmt in ("epub", "txt"):
        book = ids[fmt]
        plist = client.get(f"/books/{book}/positions").json()["positions"]
        for n, minute in ((len(plist), 10), (1, 11), ((len(plist) + 1) // 2, 12)):
            listed = plist[n - 1]
            # flat, and as a Readium Locator with only locations.position
            flat = _put(client, book, f"2026-12-01T10:{minute}:00Z", position=n)
            assert flat.status_code == 200, flat.text
            loc = flat.json()["locator"]
            assert loc["locations"]["position"] == n
            assert (loc["section"], loc["source"]["start"]) == (
                listed["section"],
                listed["source"]["start"],
            )
            readium = {"href": listed["href"], "type": listed["type"], "locations": {"position": n}}
            again = _put(client, book, f"2026-12-01T10:{minute}:30Z", locator=readium)
            assert again.status_code == 200, again.text
            assert again.json()["locator"]["source"] == loc["source"]


def test_put_a_readium_progression(client: TestClient, ids: dict[str, str]) -> None:
    epub = ids["epub"]
    plist = client.get(f"/books/{epub}/positions").json()["positions"]
    listed = plist[len(plist) // 2]
    readium = {
        "href": listed["href"],
        "type": listed["type"],
        "locations": {"progression": listed["locations"]["progression"]},
    }
    r = _put(client, epub, "2026-12-01T11:00:00Z", locator=readium)
    assert r.status_code == 200, r.text
    loc = r.json()["locator"]
    assert loc["source"]["start"] == listed["source"]["start"]
    assert loc["locations"]["position"] == listed["locations"]["position"]
    # an absolute URL of the resource names it too
    url = f"{LOCAL}/books/{epub}/{listed['href']}"
    r = _put(client, epub, "2026-12-01T11:01:00Z", href=url, progression=0.0)
    assert r.status_code == 200, r.text
    assert r.json()["locator"]["source"]["start"] == 0


@pytest.mark.parametrize(
    ("place", "status"),
    [
        ({"position": 0}, 422),
        ({"position": -3}, 422),
        ({"position": "7"}, 422),
        ({"position": 2.5}, 422),
        ({"position": 10**6}, 400),  # past the total
        ({"position": 1, "section": 0}, 422),
        ({"locator": {"href": "x", "type": "t", "locations": {"position": 0}}}, 422),
        ({"locator": {"href": "x", "type": "t", "locations": {"position": "one"}}}, 422),
        ({"locator": {"href": "x", "type": "t", "locations": {"position": 10**6}}}, 400),
        ({"href": "resources/EPUB/nothing.xhtml", "progression": 0.5}, 400),
    ],
)
def test_bad_positions_write_nothing(
    client: TestClient, ids: dict[str, str], place: dict[str, Any], status: int
) -> None:
    epub = ids["epub"]
    before = client.get(f"/books/{epub}/position/history").json()
    _error(_put(client, epub, "2027-01-01T00:00:00Z", **place), status)
    assert client.get(f"/books/{epub}/position/history").json() == before
