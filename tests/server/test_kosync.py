"""KOReader's progress sync at /kosync, driven from the plugin's own contract
(../shared/conformance/kosync/api.json: paths, methods, required fields, statuses) and
the reference server's answers: registration on and off, the MD5 key, a push that
becomes an ordinary reading position, a pull that gives the same character back, the web
reader's position pulled as an xpointer, and bad input answered with the protocol's
errors while nothing is written. Both backends."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from mindory.importers.document_keys import filename_md5, partial_md5
from mindory.library import Library
from mindory.server.app import create_app
from tests.conftest import SAMPLES, conformance_file

EPUB = SAMPLES / "wasteland.epub"
LOCAL = "http://127.0.0.1"
JSON = "application/json"
PASSWORD = "correct horse"
KEY = hashlib.md5(PASSWORD.encode()).hexdigest()


def _contract() -> dict[str, Any]:
    """api.json is Lua-flavoured JSON: drop its trailing commas."""
    text = conformance_file("kosync/api.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(re.sub(r",(\s*[}\]])", r"\1", text))
    return data["methods"]


def _path(method: dict[str, Any], **params: str) -> str:
    path = str(method["path"])
    for name, value in params.items():
        path = path.replace(f":{name}", value)
    return "/kosync" + path


@pytest.fixture
def library_path(db_url: str) -> str:
    with Library.open(db_url) as lib:
        lib.import_book(EPUB, embed=False)
    return db_url


def _client(url: str, **kw: Any) -> TestClient:
    return TestClient(create_app(url, import_isolation="thread", **kw), base_url=LOCAL)


@pytest.fixture
def client(library_path: str) -> Iterator[TestClient]:
    with _client(library_path, kosync_registration=True) as c:
        yield c


def _auth(user: str = "alice", key: str = KEY) -> dict[str, str]:
    return {
        "x-auth-user": user,
        "x-auth-key": key,
        "accept": "application/vnd.koreader.v1+json",
    }


def _check(r: httpx.Response, statuses: list[int], status: int) -> Any:
    assert r.status_code == status, (r.status_code, r.text)
    assert r.status_code in statuses  # the plugin's expected statuses
    assert r.headers["content-type"] == JSON  # exactly: older KOReader rejects a charset
    return r.json()


def _register(client: TestClient, api: dict[str, Any], user: str = "alice") -> None:
    m = api["register"]
    r = client.request(m["method"], _path(m), json={"username": user, "password": KEY})
    assert _check(r, m["expected_status"], 201) == {"username": user}


def test_register_authorize_and_the_protocol_errors(client: TestClient) -> None:
    api = _contract()
    _register(client, api)
    m = api["register"]
    again = client.post(_path(m), json={"username": "alice", "password": KEY})
    assert _check(again, m["expected_status"], 402) == {
        "code": 2002,
        "message": "Username is already registered.",
    }
    a = api["authorize"]
    ok = client.request(a["method"], _path(a), headers=_auth())
    assert _check(ok, a["expected_status"], 200) == {"authorized": "OK"}
    for headers in (_auth(key="0" * 32), _auth(key=""), _auth(user="bob"), {}):
        bad = client.get(_path(a), headers=headers)
        assert _check(bad, a["expected_status"], 401) == {"code": 2001, "message": "Unauthorized"}
    # the same password works as HTTP Basic on the API (tokens keep working too)
    basic = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert client.get("/books", headers={"authorization": f"Basic {basic}"}).status_code == 200
    wrong = base64.b64encode(b"alice:nope").decode()
    assert client.get("/books", headers={"authorization": f"Basic {wrong}"}).status_code == 401


def test_registration_is_refused_unless_the_server_allows_it(library_path: str) -> None:
    api = _contract()
    m = api["register"]
    with _client(library_path) as c:
        r = c.post(_path(m), json={"username": "alice", "password": KEY})
        assert _check(r, m["expected_status"], 402) == {
            "code": 2005,
            "message": "User registration is disabled.",
        }
        assert c.get("/books").status_code == 200  # no reader was made


def _keys(path: Path) -> tuple[str, str]:
    data = path.read_bytes()
    return partial_md5(data), filename_md5(path.name)


def test_push_becomes_a_position_and_pull_gives_the_same_character(client: TestClient) -> None:
    api = _contract()
    _register(client, api)
    binary, by_name = _keys(EPUB)
    basic = {"authorization": "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()}
    book = client.get("/books", headers=basic).json()[0]["id"]

    # the web reader keeps a position; KOReader pulls it as an xpointer
    r = client.put(
        f"/books/{book}/position",
        json={"device": "web", "modified": "2026-12-01T10:00:00Z", "section": 0, "offset": 200},
        headers=basic,
    )
    assert r.status_code == 200, r.text
    g = api["get_progress"]
    pulled = _check(
        client.get(_path(g, document=binary), headers=_auth()), g["expected_status"], 200
    )
    assert pulled["document"] == binary and pulled["device"] == "web"
    xpointer = pulled["progress"]
    assert xpointer.startswith("/body/DocFragment")
    assert 0 <= pulled["percentage"] <= 1 and isinstance(pulled["timestamp"], int)

    # KOReader pushes that xpointer from another device: the same character is kept
    u = api["update_progress"]
    body = {
        "document": binary,
        "progress": xpointer,
        "percentage": 0.42,
        "device": "Kobo Libra 2",
        "device_id": "D3V1C3",
    }
    assert set(u["required_params"]) <= set(body)
    pushed = _check(client.put(_path(u), json=body, headers=_auth()), u["expected_status"], 200)
    assert pushed["document"] == binary and isinstance(pushed["timestamp"], int)
    kept = client.get(f"/books/{book}/position", headers=basic).json()
    assert kept["device"] == "Kobo Libra 2"
    assert kept["locator"]["section"] == 0 and kept["locator"]["source"]["start"] == 200
    assert kept["locator"]["locations"]["cfi"].startswith("epubcfi(")

    # pulled again: KOReader's own xpointer back, verbatim, with its percentage
    again = client.get(_path(g, document=binary), headers=_auth()).json()
    assert again["progress"] == xpointer and again["percentage"] == 0.42
    assert again["device_id"] == "D3V1C3" and again["device"] == "Kobo Libra 2"
    # the file-name key names the same book
    by_file = client.get(_path(g, document=by_name), headers=_auth()).json()
    assert by_file["progress"] == xpointer


def test_nothing_yet_is_an_empty_object(client: TestClient) -> None:
    api = _contract()
    _register(client, api)
    binary, _ = _keys(EPUB)
    g = api["get_progress"]
    assert (
        _check(client.get(_path(g, document=binary), headers=_auth()), g["expected_status"], 200)
        == {}
    )


def test_bad_input_gets_the_protocols_error_and_writes_nothing(client: TestClient) -> None:
    api = _contract()
    _register(client, api)
    basic = {"authorization": "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()}
    book = client.get("/books", headers=basic).json()[0]["id"]
    binary, _ = _keys(EPUB)
    u = api["update_progress"]
    good = {
        "document": binary,
        "progress": "/body/DocFragment[1]/body/p[1]/text().0",
        "percentage": 0.1,
        "device": "Kobo",
        "device_id": "X",
    }
    cases: list[tuple[dict[str, Any] | str, int, int]] = [
        ({**good, "progress": "/body/DocFragment[1]/body/p[[1]/text().x"}, 403, 2003),
        ({**good, "progress": "/body/DocFragment[999]/body/p/text().0"}, 403, 2003),
        ({**good, "progress": "/body/DocFragment[1]/body/p[9999]/text().0"}, 403, 2003),
        ({**good, "document": "0" * 32}, 403, 2003),  # no book has this key
        ({**good, "document": ""}, 403, 2004),
        ({k: v for k, v in good.items() if k != "document"}, 403, 2004),
        ({k: v for k, v in good.items() if k != "percentage"}, 403, 2003),
        ({**good, "percentage": "lots"}, 403, 2003),
        ("{not json", 403, 2003),
    ]
    for body, status, code in cases:
        if isinstance(body, str):
            r = client.put(_path(u), content=body, headers={**_auth(), "content-type": JSON})
        else:
            r = client.put(_path(u), json=body, headers=_auth())
        assert r.status_code == status, (body, r.text)
        assert r.headers["content-type"] == JSON
        got = r.json()
        assert got["code"] == code and got["message"], (body, got)
    unauthorized = client.put(_path(u), json=good, headers=_auth(key="f" * 32))
    assert unauthorized.status_code == 401
    assert client.get(f"/books/{book}/position", headers=basic).status_code == 404
    g = api["get_progress"]
    assert client.get(_path(g, document=binary), headers=_auth()).json() == {}
    unknown = client.get(_path(g, document="0" * 32), headers=_auth())
    assert unknown.status_code == 403 and unknown.json()["code"] == 2003


def test_without_readers_the_local_reader_syncs(library_path: str) -> None:
    """A loopback library with no readers needs no credentials, as for the API."""
    binary, _ = _keys(EPUB)
    with _client(library_path) as c:
        assert c.get("/kosync/users/auth", headers=_auth("anyone", "0" * 32)).status_code == 200
        assert c.get(f"/kosync/syncs/progress/{binary}", headers=_auth()).json() == {}


def test_a_plain_text_book_round_trips(library_path: str) -> None:
    """KOReader's default layout of a .txt (one <pre> per non-blank line): the web
    reader's place pulled as an xpointer, pushed back from KOReader, the same character."""
    news = SAMPLES / "news-from-nowhere.txt"
    with Library.open(library_path) as lib:
        book = lib.import_book(news, embed=False).book
        section = int(lib.locate(book, offset=5000).position["section"])
    binary, _ = _keys(news)
    with _client(library_path) as c:
        r = c.put(
            f"/books/{book}/position",
            json={
                "device": "web",
                "modified": "2026-12-01T10:00:00Z",
                "section": section,
                "offset": 5000,
            },
        )
        assert r.status_code == 200, r.text
        pulled = c.get(f"/kosync/syncs/progress/{binary}", headers=_auth()).json()
        assert pulled["progress"].startswith("/FictionBook/body/pre[")
        body = {
            "document": binary,
            "progress": pulled["progress"],
            "percentage": 0.2,
            "device": "Kindle",
        }
        assert c.put("/kosync/syncs/progress", json=body, headers=_auth()).status_code == 200
        kept = c.get(f"/books/{book}/position").json()
        assert kept["device"] == "Kindle"
        assert (kept["locator"]["section"], kept["locator"]["source"]["start"]) == (section, 5000)
