"""Reading positions and bookmarks through the Library: places resolved into the full
Locator and kept in source coordinates with a quote, the newest ``modified`` winning, and
both re-anchored onto a new edition exactly as highlights are — position, exact quote,
normalized, fuzzy, orphaned — and reported in the import result."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindory.errors import ConflictError, MindoryError, NotFoundError
from mindory.library import Library
from mindory.reading.positions import Bookmark, PlaceIn, Position
from tests.conftest import SAMPLES

NEWS = SAMPLES / "news-from-nowhere.txt"
WASTE = SAMPLES / "wasteland.epub"
INSERTED = (
    "CHAPTER Interlude: A CHAPTER ADDED IN THE SECOND EDITION\r\n\r\n\r\n"
    + "".join(
        f"Paragraph {k} of a chapter written for the second edition, about a journey up "
        f"the river that never happened, on a day of weather number {k * 7}.\r\n\r\n"
        for k in range(10)
    )
    + "\r\n\r\n"
)


@pytest.fixture
def lib(db_url: str) -> Iterator[Library]:
    """A new library on each backend (SQLite, PostgreSQL: tests/pg.py)."""
    with Library.open(db_url) as library:
        yield library


def _text() -> str:
    return NEWS.read_bytes().decode("ascii")


def _edition(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def _at(lib: Library, book: str, section: int, local: int) -> int:
    return lib.section(book, section).info.source_start + local


def _check(lib: Library, kept: Position | Bookmark) -> None:
    """An anchored place: its quote is the book's text at its stored span, and its Locator
    is the point's."""
    assert kept.status == "anchored"
    sec = lib.section(kept.book, kept.section)
    base = sec.info.source_start
    assert sec.source_text[kept.source_start - base : kept.source_end - base] == kept.exact
    assert kept.source_start <= kept.point <= kept.source_end
    loc = kept.locator
    assert loc["section"] == kept.section
    assert loc["source"]["start"] == loc["source"]["end"] == kept.point
    assert (
        loc["source"]["utf16Start"]
        == len(sec.source_text[: kept.point - base].encode("utf-16-le")) // 2 + sec.info.utf16_start
    )


def _reports(result: Any) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in result.to_json()["reanchored"]}


def test_a_position_is_kept_in_source_coordinates_with_a_quote(lib: Library) -> None:
    book = lib.import_book(NEWS, embed=False).book
    at = _at(lib, book, 3, 250)
    p = lib.set_position(
        book, PlaceIn(section=3, offset=at), device="e-reader", modified="2026-12-01T08:00:00Z"
    )
    _check(lib, p)
    text = lib.section(book, 3).source_text
    assert p.point == at and p.exact == text[250:282] and p.prefix == text[218:250]
    assert p.locator["locations"]["fragments"] == [f"char={at},{at}"]
    assert lib.position(book) == p
    # the end of a section: the quote is the text before the point
    end = lib.section(book, 3).info.source_end
    q = lib.set_position(
        book,
        PlaceIn(section=3, progression=1.0),
        device="e-reader",
        modified="2026-12-01T09:00:00Z",
    )
    assert q.point == end and q.source_end == end and q.exact == text[-32:]
    _check(lib, q)
    total = lib.set_position(
        book, PlaceIn(total_progression=0.0), device="x", modified="2026-12-01T09:30:00Z"
    )
    assert (total.section, total.point) == (0, 0)


def test_the_newest_modified_wins_and_an_older_write_is_a_conflict(lib: Library) -> None:
    book = lib.import_book(NEWS, embed=False).book
    at = _at(lib, book, 2, 10)
    new = lib.set_position(
        book, PlaceIn(section=2, offset=at), device="a", modified="2026-12-01T12:00:00Z"
    )
    with pytest.raises(ConflictError) as err:
        lib.set_position(
            book, PlaceIn(section=2, offset=at + 5), device="b", modified="2026-12-01T11:59:59Z"
        )
    assert err.value.current == new.to_json()
    assert lib.position_history(book) == [new]
    with pytest.raises(NotFoundError):
        lib.position(lib.import_book(WASTE, embed=False).book)
    with pytest.raises(MindoryError, match="device"):
        lib.set_position(book, PlaceIn(section=2, offset=at), device=" ", modified="2027-01-01")
    with pytest.raises(MindoryError, match="ISO 8601"):
        lib.set_position(book, PlaceIn(section=2, offset=at), device="a", modified="soon")
    with pytest.raises(MindoryError, match="outside section"):
        lib.set_position(book, PlaceIn(section=2, offset=0), device="a", modified="2027-01-01")
    assert lib.position_history(book) == [new]  # nothing written by any of them


def test_bookmark_ids_come_from_the_place(lib: Library, tmp_path: Path) -> None:
    book = lib.import_book(NEWS, embed=False).book
    at = _at(lib, book, 6, 99)
    a = lib.add_bookmark(book, PlaceIn(section=6, offset=at), title="first")
    again = lib.add_bookmark(book, PlaceIn(section=6, offset=at))
    assert a.new and not again.new and again.id == a.id and again.title == "first"
    # the same place in another library (another insertion order) has the same id
    with Library.open(tmp_path / "other.sqlite") as other:
        other.import_book(NEWS, embed=False)
        other.add_bookmark(book, PlaceIn(section=1, offset=_at(other, book, 1, 5)))
        assert other.add_bookmark(book, PlaceIn(section=6, offset=at)).id == a.id
    assert lib.bookmark(book, a.id) == again
    assert lib.delete_bookmark(book, a.id).id == a.id
    assert lib.bookmarks(book) == []


def test_a_new_edition_moves_positions_and_bookmarks_by_position(
    lib: Library, tmp_path: Path
) -> None:
    old = lib.import_book(NEWS, embed=False).book
    before = lib.add_bookmark(old, PlaceIn(section=2, offset=_at(lib, old, 2, 700)), title="b2")
    after = lib.add_bookmark(old, PlaceIn(section=4, offset=_at(lib, old, 4, 1200)))
    pos = lib.set_position(
        old,
        PlaceIn(section=5, offset=_at(lib, old, 5, 3000)),
        device="d",
        modified="2026-12-01T10:00:00Z",
    )
    text = _text()
    cut = lib.section(old, 3).info.source_start
    result = lib.import_book(
        _edition(tmp_path, "news-2.txt", text[:cut] + INSERTED + text[cut:]),
        replaces=old,
        embed=False,
    )
    new = result.book
    reports = _reports(result)
    assert {reports[k]["kind"] for k in (before.id, after.id)} == {"bookmark"}
    assert reports[pos.id]["kind"] == "position"
    for kept in (before, after, pos):
        r = reports[kept.id]
        assert r["status"] == "position" and r["confidence"] == 1.0, r
        assert r["old"]["book"] == old and r["new"]["book"] == new
    moved = {b.id: b for b in lib.bookmarks(new)}
    assert lib.bookmarks(old) == []
    assert moved[before.id].point == before.point and moved[before.id].section == 2
    assert moved[after.id].point == after.point + len(INSERTED) and moved[after.id].section == 5
    assert moved[after.id].title is None and moved[before.id].title == "b2"
    now = lib.position(new)
    assert now.id == pos.id and now.point == pos.point + len(INSERTED) and now.section == 6
    assert now.reanchored is not None and now.reanchored["status"] == "position"
    for kept in (*moved.values(), now):
        _check(lib, kept)
        assert kept.exact == {before.id: before, after.id: after, pos.id: pos}[kept.id].exact
    report = lib.verify()  # every kept quote is where it says
    assert report.ok, report.problems


def test_a_new_edition_exact_normalized_and_orphaned(lib: Library, tmp_path: Path) -> None:
    old = lib.import_book(NEWS, embed=False).book
    sec = lib.section(old, 5)
    base, local = sec.info.source_start, sec.source_text
    paras = [m.span() for m in re.finditer(r"(?:[^\r\n]+\r\n)*[^\r\n]+", local)]
    pa, pb = next((a, b) for a, b in paras if b - a > 900 and a > 2000)
    inside = lib.add_bookmark(old, PlaceIn(section=5, offset=base + pa + 300))
    later = lib.add_bookmark(old, PlaceIn(section=5, offset=base + pb + 200))
    # a position whose quote runs over a line break (CRLF in this edition)
    br = local.index("\r\n", pb + 400)
    wrapped = lib.set_position(
        old, PlaceIn(section=5, offset=base + br - 10), device="d", modified="2026-12-01T10:00:00Z"
    )
    assert "\r\n" in wrapped.exact
    text = _text()
    cut_a, cut_b = base + pa, base + pb + 4
    second = text[:cut_a] + text[cut_b:]
    result = lib.import_book(
        _edition(tmp_path, "news-cut.txt", second.replace("\r\n", "\n")), replaces=old, embed=False
    )
    new = result.book
    reports = _reports(result)
    assert reports[inside.id]["status"] == "orphaned" and reports[inside.id]["new"] is None
    assert reports[later.id]["status"] in ("exact", "normalized"), reports[later.id]
    assert reports[wrapped.id]["status"] == "normalized", reports[wrapped.id]
    orphan = lib.bookmark(new, inside.id)
    assert orphan.status == "orphaned" and orphan.exact == inside.exact
    out = orphan.to_json()
    assert out["locator"] is None and out["orphanedFrom"]["book"] == old
    assert [b.status for b in lib.bookmarks(new)] == ["anchored", "orphaned"]
    moved = lib.position(new)
    _check(lib, moved)
    assert moved.exact.startswith(wrapped.exact.replace("\r\n", "\n"))  # same place
    _check(lib, lib.bookmark(new, later.id))
    report = lib.verify()
    assert report.ok, report.problems


def test_a_stored_edition_moves_them_fuzzily_when_a_typo_is_fixed(
    lib: Library, tmp_path: Path
) -> None:
    text = _text()
    book = lib.import_book(NEWS, embed=False).book
    sec = lib.section(book, 4)
    base = sec.info.source_start
    word = next(m for m in re.finditer(r"[a-z]{7,}", sec.source_text) if m.start() > 2000)
    p = base + word.start() + 2
    typo = text[:p] + text[p + 1] + text[p] + text[p + 2 :]
    first = lib.import_book(_edition(tmp_path, "news-typo.txt", typo), embed=False).book
    mark = lib.add_bookmark(first, PlaceIn(section=4, offset=base + word.start() - 6))
    assert typo[p : p + 2] in mark.exact
    result = lib.import_book(NEWS, replaces=first, embed=False)  # already stored
    assert result.status == "unchanged"
    r = _reports(result)[mark.id]
    assert r["status"] == "fuzzy" and r["changed"] is True, r
    fixed = lib.bookmark(book, mark.id)
    _check(lib, fixed)
    assert fixed.point == mark.point and fixed.exact == text[fixed.source_start : fixed.source_end]


def test_an_epub_edition_found_by_its_identifier_takes_them(lib: Library, tmp_path: Path) -> None:
    import zipfile

    first_path = tmp_path / "waste-1.epub"
    with zipfile.ZipFile(WASTE) as src, zipfile.ZipFile(first_path, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("wasteland-content.xhtml"):
                data = data.replace(
                    b"April is the cruellest month", b"April is the cruelest month", 1
                )
            dst.writestr(info, data)
    first = lib.import_book(first_path, embed=False).book
    sec = lib.section(first, 0)
    at = sec.source_text.index("Winter kept us warm")
    pos = lib.set_position(
        first, PlaceIn(section=0, offset=at), device="d", modified="2026-12-01T10:00:00Z"
    )
    cfi = pos.locator["locations"]["cfi"]
    assert (
        lib.set_position(first, PlaceIn(cfi=cfi), device="e", modified="2026-12-01T11:00:00Z").point
        == at
    )
    result = lib.import_book(WASTE, embed=False)  # no replaces: the same dc:identifier
    assert result.replaces == (first,)
    statuses = {r["id"]: r["status"] for r in result.to_json()["reanchored"]}
    assert set(statuses.values()) == {"exact"}, statuses
    now = lib.position(result.book)
    _check(lib, now)
    assert now.exact.startswith("Winter kept us warm") and now.locator["locations"]["cfi"]
    assert len(lib.position_history(result.book)) == 2


def test_verify_checks_kept_places(lib: Library) -> None:
    from sqlalchemy import text

    book = lib.import_book(NEWS, embed=False).book
    mark = lib.add_bookmark(book, PlaceIn(section=2, offset=_at(lib, book, 2, 50)))
    assert lib.verify().ok
    with lib.engine.begin() as conn:
        conn.execute(text("UPDATE bookmarks SET exact = 'not the text'"))
    report = lib.verify()
    assert not report.ok and any(f"bookmark {mark.id}" in p for p in report.problems)
