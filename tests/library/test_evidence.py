"""mindory stats and mindory sweep: hand-computed statistics, a real tiny sweep, the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mindory.cli import main
from mindory.errors import MindoryError
from mindory.library import Library
from mindory.library.evidence import (
    BookSource,
    book_stats,
    paired_mrr_delta,
    parse_sizes,
    parse_strategies,
    queries_for,
    run_sweep,
    stored_sections,
    sweep_settings,
)
from mindory.library.plot import plot_sweep
from mindory.search.evaluation import load_queries
from mindory.text.records import STRATEGIES, ChunkSettings, Settings

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Normalized (hard-wrapped code lines joined), the one section reads:
#   [0, 37)    "Alpha beta gamma. Delta epsilon zeta."                    37
#   [39, 49)   "Short one."                                               10
#   [51, 122)  "one two three ... twelve thirteen" (no sentence end)      71
#   [124, 167) "``` x = 1 y = 2 z = x + y + 1000 + 2000 ```"              43
#   [169, 185) "Last words here."                                         16
HAND_TEXT = (
    "Alpha beta gamma. Delta epsilon zeta.\n\n"
    "Short one.\n\n"
    "one two three four five six seven eight nine ten eleven twelve thirteen\n\n"
    "```\nx = 1\ny = 2\nz = x + y + 1000 + 2000\n```\n\n"
    "Last words here.\n"
)
HAND_SETTINGS = ChunkSettings(size=40, overlap=10, min_size=5)

# paragraph: one block per chunk; the 71-character block is cut at its last space in
# the room ("... seven eight" | "nine ... thirteen"); the code fence is atomic (43 > 40).
#   lengths 37, 10, 39, 31, 43, 16; ends: block, block, word, block, block, section end
# structured: "Short one." packs with the start of the long block (10 + 2 + 27 = 39),
# which is then cut at spaces; the fence again stands alone.
#   lengths 37, 39, 34, 8, 43, 16; ends: block, word, word, block, block, section end
HAND_EXPECTED = {
    "paragraph": {
        "chunks": 6,
        "mean": 29.3,  # 176 / 6
        "median": 34.0,  # (31 + 37) / 2
        "p95": 42.0,  # sorted 10 16 31 37 39 43: 39 + 0.75 × (43 − 39)
        "min": 10,
        "max": 43,
        "ends": {"end": 1, "paragraph": 4, "word": 1},
        "boundary_share": 0.8333,  # 5 / 6
        "cut_inside_sentence": 1,
        "over_max": 1,
        "over_max_reasons": {"code fence": 1},
    },
    "structured": {
        "chunks": 6,
        "mean": 29.5,  # 177 / 6
        "median": 35.5,  # (34 + 37) / 2
        "p95": 42.0,  # sorted 8 16 34 37 39 43
        "min": 8,
        "max": 43,
        "ends": {"end": 1, "paragraph": 3, "word": 2},
        "boundary_share": 0.6667,  # 4 / 6
        "cut_inside_sentence": 2,
        "over_max": 1,
        "over_max_reasons": {"code fence": 1},
    },
}

TINY_PARAGRAPHS = [
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. He lit the great "
    "lamp and watched the ships pass the rocky point.",
    "In the village below, the baker rose before dawn to knead the dough. The smell of fresh "
    "bread drifted down to the harbour where the fishermen mended their nets.",
    "A storm came in from the west one autumn night. Waves broke over the sea wall and the "
    "wind tore slates from the church roof.",
    "The schoolmistress taught the children to read from an old atlas. They traced the rivers "
    "of distant continents with their fingers.",
    "When spring returned, the orchards blossomed white and pink. Bees hummed among the apple "
    "trees and the farmers counted the hives.",
    "An old sailor told stories of icebergs and whales at the tavern. Nobody knew whether he "
    "had ever left the bay at all.",
]
TINY_QUERIES = [
    {
        "query": "who lit the lamp in the lighthouse",
        "book": "tiny.txt",
        "answer": "He lit the great lamp",
    },
    {
        "query": "storm waves broke over the sea wall",
        "book": "tiny.txt",
        "answer": "Waves broke over the sea wall",
    },
    {
        "query": "bees among the apple trees",
        "book": "tiny.txt",
        "answer": "Bees hummed among the apple trees",
    },
    {"query": "a query about another book", "book": "other.txt", "answer": "anything"},
]


@pytest.fixture()
def hand_book(tmp_path: Path) -> Path:
    path = tmp_path / "hand.txt"
    path.write_text(HAND_TEXT, encoding="utf-8")
    return path


@pytest.fixture()
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    book = tmp_path / "tiny.txt"
    book.write_text("Tiny Harbour\n\n" + "\n\n".join(TINY_PARAGRAPHS) + "\n", encoding="utf-8")
    queries = tmp_path / "tiny.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in TINY_QUERIES) + "\n", encoding="utf-8")
    return book, queries


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", str(db), *args])


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mindory: error: "), lines[0]
    return lines[0]


# --------------------------------------------------------------------------- arguments


def test_parse_arguments() -> None:
    assert parse_strategies([]) == STRATEGIES
    assert parse_strategies(["window,structured", "window", " paragraph "]) == (
        "window",
        "structured",
        "paragraph",
    )
    with pytest.raises(MindoryError, match="unknown chunking strategy 'semantic'"):
        parse_strategies(["window,semantic"])
    assert parse_sizes("300, 500,300,800", "--sizes") == (300, 500, 800)
    with pytest.raises(MindoryError, match="comma-separated integers"):
        parse_sizes("300,big", "--sizes")
    with pytest.raises(MindoryError, match="at least 20"):
        parse_sizes("10", "--sizes", minimum=20)


def test_sweep_settings_never_repeat_a_setting() -> None:
    settings, skipped = sweep_settings(
        ["structured", "window", "structured"], [60, 300, 800], [0, 100, 100]
    )
    labels = [(c.strategy, c.size, c.overlap) for c in settings]
    # Window first (STRATEGIES order); overlap only for window; 60/100 is refused.
    assert labels == [
        ("window", 60, 0),
        ("window", 300, 0),
        ("window", 300, 100),
        ("window", 800, 0),
        ("window", 800, 100),
        ("structured", 60, 0),
        ("structured", 300, 0),
        ("structured", 800, 0),
    ]
    assert skipped == ["window 60/100: the overlap is over half the size"]
    assert all(c.min_size < c.size for c in settings)
    with pytest.raises(MindoryError, match="no valid setting"):
        sweep_settings(["window"], [60], [100])


def test_paired_mrr_delta() -> None:
    same = paired_mrr_delta([1, 2, None], [1, 2, None], k=10)
    assert same == (0.0, 0.0, 0.0)
    d, lo, hi = paired_mrr_delta([1, 1, 1, 1], [2, 2, 2, 2], k=10)
    assert d == pytest.approx(0.5) and lo == pytest.approx(0.5) and hi == pytest.approx(0.5)
    d, lo, hi = paired_mrr_delta([1, None, 3, 11], [None, 1, 3, 1], k=10)
    assert d == pytest.approx((1 - 1 + 0 - 1) / 4) and lo <= d <= hi


# --------------------------------------------------------------------------- stats


def test_stats_of_a_hand_made_book(tmp_path: Path, hand_book: Path) -> None:
    with Library.open(tmp_path / "lib.sqlite") as lib:
        result = lib.import_book(hand_book, Settings(chunking=HAND_SETTINGS))
        stored = stored_sections(lib, result.book)
        got = book_stats(stored, HAND_SETTINGS, ["paragraph", "structured"])
    for name, expected in HAND_EXPECTED.items():
        for key, value in expected.items():
            assert got[name][key] == value, (name, key)
    # The stored sections (texts, maps, blocks) give what the file gives.
    source = BookSource.from_file(hand_book)
    assert book_stats(source.sections(), HAND_SETTINGS, ["paragraph", "structured"]) == got


def test_stats_cli(tmp_path: Path, hand_book: Path) -> None:
    db = tmp_path / "lib.sqlite"
    with Library.open(db) as lib:
        lib.import_book(hand_book, Settings(chunking=HAND_SETTINGS))
    # Size, overlap and min size default to what the book was imported with.
    out = run(db, "stats", "hand", "--strategy", "paragraph,structured", "--json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["book"]["title"] == "hand" and doc["book"]["file_name"] == "hand.txt"
    assert doc["settings"] == {
        "size": 40,
        "overlap": 10,
        "min_size": 5,
        "parent_size": 1600,
        "max_turn": 1600,
    }
    assert list(doc["strategies"]) == ["paragraph", "structured"]
    for name, expected in HAND_EXPECTED.items():
        for key, value in expected.items():
            assert doc["strategies"][name][key] == value, (name, key)
    # Every strategy by default; a file works without a library; nothing is written.
    before = db.stat().st_mtime_ns
    table = run(db, "stats", "hand")
    assert table.exit_code == 0, table.output
    for name in STRATEGIES:
        assert name in table.stdout
    assert "paragraph: over the size: 1 code fence" in table.stdout
    assert db.stat().st_mtime_ns == before
    from_file = run(db, "stats", str(hand_book), "--size", "40", "--json")
    assert from_file.exit_code == 0, from_file.output
    assert json.loads(from_file.stdout)["settings"]["size"] == 40


def test_stats_errors(tmp_path: Path, hand_book: Path) -> None:
    db = tmp_path / "lib.sqlite"
    assert "unknown chunking strategy 'semantic'" in one_line_error(
        run(db, "stats", str(hand_book), "--strategy", "semantic")
    )
    assert "missing.txt: no such file" in one_line_error(
        run(db, "stats", str(tmp_path / "missing.txt"))
    )
    assert "no book with id or title starting with 'nothing'" in one_line_error(
        run(db, "stats", "nothing")
    )
    assert "overlap must be between 0 and half the size" in one_line_error(
        run(db, "stats", str(hand_book), "--size", "40", "--overlap", "30")
    )


# --------------------------------------------------------------------------- sweep


def test_sweep_api_measures_for_real(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    book_path, query_path = tiny
    source = BookSource.from_file(book_path)
    queries = queries_for(source, load_queries(query_path))
    assert [q.line for q in queries] == [1, 2, 3]  # not the other book's
    # Paragraphs of about 130 characters: a 300-character window holds two of them.
    settings, _ = sweep_settings(["window", "paragraph", "dialogue"], [300], [0])
    result = run_sweep(source, queries, settings, k=5, mode="hybrid")
    assert [r.label for r in result.rows] == ["window 300/0", "paragraph 300", "dialogue 300"]
    window, paragraph, dialogue = result.rows
    assert result.queries == 3 and result.answers_found == 3 and not result.missing
    for r in result.rows:
        assert r.chunks > 1 and r.completeness == 1.0
        assert 0.0 < r.mrr <= r.recall_k <= 1.0 and len(r.ranks) == 3
    assert window.chunks < paragraph.chunks
    # No turns in prose: dialogue makes paragraph's chunks, measured once.
    assert dialogue.same_as == "paragraph 300" and paragraph.same_as is None
    assert dialogue.ranks == paragraph.ranks and dialogue.chunks == paragraph.chunks
    png = plot_sweep([result, result], tmp_path / "plots" / "sweep.png")
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    assert result.baseline() is None and result.deltas() == {}


def test_sweep_cli(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    book_path, query_path = tiny
    db = tmp_path / "lib.sqlite"
    png = tmp_path / "sweep.png"
    out = run(
        db,
        "sweep",
        str(book_path),
        "--queries",
        str(query_path),
        "--sizes",
        "200",
        "--overlaps",
        "0",
        "--strategies",
        "window,structured",
        "--k",
        "5",
        "--out",
        str(png),
        "--json",
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["plot"] == str(png) and png.read_bytes()[:8] == PNG_SIGNATURE
    (res,) = doc["books"]
    assert res["book"]["file_name"] == "tiny.txt" and res["k"] == 5 and res["mode"] == "hybrid"
    assert res["embedder"] == "hashed" and res["queries"] == 3
    assert [(r["strategy"], r["size"], r["overlap"]) for r in res["rows"]] == [
        ("window", 200, 0),
        ("structured", 200, None),
    ]
    for r in res["rows"]:
        assert {"chunks", "mean_length", "recall@5", "mrr", "completeness", "ranks"} <= set(r)
        assert 0 < r["mrr"] <= r["recall@5"] <= 1 and r["completeness"] == 1.0


def test_sweep_cli_table_for_a_library_book(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    """A library book is swept from its stored file; the table names the default's ΔMRR."""
    book_path, query_path = tiny
    db = tmp_path / "lib.sqlite"
    with Library.open(db) as lib:
        lib.import_book(book_path)
    book_path.unlink()  # the stored copy is what is swept
    out = run(
        db,
        "sweep",
        "tiny",
        "--queries",
        str(query_path),
        "--sizes",
        "400,800",
        "--overlaps",
        "100",
        "--strategies",
        "window",
        "--mode",
        "lexical",
        "--no-plot",
    )
    assert out.exit_code == 0, out.output
    assert "Tiny Harbour" in out.stdout or "tiny" in out.stdout
    assert "MRR@10" in out.stdout and "R@10" in out.stdout and "ΔMRR" in out.stdout
    assert "window 800/100" in out.stdout
    with Library.open(db) as lib:
        assert len(lib.books()) == 1  # the sweep never touches the library


def test_sweep_errors(tmp_path: Path, tiny: tuple[Path, Path]) -> None:
    book_path, query_path = tiny
    db = tmp_path / "lib.sqlite"
    base = ["sweep", str(book_path), "--queries", str(query_path), "--no-plot"]
    assert "unknown chunking strategy 'semantic'" in one_line_error(
        run(db, *base, "--strategies", "window,semantic")
    )
    assert "cannot read the query set" in one_line_error(
        run(db, "sweep", str(book_path), "--queries", str(tmp_path / "nope.jsonl"))
    )
    assert "nope.txt: no such file" in one_line_error(
        run(db, "sweep", str(tmp_path / "nope.txt"), "--queries", str(query_path))
    )
    other = tmp_path / "other-book.txt"
    other.write_text("Nothing to see here.\n", encoding="utf-8")
    assert "no query is about other-book.txt" in one_line_error(
        run(db, "sweep", str(other), "--queries", str(query_path), "--no-plot")
    )
    assert "--sizes must be comma-separated integers" in one_line_error(
        run(db, *base, "--sizes", "small")
    )


def test_sweep_without_matplotlib_names_the_extra(
    tmp_path: Path, tiny: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    book_path, query_path = tiny
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    line = one_line_error(
        run(tmp_path / "lib.sqlite", "sweep", str(book_path), "--queries", str(query_path))
    )
    assert "pip install 'mindory[plot]'" in line and "--no-plot" in line
