"""`mindory chunk` on EPUB: the JSON shape, per-section hrefs and per-chunk CFIs; ruby coverage."""

from __future__ import annotations

import json
import subprocess
import sys

from mindory.importers import load_book
from mindory.text.chunking import chunk_book
from mindory.text.records import Settings
from tests.conftest import SAMPLES, corpus_file


def test_epub_chunk_json() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mindory.cli",
            "chunk",
            str(SAMPLES / "wasteland.epub"),
            "--json",
            "--with-text",
        ],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    doc = json.loads(out)
    assert doc["book"]["format"] == "epub"
    book = load_book(SAMPLES / "wasteland.epub")
    for sec in doc["sections"]:
        assert sec["source_start"] == 0  # EPUB positions are per section
        assert {"href", "media_type", "title", "parser"} <= set(sec)
        assert sec["href"].endswith(".xhtml") and sec["parser"] == "xml"
    for c in doc["chunks"]:
        sec = doc["sections"][c["section"]]
        assert c["text"] == sec["normalized_text"][c["start"] : c["end"]]
        cfi_doc = book.sections[c["section"]].dom.cfi
        assert cfi_doc.resolve(c["cfi"]) == (c["source_start"], c["source_end"])
        assert cfi_doc.resolve(c["cfi_epubjs"], "epubjs") == (c["source_start"], c["source_end"])
        assert c["cfi"].startswith("epubcfi(/6/")


def test_ruby_readings_stay_out_of_normalized_text_but_inside_source_spans() -> None:
    book = load_book(corpus_file("epub3_ja_kusamakura-vertical-ruby.epub"))
    chunks = chunk_book(book, Settings())
    # (tests/test_epub_corpus.py checks that every <rt>/<rp> maps to no normalized text.)
    # A chunk whose normalized text contains a ruby base covers its reading in source.
    section = book.sections[2]
    for c in (c for c in chunks if c.section == section.ordinal):
        src = section.source_text[c.source_start : c.source_end]
        norm = c.text.replace("\n", "")
        assert len(src) >= len(norm)
    sample = next(c for c in chunks if c.section == section.ordinal)
    source_span = section.source_text[sample.source_start : sample.source_end]
    rts = [rt.text for rt in section.dom.root.iter("{http://www.w3.org/1999/xhtml}rt") if rt.text]
    assert any(r in source_span for r in rts), "chunk source span lost the ruby readings"
