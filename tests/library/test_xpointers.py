"""KOReader xpointers of stored books (mindory.library.xpointers): a place → the xpointer
KOReader writes and back, on a real Library; the errors the kosync routes map; plain
text refused; views cached by content."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindory.errors import MindoryError, XPointerError
from mindory.library import Library
from mindory.library import xpointers as xpointers_module
from mindory.library.xpointers import clear_cache, place_of_xpointer, xpointer_of
from mindory.reading.positions import PlaceIn
from tests.conftest import SAMPLES, corpus_file

NEWS = SAMPLES / "news-from-nowhere.txt"
KUSAMAKURA = "epub3_ja_kusamakura-vertical-ruby.epub"


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Library]:
    with Library.open(tmp_path_factory.mktemp("xp") / "library.db") as library:
        yield library


@pytest.fixture(scope="module")
def kusamakura(lib: Library) -> str:
    return lib.import_book(corpus_file(KUSAMAKURA), embed=False).book


@pytest.fixture(scope="module")
def news(lib: Library) -> str:
    return lib.import_book(NEWS, embed=False).book


def test_round_trip_through_the_library(lib: Library, kusamakura: str) -> None:
    clear_cache()
    text = lib.section(kusamakura, 2).source_text
    at = text.index("を登りながら")
    xp = xpointer_of(lib.state, kusamakura, 2, at)
    assert xp == "/body/DocFragment[3]/body/section/p[1]/span/text().0"
    assert place_of_xpointer(lib.state, kusamakura, xp) == (2, at)
    # the DOM 20260812 spelling reads back to the same place
    new = xpointer_of(lib.state, kusamakura, 2, at, dom_version=20260812)
    assert new == "/body[1]/DocFragment[3]/body[1]/section[1]/p[1]/span[1]/text()[1].0"
    assert place_of_xpointer(lib.state, kusamakura, new) == (2, at)
    for ordinal in (0, 5, 15):
        length = len(lib.section(kusamakura, ordinal).source_text)
        for offset in range(0, length + 1, max(1, length // 37)):
            xp = xpointer_of(lib.state, kusamakura, ordinal, offset)
            section, back = place_of_xpointer(lib.state, kusamakura, xp)
            assert section == ordinal
            # the place an xpointer names writes that same xpointer again
            assert xpointer_of(lib.state, kusamakura, section, back) == xp


def test_an_xpointer_becomes_a_reading_position(lib: Library, kusamakura: str) -> None:
    text = lib.section(kusamakura, 4).source_text
    at = len(text) // 2
    xp = xpointer_of(lib.state, kusamakura, 4, at)
    section, offset = place_of_xpointer(lib.state, kusamakura, xp)
    kept = lib.set_position(
        kusamakura,
        PlaceIn(section=section, offset=offset),
        device="koreader",
        modified="2026-12-01T08:00:00Z",
    )
    assert (kept.section, kept.point) == (4, offset)
    assert xpointer_of(lib.state, kusamakura, kept.section, kept.point) == xp


@pytest.mark.parametrize(
    ("xpointer", "message"),
    [
        ("body/DocFragment[3]", "does not start with '/'"),
        ("/body/DocFragment[99]/body/p/text().0", "outside the spine"),
        ("/body/DocFragment[3]/body/section/p[999]/text().0", "p\\[999\\]"),
        ("/body/DocFragment[3]/body/section/p[1]/span/text().999", "past the end"),
        ("/body/DocFragment[3]/body/section/p[1]/span/text()[9].0", "text\\(\\)\\[9\\]"),
        ("/FictionBook/body/p/text().0", "no DocFragment"),
    ],
)
def test_bad_xpointers_are_clear_errors(
    lib: Library, kusamakura: str, xpointer: str, message: str
) -> None:
    with pytest.raises(XPointerError, match=message) as info:
        place_of_xpointer(lib.state, kusamakura, xpointer)
    assert isinstance(info.value, MindoryError)


def test_bad_places_are_clear_errors(lib: Library, kusamakura: str) -> None:
    with pytest.raises(XPointerError, match="no section 99"):
        xpointer_of(lib.state, kusamakura, 99, 0)
    with pytest.raises(XPointerError, match="outside the section"):
        xpointer_of(lib.state, kusamakura, 2, 10**7)


def test_plain_text_lines(lib: Library, news: str) -> None:
    # KOReader's default for .txt: one <pre> per line, offsets file-global (book coordinates)
    sec = lib.section(news, 3)
    base = sec.info.source_start
    text = sec.source_text
    # the start of a line after the first line break (a non-blank line: a <pre>)
    local = next(p for p in range(1, len(text)) if text[p - 1] == "\n" and text[p] not in " \t\r\n")
    xp = xpointer_of(lib.state, news, 3, base + local)
    assert xp.startswith("/FictionBook/body/pre[") and xp.endswith("/text().0")
    assert place_of_xpointer(lib.state, news, xp) == (3, base + local)
    kept = lib.set_position(
        news,
        PlaceIn(section=3, offset=place_of_xpointer(lib.state, news, xp)[1]),
        device="koreader",
        modified="2026-12-01T08:00:00Z",
    )
    assert kept.point == base + local
    with pytest.raises(XPointerError, match="outside section 3"):
        xpointer_of(lib.state, news, 3, 0)
    with pytest.raises(XPointerError, match="Auto-detect TXT"):
        place_of_xpointer(lib.state, news, "/FictionBook/body/section/p[3]/text().5")
    with pytest.raises(XPointerError, match="plain text"):
        place_of_xpointer(lib.state, news, "/body/DocFragment[2]/body/p/text().0")


def test_plain_text_in_a_legacy_code_page_is_refused(lib: Library) -> None:
    book = lib.import_book(SAMPLES / "qiaoshi-yanyi.txt", embed=False).book
    with pytest.raises(XPointerError, match="AutodetectEncoding"):
        xpointer_of(lib.state, book, 0, 0)


def test_views_are_cached(
    lib: Library, kusamakura: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clear_cache()
    xpointer_of(lib.state, kusamakura, 6, 10)  # loads the view

    def no_read(*_: object, **__: object) -> None:
        raise AssertionError("the book file was read again")

    monkeypatch.setattr(xpointers_module, "view_of_document", no_read)
    start = time.perf_counter()
    for offset in range(0, 2000, 20):
        xp = xpointer_of(lib.state, kusamakura, 6, offset)
        place_of_xpointer(lib.state, kusamakura, xp)
    per_call = (time.perf_counter() - start) / 200
    assert per_call < 0.05  # milliseconds, not a parse of the document
