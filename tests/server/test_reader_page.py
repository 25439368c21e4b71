"""The reader page (GET /) in headless Chromium, against a real server on 127.0.0.1.

Imports the sample EPUB and the Chinese text (Big5-HKSCS, with characters outside the
BMP) through the HTTP API and embeds them, then ``tests/browser/reader_page.mjs`` clicks
books, types English and Chinese queries in the search box (the page asks ``GET /search``)
and clicks hits, as a reader would. For every hit the text the page paints (read back
from the CSS highlight registry) must equal the hit's ``locator.text.highlight`` — the
answer of ``GET /search`` for the same query — and the chunk's source slice: for the EPUB
inside the section's own XHTML in an iframe, for plain text inside the <pre>, also after
characters outside the BMP, where UTF-16 positions and code points part ways. User
selections (set programmatically and dragged with the mouse) must come back as exact
(section, UTF-16 span, code-point span, quote) triples; saved ones are stored through
``POST /books/{id}/highlights``, listed again after a reload of the page, and painted
exactly.

The screenshot goes to a temporary folder, or to docs/reader.png with
``MINDORY_UPDATE_SCREENSHOT=1`` (that is how the committed one was made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from mindory.server.app import create_app
from tests.api_server import ServerThread, upload_and_wait
from tests.browser_harness import BROWSER_DIR, chromium_path, require_browser
from tests.conftest import ROOT, SAMPLES

pytestmark = pytest.mark.browser

DRIVER = BROWSER_DIR / "reader_page.mjs"
MAX_SCREENSHOT_BYTES = 800_000


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _query(text: str, width: int = 14) -> str:
    """A piece of a chunk's text to type into the search box: from its middle, one line."""
    mid = len(text) // 2
    for start in range(mid, len(text) - width):
        piece = text[start : start + width]
        if "\n" not in piece and piece == piece.strip() and "  " not in piece:
            return piece
    for start in range(0, mid):
        piece = text[start : start + width]
        if "\n" not in piece and piece == piece.strip() and "  " not in piece:
            return piece
    raise AssertionError(f"no one-line piece of width {width} in {text!r}")


def _han_query(text: str, width: int = 4) -> str:
    """Han characters only (no punctuation), from the middle of a chunk: the screenshot's
    query, whose characters the page marks inside the hit."""
    runs = list(re.finditer("[\u4e00-\u9fff]{" + str(width) + ",}", text))
    assert runs, text[:80]
    middle = min(runs, key=lambda m: abs(m.start() - len(text) // 2))
    return middle.group()[:width]


def _run_driver(job: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None
    proc = subprocess.run(
        [node, str(DRIVER)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=240,
        cwd=BROWSER_DIR,
        env={**os.environ, "CHROMIUM_PATH": chromium_path()},
        check=False,
    )
    assert proc.returncode == 0, f"reader_page.mjs failed:\n{proc.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def test_reader_page_highlights_exact_spans(db_url: str, tmp_path: Path) -> None:
    """On each backend: the page a browser runs against the server's own answers."""
    require_browser()
    app = create_app(db_url, upload_dir=tmp_path / "uploads")
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        epub_job = upload_and_wait(client, SAMPLES / "wasteland.epub")
        txt_job = upload_and_wait(client, SAMPLES / "qiaoshi-yanyi.txt")
        assert epub_job["state"] == txt_job["state"] == "succeeded", (epub_job, txt_job)
        epub_id, txt_id = epub_job["result"]["book"], txt_job["result"]["book"]
        app.state.library.embed()  # hybrid search: words and vectors

        def chunks(book: str) -> list[dict[str, Any]]:
            r = client.get(f"/books/{book}/chunks", params={"limit": 5000})
            assert r.status_code == 200, r.text
            out: list[dict[str, Any]] = r.json()["chunks"]
            return out

        sections: dict[tuple[str, int], dict[str, Any]] = {}

        def section(book: str, n: int) -> dict[str, Any]:
            if (book, n) not in sections:
                r = client.get(f"/books/{book}/sections/{n}")
                assert r.status_code == 200, r.text
                sections[book, n] = r.json()
            return sections[book, n]

        def source_slice(book: str, c: dict[str, Any]) -> str:
            sec = section(book, c["section"])
            return str(
                sec["source_text"][
                    c["source_start"] - sec["source_start"] : c["source_end"] - sec["source_start"]
                ]
            )

        epub_chunks = chunks(epub_id)
        txt_chunks = chunks(txt_id)

        # Plain text: chunks after characters outside the BMP (UTF-16 ≠ code points), one
        # holding such a character, the first of a chapter, the book's last chunk.
        def local_shift(c: dict[str, Any]) -> int:
            sec = section(txt_id, c["section"])
            return int(
                (c["utf16_start"] - sec["utf16_start"]) - (c["source_start"] - sec["source_start"])
            )

        after_astral = [c for c in txt_chunks if local_shift(c) > 0]
        holding_astral = [c for c in txt_chunks if any(ord(ch) > 0xFFFF for ch in c["text"])]
        assert after_astral and holding_astral, "the sample must have text outside the BMP"
        picked_txt = [
            after_astral[0],
            after_astral[len(after_astral) // 2],
            holding_astral[-1],
            next(c for c in txt_chunks if c["section"] == 1 and c["index"] == 0),
            txt_chunks[-1],
        ]
        picked_epub = [epub_chunks[0], epub_chunks[len(epub_chunks) // 2], epub_chunks[-1]]
        modes = ["hybrid", "lexical"]
        clicks = [
            {"book": epub_id, "query": _query(c["text"]), "chunk": c["id"], "mode": modes[k % 2]}
            for k, c in enumerate(picked_epub)
        ] + [
            {"book": txt_id, "query": _query(c["text"], 8), "chunk": c["id"], "mode": modes[k % 2]}
            for k, c in enumerate(picked_txt)
        ]

        # Selections: in the Chinese text across and after a character outside the BMP,
        # one starting inside a surrogate pair; in the EPUB inside the iframe.
        astral_sec_no = after_astral[0]["section"]
        astral_sec = section(txt_id, astral_sec_no)
        text = astral_sec["source_text"]
        cp = next(i for i, ch in enumerate(text) if ord(ch) > 0xFFFF)
        u = _utf16(text[:cp])  # UTF-16 position of the astral character
        epub_sec = section(epub_id, 0)
        selections = [
            {"book": txt_id, "section": astral_sec_no, "start": u - 3, "end": u + 10},
            {"book": txt_id, "section": astral_sec_no, "start": u + 30, "end": u + 90},
            {"book": txt_id, "section": astral_sec_no, "start": u + 1, "end": u + 6},
            {"book": epub_id, "section": 0, "start": 1000, "end": 1234},
        ]
        drags = [{"book": txt_id, "section": astral_sec_no, "start": u - 4, "end": u + 25}]
        saves = [
            {"book": txt_id, "section": astral_sec_no, "start": u + 40, "end": u + 52,
             "note": "天啟年間", "color": "blue"},
            {"book": epub_id, "section": 0, "start": 2000, "end": 2100, "note": "", "color": "pink"},
        ]  # fmt: skip

        update = os.environ.get("MINDORY_UPDATE_SCREENSHOT") == "1"
        shot = (ROOT / "docs" / "reader.png") if update else (tmp_path / "reader.png")
        shot_chunk = holding_astral[0]  # a hit holding a character outside the BMP
        out = _run_driver(
            {
                "origin": server.url,
                "clicks": clicks,
                "selections": selections,
                "drags": drags,
                "saves": saves,
                "screenshot": {
                    "path": str(shot),
                    "book": txt_id,
                    "query": _han_query(shot_chunk["text"]),
                    "chunk": shot_chunk["id"],
                },
            }
        )
        # What GET /search answers for the same queries (the page asked the same).
        answers = []
        for step in clicks:
            r = client.get(
                "/search",
                params={"q": step["query"], "book": step["book"], "k": 30, "mode": step["mode"]},
            )
            assert r.status_code == 200, r.text
            answers.append(next(h for h in r.json()["hits"] if h["chunk"] == step["chunk"]))
        stored = {a["id"]: a for a in client.get(f"/books/{txt_id}/highlights").json()} | {
            a["id"]: a for a in client.get(f"/books/{epub_id}/highlights").json()
        }

    assert out["page_errors"] == [], out["page_errors"]

    # Every clicked hit: painted text == the hit's locator.text.highlight == the chunk's
    # source slice, scrolled into view.
    picked = [(epub_id, c) for c in picked_epub] + [(txt_id, c) for c in picked_txt]
    assert len(out["clicks"]) == len(picked)
    for (book, c), result, answer in zip(picked, out["clicks"], answers, strict=True):
        info = result["info"]
        expected = source_slice(book, c)
        assert result["hits"] >= 1
        assert result["hit"]["locator"] == answer["locator"]
        assert info["expected"] == answer["locator"]["text"]["highlight"] == expected
        assert info["chunkId"] == c["id"]
        assert info["matchesSource"] is True, "the DOM text of the section differs from its source"
        assert info["text"] == expected, (
            c["section"],
            c["index"],
            info["text"][:80],
            expected[:80],
        )
        assert _utf16(expected) == c["utf16_end"] - c["utf16_start"]
        assert info["visible"] is True
        assert info["view"] == ("epub" if book == epub_id else "text")
    # The picks really include spans after astral characters (the point of the test).
    assert any(local_shift(c) > 0 for c in picked_txt)

    # Selections → (section, UTF-16 span, code-point span, quote), exactly.
    def check_highlight(h: dict[str, Any], book: str) -> None:
        sec = section(book, h["section"])
        src = sec["source_text"]
        s, e = h["start"] - sec["source_start"], h["end"] - sec["source_start"]
        assert src[s:e] == h["exact"]
        assert h["utf16Start"] - sec["utf16_start"] == _utf16(src[:s])
        assert h["utf16End"] - sec["utf16_start"] == _utf16(src[:e])
        assert h["prefix"] == src[max(0, s - 32) : s]
        assert h["suffix"] == src[e : e + 32]
        assert h["book"] == book

    for sel, result in zip(selections, out["selections"]):
        h = result["highlight"]
        assert h is not None, sel
        check_highlight(h, sel["book"])
    # Exact spans where the selection did not split a surrogate pair.
    first = out["selections"][0]["highlight"]
    assert first["start"] - astral_sec["source_start"] == cp - 3
    assert first["exact"] == text[cp - 3 : cp + 9]  # 13 UTF-16 units = 12 code points
    assert out["selections"][0]["selected"] == first["exact"]
    # Starting inside the pair: moved out to the whole character.
    third = out["selections"][2]["highlight"]
    assert third["start"] - astral_sec["source_start"] == cp
    assert third["exact"].startswith(text[cp])
    epub_sel = out["selections"][3]["highlight"]
    assert epub_sel["exact"] == epub_sec["source_text"][1000:1234]  # ASCII: units = points
    assert epub_sel["href"] == epub_sec["href"]

    # A mouse drag across the astral character: consistent, whatever the pixels hit, and
    # stored on the server as exactly that span.
    drag = out["drags"][0]
    assert drag["highlight"] is not None
    check_highlight(drag["highlight"], txt_id)
    assert any(ord(ch) > 0xFFFF for ch in drag["highlight"]["exact"])
    saved_pairs = [(drag, txt_id, {"note": None, "color": "yellow"})] + [
        (done, step["book"], {"note": step["note"] or None, "color": step["color"]})
        for done, step in zip(out["saves"], saves, strict=True)
    ]
    for done, book, want in saved_pairs:
        sel, ann = done["highlight"], done["saved"]
        check_highlight(sel, book)
        assert ann["book"] == book and ann["status"] == "anchored"
        assert ann["section"] == sel["section"]
        assert ann["target"]["selector"][0] == {
            "type": "TextQuoteSelector",
            "exact": sel["exact"],
            "prefix": sel["prefix"],
            "suffix": sel["suffix"],
        }
        assert ann["source"] == {
            "start": sel["start"],
            "end": sel["end"],
            "utf16Start": sel["utf16Start"],
            "utf16End": sel["utf16End"],
        }
        assert (ann["note"], ann["color"]) == (want["note"], want["color"])
        assert stored[ann["id"]] == ann  # what the server keeps
    assert stored[out["saves"][1]["saved"]["id"]]["target"]["selector"][2]["value"].startswith(
        "epubcfi("
    )
    # After a reload the page lists them again (GET .../highlights) and paints them exactly.
    assert len(out["read_back"]) == len(saved_pairs)
    for (done, _book, _want), back in zip(saved_pairs, out["read_back"], strict=True):
        exact = done["saved"]["target"]["selector"][0]["exact"]
        assert back["id"] == done["saved"]["id"]
        assert back["listed"] == done["saved"]
        assert exact in back["painted"]
        assert back["opened"] == exact

    assert out["screenshot"] == str(shot)
    assert shot.is_file() and 10_000 < shot.stat().st_size < MAX_SCREENSHOT_BYTES
    if update:
        _shrink_png(shot)


def _shrink_png(path: Path) -> None:
    """64 colours are plenty for a UI screenshot: about a third of the bytes."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is optional
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(
            colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )
    small.save(path, optimize=True)


def test_reader_page_with_a_token(tmp_path: Path) -> None:
    """With MINDORY_TOKEN the page sends the token (header for fetch, cookie for the
    iframe's XHTML and its stylesheet) and still highlights exactly."""
    require_browser()
    token = "reader-page-token-0123456789"
    app = create_app(tmp_path / "library.sqlite", token=token, import_isolation="thread")
    headers = {"Authorization": f"Bearer {token}"}
    with (
        ServerThread(app) as server,
        httpx.Client(base_url=server.url, timeout=60, headers=headers) as client,
    ):
        job = upload_and_wait(client, SAMPLES / "wasteland.epub")
        assert job["state"] == "succeeded", job
        book = job["result"]["book"]
        assert httpx.get(f"{server.url}/books").status_code == 401
        chunk = client.get(f"/books/{book}/chunks").json()["chunks"][5]
        section = client.get(f"/books/{book}/sections/0").json()
        out = _run_driver(
            {
                "origin": server.url,
                "token": token,
                "clicks": [{"book": book, "query": _query(chunk["text"]), "chunk": chunk["id"]}],
            }
        )
    assert out["page_errors"] == [], out["page_errors"]
    info = out["clicks"][0]["info"]
    assert info["view"] == "epub" and info["matchesSource"] is True
    assert info["text"] == section["source_text"][chunk["source_start"] : chunk["source_end"]]
