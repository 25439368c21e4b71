"""Quote calibration sees what a reader sees: ruby annotations (furigana) are not part of
the sentence, and the span found still covers whole ``<ruby>`` elements.

The Kusamakura sample (vertical Japanese with ruby) through the Library and through
``POST /books/{id}/anchors``, a quote typed with and without its furigana; and a property
test over random ruby-bearing XHTML: the ruby-less quote of any stretch of text is found,
its span's ruby-less text is the quote, and no ruby element is cut.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.importers import load_book
from mindory.importers.xhtml import parse_content
from mindory.importers.xhtml.ruby import RubyLayout, ruby_layout
from mindory.library import Library
from mindory.reading.anchoring import SectionText, calibrate_quote
from mindory.reading.anchoring.ruby import visible_text
from mindory.server.app import create_app
from tests.conftest import corpus_file

KUSAMAKURA = "epub3_ja_kusamakura-vertical-ruby.epub"
PLAIN = "智に働けば角が立つ。"
WITH_FURIGANA = "智ちに働けば角かどが立つ。"
LOCAL = "http://127.0.0.1"


def _layouts(path: Path) -> dict[int, RubyLayout]:
    """Every section's ruby layout, from the importer's own DOM."""
    book = load_book(path)
    return {
        s.ordinal: ruby_layout(s.dom.body if s.dom is not None else None) for s in book.sections
    }


def _check_span(layout: RubyLayout, source: str, start: int, end: int, quote: str) -> None:
    """The span's ruby-less text is the quote, and it cuts no ruby element."""
    assert visible_text(source, layout, start, end) == quote
    for a, b in layout.rubies:
        assert not a < start < b, f"span starts inside ruby [{a}, {b})"
        assert not a < end < b, f"span ends inside ruby [{a}, {b})"


@pytest.fixture(scope="module")
def kusamakura() -> Path:
    return corpus_file(KUSAMAKURA)


@pytest.fixture(scope="module")
def library_path(tmp_path_factory: pytest.TempPathFactory, kusamakura: Path) -> Path:
    path = tmp_path_factory.mktemp("ruby") / "library.sqlite"
    with Library.open(path) as lib:
        lib.import_book(kusamakura)
    return path


@pytest.fixture(scope="module")
def lib(library_path: Path) -> Iterator[Library]:
    with Library.open(library_path) as library:
        yield library


@pytest.fixture(scope="module")
def book_id(lib: Library) -> str:
    (info,) = lib.books()
    return info.id


def test_search_finds_the_passage(lib: Library, book_id: str) -> None:
    result = lib.search("智に働けば角が立つ", k=3, mode="lexical", book=book_id)
    assert result.hits
    assert any(WITH_FURIGANA in h.locator.highlight for h in result.hits)


@pytest.mark.parametrize("quote", [PLAIN, WITH_FURIGANA])
def test_library_calibrates_with_and_without_furigana(
    lib: Library, book_id: str, kusamakura: Path, quote: str
) -> None:
    layouts = _layouts(kusamakura)
    answers = []
    for where in ({}, {"section": 2}):
        cal = lib.calibrate_quote(book_id, quote, **where)  # type: ignore[arg-type]
        m = cal.match
        assert m.method in ("exact", "normalized"), m.note
        assert m.exact == WITH_FURIGANA
        assert m.section == 2
        assert m.source_start is not None and m.source_end is not None
        source = lib.section(book_id, 2).source_text
        assert source[m.source_start : m.source_end] == m.exact
        _check_span(layouts[2], source, m.source_start, m.source_end, PLAIN)
        assert m.ruby_ignored is (quote == PLAIN)
        assert cal.locator is not None and cal.locator.highlight == m.exact
        answers.append((m.source_start, m.source_end))
    assert answers[0] == answers[1]
    if quote == WITH_FURIGANA:
        assert lib.calibrate_quote(book_id, quote).match.method == "exact"


def test_library_calibrates_from_a_chunk(lib: Library, book_id: str, kusamakura: Path) -> None:
    hit = lib.search("智に働けば角が立つ", k=1, mode="lexical", book=book_id).hits[0]
    cal = lib.calibrate_quote(book_id, PLAIN, chunk=hit.chunk)
    m = cal.match
    assert m.method == "normalized" and m.ruby_ignored
    assert m.exact == WITH_FURIGANA
    assert cal.scope == "chunk"


def test_a_partial_ruby_base_is_widened_to_the_whole_element(
    lib: Library, book_id: str, kusamakura: Path
) -> None:
    # 智識 carries one reading (ちしき) for both characters: a quote from 識 on
    # must still cover the whole <ruby>.
    layouts = _layouts(kusamakura)
    cal = lib.calibrate_quote(book_id, "識になるようじゃ")
    m = cal.match
    assert m.method == "normalized"
    assert m.exact is not None and m.exact.startswith("智識ちしき")
    assert m.section is not None and m.source_start is not None and m.source_end is not None
    layout = layouts[m.section]
    for a, b in layout.rubies:
        assert not a < m.source_start < b and not a < m.source_end < b
    assert "widened to whole ruby elements" in m.note


def test_http_anchors_with_and_without_furigana(
    library_path: Path, lib: Library, book_id: str
) -> None:
    app = create_app(library_path, import_isolation="thread")
    with TestClient(app, base_url=LOCAL) as client:
        for quote in (PLAIN, WITH_FURIGANA):
            for body in ({"quote": quote}, {"quote": quote, "section": 2}):
                r = client.post(f"/books/{book_id}/anchors", json=body)
                assert r.status_code == 200, r.text
                out: dict[str, Any] = r.json()
                assert out["method"] in ("exact", "normalized")
                assert out["exact"] == WITH_FURIGANA
                assert out["rubyIgnored"] is (quote == PLAIN)
                assert out["locator"]["text"]["highlight"] == WITH_FURIGANA
                want = lib.calibrate_quote(book_id, quote, section=body.get("section")).to_json()
                assert out == want
        # a quote that is nowhere is still rejected
        r = client.post(f"/books/{book_id}/anchors", json={"quote": "xyzzy florbix quantaloo"})
        assert r.status_code == 200 and r.json()["method"] == "rejected"


# --------------------------------------------------------------------------- property

XHTML = "http://www.w3.org/1999/xhtml"
_ALPHABET = "あいか漢字角"


@st.composite
def _ruby_text(draw: st.DrawFn) -> list[tuple[str, str, str, bool]]:
    """Segments: (kind, visible text, reading, with <rp>) — kind "plain" or "ruby"."""
    n = draw(st.integers(1, 12))
    out = []
    for _ in range(n):
        base = draw(st.text(_ALPHABET, min_size=1, max_size=3))
        if draw(st.booleans()):
            reading = draw(st.text(_ALPHABET, min_size=1, max_size=4))
            out.append(("ruby", base, reading, draw(st.booleans())))
        else:
            out.append(("plain", base, "", False))
    return out


def _xhtml(segments: list[tuple[str, str, str, bool]]) -> bytes:
    parts = []
    for kind, base, reading, rp in segments:
        if kind == "plain":
            parts.append(base)
        elif rp:
            parts.append(f"<ruby>{base}<rp>(</rp><rt>{reading}</rt><rp>)</rp></ruby>")
        else:
            parts.append(f"<ruby>{base}<rt>{reading}</rt></ruby>")
    body = "".join(parts)
    return f'<html xmlns="{XHTML}"><head><title>t</title></head><body><p>{body}</p></body></html>'.encode()


@settings(max_examples=300, deadline=None)
@given(_ruby_text(), st.data())
def test_ruby_less_quotes_find_whole_ruby_spans(
    segments: list[tuple[str, str, str, bool]], data: st.DataObject
) -> None:
    _, body, _, _ = parse_content(_xhtml(segments), "t.xhtml", "t.epub")
    layout = ruby_layout(body)
    source = layout.source_text
    assert source is not None
    i = data.draw(st.integers(0, len(segments) - 1))
    j = data.draw(st.integers(i, len(segments) - 1))
    quote = "".join(seg[1] for seg in segments[i : j + 1])
    text = SectionText(0, source, ruby=layout)
    m = calibrate_quote([text], quote)
    assert m.method in ("exact", "normalized"), (quote, source, m.note)
    assert m.source_start is not None and m.source_end is not None
    assert source[m.source_start : m.source_end] == m.exact
    _check_span(layout, source, m.source_start, m.source_end, quote)


@settings(max_examples=200, deadline=None)
@given(_ruby_text(), st.data())
def test_any_quote_never_cuts_a_ruby(
    segments: list[tuple[str, str, str, bool]], data: st.DataObject
) -> None:
    _, body, _, _ = parse_content(_xhtml(segments), "t.xhtml", "t.epub")
    layout = ruby_layout(body)
    source = layout.source_text
    assert source is not None
    reader = visible_text(source, layout)
    a = data.draw(st.integers(0, len(reader) - 1))
    b = data.draw(st.integers(a + 1, len(reader)))
    quote = reader[a:b]
    m = calibrate_quote([SectionText(0, source, ruby=layout)], quote, min_prefix=1)
    assert m.method in ("exact", "normalized"), (quote, source, m.note)
    assert m.source_start is not None and m.source_end is not None
    for x, y in layout.rubies:
        assert not x < m.source_start < y and not x < m.source_end < y
    assert quote in visible_text(source, layout, m.source_start, m.source_end) or (
        quote in source[m.source_start : m.source_end]
    )


# --------------------------------------------------------------------------- display text


def _ruby_hit(hits: Any) -> Any:
    return next(h for h in hits if WITH_FURIGANA in h.locator.highlight)


def test_hits_carry_a_display_text_without_ruby(lib: Library, book_id: str) -> None:
    result = lib.search("智に働けば角が立つ", k=3, mode="lexical", book=book_id)
    hit = _ruby_hit(result.hits)
    assert hit.display is not None
    assert PLAIN in hit.display.highlight
    assert WITH_FURIGANA not in hit.display.highlight
    text = hit.to_json()["locator"]["text"]
    assert text["highlight"] == hit.locator.highlight  # the raw DOM text stays
    assert text["display"] == hit.display.highlight
    assert set(text) == {"before", "highlight", "after", "displayBefore", "display", "displayAfter"}
    # the display text is the raw text without the <rt>/<rp> content, character for character
    lay = _layouts(corpus_file(KUSAMAKURA))[hit.section]
    source = lib.section(book_id, hit.section).source_text
    raw_ruby_less = visible_text(source, lay, hit.locator.source_start, hit.locator.source_end)
    assert "".join(text["display"].split()) == "".join(raw_ruby_less.split())
    # and word matches carried over land on the same words
    for m in hit.matches:
        a = hit.display.position(m.source_start - hit.locator.source_start)
        b = hit.display.position(m.source_end - hit.locator.source_start)
        assert hit.display.highlight[a:b] == visible_text(source, lay, m.source_start, m.source_end)


def test_plain_text_display_is_the_highlight(tmp_path: Path) -> None:
    from tests.conftest import SAMPLES

    with Library.open(tmp_path / "lib.sqlite") as library:
        library.import_book(SAMPLES / "news-from-nowhere.txt")
        hits = library.search("guest house", k=3, mode="lexical").hits
    assert hits
    for hit in hits:
        assert hit.display is not None
        assert hit.display.highlight == hit.locator.highlight.replace("\u00ad", "")


def test_cli_search_prints_the_reader_text(library_path: Path) -> None:
    from click.testing import CliRunner

    from mindory.cli import main as cli_main

    runner = CliRunner()
    args = ["--db", str(library_path), "search", "智に働けば角が立つ", "--mode", "lexical"]
    out = runner.invoke(cli_main, args)
    assert out.exit_code == 0, out.output
    assert "智に働けば角が立つ" in out.stdout
    assert "智ちに働けば" not in out.stdout
    as_json = runner.invoke(cli_main, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    import json

    hits = json.loads(as_json.stdout)["hits"]
    texts = [h["locator"]["text"] for h in hits]
    assert any(WITH_FURIGANA in t["highlight"] and PLAIN in t["display"] for t in texts)


def test_http_search_hits_carry_the_display_text(library_path: Path) -> None:
    app = create_app(library_path, import_isolation="thread")
    with TestClient(app, base_url=LOCAL) as client:
        r = client.get("/search", params={"q": "智に働けば角が立つ", "mode": "lexical"})
        assert r.status_code == 200, r.text
        texts = [h["locator"]["text"] for h in r.json()["hits"]]
    assert any(WITH_FURIGANA in t["highlight"] and PLAIN in t["display"] for t in texts)
    for t in texts:
        assert {"displayBefore", "display", "displayAfter"} <= set(t)
