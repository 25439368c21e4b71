"""Reading positions and bookmarks over HTTP: every form of Locator resolves into the
full Locator, the newest ``modified`` wins (an older write is 409 with the current
position and writes nothing), bad places are 4xx, bookmarks have deterministic ids, and
the shapes are the CLI's ``--json``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from mindory.cli import main as cli_main
from mindory.library import Library
from mindory.server.app import create_app
from tests.conftest import SAMPLES

EPUB = SAMPLES / "wasteland.epub"
NEWS = SAMPLES / "news-from-nowhere.txt"
LOCAL = "http://127.0.0.1"


@pytest.fixture
def library_path(db_url: str) -> str:
    """A test's library, once on SQLite and once on PostgreSQL."""
    with Library.open(db_url) as lib:
        for f in (EPUB, NEWS):
            lib.import_book(f, embed=False)
    return db_url


@pytest.fixture
def client(library_path: str) -> Iterator[TestClient]:
    app = create_app(library_path, import_isolation="thread")
    with TestClient(app, base_url=LOCAL) as c:
        yield c


@pytest.fixture
def ids(client: TestClient) -> dict[str, str]:
    return {b["format"]: b["id"] for b in client.get("/books").json()}


def _error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    body: dict[str, Any] = r.json()
    assert set(body) == {"error", "detail"}, body
    assert isinstance(body["error"], str) and body["error"]
    return body


def _u16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _put(client: TestClient, book: str, modified: str, device: str = "phone", **place: Any):  # type: ignore[no-untyped-def]
    return client.put(
        f"/books/{book}/position", json={"device": device, "modified": modified, **place}
    )


def test_every_form_resolves_to_the_full_locator(client: TestClient, ids: dict[str, str]) -> None:
    epub = ids["epub"]
    sec = client.get(f"/books/{epub}/sections/0").json()
    text = sec["source_text"]
    r = _put(client, epub, "2026-12-01T10:00:00Z", section=0, offset=500)
    assert r.status_code == 200, r.text
    got = r.json()
    loc = got["locator"]
    assert got["status"] == "anchored" and got["device"] == "phone"
    assert got["modified"] == "2026-12-01T10:00:00.000Z"
    assert loc["section"] == 0 and loc["source"]["start"] == loc["source"]["end"] == 500
    assert loc["source"]["utf16Start"] == _u16(text[:500])
    assert loc["locations"]["cfi"].startswith("epubcfi(") and "," not in loc["locations"]["cfi"]
    assert loc["locations"]["cfi_epubjs"].startswith("epubcfi(")
    assert 0 < loc["locations"]["progression"] < 1
    assert 0 < loc["locations"]["totalProgression"] < 1 and loc["locations"]["position"] >= 1
    assert got["quote"]["exact"] == text[500:532]
    assert got["quote"]["prefix"] == text[468:500]
    assert client.get(f"/books/{epub}/position").json() == got
    # the same place by its CFI, by its UTF-16 offset, by a whole Locator, by progression
    cfi = loc["locations"]["cfi"]
    by_cfi = _put(client, epub, "2026-12-01T10:01:00Z", cfi=cfi).json()
    assert by_cfi["locator"]["source"] == loc["source"]
    by_u16 = _put(
        client, epub, "2026-12-01T10:02:00Z", section=0, offset=_u16(text[:500]), unit="utf16"
    ).json()
    assert by_u16["locator"]["source"] == loc["source"]
    by_loc = _put(client, epub, "2026-12-01T10:03:00Z", locator=loc).json()
    assert by_loc["locator"]["source"] == loc["source"]
    readium = {"href": loc["href"], "locations": {"cfi": cfi}}
    by_readium = _put(client, epub, "2026-12-01T10:04:00Z", locator=readium).json()
    assert by_readium["locator"]["source"] == loc["source"]
    half = _put(client, epub, "2026-12-01T10:05:00Z", href=loc["href"], progression=0.5).json()
    assert half["locator"]["source"]["start"] == round(0.5 * len(text))
    total = _put(client, epub, "2026-12-01T10:06:00Z", totalProgression=1.0).json()
    assert total["locator"]["source"]["start"] == len(text)  # the very end: quote before it
    assert total["quote"]["exact"] == text[-32:]


def test_plain_text_counts_from_the_file_start(client: TestClient, ids: dict[str, str]) -> None:
    txt = ids["txt"]
    sec = client.get(f"/books/{txt}/sections/5").json()
    at = sec["source_start"] + 100
    got = _put(client, txt, "2026-12-01T10:00:00+01:00", section=5, offset=at).json()
    assert got["modified"] == "2026-12-01T09:00:00.000Z"  # kept in UTC
    loc = got["locator"]
    assert loc["source"]["start"] == at and loc["locations"]["fragments"] == [f"char={at},{at}"]
    assert got["quote"]["exact"] == sec["source_text"][100:132]
    # a section's own offset is not a book offset: outside the section, 400, nothing written
    body = _error(_put(client, txt, "2026-12-01T11:00:00Z", section=5, offset=100), 400)
    assert "outside section 5" in body["error"]
    assert client.get(f"/books/{txt}/position").json() == got


def test_the_newest_modified_wins(client: TestClient, ids: dict[str, str]) -> None:
    epub = ids["epub"]
    _error(client.get(f"/books/{epub}/position"), 404)  # none yet
    first = _put(client, epub, "2026-12-01T10:00:00Z", device="phone", section=0, offset=100)
    newer = _put(client, epub, "2026-12-01T12:00:00Z", device="tablet", section=0, offset=900)
    assert first.status_code == newer.status_code == 200
    # the phone comes back online with a position it read before the tablet's: 409
    stale = _put(client, epub, "2026-12-01T11:00:00Z", device="phone", section=0, offset=300)
    body = _error(stale, 409)
    assert body["detail"]["kind"] == "ConflictError"
    assert body["detail"]["current"] == newer.json()
    # the same time as the current one, another place: also a conflict
    _error(_put(client, epub, "2026-12-01T12:00:00Z", device="phone", section=0, offset=5), 409)
    # the very same write again (a retry) is no conflict and no new row
    again = _put(client, epub, "2026-12-01T12:00:00Z", device="tablet", section=0, offset=900)
    assert again.status_code == 200 and again.json() == newer.json()
    assert client.get(f"/books/{epub}/position").json() == newer.json()
    history = client.get(f"/books/{epub}/position/history").json()
    assert [(h["device"], h["locator"]["source"]["start"]) for h in history] == [
        ("tablet", 900),
        ("phone", 100),
    ]
    phone = client.get(f"/books/{epub}/position/history", params={"device": "phone"}).json()
    assert [h["id"] for h in phone] == [first.json()["id"]]
    newest = _put(client, epub, "2026-12-02T08:00:00Z", device="phone", section=0, offset=300)
    assert client.get(f"/books/{epub}/position").json() == newest.json()


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"section": 0, "offset": 10**9}, 400),  # outside the section
        ({"section": 99, "offset": 0}, 400),  # no such section
        ({"cfi": "epubcfi(/6/40!/4/2/1:0)"}, 400),  # a CFI into no section
        ({"cfi": "not a cfi"}, 400),
        ({"href": "EPUB/nothing.xhtml", "progression": 0.5}, 400),
        ({"section": 0, "offset": 5, "cfi": "epubcfi(/6/2!/4/2/1:0)"}, 422),  # two ways
        ({"offset": 5}, 422),  # an offset without its section
        ({"progression": 0.5}, 422),  # a progression in no section
        ({"progression": 1.5, "section": 0}, 422),
        ({"section": 0, "offset": -1}, 422),
        ({"section": 0, "offset": "ten"}, 422),
        ({"locator": {"locations": {}}}, 422),
        ({"locator": {"section": 0, "source": {"start": "x"}}}, 422),
        ({}, 422),
    ],
)
def test_bad_places_are_4xx_and_write_nothing(
    client: TestClient, ids: dict[str, str], body: dict[str, Any], status: int
) -> None:
    epub = ids["epub"]
    _error(_put(client, epub, "2026-12-01T10:00:00Z", **body), status)
    _error(client.get(f"/books/{epub}/position"), 404)
    r = client.post(f"/books/{epub}/bookmarks", json=body)
    _error(r, status)
    assert client.get(f"/books/{epub}/bookmarks").json() == []


def test_bad_requests(client: TestClient, ids: dict[str, str]) -> None:
    epub = ids["epub"]
    place = {"section": 0, "offset": 10}
    _error(client.put(f"/books/{epub}/position", json={"modified": "2026-12-01", **place}), 422)
    _error(client.put(f"/books/{epub}/position", json={"device": "a", **place}), 422)
    _error(_put(client, epub, "yesterday", **place), 422)
    _error(_put(client, "no-such-book", "2026-12-01T10:00:00Z", **place), 404)
    r = client.put(
        f"/books/{epub}/position", content=b"{", headers={"content-type": "application/json"}
    )
    _error(r, 422)
    _error(client.get(f"/books/{epub}/position"), 404)


def test_bookmarks(client: TestClient, ids: dict[str, str], library_path: str) -> None:
    txt = ids["txt"]
    sec = client.get(f"/books/{txt}/sections/3").json()
    at = sec["source_start"] + 40
    r = client.post(f"/books/{txt}/bookmarks", json={"section": 3, "offset": at, "title": "here"})
    assert r.status_code == 201, r.text
    made = r.json()
    assert r.headers["location"] == f"/books/{txt}/bookmarks/{made['id']}"
    assert made["title"] == "here" and made["locator"]["source"]["start"] == at
    assert len(made["id"]) == 32
    # the same place again is the same bookmark (deterministic id, not a second row)
    again = client.post(f"/books/{txt}/bookmarks", json={"section": 3, "offset": at})
    assert again.status_code == 200 and again.json()["id"] == made["id"]
    other = client.post(f"/books/{txt}/bookmarks", json={"section": 1, "progression": 0.5})
    assert other.status_code == 201
    listed = client.get(f"/books/{txt}/bookmarks").json()
    assert [b["id"] for b in listed] == [other.json()["id"], made["id"]]  # reading order
    assert client.get(f"/books/{txt}/bookmarks/{made['id']}").json() == made
    # the CLI prints the same shapes
    out = CliRunner().invoke(cli_main, ["--db", str(library_path), "bookmarks", txt, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == listed
    gone = client.delete(f"/books/{txt}/bookmarks/{made['id']}")
    assert gone.status_code == 200 and gone.json() == made
    _error(client.get(f"/books/{txt}/bookmarks/{made['id']}"), 404)
    _error(client.delete(f"/books/{txt}/bookmarks/{made['id']}"), 404)
    _error(client.get(f"/books/{txt}/bookmarks/nonsense"), 404)


def test_position_is_the_cli_json(
    client: TestClient, ids: dict[str, str], library_path: str
) -> None:
    epub = ids["epub"]
    put = _put(client, epub, "2026-12-01T10:00:00Z", section=0, offset=42).json()
    out = CliRunner().invoke(cli_main, ["--db", str(library_path), "position", epub, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == put
