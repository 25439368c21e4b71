"""Library: import, read back exactly what the pipeline produced, reproducible
re-imports and derivations, export, verify (also against tampering), delete."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, update

from mindory.errors import MindoryError, NotFoundError
from mindory.importers import load_book
from mindory.library import ImportFailure, ImportResult, Library
from mindory.store.models import (
    Base,
    BlockRow,
    ChunkRow,
    SectionTextRow,
)
from mindory.text.chunking import chunk_book
from mindory.text.records import ChunkSettings, NormalizeProfile, Settings, TocEntry
from tests.conftest import SAMPLES, corpus_file

NEWS = SAMPLES / "news-from-nowhere.txt"
QIAOSHI = SAMPLES / "qiaoshi-yanyi.txt"
WASTELAND = SAMPLES / "wasteland.epub"


@pytest.fixture
def lib(db_url: str) -> Iterator[Library]:
    """A new library on each backend (SQLite, PostgreSQL: tests/pg.py)."""
    with Library.open(db_url) as library:
        yield library


def _row_counts(lib: Library) -> dict[str, int]:
    with lib.engine.connect() as conn:
        return {
            t.name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
            for t in Base.metadata.sorted_tables
        }


def _writes_during(lib: Library) -> list[str]:
    """Collects the write statements executed on the library's engine."""
    seen: list[str] = []

    @event.listens_for(lib.engine, "before_cursor_execute")
    def _record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().split(" ", 1)[0].upper() in {"INSERT", "UPDATE", "DELETE"}:
            seen.append(statement)

    return seen


@pytest.mark.parametrize("path", [NEWS, QIAOSHI, WASTELAND], ids=lambda p: p.name)
def test_stored_chunks_are_the_pipelines(lib: Library, path: Path) -> None:
    settings = Settings()
    book = load_book(path, settings.profile)
    expected = chunk_book(book, settings)
    result = lib.import_book(path, settings)
    assert result.status == "created"
    assert (result.book, result.sections, result.chunks) == (
        book.sha256,
        len(book.sections),
        len(expected),
    )
    assert result.blocks == sum(len(s.blocks) for s in book.sections)
    assert set(result.timings) >= {"read", "parse", "normalize", "chunk", "write", "total"}
    stored = lib.chunks(book.sha256)
    assert [
        (c.id, c.section, c.index, c.start, c.end, c.source_start, c.source_end)
        + (c.utf16_start, c.utf16_end, c.text)
        for c in stored
    ] == [
        (c.id, c.section, c.index, c.start, c.end, c.source_start, c.source_end)
        + (c.utf16_start, c.utf16_end, c.text)
        for c in expected
    ]
    for ordinal in {0, len(book.sections) // 2, len(book.sections) - 1}:
        sec = lib.section(book.sha256, ordinal)
        want = book.sections[ordinal]
        assert sec.source_text == want.source_text
        assert sec.normalized_text == want.normalized_text
        assert sec.offset_map == want.offset_map
        assert sec.info.source_start == want.source_start
        page = lib.blocks(book.sha256, ordinal, 1, 10_000)
        assert [(b.kind, b.start, b.end) for b in page.blocks] == [
            (b.kind, b.start, b.end) for b in want.blocks
        ]
        assert [(b.source_start, b.source_end) for b in page.blocks] == [
            (b.source_start + want.source_start, b.source_end + want.source_start)
            for b in want.blocks
        ]
    assert lib.book_file(book.sha256) == path.read_bytes()
    assert lib.verify().ok


def test_plain_text_byte_spans(lib: Library) -> None:
    lib.import_book(QIAOSHI)
    data = QIAOSHI.read_bytes()
    book = lib.book("qiaoshi")
    assert book.encoding == "big5hkscs"
    source = "".join(
        lib.section(book.id, n).source_text for n in range(book.section_count)
    )  # sections of this file cover it end to end
    for c in lib.chunks(book.id)[::37]:
        assert c.byte_start is not None and c.byte_end is not None
        assert (
            data[c.byte_start : c.byte_end].decode("big5hkscs")
            == (source[c.source_start : c.source_end])
        )


def test_epub_rows(lib: Library) -> None:
    lib.import_book(WASTELAND)
    book = lib.book("The Waste Land")
    assert book.format == "epub" and book.creators and book.toc_count == 6
    sec = lib.section(book.id, 0)
    assert sec.info.href and sec.info.media_type == "application/xhtml+xml"
    toc = lib.toc(book.id)
    assert [n.title for n in toc][0] == "I. THE BURIAL OF THE DEAD"
    assert all(n.section == 0 and n.source_offset is not None for n in toc)
    if sec.cfi_table is not None:  # the CFI module stores its table per section
        doc = sec.cfi_document()
        c = lib.chunks(book.id, with_cfi=True)[3]
        assert c.cfi == doc.range(c.source_start, c.source_end)
        assert c.cfi and c.cfi.startswith("epubcfi(")


def test_nested_toc_is_kept(lib: Library) -> None:
    path = corpus_file("epub3_en_childrens-literature-nested-toc.epub")
    book = load_book(path)
    lib.import_book(path)

    def shape(entries: tuple[Any, ...]) -> list[Any]:
        return [(e.title, e.href, e.section, e.source_offset, shape(e.children)) for e in entries]

    stored = lib.toc(book.sha256)
    assert shape(stored) == shape(book.toc)
    assert any(n.children for n in stored)

    def count(entries: tuple[TocEntry, ...]) -> int:
        return sum(1 + count(e.children) for e in entries)

    assert lib.book(book.sha256).toc_count == count(book.toc)


def test_unchanged_reimport_writes_nothing(lib: Library, tmp_path: Path) -> None:
    first = lib.import_book(NEWS)
    before = _row_counts(lib)
    writes = _writes_during(lib)
    again = lib.import_book(NEWS)
    assert again.status == "unchanged" and not again.made_current
    assert writes == []
    assert _row_counts(lib) == before
    assert (again.book, again.chunks, again.sections, again.blocks) == (
        first.book,
        first.chunks,
        first.sections,
        first.blocks,
    )
    # Same bytes under another name are the same book.
    copy = tmp_path / "renamed.txt"
    copy.write_bytes(NEWS.read_bytes())
    assert lib.import_book(copy).status == "unchanged"
    assert writes == []


def test_unchanged_reimport_is_cheap(lib: Library) -> None:
    path = corpus_file("txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt")
    first = lib.import_book(path)
    best = min(lib.import_book(path).timings["total"] for _ in range(3))
    assert best < 0.05 * first.timings["total"], (best, first.timings)


def test_other_settings_make_a_new_derivation(lib: Library) -> None:
    small = Settings(chunking=ChunkSettings(size=300, overlap=50))
    nfkc = Settings(profile=NormalizeProfile(unicode_form="NFKC"))
    first = lib.import_book(QIAOSHI)
    default_ids = [c.id for c in lib.chunks(first.book)]

    second = lib.import_book(QIAOSHI, small)
    assert second.status == "rederived" and second.fingerprint == small.fingerprint
    assert second.chunks > first.chunks
    book = lib.book(first.book)
    assert [d.current for d in book.derivations] == [False, True]
    assert book.current is not None and book.current.fingerprint == small.fingerprint
    assert len(lib.chunks(first.book)) == second.chunks
    assert [c.id for c in lib.chunks(first.book, fingerprint=first.fingerprint)] == default_ids
    counts = _row_counts(lib)
    assert counts["books"] == 1 and counts["sections"] == first.sections
    assert counts["normalizations"] == 1  # same profile: normalized rows are shared

    third = lib.import_book(QIAOSHI, nfkc)
    assert third.status == "rederived"
    assert _row_counts(lib)["normalizations"] == 2
    expected = chunk_book(load_book(QIAOSHI, nfkc.profile), nfkc)
    assert [(c.id, c.start, c.end) for c in lib.chunks(first.book)] == [
        (c.id, c.start, c.end) for c in expected
    ]

    # Back to the first settings: nothing to compute, it becomes current again.
    writes = _writes_during(lib)
    back = lib.import_book(QIAOSHI)
    assert back.status == "unchanged" and back.made_current
    assert all(w.lstrip().upper().startswith("UPDATE") for w in writes)
    assert [c.id for c in lib.chunks(first.book)] == default_ids
    assert sum(d.current for d in lib.book(first.book).derivations) == 1
    assert lib.verify().ok


def test_ids_do_not_depend_on_import_order(tmp_path: Path) -> None:
    files = [NEWS, QIAOSHI, WASTELAND]
    exports: list[dict[str, str]] = []
    spans: list[dict[str, list[tuple[Any, ...]]]] = []
    for k, order in enumerate([files, files[::-1]]):
        with Library.open(tmp_path / f"lib{k}.sqlite") as lib:
            if k == 1:  # a different history too: another derivation first
                lib.import_book(QIAOSHI, Settings(chunking=ChunkSettings(size=200, overlap=20)))
            for path in order:
                lib.import_book(path)
            exports.append({b.id: "\n".join(lib.export(b.id)) for b in lib.books()})
            spans.append(
                {
                    b.id: [
                        (c.id, c.section, c.start, c.end, c.source_start, c.source_end)
                        for c in lib.chunks(b.id)
                    ]
                    for b in lib.books()
                }
            )
    assert exports[0] == exports[1]
    assert spans[0] == spans[1]


def test_export_shape(lib: Library) -> None:
    lib.import_book(WASTELAND)
    lines = [json.loads(line) for line in lib.export("waste")]
    kinds = [line["type"] for line in lines]
    assert kinds[0] == "book" and kinds.count("section") == 1
    assert kinds.count("toc") == 6 and kinds.count("chunk") == 41
    sections = {line["ordinal"]: line for line in lines if line["type"] == "section"}
    for chunk in (line for line in lines if line["type"] == "chunk"):
        normalized = sections[chunk["section"]]["normalized_text"]
        assert normalized[chunk["start"] : chunk["end"]] == chunk["text"]


def test_book_references(lib: Library, tmp_path: Path) -> None:
    for path in (NEWS, QIAOSHI, WASTELAND):
        lib.import_book(path)
    news = lib.book("news")
    assert news.title == "News from Nowhere"
    assert lib.book(news.id[:8]).id == news.id
    assert lib.book(news.id.upper()).id == news.id
    assert lib.book("waste").title == "The Waste Land"  # a word inside the title
    with pytest.raises(NotFoundError, match="no book"):
        lib.book("Moby")
    other = tmp_path / "news-2.txt"
    other.write_bytes(NEWS.read_bytes() + b"\r\nA last line.\r\n")
    lib.import_book(other)
    with pytest.raises(MindoryError, match="matches 2 books"):
        lib.book("News from")
    with pytest.raises(NotFoundError, match="no section 99"):
        lib.section(news.id, 99)


def test_copy_false_stores_the_path(lib: Library, tmp_path: Path) -> None:
    path = tmp_path / "news.txt"
    path.write_bytes(NEWS.read_bytes())
    result = lib.import_book(path, copy=False)
    info = lib.book(result.book)
    assert info.stored == "path"
    assert lib.book_file(result.book) == NEWS.read_bytes()
    assert lib.verify().ok
    path.write_bytes(b"changed")
    with pytest.raises(MindoryError, match="changed"):
        lib.book_file(result.book)
    report = lib.verify()
    assert not report.ok and "changed since it was imported" in report.problems[0]


def test_delete_leaves_no_rows(lib: Library) -> None:
    lib.import_book(NEWS)
    lib.import_book(NEWS, Settings(chunking=ChunkSettings(size=300, overlap=30)))
    lib.import_book(WASTELAND)
    before = _row_counts(lib)
    lib.delete_book("news")
    assert [b.title for b in lib.books()] == ["The Waste Land"]
    lib.delete_book("waste")
    after = _row_counts(lib)
    after.pop("library_facts")  # about the library (its word analysis), not a book
    assert all(n == 0 for n in after.values()), after
    assert before["chunks"] > 0
    with pytest.raises(NotFoundError):
        lib.delete_book("news")


def test_batch_import_skips_bad_files(lib: Library, tmp_path: Path) -> None:
    folder = tmp_path / "books"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "wasteland.epub").write_bytes(WASTELAND.read_bytes())
    (folder / "empty.txt").write_bytes(b"")
    (folder / "garbage.epub").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 8)
    (folder / "binary.txt").write_bytes(bytes(range(256)) * 4)
    (folder / "news.txt").write_bytes(NEWS.read_bytes())
    (folder / "notes.md").write_text("not a book")
    (folder / ".hidden.txt").write_text("skipped")
    results = list(lib.import_many([folder]))
    failed = {Path(r.path).name: r for r in results if isinstance(r, ImportFailure)}
    done = [r for r in results if isinstance(r, ImportResult)]
    assert set(failed) == {"empty.txt", "garbage.epub", "binary.txt"}
    assert all(r.path in r.error for r in failed.values())
    assert sorted(Path(r.path).name for r in done) == ["news.txt", "wasteland.epub"]
    counts = _row_counts(lib)
    assert counts["books"] == counts["book_files"] == 2
    assert counts["derivations"] == counts["normalizations"] == 2
    assert lib.verify().ok


def test_verify_finds_tampering(lib: Library) -> None:
    lib.import_book(QIAOSHI)
    assert lib.verify().ok
    with lib.engine.begin() as conn:
        chunk = conn.execute(select(ChunkRow).order_by(ChunkRow.id).limit(3)).all()
        conn.execute(
            update(ChunkRow).where(ChunkRow.id == chunk[0].id).values(text=chunk[0].text + "x")
        )
        conn.execute(
            update(ChunkRow)
            .where(ChunkRow.id == chunk[1].id)
            .values(source_start=chunk[1].source_start + 1)
        )
        conn.execute(
            update(ChunkRow)
            .where(ChunkRow.id == chunk[2].id)
            .values(utf16_end=chunk[2].utf16_end + 1, chunk_id="0" * 32)
        )
        block = conn.execute(
            select(BlockRow.id, BlockRow.index).order_by(BlockRow.id.desc())
        ).first()
        assert block is not None
        conn.execute(update(BlockRow).where(BlockRow.id == block.id).values(source_end=10**6))
    report = lib.verify()
    joined = "\n".join(report.problems)
    assert not report.ok
    assert "text is not normalized" in joined
    assert "source span" in joined and "is not the map's" in joined
    assert "UTF-16 span" in joined
    assert "id 00000000" in joined
    assert f"block {block.index} source span" in joined


def test_verify_finds_a_broken_map(lib: Library) -> None:
    lib.import_book(NEWS)
    with lib.engine.begin() as conn:
        row = conn.execute(select(SectionTextRow.id, SectionTextRow.normalized_text).limit(1)).one()
        # Change one character of a copy run: the map no longer matches the texts.
        broken = "Q" + row.normalized_text[1:]
        conn.execute(
            update(SectionTextRow).where(SectionTextRow.id == row.id).values(normalized_text=broken)
        )
        conn.execute(
            update(SectionTextRow).where(SectionTextRow.id != row.id).values(offset_map=b"\x00")
        )
    report = lib.verify()
    joined = "\n".join(report.problems)
    assert "copy run at normalized 0 differs" in joined
    assert "unreadable offset map" in joined


def test_import_errors_name_the_file(lib: Library, tmp_path: Path) -> None:
    with pytest.raises(MindoryError, match="no such file"):
        lib.import_book(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(MindoryError, match="empty.txt"):
        lib.import_book(empty)
    assert sum(_row_counts(lib).values()) == 0


def test_first_import_timing_is_reported(lib: Library) -> None:
    t = time.perf_counter()
    result = lib.import_book(NEWS)
    wall = time.perf_counter() - t
    phases = sum(result.timings[k] for k in ("read", "parse", "normalize", "chunk", "write"))
    assert phases <= result.timings["total"] <= wall
    assert result.timings["normalize"] > 0


def test_export_hash_is_stable(lib: Library) -> None:
    lib.import_book(NEWS)
    a = hashlib.sha256("\n".join(lib.export("news")).encode()).hexdigest()
    b = hashlib.sha256("\n".join(lib.export("news")).encode()).hexdigest()
    assert a == b
