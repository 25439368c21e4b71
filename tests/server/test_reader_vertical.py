"""The reader page reaches a range, a point, a search hit and a saved position in vertical books.

Two vertical EPUBs of the corpus are imported through the HTTP API of a real server on
127.0.0.1: 水滸傳 (Traditional Chinese, ``-epub-writing-mode: vertical-rl`` on ``body``)
and 草枕 (Japanese with ruby, ``vertical-rl`` on ``html``). Their text runs in columns
from right to left; the iframe's document scrolls horizontally (a negative ``scrollLeft``
in Chromium). ``tests/browser/reader_vertical.mjs`` drives headless Chromium:

- a range link (``#book=…&section=N&offset=S&end=E``, the issue's own spans): the range's
  client rects are inside the iframe's viewport, its first character is where the
  browser's own hit test (``caretRangeFromPoint``) finds it, the hit highlight paints
  exactly the range there, and the position the page then saves (``GET
  /books/{id}/position``) is the range's start — not the chapter's start;
- a point link (``…&offset=M``, mid-column; in 草枕 a ruby base): that character is on
  screen, and the saved position is the point;
- a search hit clicked (the book in the list, the query typed, the hit clicked): the same;
- a position PUT through the API, then ``#book=ID`` alone: the page opens there, with the
  character on screen, keeps that very place and writes nothing
  (:func:`assert_opens_at`, reusable with a position set any other way).

Everything is asserted geometrically; one screenshot per book goes to pytest's temporary
folder (its path is printed). Skips loudly without the corpus or the browser (fails under
CI=true).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from mindory.server.app import create_app
from tests.api_server import ServerThread, upload_and_wait
from tests.browser_harness import BROWSER_DIR, chromium_path, require_browser
from tests.conftest import corpus_file

pytestmark = pytest.mark.browser

DRIVER = BROWSER_DIR / "reader_vertical.mjs"


@dataclass(frozen=True)
class Case:
    """A vertical book of the corpus and the places the tests open in it."""

    key: str
    file: str
    section: int
    range: tuple[int, int]  # the range link, book source coordinates (code points)
    point_after: str  # the point link: the first occurrence of this text after…
    point_from: int  # …this offset
    hit_chunk_index: int  # the search hit: this chunk of `section`
    restore: int  # the saved position PUT through the API


CASES = {
    "shuihu": Case(
        key="shuihu",
        file="epub2_zh-TW_shuihu-zhuan-haodoo.epub",
        section=4,
        range=(3635, 4381),
        point_after="調轉身來",
        point_from=8000,
        hit_chunk_index=13,
        restore=6500,
    ),
    "kusamakura": Case(
        key="kusamakura",
        file="epub3_ja_kusamakura-vertical-ruby.epub",
        section=2,
        range=(3028, 3739),
        point_after="悠長ゆうちょう",  # a ruby base (its <rt> follows in the source text)
        point_from=6300,
        hit_chunk_index=7,
        restore=6900,
    ),
}


# ------------------------------------------------------------------ the driver


def run_reader_vertical(
    server_url: str,
    steps: list[dict[str, Any]],
    *,
    headers: dict[str, str] | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """Run ``reader_vertical.mjs`` with these steps; its whole answer (see the .mjs)."""
    node = shutil.which("node")
    assert node is not None, "node is not on PATH"
    headers = dict(headers or {})
    if token is None:  # a bearer token also goes where the page keeps it (and its cookie)
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        if auth.lower().startswith("bearer "):
            token = auth[7:].strip()
    job = {"origin": server_url, "headers": headers, "token": token, "steps": steps}
    proc = subprocess.run(
        [node, str(DRIVER)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120 + 60 * len(steps),
        cwd=BROWSER_DIR,
        env={**os.environ, "CHROMIUM_PATH": chromium_path()},
        check=False,
    )
    assert proc.returncode == 0, f"reader_vertical.mjs failed:\n{proc.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(proc.stdout)
    if os.environ.get("MINDORY_BROWSER_OUT"):  # keep what the page said, to read it
        Path(os.environ["MINDORY_BROWSER_OUT"]).write_text(json.dumps(out, indent=1), "utf-8")
    return out


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _first_laid_out(sec: dict[str, Any], offset: int) -> int:
    """Section-local UTF-16 offset of the first non-whitespace character at or after the
    book source offset `offset` (whitespace between blocks has no box on screen)."""
    text = sec["source_text"]
    local = offset - sec["source_start"]
    while local < len(text) and text[local].isspace():
        local += 1
    return _utf16(text[:local])


def assert_on_screen(
    step: dict[str, Any], sec: dict[str, Any], offset: int, *, label: str = ""
) -> None:
    """The character at book source offset `offset` of section `sec` (or the first one
    after it that is not whitespace) is inside the scroller's visible box — the iframe's
    viewport for EPUB, the pane for plain text — and the browser's hit test at its middle
    finds that very character (so it is really painted there, not covered or clipped)."""
    m = step["measure"]
    assert "error" not in m, (label, m)
    assert m["section"] == sec["ordinal"], (label, m["section"], sec["ordinal"])
    first = m["startChar"]
    assert first is not None, (label, "no character at or after the place has a box", m)
    assert first["offset"] == _first_laid_out(sec, offset), (label, first, offset)
    assert first["inside"], (label, "the character is off screen", first["rect"], m["box"])
    assert first["caret"] in (first["offset"], first["offset"] + len(first["text"])), (
        label,
        "the browser's hit test finds another character there",
        first,
    )


def assert_saved_at(step: dict[str, Any], book: str, section: int, offset: int) -> None:
    """What GET /books/{id}/position answers (after the page saved) is exactly this place."""
    pos = step["position"]
    assert pos["status"] == 200, pos
    body = pos["body"]
    assert body["book"] == book and body["status"] == "anchored", body
    got = (body["locator"]["section"], body["locator"]["source"]["start"])
    assert got == (section, offset), (
        f"saved {got}, expected {(section, offset)}",
        [e for e in step["log"] if e["kind"] != "restore"],
    )


def assert_opens_at(
    server_url: str,
    book_id: str,
    section: int,
    source_offset: int,
    *,
    headers: dict[str, str] | None = None,
    token: str | None = None,
    screenshot: Path | None = None,
) -> dict[str, Any]:
    """Open ``#book=<book_id>`` alone in headless Chromium and assert the page opened at the
    reader's saved position: section `section` is shown, the character at book source
    offset `source_offset` (code points; EPUB: from the section's start; the first
    non-whitespace character from there) is on screen, the place the page keeps is what
    ``GET /books/{id}/position`` answers, and opening wrote no position.

    Set the position beforehand any way (PUT /books/{id}/position, KOReader's sync, the
    CLI). `headers` go with every request of the browser (e.g. ``{"Authorization": "Bearer
    …"}``: a bearer token is also given to the page itself). Returns the driver's step
    (``measure``, ``position``, ``place``, ``log``…) for more checks."""
    require_browser()
    with httpx.Client(base_url=server_url, headers=headers or {}, timeout=60) as client:
        r = client.get(f"/books/{book_id}/sections/{section}")
        assert r.status_code == 200, r.text
        sec = r.json()
        book = client.get(f"/books/{book_id}").json()["id"]
    out = run_reader_vertical(
        server_url,
        [
            {
                "kind": "open",
                "hash": f"book={book_id}",
                "target": {"section": section, "start": source_offset, "end": None},
                "screenshot": str(screenshot) if screenshot else None,
            }
        ],
        headers=headers,
        token=token,
    )
    assert out["page_errors"] == [], out["page_errors"]
    step: dict[str, Any] = out["steps"][0]
    assert step["book"] == book, step["book"]
    assert_on_screen(step, sec, source_offset, label="opened at the saved position")
    pos = step["position"]
    assert pos["status"] == 200, pos
    loc = pos["body"]["locator"]
    assert loc is not None, pos["body"]
    kept = step["place"]
    assert kept is not None and (kept["section"], kept["offset"]) == (
        loc["section"],
        loc["source"]["start"],
    ), ("the page keeps another place than the saved one", kept, loc)
    writes = [e for e in step["log"] if e["kind"] in ("put", "conflict")]
    assert writes == [], ("opening wrote a position", writes)
    return step


# ------------------------------------------------------------------ fixtures


@dataclass
class Library:
    url: str
    books: dict[str, str]  # case key -> book id
    sections: dict[tuple[str, int], dict[str, Any]]
    chunks: dict[tuple[str, int], list[dict[str, Any]]]
    shots: Path


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    paths = {key: corpus_file(c.file) for key, c in CASES.items()}
    require_browser()
    tmp = tmp_path_factory.mktemp("reader_vertical")
    app = create_app(tmp / "library.sqlite", upload_dir=tmp / "uploads")
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=120) as client:
        books = {}
        for key, path in paths.items():
            job = upload_and_wait(client, path, timeout=300)
            assert job["state"] == "succeeded", job
            books[key] = job["result"]["book"]
        sections = {}
        chunks = {}
        for key, c in CASES.items():
            r = client.get(f"/books/{books[key]}/sections/{c.section}")
            assert r.status_code == 200, r.text
            sections[key, c.section] = r.json()
            r = client.get(f"/books/{books[key]}/chunks", params={"section": c.section})
            chunks[key, c.section] = r.json()["chunks"]
        yield Library(server.url, books, sections, chunks, tmp)


def _query(text: str, width: int = 6) -> str:
    """Letters only (Han, kana), from the middle of a chunk: what is typed in the box."""
    runs = list(re.finditer(r"[\u3041-\u30ff\u4e00-\u9fff]{" + str(width) + ",}", text))
    assert runs, text[:80]
    middle = min(runs, key=lambda m: abs(m.start() - len(text) // 2))
    return middle.group()[:width]


_RESULTS: dict[str, dict[str, Any]] = {}


def _point(lib: Library, case: Case) -> int:
    sec = lib.sections[case.key, case.section]
    local = sec["source_text"].index(case.point_after, case.point_from - sec["source_start"])
    return int(sec["source_start"] + local)


def _steps_for(lib: Library, case: Case) -> dict[str, Any]:
    """One browser run per book: the range link, the point link, the search hit (each in a
    new tab, saved before the next), memoised for the tests below."""
    if case.key in _RESULTS:
        return _RESULTS[case.key]
    book = lib.books[case.key]
    start, end = case.range
    point = _point(lib, case)
    chunk = next(
        c for c in lib.chunks[case.key, case.section] if c["index"] == case.hit_chunk_index
    )
    query = _query(chunk["text"])
    with httpx.Client(base_url=lib.url, timeout=60) as client:
        found = client.get(
            "/search", params={"q": query, "book": book, "mode": "lexical", "k": 30}
        ).json()
    assert chunk["id"] in [h["chunk"] for h in found["hits"]], (query, found["hits"][:3])
    shot = lib.shots / f"{case.key}-range.png"
    out = run_reader_vertical(
        lib.url,
        [
            {
                "kind": "link",
                "hash": f"book={book}&section={case.section}&offset={start}&end={end}",
                "target": {"section": case.section, "start": start, "end": end},
                "screenshot": str(shot),
            },
            {
                "kind": "link",
                "hash": f"book={book}&section={case.section}&offset={point}",
                "target": {"section": case.section, "start": point, "end": None},
            },
            {
                "kind": "hit",
                "book": book,
                "query": query,
                "chunk": chunk["id"],
                "mode": "lexical",
                "target": {
                    "section": case.section,
                    "start": chunk["source_start"],
                    "end": chunk["source_end"],
                },
            },
        ],
    )
    print(f"screenshot of {case.key}: {shot}")
    result = {
        "out": out,
        "range": out["steps"][0],
        "point": out["steps"][1],
        "hit": out["steps"][2],
        "point_offset": point,
        "chunk": chunk,
        "shot": shot,
    }
    _RESULTS[case.key] = result
    return result


def _assert_range_shown(
    step: dict[str, Any], sec: dict[str, Any], start: int, end: int, label: str
) -> None:
    m = step["measure"]
    assert m["writingMode"].startswith("vertical"), m["writingMode"]
    assert_on_screen(step, sec, start, label=label)
    assert m["rects"] > 0, m
    # the range's boxes are on screen: all of them when it fits across the columns on
    # screen; else it starts on screen and runs on past the far (block-end) edge
    assert m["rectsInside"] > 0, (label, "no box of the range intersects the viewport", m)
    box, bounds = m["box"], m["bounds"]
    if bounds["right"] - bounds["left"] <= box["right"] - box["left"]:
        assert m["fullyInside"], (label, "part of the range is off screen", box, bounds)
    elif m["writingMode"].startswith("vertical-rl"):  # first column on screen, runs off the left
        assert bounds["left"] < box["left"] < bounds["right"] <= box["right"] + 1, (box, bounds)
    else:
        assert box["left"] - 1 <= bounds["left"] < box["right"] < bounds["right"], (box, bounds)
    # the hit highlight paints exactly the range, there
    s, e = start - sec["source_start"], end - sec["source_start"]
    expected = sec["source_text"][s:e]
    assert [p["text"] for p in m["painted"]] == [expected], (label, m["painted"])
    assert m["painted"][0]["rectsInside"] > 0, (label, m["painted"])
    assert m["highlight"]["visible"] is True, m["highlight"]


CASE_IDS = list(CASES)


# ------------------------------------------------------------------ the tests


@pytest.mark.parametrize("key", CASE_IDS)
def test_range_link_shows_the_range_and_saves_its_start(library: Library, key: str) -> None:
    case = CASES[key]
    res = _steps_for(library, case)
    assert res["out"]["page_errors"] == [], res["out"]["page_errors"]
    sec = library.sections[key, case.section]
    start, end = case.range
    step = res["range"]
    _assert_range_shown(step, sec, start, end, f"{key} range link")
    assert_saved_at(step, library.books[key], case.section, start)
    assert res["shot"].is_file() and res["shot"].stat().st_size > 10_000


@pytest.mark.parametrize("key", CASE_IDS)
def test_point_link_shows_the_point_and_saves_it(library: Library, key: str) -> None:
    case = CASES[key]
    res = _steps_for(library, case)
    sec = library.sections[key, case.section]
    point = res["point_offset"]
    step = res["point"]
    assert step["measure"]["writingMode"].startswith("vertical")
    assert_on_screen(step, sec, point, label=f"{key} point link")
    painted = step["measure"]["painted"]
    assert len(painted) == 1 and painted[0]["rectsInside"] > 0, painted
    local = point - sec["source_start"]
    assert painted[0]["text"] == sec["source_text"][local : local + 32]
    assert_saved_at(step, library.books[key], case.section, point)


@pytest.mark.parametrize("key", CASE_IDS)
def test_search_hit_shows_the_hit_and_saves_its_start(library: Library, key: str) -> None:
    case = CASES[key]
    res = _steps_for(library, case)
    sec = library.sections[key, case.section]
    chunk = res["chunk"]
    step = res["hit"]
    _assert_range_shown(step, sec, chunk["source_start"], chunk["source_end"], f"{key} hit")
    assert step["measure"]["highlight"]["chunkId"] == chunk["id"]
    assert_saved_at(step, library.books[key], case.section, chunk["source_start"])


@pytest.mark.parametrize("key", CASE_IDS)
def test_book_opens_at_the_saved_position(library: Library, key: str) -> None:
    case = CASES[key]
    book = library.books[key]
    with httpx.Client(base_url=library.url, timeout=60) as client:
        r = client.put(
            f"/books/{book}/position",
            json={
                "section": case.section,
                "offset": case.restore,
                "unit": "codepoint",
                "device": "api-test",
                "modified": datetime.now(UTC).isoformat(timespec="milliseconds"),
            },
        )
        assert r.status_code == 200, r.text
        assert r.json()["locator"]["source"]["start"] == case.restore
    step = assert_opens_at(
        library.url, book, case.section, case.restore, screenshot=library.shots / f"{key}-open.png"
    )
    assert step["measure"]["writingMode"].startswith("vertical")
    assert step["place"]["offset"] == case.restore


def _vertical_lr_epub(path: Path) -> Path:
    """An EPUB 3 of one long chapter in ``writing-mode: vertical-lr`` (columns left to right:
    the document scrolls to the right, a positive scrollLeft)."""
    import zipfile

    digits = "零一二三四五六七八九"
    paras = "".join(
        f"<p>第{''.join(digits[int(d)] for d in str(i))}段。"
        + "".join(f"天地玄黃{digits[(i + k) % 10]}宇宙洪荒，" for k in range(12))
        + "</p>\n"
        for i in range(60)
    )
    xhtml = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="zh-Hant"><head><title>LR</title>'
        "<style>html { writing-mode: vertical-lr; } body { margin: 1em; }</style></head>"
        f"<body><h1>縱排左起</h1>\n{paras}</body></html>"
    )
    opf = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        '<dc:identifier id="id">urn:test:vertical-lr</dc:identifier>'
        "<dc:title>Vertical LR</dc:title><dc:language>zh-Hant</dc:language></metadata>"
        '<manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
        '<spine><itemref idref="c1"/></spine></package>'
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        zf.writestr("OEBPS/content.opf", opf, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("OEBPS/c1.xhtml", xhtml, compress_type=zipfile.ZIP_DEFLATED)
    return path


def test_vertical_lr_range_point_and_saved_position(tmp_path: Path) -> None:
    """vertical-lr (no corpus book has it): a range link, a point link and a restored
    position land on screen, scrolling to the right; the saved places are exact."""
    require_browser()
    app = create_app(tmp_path / "library.sqlite", upload_dir=tmp_path / "uploads")
    epub = _vertical_lr_epub(tmp_path / "vertical-lr.epub")
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        job = upload_and_wait(client, epub)
        assert job["state"] == "succeeded", job
        book = job["result"]["book"]
        sec = client.get(f"/books/{book}/sections/0").json()
        text = sec["source_text"]
        start = text.index("第三零段")
        end = text.index("第三二段")
        point = text.index("宇宙洪荒", text.index("第五零段"))
        out = run_reader_vertical(
            server.url,
            [
                {
                    "kind": "link",
                    "hash": f"book={book}&section=0&offset={start}&end={end}",
                    "target": {"section": 0, "start": start, "end": end},
                    "screenshot": str(tmp_path / "vertical-lr.png"),
                },
                {
                    "kind": "link",
                    "hash": f"book={book}&section=0&offset={point}",
                    "target": {"section": 0, "start": point, "end": None},
                },
            ],
        )
        assert out["page_errors"] == [], out["page_errors"]
        ranged, pointed = out["steps"]
        assert ranged["measure"]["writingMode"] == "vertical-lr"
        assert ranged["measure"]["scroll"]["left"] > 0  # scrolled to the right
        _assert_range_shown(ranged, sec, start, end, "vertical-lr range link")
        assert_saved_at(ranged, book, 0, start)
        assert_on_screen(pointed, sec, point, label="vertical-lr point link")
        assert_saved_at(pointed, book, 0, point)
        restore = text.index("天地玄黃", text.index("第四零段")) + 2
        r = client.put(
            f"/books/{book}/position",
            json={
                "section": 0,
                "offset": restore,
                "unit": "codepoint",
                "device": "api-test",
                "modified": datetime.now(UTC).isoformat(timespec="milliseconds"),
            },
        )
        assert r.status_code == 200, r.text
        assert_opens_at(server.url, book, 0, restore)
