"""Locators: every chunk of real books becomes an exact place, and places lead back."""

from __future__ import annotations

import json
import random
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from mindory.importers import load_book
from mindory.importers.cfi import CfiDocument, CfiError, parse_cfi, spine_step_of
from mindory.reading.chunk_spans import ChunkSpans, chunks_containing
from mindory.reading.locate import (
    CFI_CONFORMS_TO,
    CONTEXT_CHARS,
    QUOTE_CHARS,
    RFC5147_CONFORMS_TO,
    Locator,
    SectionPlace,
    locate_chunk,
    locate_position,
    locate_span,
    places_from_book,
    resolve_cfi,
)
from mindory.text.chunking import chunk_book
from mindory.text.normalize import normalize
from mindory.text.offsets import Utf16Index
from mindory.text.records import Book, Chunk, Settings
from tests.conftest import SAMPLES, corpus_file

TOP_KEYS = [
    "href",
    "type",
    "title",
    "locations",
    "text",
    "source",
    "normalized",
    "section",
    "blocks",
    "selectors",
    "chunk",
]
EPUB_LOCATION_KEYS = [
    "progression",
    "totalProgression",
    "position",
    "partialCfi",
    "cfi",
    "cfi_epubjs",
]
TXT_LOCATION_KEYS = ["progression", "totalProgression", "position", "fragments"]


def u16(text: str, i: int) -> int:
    """UTF-16 position of code point ``i``, counted independently of Utf16Index."""
    return len(text[:i].encode("utf-16-le")) // 2


# --------------------------------------------------------------------------- fixtures


@dataclass(frozen=True)
class Loaded:
    path: Path
    book: Book
    chunks: tuple[Chunk, ...]
    places: tuple[SectionPlace, ...]

    def place(self, ordinal: int) -> SectionPlace:
        return self.places[ordinal]


def _opf_spine_step(path: Path) -> int:
    with zipfile.ZipFile(path) as z:
        parser = etree.XMLParser(resolve_entities=False, no_network=True)
        container = etree.fromstring(z.read("META-INF/container.xml"), parser)
        found: Any = container.xpath("//*[local-name()='rootfile']/@full-path")
        opf_path = found[0]
        return spine_step_of(etree.fromstring(z.read(str(opf_path)), parser))


def _cfi_tables(path: Path, book: Book) -> dict[int, CfiDocument]:
    """The section's CFI table: the importer's (``dom.cfi``) or one built here from its tree."""
    step = _opf_spine_step(path)
    out: dict[int, CfiDocument] = {}
    for s in book.sections:
        found = getattr(s.dom, "cfi", None)
        if isinstance(found, CfiDocument):
            out[s.ordinal] = found
        elif getattr(s.dom, "root", None) is not None:
            out[s.ordinal] = CfiDocument.from_tree(
                s.dom.root,
                s.dom.body,
                spine_index=s.dom.spine_index,
                itemref_id=s.dom.itemref_id,
                spine_step=step,
            )
    return out


@cache
def loaded(path: Path) -> Loaded:
    book = load_book(path)
    chunks = tuple(chunk_book(book, Settings()))
    cfis = _cfi_tables(path, book) if book.format == "epub" else None
    return Loaded(path, book, chunks, places_from_book(book, cfis))


def _sample(name: str) -> Path:
    return SAMPLES / name


TXT_BOOKS = [
    pytest.param(lambda: _sample("qiaoshi-yanyi.txt"), id="qiaoshi-sample"),
    pytest.param(lambda: _sample("news-from-nowhere.txt"), id="news-sample"),
    pytest.param(
        lambda: corpus_file("txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt"), id="sanguo-utf8-corpus"
    ),
]
EPUB_BOOKS = [
    pytest.param(lambda: _sample("wasteland.epub"), id="wasteland-sample"),
    pytest.param(lambda: corpus_file("epub3_en_moby-dick.epub"), id="moby-dick-corpus"),
    pytest.param(
        lambda: corpus_file("epub3_ja_kusamakura-vertical-ruby.epub"), id="kusamakura-corpus"
    ),
    pytest.param(lambda: corpus_file("epub2_zh-TW_shuihu-zhuan-haodoo.epub"), id="shuihu-corpus"),
]


# --------------------------------------------------------------------------- shared checks


def check_locator(lb: Loaded, c: Chunk, loc: Locator, data: dict[str, Any]) -> None:
    place = lb.place(c.section)
    text = place.source_text
    base = place.source_start
    ls, le = c.source_start - base, c.source_end - base
    # the highlight is exactly the raw source text, with its surroundings
    assert data["text"]["highlight"] == text[ls:le]
    assert data["text"]["before"] == text[max(0, ls - CONTEXT_CHARS) : ls]
    assert data["text"]["after"] == text[le : le + CONTEXT_CHARS]
    assert len(data["text"]["before"]) == min(CONTEXT_CHARS, ls)
    # spans in every unit
    src = data["source"]
    assert (src["start"], src["end"]) == (c.source_start, c.source_end)
    assert (src["utf16Start"], src["utf16End"]) == (c.utf16_start, c.utf16_end)
    assert data["normalized"] == {"start": c.start, "end": c.end}
    assert place.normalized_text[c.start : c.end] == c.text
    assert data["section"] == c.section and data["chunk"] == c.id
    # W3C selectors
    quote, position, fragment = data["selectors"]
    assert quote["type"] == "TextQuoteSelector" and quote["exact"] == text[ls:le]
    assert len(quote["prefix"]) <= QUOTE_CHARS and len(quote["suffix"]) <= QUOTE_CHARS
    assert text[:ls].endswith(quote["prefix"]) and text[le:].startswith(quote["suffix"])
    assert len(quote["prefix"]) == min(QUOTE_CHARS, ls)
    assert len(quote["suffix"]) == min(QUOTE_CHARS, len(text) - le)
    assert position == {
        "type": "TextPositionSelector",
        "start": c.source_start,
        "end": c.source_end,
    }
    assert fragment["type"] == "FragmentSelector"
    # progression
    locs = data["locations"]
    assert 0.0 <= locs["progression"] < 1.0 and 0.0 <= locs["totalProgression"] < 1.0
    assert locs["progression"] == ls / len(text)
    assert locs["position"] >= 1
    # blocks: the anchor holds the start; first..last are the blocks the span overlaps
    blocks = data["blocks"]
    first, last, anchor = blocks["first"], blocks["last"], blocks["anchor"]
    assert first == anchor <= last and blocks["page"] == anchor // blocks["pageSize"]
    a = place.blocks[anchor]
    assert a.source_start <= ls < a.source_end, "a chunk starts on text inside a block"
    overlapping = [b.index for b in place.blocks if b.source_start < le and b.source_end > ls]
    assert overlapping == list(range(first, last + 1))
    # reverse: the chunk's start leads back to its block, page and chunk
    pos = locate_position(place, c.source_start, page_size=blocks["pageSize"])
    assert pos["section"] == c.section and pos["block"] == anchor
    assert pos["page"] == blocks["page"]
    assert pos["source"]["position"] == c.source_start
    assert pos["source"]["utf16Position"] == c.utf16_start
    assert pos["normalized"]["position"] == c.start


def check_book_order(lb: Loaded, locators: Sequence[dict[str, Any]]) -> None:
    """Progression and position never go backwards across a book's chunks."""
    prev_total = -1.0
    prev_position = 0
    prev_section = -1
    prev_progression = -1.0
    for data in locators:
        locs = data["locations"]
        assert locs["totalProgression"] > prev_total
        assert locs["position"] >= prev_position
        if data["section"] == prev_section:
            assert locs["progression"] > prev_progression
        prev_total, prev_position = locs["totalProgression"], locs["position"]
        prev_section, prev_progression = data["section"], locs["progression"]


def check_reverse_chunks(lb: Loaded) -> None:
    by_section: dict[int, list[Chunk]] = {}
    for c in lb.chunks:
        by_section.setdefault(c.section, []).append(c)
    for section_chunks in by_section.values():
        spans = ChunkSpans(section_chunks)
        for c in section_chunks:
            for p in (c.source_start, (c.source_start + c.source_end) // 2, c.source_end - 1):
                found = spans.containing(p)
                assert c in found
                assert found == [x for x in section_chunks if x.source_start <= p < x.source_end]


# --------------------------------------------------------------------------- plain text


@pytest.mark.parametrize("path_of", TXT_BOOKS)
def test_txt_every_chunk_is_an_exact_place(path_of: Any) -> None:
    lb = loaded(path_of())
    book = lb.book
    full = book.source.text
    data_bytes = book.source.data
    out = []
    for c in lb.chunks:
        place = lb.place(c.section)
        loc = locate_chunk(place, c)
        data = loc.to_json()
        check_locator(lb, c, loc, data)
        assert list(data) == TOP_KEYS
        assert list(data["locations"]) == TXT_LOCATION_KEYS
        assert data["href"] == book.file_name and data["type"] == "text/plain"
        src = data["source"]
        assert list(src) == ["start", "end", "utf16Start", "utf16End", "byteStart", "byteEnd"]
        # file-global code points, UTF-16 and bytes all name the same text
        assert full[c.source_start : c.source_end] == data["text"]["highlight"]
        assert src["utf16Start"] == u16(full, c.source_start)
        assert src["utf16End"] == u16(full, c.source_end)
        raw = data_bytes[src["byteStart"] : src["byteEnd"]]
        assert raw.decode(book.encoding) == data["text"]["highlight"]
        frag = f"char={c.source_start},{c.source_end}"
        assert data["locations"]["fragments"] == [frag]
        assert data["selectors"][2] == {
            "type": "FragmentSelector",
            "value": frag,
            "conformsTo": RFC5147_CONFORMS_TO,
        }
        # one resource (the file): position and totalProgression count from its start
        assert data["locations"]["position"] == c.source_start // 1024 + 1
        assert data["locations"]["totalProgression"] == c.source_start / len(full)
        out.append(data)
    check_book_order(lb, out)
    check_reverse_chunks(lb)


def test_txt_astral_characters_shift_utf16_but_not_code_points() -> None:
    lb = loaded(_sample("qiaoshi-yanyi.txt"))
    full = lb.book.source.text
    shifted = 0
    for c in lb.chunks:
        data = locate_chunk(lb.place(c.section), c).to_json()
        if data["source"]["utf16Start"] != data["source"]["start"]:
            shifted += 1
        assert (
            data["source"]["utf16End"] - data["source"]["utf16Start"]
            == len(full[c.source_start : c.source_end].encode("utf-16-le")) // 2
        )
    assert shifted > len(lb.chunks) // 2, "the sample has non-BMP characters early on"


def test_txt_place_from_stored_rows_matches_in_memory_place() -> None:
    """The library builds places without the file: section-local UTF-16 plus a start."""
    lb = loaded(_sample("qiaoshi-yanyi.txt"))
    full = lb.book.source.text
    for c in lb.chunks[::7]:
        mem = lb.place(c.section)
        stored = SectionPlace(
            book_format="txt",
            book_title=mem.book_title,
            ordinal=mem.ordinal,
            href=mem.href,
            media_type="text/plain",
            title=mem.title,
            source_text=mem.source_text,
            normalized_text=mem.normalized_text,
            offset_map=mem.offset_map,
            blocks=tuple(mem.blocks),
            source_start=mem.source_start,
            resource_source_lengths=(len(full),),
            utf16_source_start=u16(full, mem.source_start),
        )
        a = locate_chunk(mem, c).to_json()
        b = locate_chunk(stored, c).to_json()
        for key in ("byteStart", "byteEnd"):
            a["source"].pop(key)
        assert a == b


def test_txt_places_without_file_text_compute_utf16_starts() -> None:
    lb = loaded(_sample("qiaoshi-yanyi.txt"))
    bare = replace(lb.book, source=None)
    places = places_from_book(bare)
    for c in lb.chunks[::5]:
        data = locate_chunk(places[c.section], c).to_json()
        assert (data["source"]["utf16Start"], data["source"]["utf16End"]) == (
            c.utf16_start,
            c.utf16_end,
        )
        assert "byteStart" not in data["source"]
    one = SectionPlace.from_book(bare, 5)
    assert one.utf16_source_start == places[5].utf16_source_start
    assert one.to_utf16(one.source_end) == u16(lb.book.source.text, one.source_end)


# --------------------------------------------------------------------------- EPUB


@pytest.mark.parametrize("path_of", EPUB_BOOKS)
def test_epub_every_chunk_is_an_exact_place(path_of: Any) -> None:
    lb = loaded(path_of())
    assert lb.chunks
    out = []
    positions_before = 0
    chars_before = 0
    starts: dict[int, tuple[int, int]] = {}
    total = sum(len(s.source_text) for s in lb.book.sections)
    for s in lb.book.sections:
        starts[s.ordinal] = (positions_before, chars_before)
        positions_before += max(1, -(-len(s.source_text) // 1024))
        chars_before += len(s.source_text)
    for c in lb.chunks:
        place = lb.place(c.section)
        section = lb.book.sections[c.section]
        loc = locate_chunk(place, c)
        data = loc.to_json()
        check_locator(lb, c, loc, data)
        assert list(data) == TOP_KEYS
        assert list(data["locations"]) == EPUB_LOCATION_KEYS
        assert data["href"] == section.href and data["type"] == section.media_type
        assert data["title"] == (section.title or lb.book.title)
        src = data["source"]
        assert list(src) == ["start", "end", "utf16Start", "utf16End"]
        # section-local UTF-16, counted independently
        assert src["utf16Start"] == u16(section.source_text, c.source_start)
        assert src["utf16End"] == u16(section.source_text, c.source_end)
        # Readium position and totalProgression across the spine
        pb, cb = starts[c.section]
        assert data["locations"]["position"] == pb + c.source_start // 1024 + 1
        assert data["locations"]["totalProgression"] == (cb + c.source_start) / total
        # CFIs resolve back to exactly this span, in both flavors
        locs = data["locations"]
        cfi_doc = place.cfi
        assert cfi_doc is not None
        assert cfi_doc.resolve(locs["cfi"]) == (c.source_start, c.source_end)
        assert cfi_doc.resolve(locs["cfi_epubjs"], "epubjs") == (c.source_start, c.source_end)
        assert resolve_cfi(lb.places, locs["cfi"]) == (c.section, c.source_start, c.source_end)
        point = cfi_doc.point(c.source_start)
        assert point == f"epubcfi({point[8:].split('!')[0]}!{locs['partialCfi']})"
        assert cfi_doc.resolve(point) == (c.source_start, c.source_start)
        assert data["selectors"][2] == {
            "type": "FragmentSelector",
            "value": locs["cfi"],
            "conformsTo": CFI_CONFORMS_TO,
        }
        out.append(data)
    check_book_order(lb, out)
    check_reverse_chunks(lb)


def test_epub_reverse_cfi_points_and_positions() -> None:
    lb = loaded(corpus_file("epub3_en_moby-dick.epub"))
    rng = random.Random(5)
    by_ordinal = {p.ordinal: p for p in lb.places}
    for c in rng.sample(lb.chunks, 60):
        place = lb.place(c.section)
        p = rng.randrange(c.source_start, c.source_end)
        pos = locate_position(place, p, page_size=7)
        cfi = pos["locations"]["cfi"]
        assert resolve_cfi(by_ordinal, cfi) == (c.section, p, p)
        assert resolve_cfi(lb.places, pos["locations"]["cfi_epubjs"], "epubjs") == (
            c.section,
            p,
            p,
        )
        assert c in chunks_containing([x for x in lb.chunks if x.section == c.section], p)
        block = place.blocks[pos["block"]]
        assert block.source_end > p and (
            block.source_start <= p or place.blocks[pos["block"] - 1].source_end <= p
        )
        assert pos["page"] == pos["block"] // 7
        assert pos["source"]["utf16Position"] == u16(place.source_text, p)


def test_resolve_cfi_errors() -> None:
    lb = loaded(_sample("wasteland.epub"))
    with pytest.raises(CfiError):
        resolve_cfi(lb.places, "epubcfi(/6/40!/4/2/1:0)")  # no such spine item
    with pytest.raises(CfiError):
        resolve_cfi(lb.places, "epubcfi(/6/2!/4/999/1:0)")  # no such element
    with pytest.raises(CfiError):
        resolve_cfi(lb.places, "epubcfi(/4/2/1:0)")  # no step into a document


def test_importer_cfi_tables_are_used_when_present() -> None:
    book = load_book(_sample("wasteland.epub"))
    dom = book.sections[0].dom
    if not isinstance(getattr(dom, "cfi", None), CfiDocument):
        pytest.skip(
            "the EPUB importer does not attach a CfiDocument as section.dom.cfi yet; "
            "the CFI assertions above run on tables built from the section's tree"
        )
    place = SectionPlace.from_book(book, 0)
    assert place.cfi is dom.cfi
    c = chunk_book(book, Settings())[0]
    data = locate_chunk(place, c).to_json()
    assert place.cfi is not None
    assert place.cfi.resolve(data["locations"]["cfi"]) == (c.source_start, c.source_end)


def test_epub_without_cfi_table_leaves_cfi_keys_out() -> None:
    lb = loaded(_sample("wasteland.epub"))
    place = replace(lb.places[0], cfi=None)
    c = lb.chunks[3]
    data = locate_chunk(place, c).to_json()
    assert list(data["locations"]) == ["progression", "totalProgression", "position"]
    assert [s["type"] for s in data["selectors"]] == ["TextQuoteSelector", "TextPositionSelector"]


# --------------------------------------------------------------------------- shape & determinism


def test_json_is_deterministic_and_key_order_fixed() -> None:
    for path in (_sample("wasteland.epub"), _sample("qiaoshi-yanyi.txt")):
        lb = loaded(path)
        for c in lb.chunks[:50]:
            place = lb.place(c.section)
            a = json.dumps(locate_chunk(place, c).to_json(), ensure_ascii=False)
            b = json.dumps(locate_chunk(place, c).to_json(), ensure_ascii=False)
            assert a == b
        # a fresh import gives byte-identical locators
        fresh = places_from_book(
            load_book(path), _cfi_tables(path, lb.book) if lb.book.format == "epub" else None
        )
        c = lb.chunks[len(lb.chunks) // 2]
        assert json.dumps(locate_chunk(fresh[c.section], c).to_json()) == json.dumps(
            locate_chunk(lb.place(c.section), c).to_json()
        )
    data = locate_chunk(lb.place(c.section), c).to_json()
    assert list(data["text"]) == ["before", "highlight", "after"]
    assert list(data["normalized"]) == ["start", "end"]
    assert list(data["blocks"]) == ["first", "last", "anchor", "page", "pageSize"]
    assert [list(s) for s in data["selectors"]] == [
        ["type", "exact", "prefix", "suffix"],
        ["type", "start", "end"],
        ["type", "value", "conformsTo"],
    ]


def test_context_and_plain_span() -> None:
    lb = loaded(_sample("qiaoshi-yanyi.txt"))
    c = lb.chunks[20]
    place = lb.place(c.section)
    parent = (place.source_start, place.source_end)
    loc = locate_span(place, c.source_start + 2, c.source_end - 3, context=parent)
    data = loc.to_json()
    assert list(data) == [k for k in TOP_KEYS if k != "chunk"] + ["context"]
    ctx = data["context"]
    full = lb.book.source.text
    assert ctx["source"]["start"] == place.source_start
    assert ctx["source"]["utf16End"] == u16(full, place.source_end)
    assert ctx["normalized"] == {"start": 0, "end": len(place.normalized_text)}
    # normalized span computed through the map when not given
    ns, ne = data["normalized"]["start"], data["normalized"]["end"]
    s0, e0 = place.offset_map.source_span(ns, ne)
    assert s0 + place.source_start <= c.source_start + 2
    assert e0 + place.source_start >= c.source_end - 3


# --------------------------------------------------------------------------- edge cases


def _tiny_place(
    src: str, *, resource: tuple[int, ...] | None = None, index: int = 0
) -> SectionPlace:
    nt = normalize(src)
    return SectionPlace(
        book_format="epub",
        book_title="Book",
        ordinal=index,
        href="t.xhtml",
        media_type="application/xhtml+xml",
        title="",
        source_text=src,
        normalized_text=nt.text,
        offset_map=nt.offset_map,
        blocks=nt.blocks,
        resource_source_lengths=resource or (len(src),),
        resource_index=index,
    )


def test_spans_in_whitespace_between_blocks_go_to_the_next_block() -> None:
    src = "Alpha beta.\n\n\n   Gamma delta.\n\nEpsilon.\n\n"
    place = _tiny_place(src)
    assert [(b.source_start, b.source_end) for b in place.blocks] == [(0, 11), (17, 29), (31, 39)]
    gap = src.index("\n\n\n")
    loc = locate_span(place, gap + 1, gap + 4, page_size=1)
    assert loc.blocks is not None and (loc.blocks.first, loc.blocks.last) == (1, 1)
    assert loc.blocks.page == 1 and loc.highlight == "\n\n "
    empty = locate_span(place, 11, 11)
    assert empty.blocks is not None and (empty.blocks.first, empty.blocks.last) == (1, 1)
    assert empty.highlight == "" and empty.to_json()["normalized"]["start"] == 11
    both = locate_span(place, 6, 20)
    assert both.blocks is not None and (both.blocks.first, both.blocks.last) == (0, 1)
    tail = locate_span(place, len(src) - 1, len(src))
    assert tail.blocks is not None and tail.blocks.first == 2, "past the last block: the last"
    assert locate_position(place, 12)["block"] == 1
    assert locate_position(place, len(src))["block"] == 2
    assert locate_position(place, 12)["normalized"]["position"] == 11
    with pytest.raises(ValueError):
        locate_span(place, 5, 4)
    with pytest.raises(ValueError):
        locate_span(place, 0, len(src) + 1)
    with pytest.raises(ValueError):
        locate_span(place, 0, 1, page_size=0)


def test_readium_positions_count_1024_characters_per_resource() -> None:
    lengths = (0, 1024, 2049, 10)
    # resource 0: 1 position, 1: 1 position, 2: 3 positions (1024+1024+1), 3: 1
    place = _tiny_place("x" * 2049, resource=lengths, index=2)
    assert [place.position(p) for p in (0, 1023, 1024, 2047, 2048, 2049)] == [3, 3, 4, 4, 5, 5]
    assert place.total_progression(0) == 1024 / sum(lengths)
    assert place.progression(1024) == 1024 / 2049
    empty = _tiny_place("", resource=lengths, index=0)
    assert empty.position(0) == 1 and empty.progression(0) == 0.0
    assert locate_position(empty, 0)["block"] is None
    loc = locate_span(empty, 0, 0)
    assert loc.to_json()["blocks"] is None
    full = _tiny_place("z" * 1024, resource=lengths, index=1)
    assert full.position(1023) == 2 and full.position(1024) == 2, "the end stays in its resource"
    last = _tiny_place("y" * 10, resource=lengths, index=3)
    assert last.position(9) == 6


def test_place_validation() -> None:
    place = _tiny_place("abc")
    with pytest.raises(ValueError):
        replace(place, book_format="pdf")
    with pytest.raises(ValueError):
        replace(place, resource_source_lengths=(2,))
    with pytest.raises(ValueError):
        replace(place, resource_index=3)
    with pytest.raises(ValueError):
        replace(place, source_start=4)  # EPUB positions are section-local
    with pytest.raises(ValueError):
        replace(place, book_format="txt", source_start=4, resource_source_lengths=(10,))
    c = Chunk("x", 7, 0, 0, 3, 0, 3, 0, 3, "abc")
    with pytest.raises(ValueError):
        locate_chunk(place, c)


def test_utf16_index_agrees_with_independent_count() -> None:
    text = "a\U00020000b\U0001f600\r\nc"
    index = Utf16Index(text)
    assert [index.to_utf16(i) for i in range(len(text) + 1)] == [
        u16(text, i) for i in range(len(text) + 1)
    ]
    place = _tiny_place(text)
    loc = locate_span(place, 2, 5)
    assert (loc.utf16_start, loc.utf16_end) == (3, 7)
    assert loc.highlight == "b\U0001f600\r"


def test_cfi_strings_parse() -> None:
    lb = loaded(_sample("wasteland.epub"))
    c = lb.chunks[0]
    data = locate_chunk(lb.place(c.section), c).to_json()
    for key in ("cfi", "cfi_epubjs"):
        assert parse_cfi(data["locations"][key]).is_range
