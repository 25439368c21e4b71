"""EPUB importer on the real corpus books (/work/shared/corpus, see SOURCES.md)."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from lxml import etree

from mindory.importers.epub import (
    RawToc,
    metadata_and_toc_via_ebooklib,
    read_epub,
    read_package,
    read_toc,
)
from mindory.importers.epub_safety import open_checked
from mindory.importers.xhtml import ParsedDocument
from mindory.text.records import Book, NormalizeProfile, TocEntry

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"

if not CORPUS.is_dir():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"corpus folder {CORPUS} is missing (required when CI=true)")
    pytest.skip(
        f"SKIPPED LOUDLY: corpus folder {CORPUS} not found; EPUB corpus tests not run",
        allow_module_level=True,
    )

# file stem -> (sections, total source chars, total normalized chars), observed
# with the default profile. A change here is a change in what mindory reads.
GOLDEN: dict[str, tuple[int, int, int]] = {
    "epub2_en_leaves-of-grass-gutenberg-calibre": (383, 749_731, 722_565),
    "epub2_en_romeo-and-juliet-feedbooks": (30, 143_197, 143_114),
    "epub2_zh-TW_shuihu-zhuan-haodoo": (72, 530_573, 530_503),
    "epub3_en_childrens-literature-nested-toc": (3, 323_934, 294_377),
    "epub3_en_georgia-cfi": (2, 79_244, 68_923),
    "epub3_en_moby-dick": (144, 1_223_753, 1_217_720),
    "epub3_en_pepys-diary-large-endnotes": (123, 7_384_491, 7_250_184),
    "epub3_en_wasteland-noterefs": (1, 31_332, 26_316),
    "epub3_ja_kusamakura-vertical-ruby": (16, 116_303, 96_290),
}
NAMES = sorted(GOLDEN)


@cache
def book(name: str) -> Book:
    return read_epub(CORPUS / f"{name}.epub")


def dom_text(body: object) -> str:
    """Source text computed independently: an explicit walk of text, children, tails."""
    out: list[str] = []
    stack: list[tuple[object, bool]] = [(body, False)]
    # Iterative (documents nest deeply): visit element text, then children; emit
    # each child's tail after the child. Comment/PI contents are not DOM text.
    while stack:
        node, done = stack.pop()
        if done:
            tail = node.tail  # type: ignore[attr-defined]
            if tail and node is not body:
                out.append(tail)
            continue
        stack.append((node, True))
        if isinstance(node.tag, str):  # type: ignore[attr-defined]
            if node.text:  # type: ignore[attr-defined]
                out.append(node.text)  # type: ignore[attr-defined]
            stack.extend((child, False) for child in reversed(list(node)))  # type: ignore[call-overload]
    return "".join(out)


def walk(entries: tuple[TocEntry, ...], depth: int = 1) -> Iterator[tuple[int, TocEntry]]:
    for entry in entries:
        yield depth, entry
        yield from walk(entry.children, depth + 1)


def test_corpus_is_complete() -> None:
    assert sorted(p.stem for p in CORPUS.glob("*.epub")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_golden_numbers(name: str) -> None:
    b = book(name)
    observed = (
        len(b.sections),
        sum(len(s.source_text) for s in b.sections),
        sum(len(s.normalized_text) for s in b.sections),
    )
    assert observed == GOLDEN[name]
    assert b.format == "epub" and len(b.sha256) == 64 and b.title


@pytest.mark.parametrize("name", NAMES)
def test_section_invariants(name: str) -> None:
    for s in book(name).sections:
        text = s.normalized_text
        s.offset_map.check(s.source_text, text)
        assert text == text.strip()
        assert "\n\n\n" not in text
        assert not any(ch in text for ch in "\u00ad\u200b\u2060\ufeff")
        dom = s.dom
        assert isinstance(dom, ParsedDocument)
        assert (dom.spine_index, s.ordinal, s.source_start) == (s.ordinal, s.ordinal, 0)
        assert s.parser == dom.parser == "xml"
        assert dom_text(dom.body) == s.source_text
        prev = 0
        for block in s.blocks:
            piece = text[block.start : block.end]
            assert piece and piece == piece.strip()
            assert text[prev : block.start] == ("\n\n" if block.index else "")
            span = s.offset_map.source_span(block.start, block.end)
            assert span == (block.source_start, block.source_end)
            prev = block.end
        assert prev == len(text)


def test_itertext_matches_without_entities() -> None:
    # lxml's itertext skips comment/PI text but keeps tails: the same definition.
    for s in book("epub3_ja_kusamakura-vertical-ruby").sections:
        assert "".join(s.dom.body.itertext()) == s.source_text
        assert not list(s.dom.root.iter(etree.Entity))


@pytest.mark.parametrize("name", NAMES)
def test_toc_resolves(name: str) -> None:
    b = book(name)
    assert b.toc
    for _, entry in walk(b.toc):
        if entry.section is None:
            assert entry.source_offset is None
            continue
        section = b.sections[entry.section]
        assert entry.href.split("#")[0] == section.href
        assert 0 <= entry.source_offset <= len(section.source_text)  # type: ignore[operator]
    assert not [w for w in b.warnings if "TOC entry" in w]


def _plain(entries: tuple[RawToc, ...]) -> list[tuple[str, str | None, str | None, list]]:  # type: ignore[type-arg]
    return [(e.title, e.path, e.fragment, _plain(e.children)) for e in entries]


@pytest.mark.parametrize("name", NAMES)
def test_ebooklib_and_own_toc_agree(name: str) -> None:
    """The fallback reading gives the same TOC and metadata as ebooklib."""
    path = CORPUS / f"{name}.epub"
    data = path.read_bytes()
    archive = open_checked(data, str(path))
    pkg = read_package(archive)
    meta, via_ebooklib = metadata_and_toc_via_ebooklib(data, pkg)
    own, _ = read_toc(archive, pkg)
    assert _plain(via_ebooklib) == _plain(own)
    from mindory.importers.epub import read_metadata

    assert read_metadata(pkg.opf_root) == meta


def test_childrens_literature_nested_toc() -> None:
    b = book("epub3_en_childrens-literature-nested-toc")
    assert max(depth for depth, _ in walk(b.toc)) >= 4
    entries = {e.title: e for _, e in walk(b.toc)}
    text = b.sections[2].source_text
    top = entries["SECTION IV FAIRY STORIES—MODERN FANTASTIC TALES"]
    assert (top.section, top.source_offset, top.href) == (2, 3, "EPUB/s04.xhtml#pgepubid00492")
    # The <section> starts with a page number span, then the heading.
    assert " ".join(text[3:60].split()).startswith("169 SECTION IV FAIRY STORIES")
    deep = entries["I. The Rabbi and the Diadem"]
    depth = next(d for d, e in walk(b.toc) if e is deep)
    assert depth >= 4
    assert (deep.section, deep.source_offset) == (2, 13_729)
    assert text[deep.source_offset :].lstrip().startswith("1. The Rabbi and The Diadem")
    assert b.sections[2].title == top.title


def test_kusamakura_ruby_and_missing_audio() -> None:
    b = book("epub3_ja_kusamakura-vertical-ruby")
    first = next(s for s in b.sections if s.href == "OPS/xhtml/一.xhtml")
    assert "山路やまみちを登りながら" in first.source_text
    assert "山路を登りながら、こう考えた。" in first.normalized_text
    assert "智に働けば角が立つ。" in first.normalized_text
    assert "やまみち" not in first.normalized_text
    rubies = sum(
        1 for s in b.sections for _ in s.dom.body.iter("{http://www.w3.org/1999/xhtml}ruby")
    )
    assert rubies == 4_603
    missing = [w for w in b.warnings if "missing from the archive" in w]
    assert any("OPS/audio/fmse004b.mp3" in w for w in missing)
    assert any("OPS/audio/ulnr0036.mp3" in w for w in missing)
    assert [s.title for s in b.sections[2:5]] == ["一", "二", "三"]
    assert b.sections[1].linear is False  # the nav document, linear="no"
    assert b.language == "ja-jp"


def element_ranges(body: object, tags: set[str]) -> Iterator[tuple[int, int]]:
    """Source ranges of the elements named ``tags``, computed by walking the DOM."""
    pos = 0
    stack: list[tuple[object, int | None]] = [(body, None)]
    while stack:
        node, opened = stack.pop()
        if opened is not None:  # closing: the element's range ends here, then its tail
            if node.tag in tags:  # type: ignore[attr-defined]
                yield opened, pos
            if node is not body and node.tail:  # type: ignore[attr-defined]
                pos += len(node.tail)  # type: ignore[attr-defined]
            continue
        if not isinstance(node.tag, str):  # type: ignore[attr-defined]
            pos += len(node.tail or "")  # type: ignore[attr-defined]
            continue
        stack.append((node, pos))
        pos += len(node.text or "")  # type: ignore[attr-defined]
        stack.extend((child, None) for child in reversed(list(node)))  # type: ignore[call-overload]


def test_kusamakura_no_ruby_reading_in_normalized_text() -> None:
    tags = {"{http://www.w3.org/1999/xhtml}rt", "{http://www.w3.org/1999/xhtml}rp"}
    count = 0
    for s in book("epub3_ja_kusamakura-vertical-ruby").sections:
        for start, end in element_ranges(s.dom.body, tags):
            assert end > start
            # Every character of every reading maps to no normalized text at all.
            a, b = s.offset_map.normalized_span(start, end)
            assert a == b, s.source_text[start:end]
            count += 1
    assert count >= 4_603


def test_shuihu_bom_crlf_and_vertical_forms() -> None:
    name = "epub2_zh-TW_shuihu-zhuan-haodoo"
    with zipfile.ZipFile(CORPUS / f"{name}.epub") as zf:
        raw = zf.read("OEBPS/1.xhtml")
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw
    b = book(name)
    for s in b.sections:
        assert "\r" not in s.source_text  # XML parsing turned CRLF into LF
        assert "\ufeff" not in s.normalized_text
    first = b.sections[1]
    assert first.normalized_text.startswith("︽水滸傳︾施耐庵\n\n︽二○一七年七月七日版︾\n")
    assert "\n\n紛紛五代亂離間，一旦雲開復見天！" in first.normalized_text  # U+3000 indent dropped
    assert first.title == "楔子 張天師祈禳瘟疫 洪太尉誤走妖魔"
    nfkc = read_epub(CORPUS / f"{name}.epub", NormalizeProfile(unicode_form="NFKC"))
    s = nfkc.sections[1]
    s.offset_map.check(s.source_text, s.normalized_text)
    assert s.normalized_text.startswith("《水滸傳》施耐庵")


def test_romeo_epub2_quirks() -> None:
    name = "epub2_en_romeo-and-juliet-feedbooks"
    with zipfile.ZipFile(CORPUS / f"{name}.epub") as zf:
        assert zf.read("mimetype") == b"application/epub+zip\r\n"
    b = book(name)
    assert all(s.href and s.href.startswith("OPS/") for s in b.sections)
    assert "OPS/main1.xml" in {s.href for s in b.sections}
    assert max(depth for depth, _ in walk(b.toc)) == 2
    assert (
        sum(s.normalized_text.count("\n") - 2 * s.normalized_text.count("\n\n") for s in b.sections)
        > 2_000
    )


def test_pepys_endnote_targets() -> None:
    b = book("epub3_en_pepys-diary-large-endnotes")
    notes = next(s for s in b.sections if s.href and s.href.endswith("endnotes.xhtml"))
    ids = notes.dom.id_offsets
    assert len(ids) > 4_000
    offset = ids["note-1"]
    assert notes.source_text[offset:].lstrip()[:1].isalnum()
