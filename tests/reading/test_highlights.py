"""Highlights and quote calibration through the Library, and highlights that survive a
new edition of their book: real corpus books, real edits, every outcome checked.

The editions are built in ``tmp_path`` from the samples (a chapter inserted, a typo
fixed inside a highlight, a paragraph deleted, the whole text re-wrapped; an EPUB with a
word changed, found by its package identifier) and imported like any book, with
``replaces=`` or by identifier. For every highlight the test states what must happen to
it; for every anchored one it checks that the new section's source text at the stored
span is exactly the stored quote.
"""

from __future__ import annotations

import json
import re
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mindory.cli import main as cli_main
from mindory.errors import LimitError, MindoryError, NotFoundError
from mindory.library import Library
from mindory.reading.highlights import UNSET, Highlight, annotation_id, parse_highlight_id
from mindory.text.records import ChunkSettings, Settings
from tests.conftest import SAMPLES

NEWS = SAMPLES / "news-from-nowhere.txt"
QIAOSHI = SAMPLES / "qiaoshi-yanyi.txt"
WASTE = SAMPLES / "wasteland.epub"


@pytest.fixture
def lib(db_url: str) -> Iterator[Library]:
    """A new library on each backend (SQLite, PostgreSQL: tests/pg.py)."""
    with Library.open(db_url) as library:
        yield library


def _u16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _stored_text(lib: Library, h: Highlight) -> str:
    """The book's source text at a highlight's stored span."""
    sec = lib.section(h.book, h.section)
    base = sec.info.source_start
    return sec.source_text[h.source_start - base : h.source_end - base]


def _check_anchored(lib: Library, h: Highlight) -> None:
    """An anchored highlight: quote, context, UTF-16 span and CFI all agree with the book."""
    assert h.status == "anchored"
    sec = lib.section(h.book, h.section)
    text, base = sec.source_text, sec.info.source_start
    a, b = h.source_start - base, h.source_end - base
    assert text[a:b] == h.exact
    assert h.prefix == text[max(0, a - 32) : a]
    assert h.suffix == text[b : b + 32]
    u0 = sec.info.utf16_start
    assert h.utf16_start - u0 == _u16(text[:a])
    assert h.utf16_end - u0 == _u16(text[:b])
    if h.cfi is not None:  # the stored CFI resolves to the same span
        found = lib.locate(h.book, cfi=h.cfi)
        assert found.position["source"]["position"] == h.source_start
        assert found.range_end == h.source_end


def _words(text: str, lo: int, hi: int, n: int) -> tuple[int, int]:
    """The span of ``n`` whole words starting at the first word at or after ``lo``."""
    ws = [m.span() for m in re.finditer(r"\S+", text[:hi])]
    k = next(i for i, (a, _) in enumerate(ws) if a >= lo)
    return ws[k][0], ws[k + n - 1][1]


# --------------------------------------------------------------------------- highlights


def test_highlight_by_code_points_and_by_utf16_after_astral_characters(lib: Library) -> None:
    book = lib.import_book(QIAOSHI).book
    sections = lib.sections(book)
    # the first section with a character outside the BMP, and a span after it
    for info in sections:
        sec = lib.section(book, info.ordinal)
        astral = [i for i, ch in enumerate(sec.source_text) if ord(ch) > 0xFFFF]
        if astral:
            break
    else:
        raise AssertionError("the sample has characters outside the BMP")
    text, base, u0 = sec.source_text, info.source_start, info.utf16_start
    a, b = astral[0] + 3, astral[0] + 40
    by_cp = lib.add_highlight(book, section=info.ordinal, start=base + a, end=base + b)
    assert by_cp.exact == text[a:b]
    assert by_cp.utf16_start == u0 + _u16(text[:a]) == u0 + a + 1  # one astral before
    _check_anchored(lib, by_cp)
    by_u16 = lib.add_highlight(
        book,
        section=info.ordinal,
        start=by_cp.utf16_start,
        end=by_cp.utf16_end,
        unit="utf16",
        exact=text[a:b],
        note="注",
        color="#AABBCC",
    )
    assert (by_u16.source_start, by_u16.source_end) == (by_cp.source_start, by_cp.source_end)
    assert by_u16.color == "#aabbcc" and by_u16.note == "注"
    # one holding the astral character itself
    holding = lib.add_highlight(
        book, section=info.ordinal, start=base + astral[0] - 2, end=base + astral[0] + 2
    )
    assert holding.utf16_end - holding.utf16_start == 5
    _check_anchored(lib, holding)
    # a UTF-16 position inside the surrogate pair is refused, not rounded
    with pytest.raises(MindoryError, match="surrogate"):
        lib.add_highlight(
            book,
            section=info.ordinal,
            start=holding.utf16_start + 3,
            end=holding.utf16_end,
            unit="utf16",
        )
    listed = lib.highlights(book, section=info.ordinal)
    assert [h.id for h in listed] == sorted(
        [by_cp.id, by_u16.id, holding.id],
        key=lambda i: next((h.source_start, h.created) for h in listed if h.id == i),
    )


def test_highlight_json_is_a_w3c_web_annotation(lib: Library) -> None:
    txt = lib.import_book(NEWS).book
    epub = lib.import_book(WASTE).book
    sec = lib.section(txt, 3)
    base = sec.info.source_start
    a, b = _words(sec.source_text, 500, len(sec.source_text), 6)
    h = lib.add_highlight(txt, section=3, start=base + a, end=base + b, note="a note")
    out = h.to_json()
    assert out["@context"] == "http://www.w3.org/ns/anno.jsonld"
    assert out["type"] == "Annotation" and out["motivation"] == "commenting"
    assert out["id"] == annotation_id(h.id) and out["id"].startswith("urn:uuid:")
    assert out["body"] == [
        {"type": "TextualBody", "purpose": "highlighting", "value": "yellow"},
        {"type": "TextualBody", "purpose": "commenting", "format": "text/plain", "value": "a note"},
    ]
    assert out["target"]["source"] == "news-from-nowhere.txt"
    quote, position, fragment = out["target"]["selector"]
    assert quote == {
        "type": "TextQuoteSelector",
        "exact": sec.source_text[a:b],
        "prefix": sec.source_text[a - 32 : a],
        "suffix": sec.source_text[b : b + 32],
    }
    assert position == {"type": "TextPositionSelector", "start": base + a, "end": base + b}
    assert fragment == {
        "type": "FragmentSelector",
        "value": f"char={base + a},{base + b}",
        "conformsTo": "http://tools.ietf.org/rfc/rfc5147",
    }
    assert out["book"] == txt and out["section"] == 3 and out["status"] == "anchored"
    assert out["source"] == {
        "start": base + a,
        "end": base + b,
        "utf16Start": base + a,
        "utf16End": base + b,
    }
    assert out["reanchored"] is None
    json.dumps(out)  # plain data

    # EPUB: the section's document, and the specification's range CFI.
    esec = lib.section(epub, 0)
    e = lib.add_highlight(epub, section=0, start=1000, end=1234)
    sel = e.to_json()["target"]
    assert sel["source"] == esec.info.href
    assert sel["selector"][2]["conformsTo"] == "http://www.idpf.org/epub/linking/cfi/epub-cfi.html"
    assert sel["selector"][2]["value"] == e.cfi and e.cfi is not None
    _check_anchored(lib, e)
    # ... and a highlight made from that CFI is the same span
    again = lib.add_highlight(epub, cfi=e.cfi, color="green")
    assert (again.section, again.source_start, again.source_end) == (0, 1000, 1234)
    assert again.exact == esec.source_text[1000:1234]


def _chunk_at(lib: Library, book: str, section: int) -> str:
    return lib.chunks(book, section=section, limit=1)[0].id


def test_get_update_delete(lib: Library) -> None:
    book = lib.import_book(NEWS).book
    base = lib.section(book, 2).info.source_start
    h = lib.add_highlight(book, section=2, start=base + 100, end=base + 130)
    assert lib.highlight(book, h.id) == h
    assert lib.highlight(book, annotation_id(h.id)) == h  # urn:uuid: form
    assert lib.highlight(book, str(uuid.UUID(h.id))) == h
    changed = lib.update_highlight(book, h.id, note="why", color="blue")
    assert (changed.note, changed.color) == ("why", "blue")
    assert changed.modified >= h.modified and changed.created == h.created
    kept = lib.update_highlight(book, h.id, color="pink")
    assert (kept.note, kept.color) == ("why", "pink")
    cleared = lib.update_highlight(book, h.id, note=None, color=UNSET)
    assert cleared.note is None and cleared.color == "pink"
    assert (cleared.exact, cleared.source_start) == (h.exact, h.source_start)
    with pytest.raises(MindoryError, match="colour"):
        lib.update_highlight(book, h.id, color="chartreuse")
    gone = lib.delete_highlight(book, h.id)
    assert gone.id == h.id
    with pytest.raises(NotFoundError):
        lib.highlight(book, h.id)
    with pytest.raises(NotFoundError):
        lib.delete_highlight(book, h.id)
    with pytest.raises(NotFoundError):
        lib.highlight(book, "not-an-id")
    assert parse_highlight_id("urn:uuid:" + str(uuid.UUID(h.id))) == h.id


def test_verify_checks_highlights(lib: Library) -> None:
    book = lib.import_book(NEWS).book
    base = lib.section(book, 2).info.source_start
    h = lib.add_highlight(book, section=2, start=base + 10, end=base + 40)
    assert lib.verify().ok
    from sqlalchemy import update

    from mindory.store.models import HighlightRow

    with lib.engine.begin() as conn:
        conn.execute(update(HighlightRow).where(HighlightRow.uid == h.id).values(exact="x" * 30))
    report = lib.verify()
    assert not report.ok and any(h.id in p and "not its quote" in p for p in report.problems)
    assert parse_highlight_id("xyz") is None


def test_bad_highlights_are_refused(lib: Library) -> None:
    txt = lib.import_book(NEWS).book
    epub = lib.import_book(WASTE).book
    sec = lib.section(txt, 1)
    base, end = sec.info.source_start, sec.info.source_end
    cases: list[tuple[dict[str, Any], str]] = [
        ({"section": 1, "start": base + 5, "end": base + 5}, "empty"),
        ({"section": 1, "start": base + 9, "end": base + 5}, "empty"),
        ({"section": 1, "start": end - 2, "end": end + 10}, "outside section 1"),
        ({"section": 1, "start": base - 10, "end": base + 2}, "outside section 1"),
        ({"section": 1, "start": base}, "needs a section and a span"),
        ({"start": base, "end": base + 3}, "needs a section and a span"),
        ({"section": 1, "start": base, "end": base + 3, "unit": "bytes"}, "unknown unit"),
        ({"section": 1, "start": base, "end": base + 3, "color": "nope"}, "colour"),
        ({"section": 1, "start": base, "end": base + 3, "exact": "other"}, "not the given quote"),
        ({"cfi": "epubcfi(/6/2!/4/2,/1:0,/1:4)"}, "plain text"),
    ]
    for kwargs, message in cases:
        with pytest.raises(MindoryError, match=message):
            lib.add_highlight(txt, **kwargs)
    with pytest.raises(NotFoundError):
        lib.add_highlight(txt, section=999, start=0, end=3)
    with pytest.raises(MindoryError):
        lib.add_highlight(epub, cfi="epubcfi(/6/99!/4/2/1:0)")
    with pytest.raises(MindoryError, match="needs a range|needs text|empty"):
        lib.add_highlight(
            epub, cfi=lib.locate(epub, section=0, offset=100).position["locations"]["cfi"]
        )
    with pytest.raises(MindoryError, match="either a CFI or a span"):
        lib.add_highlight(epub, cfi="epubcfi(/6/2!/4/2/1:0)", start=1, end=2)
    with pytest.raises(MindoryError, match="note"):
        lib.add_highlight(txt, section=1, start=base, end=base + 3, note="x" * 10_001)
    assert lib.highlights(txt) == [] and lib.highlights(epub) == []


def test_reimporting_the_same_file_touches_no_highlight(lib: Library) -> None:
    book = lib.import_book(NEWS).book
    base = lib.section(book, 4).info.source_start
    h = lib.add_highlight(book, section=4, start=base + 300, end=base + 360, note="n")
    assert lib.import_book(NEWS).status == "unchanged"
    other = Settings(chunking=ChunkSettings(size=400, overlap=50))
    r = lib.import_book(NEWS, other)
    assert r.status == "rederived" and r.reanchored == ()
    assert lib.highlights(book) == [h]
    _check_anchored(lib, lib.highlight(book, h.id))


# --------------------------------------------------------------------------- quotes


def test_quote_calibration_through_the_library(lib: Library) -> None:
    book = lib.import_book(NEWS).book
    chunk = lib.chunks(book, section=7, limit=3)[1]
    sec = lib.section(book, 7)
    base = sec.info.source_start
    raw = sec.source_text[chunk.source_start - base : chunk.source_end - base]
    # literal, from a chunk
    quote = raw[200:320].strip()
    m = lib.calibrate_quote(book, quote, chunk=chunk.id)
    assert m.method == "exact" and m.match.exact == quote
    out = m.to_json()
    assert out["scope"] == {"kind": "chunk", "section": 7, "chunk": chunk.id}
    assert out["locator"]["text"]["highlight"] == quote
    assert out["source"]["start"] == chunk.source_start + raw.index(quote, 190)
    assert out["minPrefix"] == 16 and out["quote"] == quote
    # the same quote as an assistant writes it: one line, curly quotes, extra spaces
    flat = " ".join(quote.split()).replace("'", "\u2019")
    n = lib.calibrate_quote(book, f"  {flat} ", chunk=chunk.id[:10])
    assert n.method == "normalized"
    assert n.locator.highlight == quote
    # a hallucinated tail: only the prefix that is really there
    p = lib.calibrate_quote(book, quote[:60] + " and then the Martians landed in Hammersmith")
    assert p.method == "prefix" and quote.startswith(p.match.exact)
    assert p.to_json()["scope"] == {"kind": "book", "section": None, "chunk": None}
    assert p.to_json()["quote"].endswith("Hammersmith")  # the raw quote is kept
    # pure invention
    r = lib.calibrate_quote(book, "Zanzibar quantum blockchain synergy", section=7)
    assert r.method == "rejected" and r.locator is None
    assert r.to_json()["exact"] is None and r.to_json()["locator"] is None
    # a higher floor turns a short prefix into a rejection
    short = lib.calibrate_quote(book, quote[:20] + " Zanzibar Zanzibar", min_prefix=40)
    assert short.method == "rejected" and short.to_json()["minPrefix"] == 40
    with pytest.raises(MindoryError, match="section 7, not 3"):
        lib.calibrate_quote(book, quote, chunk=chunk.id, section=3)
    with pytest.raises(NotFoundError):
        lib.calibrate_quote(book, quote, section=500)
    with pytest.raises(LimitError):
        lib.calibrate_quote(book, "x" * 10_001)


def test_quote_calibration_in_chinese_after_astral_characters(lib: Library) -> None:
    book = lib.import_book(QIAOSHI).book
    for info in lib.sections(book):
        sec = lib.section(book, info.ordinal)
        astral = [i for i, ch in enumerate(sec.source_text) if ord(ch) > 0xFFFF]
        if astral:
            break
    a = astral[0] + 5
    quote = sec.source_text[a : a + 30]
    m = lib.calibrate_quote(book, quote)
    assert m.method == "exact" and m.min_prefix == 5
    loc = m.locator
    assert loc.highlight == quote and loc.section == info.ordinal
    assert loc.utf16_start - info.utf16_start == _u16(sec.source_text[:a])
    # wrapped in 「」 with its line breaks removed and a made-up ending
    said = "「" + "".join(quote.split()) + "」"
    assert lib.calibrate_quote(book, said).locator.highlight.strip() == quote.strip()
    tail = lib.calibrate_quote(book, "".join(quote.split())[:8] + "天下太平萬事如意也")
    assert tail.method == "prefix" and tail.min_prefix == 5


# --------------------------------------------------------------------------- new editions

INSERTED = (
    "CHAPTER Interlude: A CHAPTER ADDED IN THE SECOND EDITION\r\n\r\n\r\n"
    + "".join(
        f"Paragraph {k} of a chapter written for the second edition, about a journey up "
        f"the river that never happened, on a day of weather number {k * 7}.\r\n\r\n"
        for k in range(10)
    )
    + "\r\n\r\n"
)


def _news_text() -> str:
    return NEWS.read_bytes().decode("ascii")


def _edition(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def _highlight_words(
    lib: Library, book: str, section: int, lo: int, n: int, note: str
) -> Highlight:
    sec = lib.section(book, section)
    base = sec.info.source_start
    a, b = _words(sec.source_text, lo, len(sec.source_text), n)
    return lib.add_highlight(book, section=section, start=base + a, end=base + b, note=note)


def _reports(result: Any) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in result.to_json()["reanchored"]}


def test_new_edition_with_a_chapter_inserted_before(lib: Library, tmp_path: Path) -> None:
    old = lib.import_book(NEWS).book
    marks = [
        _highlight_words(lib, old, s, lo, n, f"h{s}")
        for s, lo, n in ((2, 800, 5), (3, 1500, 12), (5, 3000, 1), (9, 400, 30))
    ]
    text = _news_text()
    at = lib.section(old, 3).info.source_start  # before chapter 3's heading
    new_path = _edition(tmp_path, "news-2.txt", text[:at] + INSERTED + text[at:])
    result = lib.import_book(new_path, replaces=old[:12])
    assert result.status == "created" and result.replaces == (old,)
    new = result.book
    reports = _reports(result)
    assert set(reports) == {annotation_id(h.id) for h in marks}
    for h in marks:
        r = reports[annotation_id(h.id)]
        assert r["status"] == "position" and r["confidence"] == 1.0, r
        moved = lib.highlight(new, h.id)
        _check_anchored(lib, moved)
        assert moved.exact == h.exact and moved.note == h.note
        assert moved.book == new and moved.reanchored is not None
        assert moved.reanchored["status"] == "position"
        after = h.section >= 3
        assert moved.section == h.section + (1 if after else 0)
        assert moved.source_start == h.source_start + (len(INSERTED) if after else 0)
    # moved, not copied: the old book keeps no highlight, and is kept itself
    assert lib.highlights(old) == []
    assert lib.book(old).id == old
    assert lib.verify().ok, lib.verify().problems  # every stored quote is where it says
    # importing the new edition again changes nothing
    again = lib.import_book(new_path)
    assert again.status == "unchanged" and again.reanchored == ()


def test_new_edition_with_a_typo_fixed_inside_a_highlight(lib: Library, tmp_path: Path) -> None:
    text = _news_text()
    old_path = tmp_path / "news-typo.txt"
    old = lib.import_book(NEWS).book
    sec = lib.section(old, 4)
    base = sec.info.source_start
    a, b = _words(sec.source_text, 2000, len(sec.source_text), 9)
    word = max(re.finditer(r"[A-Za-z]{6,}", sec.source_text[a:b]), key=lambda m: m.start())
    # the first edition had the letters of one word swapped; the second fixes it
    p = base + a + word.start() + 2
    typo_text = text[:p] + text[p + 1] + text[p] + text[p + 2 :]
    old_path.write_bytes(typo_text.encode("ascii"))
    first = lib.import_book(old_path).book
    h = lib.add_highlight(first, section=4, start=base + a, end=base + b)
    assert h.exact != text[base + a : base + b]
    untouched = _highlight_words(lib, first, 6, 1000, 8, "other")
    result = lib.import_book(NEWS, replaces=first)
    assert result.status == "unchanged"  # the fixed text was already in the library
    reports = _reports(result)
    r = reports[annotation_id(h.id)]
    assert r["status"] == "fuzzy" and r["changed"] is True and r["edits"] == 2, r
    assert "quote changed" in r["note"]
    fixed = lib.highlight(old, h.id)
    _check_anchored(lib, fixed)
    assert (fixed.source_start, fixed.source_end) == (base + a, base + b)
    assert fixed.exact == text[base + a : base + b]  # the updated quote
    assert r["new"]["exact"] == fixed.exact and r["old"]["exact"] == h.exact
    assert reports[annotation_id(untouched.id)]["status"] == "position"


def test_new_edition_with_a_paragraph_deleted(lib: Library, tmp_path: Path) -> None:
    text = _news_text()
    old = lib.import_book(NEWS).book
    sec = lib.section(old, 5)
    base, local = sec.info.source_start, sec.source_text
    paras = [m.span() for m in re.finditer(r"(?:[^\r\n]+\r\n)*[^\r\n]+", local)]
    pa, pb = next((a, b) for a, b in paras if b - a > 900 and a > 2000)
    assert local[pb : pb + 4] == "\r\n\r\n"
    inside = [
        _highlight_words(lib, old, 5, pa, 1, "first word"),
        _highlight_words(lib, old, 5, pa + 300, 12, "middle"),
        _highlight_words(lib, old, 5, pb - 40, 3, "last words"),
    ]
    before = _highlight_words(lib, old, 5, pa - 600, 6, "before")
    after = _highlight_words(lib, old, 5, pb + 200, 6, "after")
    elsewhere = _highlight_words(lib, old, 8, 500, 6, "elsewhere")
    cut_a, cut_b = base + pa, base + pb + 4
    new_path = _edition(tmp_path, "news-cut.txt", text[:cut_a] + text[cut_b:])
    result = lib.import_book(new_path, replaces=old)
    new = result.book
    reports = _reports(result)
    gone = cut_b - cut_a
    for h in inside:
        r = reports[annotation_id(h.id)]
        assert r["status"] == "orphaned" and r["new"] is None, (h.exact, r)
        orphan = lib.highlight(new, h.id)  # listed under the new book ...
        assert orphan.status == "orphaned" and orphan.exact == h.exact  # ... with its old quote
        assert (orphan.section, orphan.source_start) == (h.section, h.source_start)
        out = orphan.to_json()
        assert out["section"] is None and out["source"] is None
        assert out["target"]["selector"] == [
            {"type": "TextQuoteSelector", "exact": h.exact, "prefix": h.prefix, "suffix": h.suffix}
        ]
        assert out["orphanedFrom"]["book"] == old
        assert out["orphanedFrom"]["source"]["start"] == h.source_start
    assert reports[annotation_id(before.id)]["status"] == "position"
    assert reports[annotation_id(after.id)]["status"] == "exact"
    assert reports[annotation_id(elsewhere.id)]["status"] == "position"
    for h, shift in ((before, 0), (after, gone), (elsewhere, gone)):
        moved = lib.highlight(new, h.id)
        _check_anchored(lib, moved)
        assert moved.exact == h.exact and moved.source_start == h.source_start - shift
    assert [h.status for h in lib.highlights(new)] == ["anchored"] * 3 + ["orphaned"] * 3
    assert {h.id for h in lib.highlights(new, status="orphaned")} == {h.id for h in inside}
    assert lib.highlights(new, section=5) == [
        lib.highlight(new, before.id),
        lib.highlight(new, after.id),
    ]

    # A third edition restores the paragraph: the orphans come back, placed by their
    # quotes and the text of the edition they were made on (still in the library).
    restored = _edition(tmp_path, "news-3.txt", text + "\r\nThe end of the third edition.\r\n")
    third = lib.import_book(restored, replaces=new)
    back = _reports(third)
    for h in inside:
        r = back[annotation_id(h.id)]
        assert r["status"] in ("position", "exact"), r
        placed = lib.highlight(third.book, h.id)
        _check_anchored(lib, placed)
        assert placed.exact == h.exact and placed.source_start == h.source_start


def test_new_edition_rewrapped(lib: Library, tmp_path: Path) -> None:
    text = _news_text()
    old = lib.import_book(NEWS).book
    marks = [
        _highlight_words(lib, old, s, lo, n, f"w{s}")
        for s, lo, n in ((2, 300, 4), (3, 2222, 25), (6, 5000, 2), (10, 100, 14))
    ]
    paras = re.split(r"(?:\r?\n){2,}", text)
    out = []
    for para in paras:  # every paragraph re-filled at 55 columns, LF line ends
        lines: list[str] = []
        line = ""
        for w in para.split():
            if line and len(line) + 1 + len(w) > 55:
                lines.append(line)
                line = w
            else:
                line = f"{line} {w}" if line else w
        lines.append(line)
        out.append("\n".join(lines))
    new_path = _edition(tmp_path, "news-wrapped.txt", "\n\n".join(out))
    result = lib.import_book(new_path, replaces=old)
    reports = _reports(result)
    for h in marks:
        r = reports[annotation_id(h.id)]
        assert r["status"] in ("exact", "normalized"), r
        moved = lib.highlight(result.book, h.id)
        _check_anchored(lib, moved)
        # the same words, only whitespace differs
        assert moved.exact.split() == h.exact.split()
        assert moved.exact == r["new"]["exact"]
    assert any(reports[annotation_id(h.id)]["status"] == "normalized" for h in marks)


def _epub_with(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """wasteland.epub with one text change in its content document (same identifier)."""
    out = tmp_path / name
    with zipfile.ZipFile(WASTE) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith("wasteland-content.xhtml"):
                body = data.decode("utf-8")
                assert body.count(old) == 1, old
                data = body.replace(old, new).encode("utf-8")
            dst.writestr(info, data, compress_type=info.compress_type)
    return out


def test_epub_new_edition_is_found_by_its_identifier(lib: Library, tmp_path: Path) -> None:
    first = lib.import_book(
        _epub_with(tmp_path, "waste-1.epub", "Unreal City,", "Unreal Citty,")
    ).book
    sec = lib.section(first, 0)
    text = sec.source_text
    at = text.index("Unreal Citty,")
    typo = lib.add_highlight(first, section=0, start=at - 20, end=at + 30, note="city")
    far = text.index("Shantih")
    kept = lib.add_highlight(first, section=0, start=far - 50, end=far + 7)
    result = lib.import_book(WASTE)  # no replaces: the same dc:identifier
    assert result.status == "created" and result.replaces == (first,)
    reports = _reports(result)
    assert reports[annotation_id(typo.id)]["status"] == "fuzzy"
    assert reports[annotation_id(kept.id)]["status"] in ("position", "exact")
    for h in (typo, kept):
        moved = lib.highlight(result.book, h.id)
        _check_anchored(lib, moved)  # includes the new CFI resolving to the new span
        assert moved.cfi is not None and moved.href == sec.info.href
    assert "Unreal City," in lib.highlight(result.book, typo.id).exact
    # A book with another identifier is never taken for an edition.
    plain = lib.import_book(NEWS)
    assert plain.replaces == () and plain.reanchored == ()


def test_replaces_is_checked(lib: Library, tmp_path: Path) -> None:
    book = lib.import_book(NEWS).book
    with pytest.raises(NotFoundError):
        lib.import_book(QIAOSHI, replaces="no such book anywhere")
    with pytest.raises(MindoryError, match="very file"):
        lib.import_book(NEWS, replaces=book)
    assert len(lib.books()) == 1
    # nothing to move: fine, and said so
    r = lib.import_book(QIAOSHI, replaces=book)
    assert r.replaces == (book,) and r.reanchored == ()
    assert r.to_json()["replaces"] == [book] and r.to_json()["reanchored"] == []


def test_cli_import_replaces(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    with Library.open(db) as lib:
        old = lib.import_book(NEWS).book
        h = _highlight_words(lib, old, 3, 700, 5, "cli")
    text = _news_text()
    new_path = _edition(tmp_path, "news-cli.txt", text.replace("CHAPTER III", "CHAPTER 3", 1))
    runner = CliRunner()
    res = runner.invoke(
        cli_main, ["--db", str(db), "import", str(new_path), "--replaces", old[:10], "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    (item,) = out["results"]
    assert item["replaces"] == [old]
    assert [r["id"] for r in item["reanchored"]] == [annotation_id(h.id)]
    assert item["reanchored"][0]["status"] in ("position", "exact")
    res = runner.invoke(
        cli_main, ["--db", str(db), "import", str(new_path), str(NEWS), "--replaces", old]
    )
    assert res.exit_code != 0 and "one file" in res.output
