"""Plain-text import on the real corpus: encodings, chapters, file-global positions, bad input."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from mindory.errors import DecodeError, MindoryError
from mindory.importers import load_book
from mindory.importers.text import PlainSource
from mindory.text.chunking import chunk_book
from mindory.text.records import Settings
from tests.conftest import ROOT, SAMPLES, corpus_file

# (file, codec, phrase, code point position, byte position, UTF-16 position,
#  section ordinal holding it, that section's title) — found by hand, hard-coded.
KNOWN = [
    (
        "txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt",
        "utf-8",
        "滚滚长江东逝水",
        52,
        108,
        52,
        1,
        "第一回 宴桃园豪杰三结义 斩黄巾英雄首立功",
    ),
    (
        "txt_zh-Hant_honglou-meng_gbk_crlf.txt",
        "gbk",
        "甄士隱夢幻識通靈",
        1227,
        1499,
        1227,
        1,
        "第一回 甄士隱夢幻識通靈 賈雨村風塵懷閨秀",
    ),
    (
        "txt_zh-Hant_honglou-meng_big5-cp950_crlf.txt",
        "cp950",
        "甄士隱夢幻識通靈",
        1227,
        1499,
        1227,
        1,
        "第一回 甄士隱夢幻識通靈 賈雨村風塵懷閨秀",
    ),
    (
        "txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt",
        "big5hkscs",
        "𡩋。流盼光溢",
        4162,
        8250,
        4162,
        1,
        "第一回\u3000幼君初政望太平\u3000奸璫密謀通奉聖",
    ),
    (
        "txt_en_news-from-nowhere_ascii_crlf.txt",
        "ascii",
        "CHAPTER I: DISCUSSION AND BED",
        1471,
        1471,
        1471,
        1,
        "CHAPTER I: DISCUSSION AND BED",
    ),
]


def _source(book_source: object) -> PlainSource:
    assert isinstance(book_source, PlainSource)
    return book_source


@pytest.mark.parametrize("name, codec, phrase, cp, byte, u16, ordinal, title", KNOWN)
def test_corpus_text_positions(
    name: str, codec: str, phrase: str, cp: int, byte: int, u16: int, ordinal: int, title: str
) -> None:
    path = corpus_file(name)
    raw = path.read_bytes()
    book = load_book(path)
    src = _source(book.source)
    assert book.encoding == codec and not book.lossy
    assert src.text == raw.decode(codec)  # the source text keeps CRLF, indents, everything
    assert src.text[cp : cp + len(phrase)] == phrase
    assert src.bytes_index.byte_offset(cp) == byte
    assert raw[byte:].decode(codec, errors="ignore").startswith(phrase)
    assert src.utf16.to_utf16(cp) == u16
    section = next(s for s in book.sections if s.source_start <= cp < s.source_end)
    assert (section.ordinal, section.title) == (ordinal, title)
    # Sections tile the file: file-global positions.
    assert book.sections[0].source_start == 0
    for a, b in zip(book.sections, book.sections[1:]):
        assert a.source_end == b.source_start
    chunks = chunk_book(book, Settings())
    for c in chunks[:: max(1, len(chunks) // 50)]:
        # A chunk's byte span decodes to exactly its source span.
        b0, b1 = (
            src.bytes_index.byte_offset(c.source_start),
            src.bytes_index.byte_offset(c.source_end),
        )
        assert raw[b0:b1].decode(codec) == src.text[c.source_start : c.source_end]
        assert (
            c.utf16_end - c.utf16_start
            == len(src.text[c.source_start : c.source_end].encode("utf-16-le")) // 2
        )


def test_astral_characters_shift_utf16_positions() -> None:
    book = load_book(corpus_file("txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt"))
    chunks = chunk_book(book, Settings())
    last = chunks[-1]
    assert last.utf16_end - last.source_end == 86  # 86 characters outside the BMP before the end
    crossing = [c for c in chunks if c.source_start <= 4162 < c.source_end][0]
    assert crossing.utf16_end == crossing.source_end + 1


def test_gbk_and_big5_give_identical_normalized_text_and_spans() -> None:
    gbk = load_book(corpus_file("txt_zh-Hant_honglou-meng_gbk_crlf.txt"))
    big5 = load_book(corpus_file("txt_zh-Hant_honglou-meng_big5-cp950_crlf.txt"))
    assert gbk.sha256 != big5.sha256
    assert [s.normalized_text for s in gbk.sections] == [s.normalized_text for s in big5.sections]
    span = lambda cs: [(c.section, c.start, c.end, c.source_start, c.source_end) for c in cs]  # noqa: E731
    assert span(chunk_book(gbk, Settings())) == span(chunk_book(big5, Settings()))


def test_chapters_and_titles() -> None:
    book = load_book(corpus_file("txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt"))
    assert book.title == "三国演义"
    assert len(book.sections) == 121  # front matter + 120 回
    assert book.sections[-1].title.startswith("第一百二十回")
    english = load_book(SAMPLES / "news-from-nowhere.txt")
    assert english.title.startswith("News from Nowhere")
    assert len(english.sections) == 33  # Gutenberg front matter + 32 chapters; TOC lines folded
    # Hard-wrapped Gutenberg text is unwrapped into paragraphs.
    first = english.sections[1].normalized_text
    assert first.startswith("CHAPTER I: DISCUSSION AND BED\n\nUp at the League, says a friend")
    assert "\r" not in first


def _write(tmp_path, name: str, data: bytes):  # type: ignore[no-untyped-def]
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize(
    "name, data, needle",
    [
        ("empty.txt", b"", "empty"),
        ("blank.txt", b"  \r\n\t\r\n\xe3\x80\x80\r\n", "no text"),
        ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4, "binary"),
    ],
)
def test_bad_text_files_name_the_file(tmp_path, name: str, data: bytes, needle: str) -> None:  # type: ignore[no-untyped-def]
    path = _write(tmp_path, name, data)
    with pytest.raises(DecodeError) as info:
        load_book(path)
    assert name in str(info.value) and needle in str(info.value)
    # The CLI prints one clear line and exits non-zero, no traceback.
    proc = subprocess.run(
        [sys.executable, "-m", "mindory.cli", "chunk", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("mindory: error: ") and name in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MindoryError, match="no such file"):
        load_book(tmp_path / "nope.txt")


def test_invalid_bytes_import_lossy_with_a_warning(tmp_path) -> None:  # type: ignore[no-untyped-def]
    head = b"Plain ASCII start. " * 5 + b"\n"  # 96 bytes
    data = head + b"\xff\xfe\xfa" + ("Ünïcødé text, mostly fine. " * 40).encode("utf-8")
    path = _write(tmp_path, "broken.txt", data)
    book = load_book(path)
    assert book.lossy and book.bad_bytes == 3 and book.first_bad_byte == 96
    assert book.warnings and "broken.txt" in book.warnings[0]
    proc = subprocess.run(
        [sys.executable, "-m", "mindory.cli", "chunk", str(path), "--json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    assert "warning" in proc.stderr
    assert json.loads(proc.stdout)["book"]["lossy"] is True


def test_json_output_is_byte_identical_across_processes() -> None:
    digests = set()
    for _ in range(2):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "mindory.cli",
                "chunk",
                str(SAMPLES / "qiaoshi-yanyi.txt"),
                "--json",
                "--with-text",
            ],
            capture_output=True,
            check=True,
            cwd=ROOT,
        ).stdout
        digests.add(hashlib.sha256(out).hexdigest())
    assert len(digests) == 1
    doc = json.loads(out)
    assert set(doc) == {"book", "settings", "fingerprint", "sections", "chunks"}
    assert set(doc["book"]) == {"title", "format", "encoding", "lossy", "sha256"}
    full = "".join(s["source_text"] for s in doc["sections"])
    for c in doc["chunks"]:
        sec = doc["sections"][c["section"]]
        assert c["text"] == sec["normalized_text"][c["start"] : c["end"]]
        assert full[c["source_start"] : c["source_end"]]  # file-global span
        assert {"byte_start", "byte_end", "utf16_start", "utf16_end"} <= set(c)
