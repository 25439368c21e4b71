"""The shipped query sets: every answer is found, the metrics are right, and hybrid
search is at least as good as the better of lexical and vector search, per language."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindory.errors import MindoryError
from mindory.library import Library
from mindory.search.evaluation import AnswerPlace, evaluate, load_queries
from tests.conftest import SAMPLES

SETS = {
    "news-from-nowhere.txt": SAMPLES / "queries" / "news-from-nowhere.jsonl",
    "qiaoshi-yanyi.txt": SAMPLES / "queries" / "qiaoshi-yanyi.jsonl",
}


@pytest.fixture(scope="module")
def lib(module_db_url: str) -> Iterator[Library]:
    """The samples, imported and embedded once, on each backend (the same recall on both:
    docs/search.md, "PostgreSQL")."""
    with Library.open(module_db_url) as library:
        list(library.import_many([SAMPLES]))
        library.embed()
        yield library


def test_query_sets_are_hand_written_and_well_formed() -> None:
    for book, path in SETS.items():
        queries = load_queries(path)
        assert len(queries) >= 30
        assert {q.book for q in queries} == {book}
        kinds = {q.kind for q in queries}
        assert kinds == {"span", "paraphrase"}
        paraphrases = [q for q in queries if q.kind == "paraphrase"]
        assert len(paraphrases) >= len(queries) // 2
        # A paraphrase is not the answer copied.
        assert all(q.answer and q.answer not in q.query for q in paraphrases)


@pytest.mark.parametrize("book", sorted(SETS))
def test_hybrid_is_at_least_as_good_as_either_mode(lib: Library, book: str) -> None:
    report = evaluate(lib, load_queries(SETS[book]))
    assert report.missing == ()  # every answer occurs in its book
    assert report.completeness == 1.0  # short answers: each inside one 800-character chunk
    m = report.groups[f"book:{book}"]
    assert m["hybrid"].mrr >= max(m["lexical"].mrr, m["vector"].mrr), {
        mode: x.to_json() for mode, x in m.items()
    }
    assert m["hybrid"].recall[10] >= 0.85
    # Spans copied from the text are found first almost always.
    spans = report.groups["kind:span"]["hybrid"]
    assert spans.recall[1] >= 0.9


def test_metrics_and_relevance(tmp_path: Path, lib: Library) -> None:
    place = AnswerPlace("b", 3, 100, 120)
    assert place.covered_by(3, 90, 130) and place.covered_by(3, 110, 200)  # 10 of 20
    assert not place.covered_by(3, 111, 200) and not place.covered_by(2, 0, 1000)
    path = tmp_path / "q.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(d, ensure_ascii=False)
            for d in [
                {
                    "query": "cruellest month",
                    "book": "wasteland.epub",
                    "answer": "April is the cruellest month",
                },
                {
                    "query": "no such text",
                    "book": "wasteland.epub",
                    "answer": "a text that is not there",
                },
                {"query": "lilacs", "book": "wasteland.epub", "span": [336, 364], "section": 0},
            ]
        ),
        "utf-8",
    )
    report = evaluate(lib, load_queries(path), modes=("lexical",))
    first, missing, by_span = report.outcomes
    assert first.ranks == {"lexical": 1} and first.complete
    assert missing.places == () and missing.ranks == {"lexical": None}
    assert len(report.missing) == 1 and "line 2" in report.missing[0]
    assert by_span.places[0].source_start == 336 and by_span.ranks["lexical"] is not None
    overall = report.groups["all"]["lexical"]
    assert overall.n == 3 and overall.recall[1] == pytest.approx(2 / 3)
    assert report.to_json()["groups"]["all"]["lexical"]["mrr"] == pytest.approx(
        (1 + 1 / by_span.ranks["lexical"]) / 3, abs=1e-4
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "not JSON"),
        ('{"book": "x.txt", "answer": "a"}', "'query'"),
        ('{"query": "q", "answer": "a"}', "'book'"),
        ('{"query": "q", "book": "x.txt"}', "either 'answer'"),
        ('{"query": "q", "book": "x.txt", "span": [5, 2]}', "'span'"),
    ],
)
def test_bad_query_lines_are_named(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n", "utf-8")
    with pytest.raises(MindoryError, match=message) as info:
        load_queries(path)
    assert "bad.jsonl:1" in str(info.value)


def test_unknown_book_is_a_clear_error(tmp_path: Path, lib: Library) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"query": "q", "book": "moby-dick.epub", "answer": "whale"}\n', "utf-8")
    with pytest.raises(MindoryError, match="import the book first"):
        evaluate(lib, load_queries(path))


def test_reader_questions_hybrid_is_never_below_either_mode_per_kind(lib: Library) -> None:
    """The hand-written reader questions on the bundled samples (found by content hash:
    the set names the corpus files): per kind of question, hybrid is at least as good
    as the better of lexical and vector alone."""
    import hashlib

    shas = {hashlib.sha256(p.read_bytes()).hexdigest() for p in SAMPLES.iterdir() if p.is_file()}
    queries = [
        q
        for q in load_queries(SAMPLES / "queries" / "reader-questions.jsonl")
        if q.book_sha256 in shas
    ]
    assert len(queries) >= 40
    report = evaluate(lib, queries)
    assert report.missing == ()
    for kind in ("paraphrase", "keyword", "context"):
        m = report.groups[f"kind:{kind}"]
        assert m["hybrid"].mrr >= max(m["lexical"].mrr, m["vector"].mrr), {
            mode: x.to_json() for mode, x in m.items()
        }
