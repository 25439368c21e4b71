"""``GET /search`` sends the search's JSON as made: what ``SearchOut`` documents (and
what it gave when each answer went through it), without validating ten Locators."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from mindory.library import Library
from mindory.server.app import create_app
from mindory.server.shapes import SearchOut
from tests.conftest import SAMPLES


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("search_route") / "lib.sqlite"
    with Library.open(db) as lib:
        for name in ("wasteland.epub", "qiaoshi-yanyi.txt"):
            lib.import_book(SAMPLES / name)
        lib.embed("hashed")
    with TestClient(create_app(str(db)), base_url="http://127.0.0.1") as c:
        yield c


@pytest.mark.parametrize("query", ["April is the cruellest month", "客氏", "unreal city"])
@pytest.mark.parametrize("mode", ["hybrid", "lexical", "vector"])
def test_the_answer_is_what_the_model_gave(client: TestClient, query: str, mode: str) -> None:
    r = client.get("/search", params={"q": query, "mode": mode, "k": 5})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["hits"], body
    through_model = SearchOut.model_validate(body).model_dump(mode="json")
    assert body == through_model


def test_search_is_still_documented_by_its_model(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    answer = spec["paths"]["/search"]["get"]["responses"]["200"]["content"]["application/json"]
    assert answer["schema"]["$ref"].endswith("/SearchOut")


def test_a_bad_request_is_still_refused(client: TestClient) -> None:
    assert client.get("/search", params={"q": "x", "mode": "nope"}).status_code == 422
