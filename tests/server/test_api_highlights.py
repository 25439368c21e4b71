"""The HTTP API, phase 2: search, locate, quote calibration, highlights, new editions.

Every route answers with the CLI's / the Library's JSON for the same library; errors are
4xx with the error shape.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
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
TXT = SAMPLES / "qiaoshi-yanyi.txt"
NEWS = SAMPLES / "news-from-nowhere.txt"
LOCAL = "http://127.0.0.1"


@pytest.fixture(scope="module")
def library_path(module_db_url: str) -> str:
    """The module's library, once on SQLite and once on PostgreSQL."""
    with Library.open(module_db_url) as lib:
        for f in (EPUB, TXT, NEWS):
            lib.import_book(f)
        lib.embed()
    return module_db_url


@pytest.fixture(scope="module")
def client(library_path: str) -> Iterator[TestClient]:
    app = create_app(library_path, import_isolation="thread")
    with TestClient(app, base_url=LOCAL) as c:
        yield c


@pytest.fixture(scope="module")
def ids(client: TestClient) -> dict[str, str]:
    return {b["file_name"]: b["id"] for b in client.get("/books").json()}


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


def _without_timings(out: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in out.items() if k != "timings"}


def _u16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


# --------------------------------------------------------------------------- search


@pytest.mark.parametrize(
    ("query", "extra"),
    [
        ("the houses of parliament", ()),
        ("Unreal City", ("--mode", "lexical")),
        ("魏忠賢", ("--k", "5")),
        ("客氏", ("--mode", "lexical", "--book", "qiaoshi")),
    ],
)
def test_search_is_the_cli_json(
    client: TestClient, library_path: str, query: str, extra: tuple[str, ...]
) -> None:
    params: dict[str, Any] = {"q": query}
    it = iter(extra)
    for flag in it:
        params[flag.lstrip("-")] = next(it)
    r = client.get("/search", params=params)
    assert r.status_code == 200, r.text
    got = r.json()
    want = _cli_json(library_path, "search", query, *extra, "--json")
    assert _without_timings(got) == _without_timings(want)
    assert got["hits"], query
    for hit in got["hits"]:
        loc = hit["locator"]
        sec = client.get(f"/books/{hit['book']['id']}/sections/{loc['section']}").json()
        text = sec["source_text"]
        a, b = (
            loc["source"]["start"] - sec["source_start"],
            loc["source"]["end"] - sec["source_start"],
        )
        assert loc["text"]["highlight"] == text[a:b]
        assert loc["source"]["utf16Start"] - sec["utf16_start"] == _u16(text[:a])


def test_search_errors(client: TestClient, ids: dict[str, str]) -> None:
    _error(client.get("/search"), 422)
    _error(client.get("/search", params={"q": ""}), 422)
    _error(client.get("/search", params={"q": "x", "mode": "psychic"}), 422)
    _error(client.get("/search", params={"q": "x", "k": 0}), 422)
    _error(client.get("/search", params={"q": "x", "k": 101}), 422)
    _error(client.get("/search", params={"q": "x", "section": 1}), 400)  # needs a book
    _error(client.get("/search", params={"q": "x", "book": "nosuchbook"}), 404)
    _error(
        client.get("/search", params={"q": "x", "book": ids["wasteland.epub"], "section": 99}), 404
    )
    # a query of punctuation only: no hits, no error
    r = client.get("/search", params={"q": "!!! ??? ()", "mode": "lexical"})
    assert r.status_code == 200 and r.json()["hits"] == []


# --------------------------------------------------------------------------- locate


def test_locate_is_the_cli_json(client: TestClient, library_path: str, ids: dict[str, str]) -> None:
    epub, txt = ids["wasteland.epub"], ids["qiaoshi-yanyi.txt"]
    chunk = client.get(f"/books/{epub}/chunks", params={"limit": 5}).json()["chunks"][3]
    by_chunk = client.get(f"/books/{epub}/locate", params={"chunk": chunk["id"][:12]})
    assert by_chunk.status_code == 200, by_chunk.text
    assert by_chunk.json() == _cli_json(
        library_path, "locate", epub, "--chunk", chunk["id"], "--json"
    )
    cfi = by_chunk.json()["locations"]["cfi"]
    by_cfi = client.get(f"/books/{epub}/locate", params={"cfi": cfi})
    assert by_cfi.status_code == 200, by_cfi.text
    assert by_cfi.json() == _cli_json(library_path, "locate", epub, "--cfi", cfi, "--json")
    assert by_cfi.json()["source"]["position"] == chunk["source_start"]
    assert by_cfi.json()["rangeEnd"] == chunk["source_end"]
    assert chunk["id"] in [c["id"] for c in by_cfi.json()["chunks"]]
    # plain text, UTF-16 offset after characters outside the BMP
    sections = client.get(f"/books/{txt}/sections").json()
    for s in sections:
        text = client.get(f"/books/{txt}/sections/{s['ordinal']}").json()["source_text"]
        astral = [i for i, ch in enumerate(text) if ord(ch) > 0xFFFF]
        if astral:
            break
    cp = astral[0] + 10
    u = _u16(text[:cp])
    by_u16 = client.get(
        f"/books/{txt}/locate",
        params={"section": s["ordinal"], "section_offset": u, "unit": "utf16"},
    ).json()
    by_cp = client.get(
        f"/books/{txt}/locate", params={"section": s["ordinal"], "section_offset": cp}
    ).json()
    assert (
        by_u16
        == by_cp
        == _cli_json(
            library_path,
            "locate",
            txt,
            "--section",
            str(s["ordinal"]),
            "--section-offset",
            str(u),
            "--utf16",
            "--json",
        )
    )
    assert by_cp["source"]["position"] == s["source_start"] + cp
    assert by_cp["locations"]["fragments"] == [f"char={s['source_start'] + cp}"]
    # `offset` is book source coordinates (file-global for plain text), as `char=N`
    glob = s["source_start"] + cp
    assert s["source_start"] > 0
    assert (
        client.get(f"/books/{txt}/locate", params={"section": s["ordinal"], "offset": glob}).json()
        == by_cp
        == client.get(f"/books/{txt}/locate", params={"offset": glob}).json()
        == client.get(
            f"/books/{txt}/locate", params={"offset": s["utf16_start"] + u, "unit": "utf16"}
        ).json()
        == _cli_json(library_path, "locate", txt, "--offset", str(glob), "--json")
    )


def test_one_offset_convention_at_every_door(client: TestClient, ids: dict[str, str]) -> None:
    """The numbers a search hit carries (`char=N`, `source.start`) are what locate's
    `offset`, `POST /highlights` and calibration's `source` use: book source coordinates."""
    txt = ids["qiaoshi-yanyi.txt"]
    hits = client.get("/search", params={"q": "客氏", "book": txt, "mode": "lexical"}).json()
    hit = next(h for h in hits["hits"] if h["locator"]["section"] > 1)
    loc = hit["locator"]
    start, section = loc["source"]["start"], loc["section"]
    assert loc["locations"]["fragments"][0].startswith(f"char={start},")
    located = client.get(f"/books/{txt}/locate", params={"section": section, "offset": start})
    assert located.status_code == 200, located.text
    assert located.json()["source"]["position"] == start
    assert hit["chunk"] in [c["id"] for c in located.json()["chunks"]]
    quote = loc["text"]["highlight"][:30]
    anchor = client.post(f"/books/{txt}/anchors", json={"quote": quote}).json()
    assert anchor["method"] == "exact" and anchor["source"]["start"] == start
    made = client.post(
        f"/books/{txt}/highlights",
        json={"section": section, "start": start, "end": start + 30, "exact": quote},
    )
    assert made.status_code == 201, made.text
    try:
        target = made.json()["target"]
        pos = next(x for x in target["selector"] if x["type"] == "TextPositionSelector")
        assert (pos["start"], pos["end"]) == (start, start + 30)
    finally:
        client.delete(f"/books/{txt}/highlights/{made.json()['id']}")
    # section-local numbers only under their own name; given as `offset` they are refused
    local = start - client.get(f"/books/{txt}/sections/{section}").json()["source_start"]
    assert local < start
    by_local = client.get(
        f"/books/{txt}/locate", params={"section": section, "section_offset": local}
    )
    assert by_local.json() == located.json()
    wrong = _error(
        client.get(f"/books/{txt}/locate", params={"section": section, "offset": local}), 400
    )
    assert "book coordinates" in wrong["error"] and "section_offset" in wrong["error"]
    _error(client.get(f"/books/{txt}/locate", params={"offset": 1, "section_offset": 1}), 422)
    _error(client.get(f"/books/{txt}/locate", params={"section_offset": 1}), 422)


def test_locate_errors(client: TestClient, ids: dict[str, str]) -> None:
    epub, txt = ids["wasteland.epub"], ids["qiaoshi-yanyi.txt"]
    _error(client.get(f"/books/{epub}/locate"), 422)
    _error(client.get(f"/books/{epub}/locate", params={"section": 0}), 422)
    _error(
        client.get(f"/books/{epub}/locate", params={"chunk": "ab", "section": 0, "offset": 1}), 422
    )
    _error(client.get(f"/books/{epub}/locate", params={"cfi": "x", "section": 0, "offset": 1}), 422)
    _error(client.get(f"/books/{epub}/locate", params={"cfi": "epubcfi(nonsense)"}), 400)
    _error(client.get(f"/books/{txt}/locate", params={"cfi": "epubcfi(/6/2!/4/2/1:0)"}), 400)
    _error(client.get(f"/books/{epub}/locate", params={"section": 0, "offset": 10**9}), 400)
    _error(client.get(f"/books/{epub}/locate", params={"section": 999, "offset": 1}), 404)
    _error(client.get(f"/books/{epub}/locate", params={"chunk": "ffffffffffff"}), 404)
    _error(
        client.get(f"/books/{epub}/locate", params={"section": 0, "offset": 1, "unit": "x"}), 422
    )


# --------------------------------------------------------------------------- anchors


def test_anchors_are_the_library_json(
    client: TestClient, library_path: str, ids: dict[str, str]
) -> None:
    news = ids["news-from-nowhere.txt"]
    chunk = client.get(f"/books/{news}/chunks", params={"section": 6, "limit": 2}).json()["chunks"][
        1
    ]
    sec = client.get(f"/books/{news}/sections/6").json()
    raw = sec["source_text"][
        chunk["source_start"] - sec["source_start"] : chunk["source_end"] - sec["source_start"]
    ]
    quote = " ".join(raw[100:260].split())
    cases = [
        {"quote": quote, "chunk": chunk["id"]},
        {"quote": quote, "section": 6},
        {"quote": quote[:80] + " and the moon was made of cheese, as everyone knows"},
        {"quote": "Completely invented words: florbix quantaloo", "min_prefix": 3},
    ]
    methods = []
    with Library.open(library_path) as lib:
        for body in cases:
            r = client.post(f"/books/{news}/anchors", json=body)
            assert r.status_code == 200, r.text
            want = lib.calibrate_quote(
                news,
                body["quote"],
                section=body.get("section"),
                chunk=body.get("chunk"),
                min_prefix=body.get("min_prefix"),
            ).to_json()
            assert r.json() == want
            methods.append(r.json()["method"])
            out = r.json()
            assert out["quote"] == body["quote"]
            if out["exact"] is not None:
                assert out["locator"]["text"]["highlight"] == out["exact"]
                assert out["exact"] in sec["source_text"] or out["section"] != 6
    assert methods[:3] == ["normalized", "normalized", "prefix"]
    assert methods[3] in ("prefix", "rejected")


def test_anchor_errors(client: TestClient, ids: dict[str, str]) -> None:
    news = ids["news-from-nowhere.txt"]
    _error(client.post(f"/books/{news}/anchors", json={}), 422)
    _error(client.post(f"/books/{news}/anchors", json={"quote": ""}), 422)
    _error(client.post(f"/books/{news}/anchors", json={"quote": "x", "other": 1}), 422)
    _error(client.post(f"/books/{news}/anchors", json={"quote": "x" * 10_001}), 422)
    _error(client.post(f"/books/{news}/anchors", json={"quote": "x", "min_prefix": 0}), 422)
    _error(client.post(f"/books/{news}/anchors", json={"quote": "x", "section": 9999}), 404)
    _error(client.post(f"/books/{news}/anchors", json={"quote": "x", "chunk": "ffffffffff"}), 404)
    _error(client.post("/books/nosuchbook/anchors", json={"quote": "x"}), 404)
    _error(
        client.post(
            f"/books/{news}/anchors",
            content=b"not json",
            headers={"Content-Type": "application/json"},
        ),
        422,
    )


# --------------------------------------------------------------------------- highlights


def test_highlight_lifecycle(client: TestClient, library_path: str, ids: dict[str, str]) -> None:
    txt = ids["qiaoshi-yanyi.txt"]
    sections = client.get(f"/books/{txt}/sections").json()
    for s in sections:
        sec = client.get(f"/books/{txt}/sections/{s['ordinal']}").json()
        astral = [i for i, ch in enumerate(sec["source_text"]) if ord(ch) > 0xFFFF]
        if astral:
            break
    text, n = sec["source_text"], sec["ordinal"]
    a, b = astral[0] + 2, astral[0] + 30
    u0 = sec["utf16_start"]
    body = {
        "section": n,
        "start": u0 + _u16(text[:a]),
        "end": u0 + _u16(text[:b]),
        "unit": "utf16",
        "exact": text[a:b],
        "note": "a note",
        "color": "green",
    }
    r = client.post(f"/books/{txt}/highlights", json=body)
    assert r.status_code == 201, r.text
    made = r.json()
    hid = made["id"]
    assert hid.startswith("urn:uuid:")
    bare = hid.removeprefix("urn:uuid:")
    assert r.headers["location"] == f"/books/{txt}/highlights/{uuid.UUID(bare).hex}"
    assert made["target"]["selector"][0]["exact"] == text[a:b]
    assert made["source"]["start"] == sec["source_start"] + a
    assert made["source"]["utf16Start"] == body["start"]
    assert made["status"] == "anchored" and made["section"] == n
    with Library.open(library_path) as lib:
        assert lib.highlight(txt, hid).to_json() == made
    assert client.get(r.headers["location"]).json() == made
    assert client.get(f"/books/{txt}/highlights/{hid}").json() == made
    assert client.get(f"/books/{txt}/highlights/{bare}").json() == made
    listed = client.get(f"/books/{txt}/highlights", params={"section": n}).json()
    assert made in listed
    assert client.get(f"/books/{txt}/highlights", params={"status": "orphaned"}).json() == []

    patched = client.patch(f"/books/{txt}/highlights/{bare}", json={"color": "blue"}).json()
    assert patched["color"] == "blue" and patched["note"] == "a note"
    patched = client.patch(f"/books/{txt}/highlights/{bare}", json={"note": None}).json()
    assert patched["note"] is None and patched["color"] == "blue"
    assert patched["body"] == [{"type": "TextualBody", "purpose": "highlighting", "value": "blue"}]
    _error(client.patch(f"/books/{txt}/highlights/{bare}", json={"color": None}), 422)
    _error(client.patch(f"/books/{txt}/highlights/{bare}", json={"color": "plaid"}), 400)
    _error(client.patch(f"/books/{txt}/highlights/{bare}", json={"exact": "x"}), 422)
    other = ids["wasteland.epub"]
    _error(client.get(f"/books/{other}/highlights/{bare}"), 404)  # another book's

    gone = client.delete(f"/books/{txt}/highlights/{hid}")
    assert gone.status_code == 200 and gone.json()["id"] == hid
    _error(client.get(f"/books/{txt}/highlights/{hid}"), 404)
    _error(client.delete(f"/books/{txt}/highlights/{hid}"), 404)
    _error(client.get(f"/books/{txt}/highlights/not-a-highlight"), 404)


def test_highlights_from_a_cfi_and_from_a_search_hit(
    client: TestClient, ids: dict[str, str]
) -> None:
    epub = ids["wasteland.epub"]
    hit = client.get(
        "/search", params={"q": "Unreal City", "book": epub, "mode": "lexical"}
    ).json()["hits"][0]
    loc = hit["locator"]
    from_locator = client.post(f"/books/{epub}/highlights", json={"locator": loc})
    assert from_locator.status_code == 201, from_locator.text
    h = from_locator.json()
    assert h["target"]["selector"][0]["exact"] == loc["text"]["highlight"]
    assert h["target"]["selector"][2]["value"] == loc["locations"]["cfi"]
    from_cfi = client.post(f"/books/{epub}/highlights", json={"cfi": loc["locations"]["cfi"]})
    assert from_cfi.status_code == 201, from_cfi.text
    assert (
        from_cfi.json()["source"]
        == h["source"]
        == {
            "start": loc["source"]["start"],
            "end": loc["source"]["end"],
            "utf16Start": loc["source"]["utf16Start"],
            "utf16End": loc["source"]["utf16End"],
        }
    )
    # a stale locator (its text is not there any more) is refused
    stale = {**loc, "text": {**loc["text"], "highlight": "something else"}}
    _error(client.post(f"/books/{epub}/highlights", json={"locator": stale}), 400)
    _error(client.post(f"/books/{epub}/highlights", json={"locator": {"section": 0}}), 422)
    _error(
        client.post(
            f"/books/{epub}/highlights", json={"locator": loc, "start": 1, "end": 2, "section": 0}
        ),
        422,
    )
    for h_ in (h, from_cfi.json()):
        assert client.delete(f"/books/{epub}/highlights/{h_['id']}").status_code == 200


def test_bad_highlights_are_4xx(client: TestClient, ids: dict[str, str]) -> None:
    epub = ids["wasteland.epub"]
    url = f"/books/{epub}/highlights"
    _error(client.post(url, json={}), 400)
    _error(client.post(url, json={"section": 0, "start": 5, "end": 5}), 400)
    _error(client.post(url, json={"section": 0, "start": 5, "end": 10**9}), 400)
    _error(client.post(url, json={"section": 0, "start": -1, "end": 5}), 422)
    _error(client.post(url, json={"section": 0, "start": 1, "end": 5, "unit": "bytes"}), 422)
    _error(client.post(url, json={"section": 0, "start": 1, "end": 5, "color": "plaid"}), 400)
    _error(client.post(url, json={"section": 0, "start": 1, "end": 5, "zzz": 1}), 422)
    _error(client.post(url, json={"section": 99, "start": 1, "end": 5}), 404)
    _error(client.post(url, json={"cfi": "epubcfi(/6/2!/4/2/1:0)"}), 400)  # a point
    _error(client.get(url, params={"status": "lost"}), 422)
    _error(
        client.post("/books/nosuchbook/highlights", json={"section": 0, "start": 1, "end": 2}), 404
    )
    assert client.get(url).json() == []


# --------------------------------------------------------------------------- editions


def _wait(client: TestClient, job: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while job["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
        job = client.get(f"/jobs/{job['id']}").json()
    return job


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_upload_a_new_edition_moves_the_highlights(tmp_path: Path, isolation: str) -> None:
    app = create_app(
        tmp_path / "lib.sqlite", upload_dir=tmp_path / "uploads", import_isolation=isolation
    )
    with TestClient(app, base_url=LOCAL) as client:
        r = client.post("/books", files={"file": ("news.txt", NEWS.read_bytes())})
        old = _wait(client, r.json())["result"]["book"]
        sec = client.get(f"/books/{old}/sections/4").json()
        base = sec["source_start"]
        h = client.post(
            f"/books/{old}/highlights",
            json={"section": 4, "start": base + 1000, "end": base + 1060, "note": "keep"},
        ).json()
        text = NEWS.read_bytes()
        second = text.replace(b"CHAPTER II: A MORNING BATH", b"CHAPTER II: A BATH IN THE MORNING")
        _error(
            client.post(
                "/books", files={"file": ("news-2.txt", second)}, data={"replaces": "no such book"}
            ),
            404,
        )
        r = client.post(
            "/books", files={"file": ("news-2.txt", second)}, data={"replaces": old[:8]}
        )
        assert r.status_code == 202, r.text
        assert r.json()["replaces"] == old
        job = _wait(client, r.json())
        assert job["state"] == "succeeded", job
        result = job["result"]
        assert result["replaces"] == [old]
        (report,) = result["reanchored"]
        assert report["id"] == h["id"] and report["status"] == "position"
        assert set(report) >= {"id", "status", "confidence", "note"}
        new = result["book"]
        moved = client.get(f"/books/{new}/highlights/{h['id']}").json()
        assert moved["note"] == "keep" and moved["status"] == "anchored"
        assert moved["target"]["selector"][0]["exact"] == h["target"]["selector"][0]["exact"]
        assert moved["source"]["start"] == h["source"]["start"] + 7
        assert moved["reanchored"]["from"] == old
        assert client.get(f"/books/{old}/highlights").json() == []
