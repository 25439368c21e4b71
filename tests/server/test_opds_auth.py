"""Who may read the catalogue: HTTP Basic with a reader's password (all an e-ink app can
send), tokens as everywhere, a 401 that each kind of client understands (OPDS 2: the
authentication document), and a loopback library without readers open to all."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from mindory.library import Library
from mindory.server.app import create_app
from tests.conftest import SAMPLES

LOCAL = "http://127.0.0.1"


def _basic(name: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


@pytest.fixture
def library(tmp_path: Path) -> Iterator[tuple[str, str]]:
    path = tmp_path / "lib.sqlite"
    with Library.open(path) as lib:
        lib.import_book(SAMPLES / "wasteland.epub", embed=False)
        token = lib.add_reader("alice").token
        lib.set_password("alice", "pässword")
    yield str(path), token


def test_the_catalogue_asks_for_basic_auth(library: tuple[str, str]) -> None:
    path, token = library
    with TestClient(create_app(path, import_isolation="thread"), base_url=LOCAL) as c:
        r = c.get("/opds")
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Basic realm=")
        r = c.get("/opds/v2")
        assert r.status_code == 401
        assert r.headers["content-type"].startswith("application/opds-authentication+json")
        assert r.headers["www-authenticate"].startswith("Basic realm=")
        doc = r.json()
        assert any(a["type"] == "http://opds-spec.org/auth/basic" for a in doc["authentication"])
        assert c.get("/opds/v2/auth.json").status_code == 200  # public
        assert c.get("/opds", headers=_basic("alice", "pässword")).status_code == 200
        assert c.get("/opds/v2", headers=_basic("alice", "pässword")).status_code == 200
        assert c.get("/opds/v2", headers={"authorization": f"Bearer {token}"}).status_code == 200
        for wrong in (_basic("alice", "password"), _basic("bob", "pässword")):
            r = c.get("/opds", headers=wrong)
            assert r.status_code == 401 and "password" in r.json()["error"]
        r = c.get("/books")  # the API asks for a bearer token (or Basic) as before
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        garbled = {"authorization": "Basic !!!notbase64"}
        assert c.get("/opds", headers=garbled).status_code == 401


def test_a_loopback_library_without_readers_is_open(tmp_path: Path) -> None:
    path = tmp_path / "lib.sqlite"
    with Library.open(path) as lib:
        lib.import_book(SAMPLES / "wasteland.epub", embed=False)
    with TestClient(create_app(str(path), import_isolation="thread"), base_url=LOCAL) as c:
        assert c.get("/opds").status_code == 200
        # an app configured with a user name still gets in (the credentials are ignored)
        assert c.get("/opds/v2", headers=_basic("someone", "x")).status_code == 200


def test_a_cors_preflight_needs_no_credentials(library: tuple[str, str]) -> None:
    """A web Readium app on another origin asks first, without credentials (Fetch)."""
    path, token = library
    with TestClient(
        create_app(path, token="server-token", import_isolation="thread"), base_url=LOCAL
    ) as c:
        book = c.get("/books", headers={"authorization": f"Bearer {token}"}).json()[0]["id"]
        ask = {"origin": "https://reader.example", "access-control-request-method": "GET"}
        r = c.options(f"/books/{book}/manifest.json", headers=ask)
        assert r.status_code in (200, 204), r.text
        assert r.headers["access-control-allow-origin"] == "*"
        assert c.get(f"/books/{book}/manifest.json").status_code == 401  # the read still asks
