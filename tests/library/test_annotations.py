"""Highlights at the CLI and W3C Web Annotation export / import, through the Library and
the ``mindory`` command: a highlight made from a quote (through calibration), the same
span twice (``duplicate_of``), the round trip export → delete → import giving the same
annotations, orphans reported by their quote and never placed, and files that are not a
JSON-LD AnnotationCollection refused with nothing written."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mindory.cli import main as cli_main
from mindory.errors import MindoryError
from mindory.library import Library
from mindory.reading.highlights import Highlight
from mindory.reading.units import CFI_CONFORMS_TO, RFC5147_CONFORMS_TO
from mindory.reading.webannotation import AnnotationFileError, parse_collection
from tests.conftest import SAMPLES

WASTE = SAMPLES / "wasteland.epub"
NEWS = SAMPLES / "news-from-nowhere.txt"
ANNO = "http://www.w3.org/ns/anno.jsonld"


@pytest.fixture
def lib(db_url: str) -> Iterator[Library]:
    """Two books in a new library on each backend (tests/pg.py)."""
    with Library.open(db_url) as library:
        library.import_book(WASTE)
        library.import_book(NEWS)
        yield library


def _ids(lib: Library) -> tuple[str, str]:
    by_name = {b.file_name: b.id for b in lib.books()}
    return by_name["wasteland.epub"], by_name["news-from-nowhere.txt"]


def _quote(lib: Library, book: str, section: int, at: int, n: int = 40) -> str:
    text = lib.section(book, section).source_text
    start = text.index(" ", at) + 1
    return " ".join(text[start : start + n].split())


def _key(h: Highlight) -> tuple[Any, ...]:
    """What makes two highlights the same annotation (ids and times are new on import)."""
    return tuple(
        "" if v is None else v
        for v in (
            h.book,
            h.section,
            h.source_start,
            h.source_end,
            h.utf16_start,
            h.utf16_end,
            h.exact,
            h.prefix,
            h.suffix,
            h.cfi,
            h.note,
            h.color,
            h.status,
        )
    )


def _run(db: Path | str, *args: str) -> Any:
    result = CliRunner().invoke(cli_main, ["--db", str(db), *args])
    return result


def _make_some(lib: Library) -> list[Highlight]:
    epub, txt = _ids(lib)
    made = [
        lib.highlight_quote(epub, "April is the cruellest month", note="the opening").highlight,
        lib.highlight_quote(epub, "Unreal City", color="blue").highlight,
        lib.highlight_quote(txt, _quote(lib, txt, 5, 2000), section=5).highlight,
    ]
    return made


def test_highlight_from_a_quote_goes_through_calibration(lib: Library) -> None:
    epub, _ = _ids(lib)
    made = lib.highlight_quote(epub, "April   is the cruellest month", note="n")
    h = made.highlight
    assert made.calibration.match.method == "normalized"  # whitespace folded
    assert h.exact == "April is the cruellest month"
    sec = lib.section(epub, h.section).source_text
    assert sec[h.source_start : h.source_end] == h.exact
    assert h.note == "n" and h.cfi is not None
    out = made.to_json()
    assert out["calibration"]["method"] == "normalized"
    with pytest.raises(MindoryError, match="not in"):
        lib.highlight_quote(epub, "words that are nowhere in this poem at all, none")
    assert lib.highlights(epub) == [h]


def test_the_same_span_twice_is_allowed_and_reported(lib: Library) -> None:
    epub, _ = _ids(lib)
    first = lib.highlight_quote(epub, "Unreal City").highlight
    second = lib.highlight_quote(epub, "Unreal City", note="again").highlight
    assert first.duplicate_of is None
    assert second.duplicate_of == first.id
    assert second.to_json()["duplicate_of"] == first.annotation_id
    listed = {h.id: h for h in lib.highlights(epub)}
    assert listed[first.id].duplicate_of is None
    assert listed[second.id].duplicate_of == first.id
    assert "duplicate_of" not in listed[first.id].to_json()
    assert lib.highlight(epub, second.id).duplicate_of == first.id


def test_export_is_a_jsonld_collection_with_three_selectors(lib: Library) -> None:
    made = _make_some(lib)
    doc = lib.export_annotations()
    assert doc["@context"] == ANNO and doc["type"] == "AnnotationCollection"
    assert doc["total"] == len(made) == len(doc["first"]["items"])
    assert doc["first"]["type"] == "AnnotationPage"
    for item in doc["first"]["items"]:
        assert item["type"] == "Annotation" and item["id"].startswith("urn:uuid:")
        kinds = [s["type"] for s in item["target"]["selector"]]
        assert kinds == ["TextQuoteSelector", "TextPositionSelector", "FragmentSelector"]
        frag = item["target"]["selector"][2]
        if item["book"] == _ids(lib)[0]:
            assert frag["conformsTo"] == CFI_CONFORMS_TO
            assert frag["value"].startswith("epubcfi(")
        else:
            assert frag["conformsTo"] == RFC5147_CONFORMS_TO
    one = lib.export_annotations(_ids(lib)[0])
    assert one["total"] == 2
    assert json.loads(json.dumps(doc)) == doc  # plain JSON all the way


def test_round_trip_export_delete_import(lib: Library, tmp_path: Path) -> None:
    made = _make_some(lib)
    epub, txt = _ids(lib)
    lib.highlight_quote(epub, "Unreal City", note="twice")  # a duplicate span, exported too
    before = sorted(_key(h) for b in (epub, txt) for h in lib.highlights(b))
    path = tmp_path / "notes.jsonld"
    path.write_text(json.dumps(lib.export_annotations()), encoding="utf-8")
    for b in (epub, txt):
        for h in lib.highlights(b):
            lib.delete_highlight(b, h.id)
    assert not lib.highlights(epub) and not lib.highlights(txt)
    report = lib.import_annotations(path)
    assert report.count("placed") == len(made) + 1 and not report.orphans
    assert {i.method for i in report.items} == {"position"}
    after = sorted(_key(h) for b in (epub, txt) for h in lib.highlights(b))
    assert after == before
    dup = [h for h in lib.highlights(epub) if h.duplicate_of is not None]
    assert len(dup) == 1 and dup[0].note == "twice"
    # importing again writes nothing: every annotation is already there
    again = lib.import_annotations(path)
    assert again.count("present") == len(made) + 1 and again.count("placed") == 0
    assert sorted(_key(h) for b in (epub, txt) for h in lib.highlights(b)) == before


def test_import_reverifies_quotes_and_reports_orphans(lib: Library) -> None:
    _make_some(lib)
    epub, txt = _ids(lib)
    doc = lib.export_annotations()
    for b in (epub, txt):
        for h in lib.highlights(b):
            lib.delete_highlight(b, h.id)
    changed = copy.deepcopy(doc)
    items = changed["first"]["items"]
    on_epub = [i for i in items if i["book"] == epub]
    on_txt = [i for i in items if i["book"] == txt]
    # 1: its stored place no longer holds the quote, but the quote is in the book
    pos = on_epub[0]["target"]["selector"][1]
    pos["start"] += 3
    pos["end"] += 3
    # 2: a quote that is nowhere in the book: an orphan, reported by its quote
    on_epub[1]["target"]["selector"][0]["exact"] = "a line Eliot never wrote in this poem"
    # 3: a book this library does not have
    on_txt[0]["book"] = "0" * 64
    report = lib.import_annotations(changed)
    by_index = {i.index: i for i in report.items}
    first = by_index[items.index(on_epub[0])]
    nowhere = by_index[items.index(on_epub[1])]
    foreign = by_index[items.index(on_txt[0])]
    assert (first.status, nowhere.status, foreign.status) == ("placed", "orphaned", "orphaned")
    assert first.method == "exact"
    placed = first.highlight
    assert placed is not None and placed.exact == on_epub[0]["target"]["selector"][0]["exact"]
    assert nowhere.quote == "a line Eliot never wrote in this poem"
    assert "not in" in (nowhere.reason or "")
    assert "no book" in (foreign.reason or "")
    # nothing invented: only the placed one was written
    assert [h.id for h in lib.highlights(epub)] == [placed.id]
    assert lib.highlights(txt) == []
    assert report.to_json()["orphaned"] == 2


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "not a JSON object"),
        ({"type": "AnnotationCollection"}, "@context"),
        ({"@context": ANNO, "type": "Annotation"}, "not an AnnotationCollection"),
        ({"@context": ANNO, "type": "AnnotationCollection", "total": 1}, "AnnotationPage"),
        (
            {
                "@context": ANNO,
                "type": "AnnotationCollection",
                "first": {"type": "AnnotationPage", "items": [{"type": "Annotation"}]},
            },
            "target",
        ),
        (
            {
                "@context": ANNO,
                "type": "AnnotationCollection",
                "first": {
                    "type": "AnnotationPage",
                    "items": [
                        {
                            "type": "Annotation",
                            "target": {"selector": [{"type": "TextPositionSelector"}]},
                        }
                    ],
                },
            },
            "TextQuoteSelector",
        ),
    ],
)
def test_files_that_are_not_collections_are_refused(
    lib: Library, tmp_path: Path, doc: Any, message: str
) -> None:
    with pytest.raises(AnnotationFileError, match=message):
        parse_collection(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(AnnotationFileError, match=message):
        lib.import_annotations(path)
    epub, txt = _ids(lib)
    assert lib.highlights(epub) == [] and lib.highlights(txt) == []


def test_a_bad_item_late_in_the_file_writes_nothing(lib: Library) -> None:
    _make_some(lib)
    epub, txt = _ids(lib)
    doc = lib.export_annotations()
    for b in (epub, txt):
        for h in lib.highlights(b):
            lib.delete_highlight(b, h.id)
    doc["first"]["items"][-1]["target"]["selector"] = []
    with pytest.raises(AnnotationFileError, match="TextQuoteSelector"):
        lib.import_annotations(doc)
    assert lib.highlights(epub) == [] and lib.highlights(txt) == []


# --------------------------------------------------------------------------- the CLI


def test_cli_highlights_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    with Library.open(db) as library:
        library.import_book(WASTE)
        (book,) = [b.id for b in library.books()]
    r = _run(db, "highlight", "add", book, "--quote", "April is the cruellest month", "--json")
    assert r.exit_code == 0, r.output
    first = json.loads(r.stdout)
    assert first["calibration"]["method"] == "exact"
    r = _run(db, "highlight", "add", book, "--quote", "April is the cruellest month", "--note", "x")
    assert r.exit_code == 0, r.output
    assert "same span as" in r.stdout
    r = _run(db, "highlights", book, "--json")
    listed = json.loads(r.stdout)
    assert len(listed) == 2 and listed[1]["duplicate_of"] == first["id"]
    r = _run(db, "highlights", book)
    assert r.exit_code == 0 and "April is the cruellest month" in r.stdout
    bad = _run(db, "highlight", "add", book, "--quote", "florbix quantaloo zzyzx")
    assert bad.exit_code != 0 and "not in" in bad.output

    out = tmp_path / "a.jsonld"
    r = _run(db, "annotations", "export", book, "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["type"] == "AnnotationCollection" and doc["total"] == 2
    r = _run(db, "annotations", "export")
    assert json.loads(r.stdout)["total"] == 2

    exported = _run(db, "export", book)
    lines = [json.loads(x) for x in exported.stdout.splitlines()]
    notes = [x["annotation"] for x in lines if x["type"] == "annotation"]
    assert [n["id"] for n in notes] == [first["id"], listed[1]["id"]]
    bare = _run(db, "export", book, "--no-annotations")
    assert all(json.loads(x)["type"] != "annotation" for x in bare.stdout.splitlines())

    for item in listed:
        r = _run(db, "highlight", "delete", book, item["id"])
        assert r.exit_code == 0, r.output
    assert json.loads(_run(db, "highlights", book, "--json").stdout) == []
    r = _run(db, "annotations", "import", str(out), "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["placed"] == 2 and report["orphaned"] == 0
    again = json.loads(_run(db, "highlights", book, "--json").stdout)
    keep = ("target", "body", "section", "source", "note", "color", "status")
    assert [{k: a[k] for k in keep} for a in again] == [{k: a[k] for k in keep} for a in listed]

    # an orphan is reported by its quote, and not written
    doc["first"]["items"][0]["target"]["selector"][0]["exact"] = "not a line of the poem"
    orphan_file = tmp_path / "orphan.jsonld"
    orphan_file.write_text(json.dumps(doc), encoding="utf-8")
    r = _run(db, "annotations", "import", str(orphan_file))
    assert r.exit_code == 0, r.output
    assert "orphan: «not a line of the poem»" in r.stdout
    assert len(json.loads(_run(db, "highlights", book, "--json").stdout)) == 2

    # a file that is not a JSON-LD AnnotationCollection: a clear error, nothing written
    for text in ("not json", json.dumps({"@context": ANNO, "type": "Annotation"})):
        bad_file = tmp_path / "bad.json"
        bad_file.write_text(text, encoding="utf-8")
        r = _run(db, "annotations", "import", str(bad_file))
        assert r.exit_code != 0
        assert "mindory: error:" in r.output and "bad.json" in r.output
    assert len(json.loads(_run(db, "highlights", book, "--json").stdout)) == 2


# --------------------------------------------------------------------------- HTTP


def test_http_annotations_round_trip(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from mindory.server.app import create_app

    db = tmp_path / "lib.sqlite"
    with Library.open(db) as library:
        library.import_book(WASTE)
        (book,) = [b.id for b in library.books()]
    app = create_app(db, import_isolation="thread")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        made = [
            client.post(f"/books/{book}/highlights", json={"cfi": cfi, "note": note}).json()
            for cfi, note in [
                (_cfi(client, book, "April is the cruellest month"), "one"),
                (_cfi(client, book, "Unreal City"), None),
            ]
        ]
        again = client.post(
            f"/books/{book}/highlights", json={"cfi": made[1]["target"]["selector"][2]["value"]}
        ).json()
        assert again["duplicate_of"] == made[1]["id"]
        r = client.get("/annotations", params={"book": book})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/ld+json")
        doc = r.json()
        assert doc["type"] == "AnnotationCollection" and doc["total"] == 3
        assert client.get("/annotations").json()["total"] == 3
        before = client.get(f"/books/{book}/highlights").json()
        for h in before:
            assert client.delete(f"/books/{book}/highlights/{h['id']}").status_code == 200
        r = client.post("/annotations", json=doc)
        assert r.status_code == 200, r.text
        report = r.json()
        assert (report["placed"], report["orphaned"]) == (3, 0)
        after = client.get(f"/books/{book}/highlights").json()
        keep = ("target", "body", "section", "source", "note", "color", "status")
        assert [{k: h[k] for k in keep} for h in after] == [{k: h[k] for k in keep} for h in before]
        assert [("duplicate_of" in h) for h in after] == [("duplicate_of" in h) for h in before]
        # not a collection: 400, nothing written
        for bad in ([], "notes.json", {"@context": ANNO, "type": "Annotation"}):
            r = client.post("/annotations", json=bad)
            assert r.status_code == 400, r.text
            assert "AnnotationCollection" in r.json()["error"] or "@context" in r.json()["error"]
        assert len(client.get(f"/books/{book}/highlights").json()) == 3


def _cfi(client: Any, book: str, quote: str) -> str:
    cal = client.post(f"/books/{book}/anchors", json={"quote": quote}).json()
    return str(cal["locator"]["locations"]["cfi"])


# --------------------------------------------------------------------------- readers


def test_annotations_are_each_readers_own(lib: Library, tmp_path: Path) -> None:
    epub, _ = _ids(lib)
    alice = lib.add_reader("alice").reader.id
    bob = lib.add_reader("bob").reader.id
    mine = lib.highlight_quote(epub, "Unreal City", note="alice's", reader=alice).highlight
    # Bob's export holds none of Alice's; his import writes his own, never hers
    assert lib.export_annotations(reader=bob)["total"] == 0
    doc = lib.export_annotations(reader=alice)
    assert doc["total"] == 1
    report = lib.import_annotations(doc, reader=bob)
    assert report.count("placed") == 1  # not "present": Alice's is not Bob's
    (his,) = lib.highlights(epub, reader=bob)
    assert his.id != mine.id and his.note == "alice's" and his.duplicate_of is None
    assert [h.id for h in lib.highlights(epub, reader=alice)] == [mine.id]
    assert lib.highlights(epub) == []  # the implicit local reader has none
    # at the CLI, --user picks the reader
    r = _run(lib.state.url, "--user", "bob", "highlights", epub, "--json")  # a file or a URL
    assert r.exit_code == 0, r.output
    assert [h["id"] for h in json.loads(r.stdout)] == [his.annotation_id]
    r = _run(lib.state.url, "--user", "alice", "annotations", "export", epub)
    assert [i["id"] for i in json.loads(r.stdout)["first"]["items"]] == [mine.annotation_id]
