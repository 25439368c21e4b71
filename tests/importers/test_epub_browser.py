"""Real reader engines agree: mindory's CFIs resolve to the chunk's exact text in Chromium.

For every corpus EPUB, at least 50 chunks (evenly spread, all sections represented as far
as possible): the specification's ``cfi`` resolved by foliate-js and ``cfi_epubjs`` resolved
by epub.js 0.3 both give a DOM range whose ``toString()`` equals
``source_text[source_start:source_end]``. Also: every chunk's range CFI round-trips
through mindory's own resolver (both flavors).
"""

from __future__ import annotations

import pytest

from mindory.importers import load_book
from mindory.text.chunking import chunk_book
from mindory.text.records import Book, Chunk, Settings
from tests.browser_harness import require_browser, resolve_in_browser
from tests.conftest import corpus_file

EPUBS = [
    "epub3_en_georgia-cfi.epub",
    "epub3_en_wasteland-noterefs.epub",
    "epub3_en_childrens-literature-nested-toc.epub",
    "epub3_en_moby-dick.epub",
    "epub3_ja_kusamakura-vertical-ruby.epub",
    "epub3_en_pepys-diary-large-endnotes.epub",
    "epub2_en_romeo-and-juliet-feedbooks.epub",
    "epub2_en_leaves-of-grass-gutenberg-calibre.epub",
    "epub2_zh-TW_shuihu-zhuan-haodoo.epub",
]

_BOOKS: dict[str, tuple[Book, list[Chunk]]] = {}


def _book(name: str) -> tuple[Book, list[Chunk]]:
    if name not in _BOOKS:
        book = load_book(corpus_file(name))
        _BOOKS[name] = (book, chunk_book(book, Settings()))
    return _BOOKS[name]


def _pick(chunks: list[Chunk], n: int = 60) -> list[Chunk]:
    if len(chunks) <= n:
        return chunks
    step = len(chunks) / n
    return [chunks[int(i * step)] for i in range(n)]


@pytest.mark.parametrize("name", EPUBS)
def test_every_chunk_cfi_round_trips(name: str) -> None:
    book, chunks = _book(name)
    for c in chunks:
        cfi_doc = book.sections[c.section].dom.cfi
        for flavor in ("spec", "epubjs"):
            cfi = cfi_doc.range(c.source_start, c.source_end, flavor)
            assert cfi_doc.resolve(cfi, flavor) == (c.source_start, c.source_end), (flavor, cfi)


@pytest.mark.browser
@pytest.mark.parametrize("name", EPUBS)
def test_reader_engines_resolve_chunk_cfis(name: str) -> None:
    require_browser()
    book, chunks = _book(name)
    picked = _pick(chunks)
    assert len(picked) >= min(50, len(chunks))
    items = []
    for c in picked:
        section = book.sections[c.section]
        cfi_doc = section.dom.cfi
        items.append(
            {
                "href": section.href,
                "cfi": cfi_doc.range(c.source_start, c.source_end, "spec"),
                "cfi_epubjs": cfi_doc.range(c.source_start, c.source_end, "epubjs"),
            }
        )
    results = resolve_in_browser(corpus_file(name), items)
    bad_foliate = []
    bad_epubjs = []
    for c, item, got in zip(picked, items, results):
        want = book.sections[c.section].source_text[c.source_start : c.source_end]
        if got["foliate"] != want:
            bad_foliate.append((item["cfi"], got.get("foliate_error"), (got["foliate"] or "")[:40]))
        if got["epubjs"] != want:
            bad_epubjs.append(
                (item["cfi_epubjs"], got.get("epubjs_error"), (got["epubjs"] or "")[:40])
            )
    assert not bad_foliate, (
        f"foliate-js: {len(bad_foliate)} of {len(picked)} wrong: {bad_foliate[:3]}"
    )
    assert not bad_epubjs, f"epub.js: {len(bad_epubjs)} of {len(picked)} wrong: {bad_epubjs[:3]}"
