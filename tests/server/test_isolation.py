"""Readers cannot see each other: every highlight, position, bookmark and annotation route, walked
with two readers' tokens. Another reader's id is answered exactly as an id that does not
exist (404, the same body), their lists are empty, nothing of theirs changes; a foreign
or missing token is 401 and writes nothing; the server's own token is the local reader."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from mindory.library import Library
from mindory.server.app import create_app
from tests.conftest import SAMPLES

NEWS = SAMPLES / "news-from-nowhere.txt"
SERVER_TOKEN = "server-token-0123456789abcdef"
MISSING_HIGHLIGHT = "urn:uuid:00000000-0000-4000-8000-000000000000"
MISSING_BOOKMARK = "0" * 32


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("isolation") / "library.sqlite"
    with Library.open(path) as lib:
        book = lib.import_book(NEWS, embed=False).book
        alice = lib.add_reader("alice").token
        bob = lib.add_reader("bob").token
        start = lib.section(book, 4).info.source_start
    return {"path": path, "book": book, "alice": alice, "bob": bob, "at": start + 200}


@pytest.fixture(scope="module")
def client(setup: dict[str, Any]) -> Iterator[TestClient]:
    app = create_app(setup["path"], token=SERVER_TOKEN, import_isolation="thread")
    with TestClient(app, base_url="http://127.0.0.1") as c:
        yield c


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _same_404(r: httpx.Response, missing: httpx.Response, own: str, other: str) -> None:
    """``r`` (another reader's id) is answered exactly as ``missing`` (no such id)."""
    assert r.status_code == missing.status_code == 404, r.text
    assert r.headers.get("content-type") == missing.headers.get("content-type")
    assert r.json() == _swap(missing.json(), other, own)


def _swap(body: Any, a: str, b: str) -> Any:
    return {k: (v.replace(a, b) if isinstance(v, str) else v) for k, v in body.items()}


def _alice_data(client: TestClient, setup: dict[str, Any]) -> dict[str, Any]:
    book, at, me = setup["book"], setup["at"], _as(setup["alice"])
    h = client.post(
        f"/books/{book}/highlights",
        json={"section": 4, "start": at, "end": at + 20, "note": "mine"},
        headers=me,
    )
    p = client.put(
        f"/books/{book}/position",
        json={"section": 4, "offset": at, "device": "phone", "modified": "2026-12-01T10:00:00Z"},
        headers=me,
    )
    b = client.post(
        f"/books/{book}/bookmarks", json={"section": 4, "offset": at, "title": "t"}, headers=me
    )
    assert (h.status_code, p.status_code, b.status_code) == (201, 200, 201)
    return {"highlight": h.json(), "position": p.json(), "bookmark": b.json()}


def _snapshot(client: TestClient, book: str, token: str) -> dict[str, Any]:
    me = _as(token)
    return {
        "highlights": client.get(f"/books/{book}/highlights", headers=me).json(),
        "position": client.get(f"/books/{book}/position", headers=me).json(),
        "history": client.get(f"/books/{book}/position/history", headers=me).json(),
        "bookmarks": client.get(f"/books/{book}/bookmarks", headers=me).json(),
    }


def test_every_route_keeps_readers_apart(client: TestClient, setup: dict[str, Any]) -> None:
    book, at = setup["book"], setup["at"]
    mine = _alice_data(client, setup)
    before = _snapshot(client, book, setup["alice"])
    bob = _as(setup["bob"])
    hid, bid = mine["highlight"]["id"], mine["bookmark"]["id"]
    walked: set[tuple[str, str]] = set()

    def call(method: str, route: str, path: str, **kw: Any) -> httpx.Response:
        walked.add((method, route))
        return client.request(method, path, headers=bob, **kw)

    hl = "/books/{book}/highlights/{highlight}"
    bm = "/books/{book}/bookmarks/{bookmark}"
    # lists: nothing of Alice's, not even a count
    assert call("GET", "/books/{book}/highlights", f"/books/{book}/highlights").json() == []
    assert call("GET", "/books/{book}/bookmarks", f"/books/{book}/bookmarks").json() == []
    hist = call("GET", "/books/{book}/position/history", f"/books/{book}/position/history")
    assert hist.json() == []
    no_pos = call("GET", "/books/{book}/position", f"/books/{book}/position")
    assert no_pos.status_code == 404
    exported = call("GET", "/annotations", "/annotations", params={"book": book})
    assert exported.status_code == 200 and hid not in exported.text and "mine" not in exported.text
    refused = call("POST", "/annotations", "/annotations", json={"type": "nothing"})
    assert 400 <= refused.status_code < 500
    # one of Alice's by id: exactly as an id that does not exist
    for method, kw in (("GET", {}), ("PATCH", {"json": {"note": "bob was here"}}), ("DELETE", {})):
        missing = client.request(
            method, f"/books/{book}/highlights/{MISSING_HIGHLIGHT}", headers=bob, **kw
        )
        r = call(method, hl, f"/books/{book}/highlights/{hid}", **kw)
        _same_404(r, missing, hid, MISSING_HIGHLIGHT)
    for method in ("GET", "DELETE"):
        missing = client.request(method, f"/books/{book}/bookmarks/{MISSING_BOOKMARK}", headers=bob)
        r = call(method, bm, f"/books/{book}/bookmarks/{bid}")
        _same_404(r, missing, bid, MISSING_BOOKMARK)
    # Bob's own writes never touch Alice's: an older position is no conflict with hers,
    # the same place bookmarked is another bookmark, a highlight of the same span another
    pos = call(
        "PUT",
        "/books/{book}/position",
        f"/books/{book}/position",
        json={"section": 4, "offset": at + 5, "device": "bob", "modified": "2026-11-01T00:00:00Z"},
    )
    assert pos.status_code == 200, pos.text
    bmk = call(
        "POST",
        "/books/{book}/bookmarks",
        f"/books/{book}/bookmarks",
        json={"section": 4, "offset": at},
    )
    assert bmk.status_code == 201 and bmk.json()["id"] != bid
    hlt = call(
        "POST",
        "/books/{book}/highlights",
        f"/books/{book}/highlights",
        json={"section": 4, "start": at, "end": at + 20},
    )
    assert hlt.status_code == 201 and hlt.json()["id"] != hid
    # and Alice sees only hers, unchanged
    assert _snapshot(client, book, setup["alice"]) == before
    assert (
        client.get(f"/books/{book}/highlights/{hid}", headers=_as(setup["alice"])).json()["note"]
        == "mine"
    )
    # the Readium positions list is the book's structure, the same for every reader
    plist = call("GET", "/books/{book}/positions", f"/books/{book}/positions")
    assert plist.status_code == 200 and plist.json()["total"] >= 1
    assert (
        plist.json() == client.get(f"/books/{book}/positions", headers=_as(setup["alice"])).json()
    )
    pre = call("OPTIONS", "/books/{book}/positions", f"/books/{book}/positions")
    assert pre.status_code == 204
    # Bob now sees his own and only his own
    theirs = _snapshot(client, book, setup["bob"])
    assert [h["id"] for h in theirs["highlights"]] == [hlt.json()["id"]]
    assert [b["id"] for b in theirs["bookmarks"]] == [bmk.json()["id"]]
    assert theirs["position"]["device"] == "bob"
    # the server token is the local reader: none of theirs
    local = _snapshot(client, book, SERVER_TOKEN)
    assert local["highlights"] == [] and local["bookmarks"] == [] and local["history"] == []
    # every route of the three kinds was walked (a new route must join this test)
    routes = {
        (m, r.path)
        for r in client.app.state.method_routes  # type: ignore[attr-defined]
        if re.search(r"highlights|position|bookmarks|annotations", getattr(r, "path", ""))
        for m in getattr(r, "methods", ()) or ()
        if m != "HEAD"
    }
    assert routes == walked, routes ^ walked


@pytest.mark.parametrize("token", ["no-such-token-at-all-0123456789", None])
def test_a_foreign_or_missing_token_is_401_and_writes_nothing(
    client: TestClient, setup: dict[str, Any], token: str | None
) -> None:
    book, at = setup["book"], setup["at"]
    before = _snapshot(client, book, setup["alice"]), _snapshot(client, book, SERVER_TOKEN)
    headers = _as(token) if token else {}
    writes = [
        ("POST", f"/books/{book}/highlights", {"section": 4, "start": at, "end": at + 3}),
        (
            "PUT",
            f"/books/{book}/position",
            {"section": 4, "offset": at, "device": "x", "modified": "2030-01-01T00:00:00Z"},
        ),
        ("POST", f"/books/{book}/bookmarks", {"section": 4, "offset": at + 1}),
        ("GET", f"/books/{book}/highlights", None),
        ("GET", f"/books/{book}/position", None),
        ("GET", "/books", None),
    ]
    for method, path, body in writes:
        r = client.request(method, path, json=body, headers=headers)
        assert r.status_code == 401, (method, path, r.text)
        error = r.json()
        assert set(error) == {"error", "detail"} and "token" in error["error"]
        assert r.headers["www-authenticate"].startswith("Bearer")
    after = _snapshot(client, book, setup["alice"]), _snapshot(client, book, SERVER_TOKEN)
    assert after == before


def test_a_reader_token_works_as_the_cookie_too(client: TestClient, setup: dict[str, Any]) -> None:
    book = setup["book"]
    r = client.get(
        f"/books/{book}/bookmarks", headers={"Cookie": f"mindory_token={setup['alice']}"}
    )
    assert r.status_code == 200
    assert r.json() == client.get(f"/books/{book}/bookmarks", headers=_as(setup["alice"])).json()


def test_loopback_without_a_server_token_needs_a_token_once_readers_exist(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    # no readers: one implicit local reader, no token (as before readers existed)
    path = tmp_path / "solo.sqlite"
    with Library.open(path) as lib:
        book = lib.import_book(NEWS, embed=False).book
    app = create_app(path, import_isolation="thread")
    with TestClient(app, base_url="http://127.0.0.1") as c:
        assert c.get(f"/books/{book}/bookmarks").status_code == 200
        with Library.open(path) as lib:
            token = lib.add_reader("carol").token
        r = c.get(f"/books/{book}/bookmarks")
        assert r.status_code == 401 and "readers" in r.json()["error"]
        assert c.get(f"/books/{book}/bookmarks", headers=_as(token)).json() == []
        assert c.get(f"/books/{book}/bookmarks", headers=_as("wrong-token")).status_code == 401
