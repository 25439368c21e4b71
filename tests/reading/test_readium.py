"""Readium positions (mindory.reading.readium) and the manifest / positions list of every
corpus book (mindory.library.manifest): counted as Readium's toolkits count them (checked
here against zipfile's ``compress_size`` and an OPF read of our own), position N → place →
position N exactly, and every manifest and Locator valid under the official schemas."""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote
from xml.etree import ElementTree

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.library import Library
from mindory.reading.positions import PlaceIn
from mindory.reading.readium import (
    PositionList,
    ReadingItem,
    index_at_offset,
    index_at_progression,
    offset_at_progression,
    offset_of_index,
    offset_range,
    position_count,
    position_in_publication,
    zip_path_of_href,
)
from tests.conftest import CORPUS, ROOT, corpus_file

SCHEMAS = ROOT.parent / "shared" / "conformance" / "opds-schemas"
EPUBS = sorted(p.name for p in CORPUS.glob("*.epub")) or [
    "epub3_en_georgia-cfi.epub"  # absent corpus: corpus_file skips loudly (fails on CI)
]
TEXTS = [
    "txt_en_news-from-nowhere_ascii_crlf.txt",
    "txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt",
]


# --------------------------------------------------------------------------- pure rules


def test_position_count_is_readiums() -> None:
    assert [position_count(n) for n in (0, 1, 1023, 1024, 1025, 2048, 2049)] == [
        1, 1, 1, 1, 2, 2, 3,
    ]  # fmt: skip
    assert position_count(50_000, fixed=True) == 1
    with pytest.raises(ValueError):
        position_count(-1)


def test_the_navigator_rule() -> None:
    # Kotlin EpubNavigatorFragment / Swift EPUBNavigatorViewController: ceil(p * (n - 1))
    assert [index_at_progression(4, p) for p in (0.0, 0.01, 0.25, 0.34, 0.5, 0.75, 1.0)] == [
        0, 1, 1, 2, 2, 3, 3,
    ]  # fmt: skip
    # the positions list's own progressions (k-1)/n come back to k
    for n in range(1, 60):
        assert [index_at_progression(n, j / n) for j in range(n)] == list(range(n))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 400), st.integers(0, 200_000), st.data())
def test_position_place_position_round_trip(n: int, extra: int, data: st.DataObject) -> None:
    """With at least n - 1 characters every position has a character of its own."""
    length = n - 1 + extra
    offsets = [offset_of_index(n, length, j) for j in range(n)]
    assert offsets == sorted(offsets) and offsets[0] == 0
    for j, o in enumerate(offsets):
        assert 0 <= o <= length
        assert index_at_offset(n, length, o) == j
        lo, hi = offset_range(n, length, j)
        assert lo <= o <= hi
        # the positions list's progression resolves to the very same character
        assert offset_at_progression(n, length, j / n) == o
    # any progression: the place taken shows the position the navigator shows there
    p = data.draw(st.floats(0.0, 1.0))
    o = offset_at_progression(n, length, p)
    assert index_at_offset(n, length, o) == index_at_progression(n, p)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 50), st.integers(0, 48))
def test_too_few_characters_stay_monotone(n: int, length: int) -> None:
    """Fewer characters than positions: positions share characters, never go backwards."""
    offsets = [offset_of_index(n, length, j) for j in range(n)]
    assert offsets == sorted(offsets) and all(0 <= o <= length for o in offsets)
    back = [index_at_offset(n, length, o) for o in offsets]
    assert back == sorted(back)


def test_position_list_numbering() -> None:
    items = [
        ReadingItem(0, "a.xhtml", "application/xhtml+xml", 3, 3000),
        ReadingItem(2, "b.xhtml", "application/xhtml+xml", 1, 10),
        ReadingItem(3, "c.xhtml", "application/xhtml+xml", 2, 0),
    ]
    plist = PositionList(items)
    assert plist.total == 6 and plist.firsts == (1, 4, 5)
    got = [(r.section, r.progression, r.offset) for r in map(plist.resolve, range(1, 7))]
    assert got == [(0, 0.0, 0), (0, 1 / 3, 1000), (0, 2 / 3, 2000), (2, 0.0, 0), (3, 0.0, 0),
                   (3, 0.5, 0)]  # fmt: skip
    assert plist.resolve(6).total_progression == 5 / 6
    for bad in (0, 7, -1):
        with pytest.raises(ValueError, match="outside the publication"):
            plist.resolve(bad)
    with pytest.raises(ValueError, match="whole number"):
        plist.resolve(True)
    # a section outside the reading order (counts 0): the next position
    assert position_in_publication((3, 0, 1, 2), 1, 5, 100) == 4
    assert position_in_publication((3, 1, 0), 2, 0, 9) == 4  # clamped to the last


def test_manifest_hrefs_back_to_zip_paths() -> None:
    assert zip_path_of_href("resources/OPS/ch%201.xhtml#p3") == "OPS/ch 1.xhtml"
    assert zip_path_of_href("http://h:8/books/abc/resources/OEBPS/x.xhtml") == "OEBPS/x.xhtml"
    assert zip_path_of_href("/books/abc/resources/OEBPS/x.xhtml") == "OEBPS/x.xhtml"
    assert zip_path_of_href("/OEBPS/x.xhtml") == "OEBPS/x.xhtml"  # Readium 2 toolkits
    assert zip_path_of_href("OEBPS/x.xhtml") is None  # a ZIP path: mindory's own rules
    assert zip_path_of_href("resources/../etc/passwd") is None


# --------------------------------------------------------------------------- the corpus


def _schema_registry() -> Any:
    """The Readium schemas (webpub manifest, Locator) and the OPDS drafts they cite,
    with ``(?<name>`` rewritten to Python's ``(?P<name>`` in memory."""
    from referencing import Registry, Resource

    if not SCHEMAS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"conformance schemas missing on CI: {SCHEMAS}")
        pytest.skip(f"SKIPPED LOUDLY: {SCHEMAS} is not here (tests read ../shared/conformance)")
    resources = []
    for folder in ("webpub-manifest", "readium-architecture", "opds-drafts"):
        for path in sorted((SCHEMAS / folder).rglob("*.schema.json")):
            text = re.sub(r"\(\?<(?=[A-Za-z])", "(?P<", path.read_text(encoding="utf-8"))
            schema = json.loads(text)
            resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


@pytest.fixture(scope="module")
def validators() -> dict[str, Any]:
    from jsonschema import Draft7Validator

    registry = _schema_registry()

    def make(uri: str) -> Any:
        schema = registry.contents(uri)
        return Draft7Validator(
            schema, registry=registry, format_checker=Draft7Validator.FORMAT_CHECKER
        )

    return {
        "manifest": make("https://readium.org/webpub-manifest/schema/publication.schema.json"),
        "locator": make("https://readium.org/architecture/schema/locator.schema.json"),
    }


@pytest.fixture(scope="module")
def corpus_lib(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Library, dict[str, str]]]:
    lib = Library.open(tmp_path_factory.mktemp("readium") / "lib.db")
    ids: dict[str, str] = {}
    for name in [*EPUBS, *TEXTS]:
        path = CORPUS / name
        if path.exists():
            ids[name] = lib.import_book(path, embed=False).book
    yield lib, ids
    lib.close()


def _book(corpus_lib: tuple[Library, dict[str, str]], name: str) -> tuple[Library, str]:
    corpus_file(name)  # skips loudly when the corpus is absent
    lib, ids = corpus_lib
    return lib, ids[name]


def _own_reading_order(path: Path) -> list[tuple[str, int]]:
    """(ZIP path, compressed size) of the linear spine items, read without mindory."""
    with zipfile.ZipFile(path) as z:
        container = ElementTree.fromstring(z.read("META-INF/container.xml"))
        opf_path = next(e.get("full-path") for e in container.iter() if e.tag.endswith("rootfile"))
        assert opf_path is not None
        opf = ElementTree.fromstring(z.read(opf_path))
        base = posixpath.dirname(opf_path)
        hrefs = {
            e.get("id"): posixpath.normpath(posixpath.join(base, unquote(e.get("href") or "")))
            for e in opf.iter()
            if e.tag.endswith("}item")
        }
        out = []
        for ref in opf.iter():
            if ref.tag.endswith("}itemref") and (ref.get("linear") or "yes") != "no":
                name = hrefs[ref.get("idref")]
                out.append((name, z.getinfo(name).compress_size))
        return out


@pytest.mark.parametrize("name", EPUBS)
def test_total_is_readiums_count(corpus_lib: tuple[Library, dict[str, str]], name: str) -> None:
    lib, book = _book(corpus_lib, name)
    order = _own_reading_order(CORPUS / name)
    expected = sum(max(1, math.ceil(size / 1024)) for _, size in order)
    plist = lib.readium_positions(book).to_json()
    assert plist["total"] == expected == len(plist["positions"])
    manifest = lib.readium_manifest(book, self_url="http://127.0.0.1/m.json").to_json()
    assert [
        unquote(link["href"].removeprefix("resources/")) for link in manifest["readingOrder"]
    ] == [n for n, _ in order]


@pytest.mark.parametrize("name", EPUBS + TEXTS)
def test_manifest_and_locators_validate(
    corpus_lib: tuple[Library, dict[str, str]], validators: dict[str, Any], name: str
) -> None:
    lib, book = _book(corpus_lib, name)
    manifest = lib.readium_manifest(book, self_url=f"http://127.0.0.1/books/{book}/manifest.json")
    data = manifest.to_json()
    errors = [e.message for e in validators["manifest"].iter_errors(data)]
    assert not errors, errors[:5]
    assert data["metadata"]["@type"] == "http://schema.org/Book" and data["readingOrder"]
    if name.endswith(".txt"):
        assert data["readingOrder"] == [
            {"href": "file", "type": "text/plain", "title": data["metadata"]["title"]}
        ]
    positions = lib.readium_positions(book).to_json()["positions"]
    hrefs = {link["href"] for link in data["readingOrder"]}
    for loc in positions:
        errors = [e.message for e in validators["locator"].iter_errors(loc)]
        assert not errors, (loc, errors[:5])
        assert loc["href"] in hrefs


@pytest.mark.parametrize("name", EPUBS + TEXTS)
def test_every_position_round_trips(corpus_lib: tuple[Library, dict[str, str]], name: str) -> None:
    """Position N → its place (section, source offset) → the Locator's position: N, for
    every N; the UTF-16 offset and the CFI of each position are the place's own."""
    lib, book = _book(corpus_lib, name)
    positions = lib.readium_positions(book).to_json()["positions"]
    places: dict[int, Any] = {}
    for n, loc in enumerate(positions, start=1):
        assert loc["locations"]["position"] == n
        assert loc["locations"]["totalProgression"] == (n - 1) / len(positions)
        section = loc["section"]
        if section not in places:
            places[section] = lib.place(book, section)
        place = places[section]
        point = loc["source"]["start"]
        assert place.position(point) == n, (name, n, section, point)
        assert loc["source"]["utf16Start"] == place.to_utf16(point)
        if place.cfi is not None:
            assert loc["locations"]["cfi"] == place.cfi.point(point - place.source_start, "spec")


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_a_put_position_resolves_to_the_listed_place(
    corpus_lib: tuple[Library, dict[str, str]], data: st.DataObject
) -> None:
    """Through the library's place resolution (what PUT /books/{id}/position runs)."""
    name = data.draw(st.sampled_from(EPUBS + TEXTS))
    lib, book = _book(corpus_lib, name)
    positions = lib.readium_positions(book).to_json()["positions"]
    n = data.draw(st.integers(1, len(positions)))
    listed = positions[n - 1]
    kept = lib.add_bookmark(book, PlaceIn(position=n))
    assert kept.locator["locations"]["position"] == n
    assert (kept.section, kept.point) == (listed["section"], listed["source"]["start"])
    # the same place by Readium's progression in the manifest's href
    p = listed["locations"]["progression"]
    by_p = lib.add_bookmark(book, PlaceIn(href=listed["href"], progression=p))
    assert (by_p.section, by_p.point) == (kept.section, kept.point)
