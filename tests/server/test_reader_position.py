"""The reader page keeps the reader's place: positions, restore, deep links, first text.

A real server on 127.0.0.1 with three books uploaded through the API — the Chinese
plain text (characters outside the BMP, file-global offsets), the sample EPUB, and an
EPUB built here whose first section is only a cover image — and
``tests/browser/reading_position.mjs`` in headless Chromium doing what a reader does:

- clicking the cover book opens its first section with text, not the cover;
- clicking the Chinese book, a chapter in the table of contents and scrolling with the
  mouse wheel makes the page PUT the position (debounced); reloading the page (the URL
  fragment the page wrote), a new tab (``/`` and a click: ``GET`` of the position) and
  another browser (another device id) all come back to the same section with the saved
  offset on screen — and none of them writes a position just for opening;
- a newer position from another device (written meanwhile through the API) makes the
  page's next write a 409: the page adopts the newer place, and its next move is saved
  after it;
- deep links (``#book=…&section=…&offset=…`` in code points or ``unit=utf16``,
  ``section_offset``, a point CFI, a range CFI, ``end``) open their place and paint
  exactly the API's text there: a bookmark's ``quote.exact`` at the same place (what the
  server keeps at a point) or a chunk Locator's ``text.highlight``; reading on rewrites
  the fragment; a link outside its section is refused in the status line.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zipfile
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from mindory.server.app import create_app
from tests.api_server import ServerThread, upload_and_wait
from tests.browser_harness import BROWSER_DIR, chromium_path, require_browser
from tests.conftest import SAMPLES

pytestmark = pytest.mark.browser

DRIVER = BROWSER_DIR / "reading_position.mjs"
QUOTE = 32  # code points the server keeps after a place (mindory.reading.positions)
LINE_UNITS = 120  # the caret at the top edge is on the first line on screen, or the one above


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _png() -> bytes:
    """A 2×2 grey PNG (the cover image)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + b"\x80\x80\x80" * 2 for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _cover_epub(path: Path) -> Path:
    """An EPUB 3 whose spine starts with a page holding only the cover image."""
    xhtml = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{t}</title></head>'
        "<body>{b}</body></html>"
    )
    paragraphs = "".join(
        f"<p>Paragraph {i} of the first chapter, where the reading starts.</p>" for i in range(40)
    )
    docs = {
        "cover.xhtml": xhtml.format(
            t="Cover",
            b='\n  <div><img src="cover.png" alt="Cover" width="600" height="800"/></div>\n',
        ),
        "ch1.xhtml": xhtml.format(t="One", b=f"<h1>Chapter One</h1>{paragraphs}"),
        "ch2.xhtml": xhtml.format(t="Two", b="<h1>Chapter Two</h1><p>The second chapter.</p>"),
    }
    items = "".join(
        f'<item id="d{i}" href="{name}" media-type="application/xhtml+xml"/>'
        for i, name in enumerate(docs)
    )
    opf = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<package xmlns="http://www.w3.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        '<dc:identifier id="id">urn:test:cover-first</dc:identifier>'
        "<dc:title>Cover First</dc:title><dc:language>en</dc:language>"
        '<meta name="cover" content="img"/></metadata>'
        f'<manifest>{items}<item id="img" href="cover.png" media-type="image/png" '
        'properties="cover-image"/></manifest>'
        '<spine><itemref idref="d0"/><itemref idref="d1"/><itemref idref="d2"/></spine></package>'
    ).replace("http://www.w3.org/2007/opf", "http://www.idpf.org/2007/opf")
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
        for name, content in docs.items():
            zf.writestr(f"OEBPS/{name}", content, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("OEBPS/cover.png", _png())
    return path


def _run_driver(job: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None
    proc = subprocess.run(
        [node, str(DRIVER)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        cwd=BROWSER_DIR,
        env={**os.environ, "CHROMIUM_PATH": chromium_path()},
        check=False,
    )
    assert proc.returncode == 0, f"reading_position.mjs failed:\n{proc.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(proc.stdout)
    if os.environ.get("MINDORY_BROWSER_OUT"):  # keep what the page said, to read it
        Path(os.environ["MINDORY_BROWSER_OUT"]).write_text(json.dumps(out, indent=1), "utf-8")
    return out


def _on_screen(snap: dict[str, Any], sec: dict[str, Any], offset: int) -> None:
    """The snapshot shows section `sec` with book source offset `offset` on screen — as
    the page measures it, and consistent with what the browser's own hit test finds
    there. An offset in whitespace that is not laid out (between two lines of an XHTML
    document) counts as on screen when the first character after it is."""
    section = sec["ordinal"]
    assert snap["section"] == section, (snap["section"], section)
    vis = snap["visible"]
    assert vis["section"] == section
    start = vis["start"]
    if offset < start:
        gap = sec["source_text"][offset - sec["source_start"] : start - sec["source_start"]]
        assert gap.isspace(), (vis, offset, gap)
        start = offset
    assert start <= offset <= vis["end"], (vis, offset)
    probe = snap["probe"]
    assert probe["quarter"] is not None and probe["top"] is not None, probe
    assert vis["utf16Start"] <= probe["quarter"] <= vis["utf16End"], (vis, probe)
    assert abs(probe["top"] - vis["utf16Start"]) <= LINE_UNITS, (vis, probe)


def _writes(snap: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in snap["log"] if e["kind"] in ("put", "conflict")]


def test_reader_page_keeps_the_place(tmp_path: Path) -> None:
    require_browser()
    app = create_app(tmp_path / "library.sqlite", upload_dir=tmp_path / "uploads")
    cover_path = _cover_epub(tmp_path / "cover-first.epub")
    with ServerThread(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
        jobs = [
            upload_and_wait(client, p)
            for p in (SAMPLES / "qiaoshi-yanyi.txt", SAMPLES / "wasteland.epub", cover_path)
        ]
        assert all(j["state"] == "succeeded" for j in jobs), jobs
        txt, epub, cover = (j["result"]["book"] for j in jobs)
        books = {b: client.get(f"/books/{b}").json() for b in (txt, epub, cover)}
        sections: dict[tuple[str, int], dict[str, Any]] = {}

        def section(book: str, n: int) -> dict[str, Any]:
            if (book, n) not in sections:
                r = client.get(f"/books/{book}/sections/{n}")
                assert r.status_code == 200, r.text
                sections[book, n] = r.json()
            return sections[book, n]

        # The cover book: section 0 is only the image (no text a reader sees).
        cover_sections = books[cover]["sections"]
        assert cover_sections[0]["normalized_length"] == 0 < cover_sections[1]["normalized_length"]

        # A chapter of the Chinese text with characters outside the BMP early on: UTF-16
        # offsets and code points part ways after them.
        def first_astral(n: int) -> int | None:
            text = section(txt, n)["source_text"]
            return next((i for i, ch in enumerate(text) if ord(ch) > 0xFFFF), None)

        chapter = next(
            s["ordinal"]
            for s in books[txt]["sections"]
            if s["ordinal"] > 0
            and s["source_end"] - s["source_start"] > 3000
            and (first_astral(s["ordinal"]) or 10**9) < 2000
        )
        chap = section(txt, chapter)
        astral = first_astral(chapter)
        assert astral is not None
        # Deep-link places: after the astral character, in book source coordinates.
        local = astral + 40
        point = chap["source_start"] + local
        point_u16 = chap["utf16_start"] + _utf16(chap["source_text"][:local])
        assert point_u16 - chap["utf16_start"] > local  # the point of the test

        def bookmark(book: str, place: dict[str, Any]) -> dict[str, Any]:
            r = client.post(f"/books/{book}/bookmarks", json=place)
            assert r.status_code in (200, 201), r.text
            out: dict[str, Any] = r.json()
            return out

        txt_mark = bookmark(txt, {"section": chapter, "offset": point})
        assert txt_mark["quote"]["exact"] == chap["source_text"][local : local + QUOTE]
        section(epub, 0)  # read after the server has stopped
        epub_mark = bookmark(epub, {"section": 0, "offset": 5000})
        epub_point_cfi = epub_mark["locator"]["locations"]["cfi"]
        epub_chunk = client.get(f"/books/{epub}/chunks", params={"limit": 200}).json()["chunks"][7]
        epub_range = client.get(f"/books/{epub}/locate", params={"chunk": epub_chunk["id"]}).json()
        txt_chunk = next(
            c
            for c in client.get(f"/books/{txt}/chunks", params={"section": chapter}).json()[
                "chunks"
            ]
            if c["index"] == 1
        )
        txt_range = client.get(f"/books/{txt}/locate", params={"chunk": txt_chunk["id"]}).json()
        links = [
            (f"book={txt}&section={chapter}&offset={point}", txt_mark["quote"]["exact"], chapter),
            (
                f"book={txt}&section={chapter}&offset={point_u16}&unit=utf16",
                txt_mark["quote"]["exact"],
                chapter,
            ),
            (
                f"book={txt}&section={chapter}&section_offset={local}",
                txt_mark["quote"]["exact"],
                chapter,
            ),
            (f"book={epub}&cfi={epub_point_cfi}", epub_mark["quote"]["exact"], 0),
            # the same CFI percent-encoded, as encodeURIComponent writes [ ] (the docs' form)
            (
                f"book={epub}&cfi={quote(epub_point_cfi, safe='/:,;@$!()')}",
                epub_mark["quote"]["exact"],
                0,
            ),
            (
                f"book={epub}&cfi={epub_range['locations']['cfi']}",
                epub_range["text"]["highlight"],
                0,
            ),
            (
                f"book={txt}&section={chapter}&offset={txt_chunk['source_start']}"
                f"&end={txt_chunk['source_end']}",
                txt_range["text"]["highlight"],
                chapter,
            ),
        ]
        phone_time = (datetime.now(UTC) + timedelta(hours=1)).isoformat(timespec="milliseconds")
        phone_place = {"section": 0, "offset": 20000}
        later_place = {"section": 0, "offset": 9000}
        out = _run_driver(
            {
                "origin": server.url,
                "cover": {"book": cover},
                "restore": {"book": txt, "section": chapter, "wheel": 1600},
                "conflict": {
                    "book": epub,
                    "place": phone_place,
                    "device": "phone",
                    "modified": phone_time,
                    "later_place": later_place,
                },
                "links": [raw for raw, _, _ in links],
                "bad_link": f"book={txt}&section={chapter}&offset=0",
            }
        )
        kept_txt = client.get(f"/books/{txt}/position").json()
        kept_epub = client.get(f"/books/{epub}/position").json()
        txt_history = client.get(f"/books/{txt}/position/history").json()

    assert out["page_errors"] == [], out["page_errors"]

    # 1. The cover book opens on its first text.
    c = out["cover"]
    assert c["book"] == cover and c["section"] == 1 and c["view"] == "epub"
    assert c["textLength"] > 0 and c["visible"]["section"] == 1
    assert _writes(c) == []  # opening is not a move

    # 2. Saved as the reader moved, restored on reload, in a new tab, on another device.
    r = out["restore"]
    assert r["opened"]["section"] == 0  # no position yet: the first section with text
    saved = r["saved"]
    place = saved["place"]
    assert place["book"] == txt and place["section"] == chapter
    assert place["offset"] > chap["source_start"] + 200, "the wheel did not scroll the chapter"
    assert saved["savedPlace"] == place
    put = [e for e in saved["log"] if e["kind"] == "put"][-1]
    assert put["body"]["section"] == chapter and put["body"]["offset"] == place["offset"]
    assert put["body"]["unit"] == "codepoint" and put["body"]["device"] == saved["device"]
    assert saved["position"]["locator"]["section"] == chapter
    assert saved["position"]["locator"]["source"]["start"] == place["offset"]
    assert saved["position"]["device"] == saved["device"]
    _on_screen(saved, chap, place["offset"])
    assert saved["hash"] == f"#book={txt}&section={chapter}&offset={place['offset']}"
    # The place is the first character on screen: its UTF-16 twin is the same point.
    assert place["utf16"] - chap["utf16_start"] == _utf16(
        chap["source_text"][: place["offset"] - chap["source_start"]]
    )
    for name in ("reloaded", "same_device", "other_device"):
        snap = r[name]
        _on_screen(snap, chap, place["offset"])
        assert snap["place"]["offset"] == place["offset"], (name, snap["place"], place)
        assert _writes(snap) == [], (name, snap["log"])  # coming back writes nothing
    assert r["same_device"]["device"] == saved["device"] != r["other_device"]["device"]
    assert r["other_device"]["position"]["id"] == saved["position"]["id"]
    # A reload opens the URL the page wrote: a deep link, painted at the place.
    at = place["offset"] - chap["source_start"]
    assert r["reloaded"]["highlight"]["text"] == chap["source_text"][at : at + QUOTE]
    # Leaving before the debounce fired: saved on pagehide, restored on the next visit.
    leaving, returned = r["leaving"], r["returned"]
    assert leaving["current"]["offset"] > place["offset"], "the second wheel did not scroll"
    assert leaving["savedPlace"] == place  # not saved yet when the page was left
    assert returned["position"]["device"] == saved["device"]
    assert returned["position"]["locator"]["source"]["start"] == leaving["current"]["offset"]
    assert returned["place"]["offset"] == leaving["current"]["offset"]
    _on_screen(returned, chap, leaving["current"]["offset"])

    # 3. A newer position from another device: 409, adopted, then saved after it.
    k = out["conflict"]
    assert k["other"]["status"] == 200, k["other"]
    conflicts = [e for e in k["adopted"]["log"] if e["kind"] == "conflict"]
    assert len(conflicts) == 1 and conflicts[0]["current"]["device"] == "phone"
    assert k["adopted"]["position"]["device"] == "phone"
    _on_screen(k["adopted"], section(epub, 0), phone_place["offset"])
    assert len(out["expected_errors"]) == 1 and "409" in out["expected_errors"][0]
    last = k["after"]["log"][-1]
    assert last["kind"] == "put", k["after"]["log"]
    assert k["after"]["position"]["device"] == k["after"]["device"]
    assert datetime.fromisoformat(
        last["body"]["modified"].replace("Z", "+00:00")
    ) > datetime.fromisoformat(phone_time)
    # Shown again after the reader went on on the phone: the page goes there by itself.
    assert k["again"]["status"] == 200, k["again"]
    refreshed = k["refreshed"]
    assert refreshed["position"]["device"] == "phone"
    assert refreshed["position"]["id"] == k["again"]["body"]["id"]
    _on_screen(refreshed, section(epub, 0), later_place["offset"])
    assert [e["kind"] for e in refreshed["log"][len(k["after"]["log"]) :]] == ["refresh"]

    # 4. Deep links paint exactly the API's text at their place.
    assert len(out["links"]) == len(links)
    for shown, (raw, expected, sec) in zip(out["links"], links, strict=True):
        assert shown["link"] == raw
        assert shown["section"] == sec, raw
        assert shown["painted"] == expected, (raw, shown["painted"][:60], expected[:60])
        info = shown["highlight"]
        assert info["text"] == expected and info["visible"] is True, raw
        assert info["matchesSource"] is True
        assert shown["hash"] == "#" + raw  # the link stays until the reader moves on
    moved = out["links_moved"]
    frag = moved["fragment"]
    assert (
        moved["hash"]
        == f"#book={moved['place']['book']}&section={moved['place']['section']}&offset={moved['place']['offset']}"
    )
    assert (frag["book"], frag["section"], frag["offset"]) == (
        moved["place"]["book"],
        moved["place"]["section"],
        moved["place"]["offset"],
    )
    assert "outside section" in out["bad_link"]["status"]

    # What the server keeps is what the page last saved (the phone's place was newer once).
    assert kept_txt["locator"]["section"] == moved["place"]["section"] == chapter
    assert kept_txt["locator"]["source"]["start"] == moved["place"]["offset"]
    assert kept_txt["device"] == moved["device"]
    assert kept_epub["device"] == moved["device"]
    assert kept_epub["modified"] > phone_time.replace("+00:00", "Z")
    assert [p["id"] for p in txt_history].count(kept_txt["id"]) == 1
