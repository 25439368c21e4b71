"""The search commands: embed, index, search, locate, eval — readable output for people,
and ``--json`` that is exactly the Library's ``to_json()``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mindory.cli import main
from mindory.library import Library
from mindory.search.evaluation import evaluate, load_queries
from tests.conftest import SAMPLES, corpus_file


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", str(db), *args])


def _no_timings(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "timings"}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("search-cli") / "lib.sqlite"
    result = run(path, "import", str(SAMPLES), "--json")
    assert result.exit_code == 0, result.output
    yield path


@pytest.fixture(scope="module")
def embedded(db: Path) -> Path:
    assert run(db, "embed").exit_code == 0
    return db


def test_embed_and_index(db: Path) -> None:
    first = run(db, "embed", "--json")
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert doc["embedded"] == doc["total_chunks"] > 0
    assert doc["embedding"]["embedder"] == "hashed-ngram-v1-384"
    assert doc["index"]["count"] == doc["total_chunks"]
    again = run(db, "embed")
    assert again.exit_code == 0 and "embedded 0 chunk(s)" in again.stdout
    index = json.loads(run(db, "index", "--json").stdout)
    assert index["status"] == "loaded" and index["count"] == doc["total_chunks"]
    assert index["path"] == str(db.resolve()) + ".faiss"
    rebuilt = run(db, "index", "--rebuild")
    assert rebuilt.exit_code == 0 and "index rebuilt" in rebuilt.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("Dung Market",),
        ("魏忠賢請客氏到私宅吃酒", "--k", "3"),
        ("客氏", "--mode", "lexical", "--book", "qiaoshi", "--k", "5"),
        ("the river", "--mode", "vector", "--book", "news", "--section", "24"),
        ("April is the cruellest month", "--book", "waste"),
    ],
)
def test_search_json_is_the_library_shape(embedded: Path, args: tuple[str, ...]) -> None:
    db = embedded
    result = run(db, "search", *args, "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    query, rest = args[0], args[1:]
    options: dict[str, Any] = {}
    for flag, value in zip(rest[::2], rest[1::2]):
        name = flag.lstrip("-")
        options[name] = int(value) if name in ("k", "section") else value
    with Library.open(db) as lib:
        want = lib.search(query, **options).to_json()
    assert _no_timings(got) == _no_timings(want)
    assert set(got["timings"]) >= {"total", "locate"}
    assert got["hits"] and all(h["locator"]["chunk"] == h["chunk"] for h in got["hits"])


def test_search_readable_output(db: Path) -> None:
    result = run(db, "search", "Dung Market", "--k", "3")
    assert result.exit_code == 0, result.output
    assert "News from Nowhere" in result.stdout and "char=" in result.stdout
    assert "hit(s) in" in result.stdout
    epub = run(db, "search", "cruellest month", "--book", "waste", "--k", "1")
    assert "epubcfi(/6/" in epub.stdout and "[bodymatter]" in epub.stdout
    nothing = run(db, "search", "zzzzqqqq", "--mode", "lexical")
    assert nothing.exit_code == 0 and "no hits" in nothing.stdout
    bad = run(db, "search", "river", "--section", "3")
    assert bad.exit_code == 1 and "needs a book" in bad.stderr


def test_locate_json_is_the_library_shape(db: Path) -> None:
    with Library.open(db) as lib:
        hit = lib.search("hyacinth girl", k=1, book="waste").hits[0]
        cfi = hit.locator.cfi
        assert cfi is not None
        want_cfi = lib.locate("waste", cfi=cfi).to_json()
        want_offset = lib.locate("qiaoshi", section=3, section_offset=100, utf16=True).to_json()
        want_chunk = lib.locate_chunk("waste", hit.chunk).to_json()
    got = run(db, "locate", "waste", "--cfi", cfi, "--json")
    assert got.exit_code == 0, got.output
    assert json.loads(got.stdout) == want_cfi
    assert hit.chunk in [c["id"] for c in want_cfi["chunks"]]
    got = run(
        db, "locate", "qiaoshi", "--section", "3", "--section-offset", "100", "--utf16", "--json"
    )
    assert json.loads(got.stdout) == want_offset
    got = run(db, "locate", "waste", "--chunk", hit.chunk[:12], "--json")
    assert json.loads(got.stdout) == want_chunk == hit.locator.to_json()
    readable_cfi = run(db, "locate", "waste", "--cfi", cfi)
    assert readable_cfi.exit_code == 0 and "[bodymatter]" in readable_cfi.stdout  # not markup
    assert "[ch1]" in run(db, "locate", "waste", "--chunk", hit.chunk[:12]).stdout
    readable = run(db, "locate", "news", "--section", "7", "--section-offset", "100")
    assert readable.exit_code == 0 and "chunks containing it" in readable.stdout
    assert "char=" in readable.stdout
    usage = run(db, "locate", "news")
    assert usage.exit_code == 2 and "--cfi" in usage.output


def test_eval_command(db: Path) -> None:
    queries = SAMPLES / "queries" / "news-from-nowhere.jsonl"
    got = run(db, "eval", str(queries), "--json")
    assert got.exit_code == 0, got.output
    with Library.open(db) as lib:
        want = evaluate(lib, load_queries(queries)).to_json()
    assert json.loads(got.stdout) == want
    readable = run(db, "eval", str(queries), "--mode", "lexical", "--details")
    assert readable.exit_code == 0
    assert "R@10" in readable.stdout and "answer completeness" in readable.stdout
    missing = run(db, "eval", str(queries.with_name("none.jsonl")))
    assert missing.exit_code == 1 and "cannot read the query set" in missing.stderr


def test_locate_takes_the_offset_search_prints(db: Path) -> None:
    """One plain-text convention: the `char=N` a search prints is the `--offset` of locate
    (book source coordinates, file-global); `--section-offset` counts from the section."""
    found = run(db, "search", "客氏", "--book", "qiaoshi", "--mode", "lexical", "--k", "10")
    assert found.exit_code == 0, found.output
    printed = re.findall(r"§(\d+)\s+char=(\d+),(\d+)", found.stdout)
    with Library.open(db) as lib:
        starts = {s.ordinal: s.source_start for s in lib.sections("qiaoshi")}
    # a hit whose section-local offset is smaller than its section's start: the two
    # conventions give different places, so mixing them up cannot go unnoticed
    section, start = next(
        (sec, int(a)) for sec, a, _ in printed if int(a) - starts[int(sec)] < starts[int(sec)]
    )
    section_start = starts[int(section)]
    by_offset = run(db, "locate", "qiaoshi", "--section", section, "--offset", str(start), "--json")
    assert by_offset.exit_code == 0, by_offset.output
    doc = json.loads(by_offset.stdout)
    assert doc["source"]["position"] == start
    assert doc["locations"]["fragments"] == [f"char={start}"]
    # the section may be left out for plain text: the offset names it
    no_section = run(db, "locate", "qiaoshi", "--offset", str(start), "--json")
    assert json.loads(no_section.stdout) == doc
    local = str(start - section_start)
    by_local = run(
        db, "locate", "qiaoshi", "--section", section, "--section-offset", local, "--json"
    )
    assert json.loads(by_local.stdout) == doc
    # a section-local number given as --offset is outside the section, and says why
    wrong = run(db, "locate", "qiaoshi", "--section", section, "--offset", local)
    assert wrong.exit_code == 1
    assert "book coordinates" in wrong.stderr and "--section-offset" in wrong.stderr
    both = run(db, "locate", "qiaoshi", "--offset", "1", "--section-offset", "1")
    assert both.exit_code == 2 and "not both" in both.output
    orphan = run(db, "locate", "qiaoshi", "--section-offset", "1")
    assert orphan.exit_code == 2 and "--section" in orphan.output


def test_eval_finds_a_book_by_content_under_another_file_name(tmp_path: Path) -> None:
    """The query set names `qiaoshi-yanyi.txt` and gives its SHA-256; the library holds
    the same bytes under the corpus's file name: eval matches the book by content."""
    copy = corpus_file("txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt")
    sample = SAMPLES / "qiaoshi-yanyi.txt"
    assert copy.read_bytes() == sample.read_bytes() and copy.name != sample.name
    db = tmp_path / "lib.sqlite"
    assert run(db, "import", str(copy), "--json").exit_code == 0
    with Library.open(db) as lib:
        (only,) = lib.books()
    assert only.file_name == copy.name
    queries = SAMPLES / "queries" / "qiaoshi-yanyi.jsonl"
    got = run(db, "eval", str(queries), "--mode", "lexical", "--json")
    assert got.exit_code == 0, got.output
    report = json.loads(got.stdout)
    n = len(load_queries(queries))
    assert report["missing"] == [] and report["queries"] == n, report["missing"]
    assert report["answers_found"] == n
    assert all(d["book"] == "qiaoshi-yanyi.txt" and d["answers"] for d in report["details"])
