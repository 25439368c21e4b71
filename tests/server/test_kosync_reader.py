"""A position KOReader pushes through /kosync opens the reader page on that character,
in a horizontal and in two vertical books (real Chromium), and the position the reader
page saves is what KOReader pulls: the xpointer it gets back names the same character.

The xpointers are made the way KOReader writes them (:mod:`mindory.reading.xpointer`,
rules in docs/koreader.md); the document key is KOReader's partial MD5 of the file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from mindory.importers.document_keys import partial_md5
from mindory.library import Library
from mindory.library.xpointers import place_of_xpointer, xpointer_of
from mindory.server.app import create_app
from tests.api_server import ServerThread, upload_and_wait
from tests.browser_harness import require_browser
from tests.conftest import SAMPLES, corpus_file
from tests.server.test_reader_vertical import assert_opens_at, assert_saved_at, run_reader_vertical

pytestmark = pytest.mark.browser


@dataclass(frozen=True)
class Case:
    key: str
    path: Path
    section: int
    pushed: int  # where KOReader is (section source offset, code points)
    saved: int  # where the reader page then goes (a point link)


def _cases() -> dict[str, Case]:
    return {
        "wasteland": Case("wasteland", SAMPLES / "wasteland.epub", 0, 1200, 2400),
        "shuihu": Case(
            "shuihu", corpus_file("epub2_zh-TW_shuihu-zhuan-haodoo.epub"), 4, 5100, 7000
        ),
        "kusamakura": Case(
            "kusamakura", corpus_file("epub3_ja_kusamakura-vertical-ruby.epub"), 2, 5400, 6100
        ),
    }


@dataclass
class Served:
    url: str
    db: Path
    books: dict[str, str]
    cases: dict[str, Case]
    shots: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    cases = _cases()
    require_browser()
    tmp = tmp_path_factory.mktemp("kosync_reader")
    db = tmp / "library.sqlite"
    app = create_app(db, upload_dir=tmp / "uploads")
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        books = {}
        for key, case in cases.items():
            job = upload_and_wait(client, case.path, timeout=300)
            assert job["state"] == "succeeded", job
            books[key] = job["result"]["book"]
        yield Served(server.url, db, books, cases, tmp)


def _text_char(url: str, book: str, section: int, offset: int) -> int:
    """The first offset at or after ``offset`` that is not whitespace (a place a reader
    can be on)."""
    with httpx.Client(base_url=url, timeout=60) as client:
        sec = client.get(f"/books/{book}/sections/{section}").json()
    text = sec["source_text"]
    local = offset - sec["source_start"]
    while local < len(text) and text[local].isspace():
        local += 1
    return int(sec["source_start"] + local)


KOREADER = {"x-auth-user": "reader", "x-auth-key": "0" * 32}


@pytest.mark.parametrize("key", ["wasteland", "shuihu", "kusamakura"])
def test_koreader_position_opens_the_reader_page_there_and_back(served: Served, key: str) -> None:
    case = served.cases[key]
    book = served.books[key]
    document = partial_md5(case.path.read_bytes())
    pushed = _text_char(served.url, book, case.section, case.pushed)
    with Library.open(served.db) as lib:
        xpointer = xpointer_of(lib.state, book, case.section, pushed)
    assert xpointer.startswith("/body/DocFragment")
    with httpx.Client(base_url=served.url, timeout=60) as client:
        r = client.put(
            "/kosync/syncs/progress",
            json={
                "document": document,
                "progress": xpointer,
                "percentage": 0.5,
                "device": "Kobo",
                "device_id": "K1",
            },
            headers=KOREADER,
        )
        assert r.status_code == 200, r.text
        kept = client.get(f"/books/{book}/position").json()["locator"]
        assert (kept["section"], kept["source"]["start"]) == (case.section, pushed)

    # the reader page opens on KOReader's character
    assert_opens_at(
        served.url, book, case.section, pushed, screenshot=served.shots / f"{key}-koreader.png"
    )

    # the reader follows a link further on; the page saves that place; KOReader pulls it
    saved = _text_char(served.url, book, case.section, case.saved)
    out = run_reader_vertical(
        served.url,
        [
            {
                "kind": "link",
                "hash": f"book={book}&section={case.section}&offset={saved}",
                "target": {"section": case.section, "start": saved, "end": None},
            }
        ],
    )
    assert out["page_errors"] == [], out["page_errors"]
    assert_saved_at(out["steps"][0], book, case.section, saved)
    with httpx.Client(base_url=served.url, timeout=60) as client:
        pulled = client.get(f"/kosync/syncs/progress/{document}", headers=KOREADER).json()
    assert pulled["document"] == document and pulled["progress"] != xpointer
    with Library.open(served.db) as lib:
        assert place_of_xpointer(lib.state, book, pulled["progress"]) == (case.section, saved)
