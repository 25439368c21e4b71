"""The second stage (issue 26): sentence windows cut exactly, the re-ordering keeps quotes
and apparatus in place, and a re-ranked hit keeps the exact place of its chunk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from mindory.cli import main
from mindory.library import Library
from mindory.search.minilm import MiniLMEmbedder
from mindory.search.rerank import (
    RERANK_DEPTH,
    rerank_order,
    sentence_windows,
    sentences,
    window_scores,
)
from tests.conftest import SAMPLES

_TEXT = st.text(
    alphabet=st.sampled_from(list("ab .!?;:\"'”)\n\t") + ["宋", "。", "é", "𠀀"]), max_size=120
)


@given(_TEXT)
def test_sentences_are_stripped_spans_in_order(text: str) -> None:
    spans = sentences(text)
    last = 0
    for a, b in spans:
        assert last <= a < b <= len(text)
        assert not text[a].isspace() and not text[b - 1].isspace()
        last = b
    # Nothing but white space is left out.
    covered = set().union(*(range(a, b) for a, b in spans)) if spans else set()
    assert all(text[i].isspace() for i in range(len(text)) if i not in covered)


@given(_TEXT, st.integers(min_value=1, max_value=200))
def test_windows_start_and_end_at_sentences_and_cover_them_all(text: str, width: int) -> None:
    spans = sentences(text)
    windows = sentence_windows(text, width)
    starts = {a for a, _ in spans}
    ends = {b for _, b in spans}
    for a, b in windows:
        assert a in starts and b in ends
        inside = [s for s in spans if a <= s[0] and s[1] <= b]
        assert len(inside) == 1 or b - a < width  # grows only while within the width
    for a, b in spans:
        assert any(wa <= a and b <= wb for wa, wb in windows)
    assert (windows == []) == (text.strip() == "")


def test_windows_of_a_chunk_are_its_own_characters() -> None:
    text = 'He waited.  "Why?" she asked; he said:\nthirty days had passed!  The end'
    windows = sentence_windows(text, 30)
    # One window from each sentence, grown by whole sentences while under 30 characters.
    assert [text[a:b] for a, b in windows] == [
        'He waited.  "Why?" she asked;',
        '"Why?" she asked; he said:',
        "she asked; he said:",
        "he said:",
        "thirty days had passed!",
        "The end",
    ]
    assert [text[a:b] for a, b in sentence_windows(text, 1)] == [
        "He waited.",
        '"Why?"',
        "she asked;",
        "he said:",
        "thirty days had passed!",
        "The end",
    ]
    assert [text[a:b] for a, b in sentence_windows(text, 1000)] == [text.strip()]


@given(
    st.lists(st.floats(min_value=-1, max_value=1), min_size=0, max_size=15),
    st.data(),
)
def test_rerank_order_is_a_permutation_that_keeps_fixed_places(
    scores: list[float], data: st.DataObject
) -> None:
    movable = data.draw(st.lists(st.booleans(), min_size=len(scores), max_size=len(scores)))
    order = list(range(100, 100 + len(scores)))
    out = rerank_order(order, movable, scores)
    assert sorted(out) == order
    for i, m in enumerate(movable):
        if not m:
            assert out[i] == order[i]
    assert rerank_order(order, movable, scores, weight=0.0) == order


def test_rerank_order_moves_by_score_against_the_prior() -> None:
    order = [10, 11, 12, 13]
    # The last has the best window by far: it rises to the top.
    assert rerank_order(order, [True] * 4, [0.1, 0.2, 0.1, 0.9]) == [13, 10, 11, 12]
    # The first is nearly as good: the prior keeps it first, the last passes the middle.
    assert rerank_order(order, [True] * 4, [0.5, 0.2, 0.1, 0.6]) == [10, 13, 11, 12]
    # A quote (not movable) stays first whatever the scores.
    assert rerank_order(order, [False, True, True, True], [0.0, 0.1, 0.1, 0.9])[0] == 10
    # Equal scores: the first stage's order.
    assert rerank_order(order, [True] * 4, [0.5] * 4) == order
    with pytest.raises(ValueError):
        rerank_order(order, [True], [0.1])


def test_window_scores_take_each_text_s_best_window() -> None:
    def embed(windows: list[str]) -> np.ndarray:
        return np.array([[1.0, 0.0] if "whale" in w else [0.0, 1.0] for w in windows])

    q = np.array([2.0, 0.0])
    texts = ["A ship. A whale rose.", "Only a ship.", "   "]
    assert window_scores(q, texts, embed) == [1.0, 0.0, 0.0]
    assert window_scores(np.zeros(2), texts, embed) == [0.0, 0.0, 0.0]


def test_minilm_finds_the_answering_sentence_inside_a_long_chunk() -> None:
    minilm = MiniLMEmbedder()
    filler = " ".join(f"The harvest of year {n} was stored in the barn." for n in range(12))
    answer = "The rabbi kept the crown until the thirty days were over, then returned it."
    diluted = f"{filler} {answer} {filler}"
    other = " ".join(f"A carriage went by on road number {n}." for n in range(20))
    question = minilm.embed(["why did the rabbi wait before giving back the crown"])[0]
    best = window_scores(question, [diluted, other], minilm.embed)
    whole = minilm.embed([diluted])[0] @ question
    assert best[0] > best[1]
    assert best[0] > whole + 0.1  # the sentence answers more nearly than the whole chunk


# --------------------------------------------------------------------------- a library


@pytest.fixture(scope="module")
def lib_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples, embedded with the test embedder (hashed vectors)."""
    path = tmp_path_factory.mktemp("rerank") / "lib.sqlite"
    with Library.open(path) as library:
        for r in library.import_many([SAMPLES]):
            assert r.status == "created", r
        library.embed()
    return path


@pytest.fixture(scope="module")
def lib(lib_path: Path) -> Iterator[Library]:
    with Library.open(lib_path) as library:
        yield library


QUESTION = "what did the old man say about the river and the houses by the water"


def test_a_reranked_hit_keeps_its_chunk_s_exact_place(lib: Library) -> None:
    first = lib.search(QUESTION, k=RERANK_DEPTH)
    second = lib.search(QUESTION, k=RERANK_DEPTH, rerank=True)
    assert "rerank" in second.timings and not second.warnings
    assert [h.chunk for h in second.hits] != [h.chunk for h in first.hits]  # it moved some
    # The same chunks, re-ordered; each with the same Locator and word matches.
    assert sorted(h.chunk for h in second.hits) == sorted(h.chunk for h in first.hits)
    before = {h.chunk: h for h in first.hits}
    for h in second.hits:
        assert h.locator == before[h.chunk].locator
        assert h.matches == before[h.chunk].matches
    assert [h.rank for h in second.hits] == list(range(1, len(second.hits) + 1))
    # Same question, same order: the second stage is deterministic.
    again = lib.search(QUESTION, k=RERANK_DEPTH, rerank=True)
    assert [h.chunk for h in again.hits] == [h.chunk for h in second.hits]


def test_fewer_hits_than_the_depth_are_the_first_of_the_reranked(lib: Library) -> None:
    full = lib.search(QUESTION, k=RERANK_DEPTH, rerank=True)
    three = lib.search(QUESTION, k=3, rerank=True)
    assert [h.chunk for h in three.hits] == [h.chunk for h in full.hits[:3]]


def test_rerank_says_when_it_does_not_apply(lib: Library) -> None:
    chinese = lib.search("清兵入關", rerank=True)
    assert "rerank" not in chinese.timings
    assert any("Latin-script questions only" in w for w in chinese.warnings)
    vector = lib.search(QUESTION, mode="vector", rerank=True)
    assert any("rerank not applied" in w for w in vector.warnings)
    plain = lib.search("清兵入關")
    assert [h.chunk for h in chinese.hits] == [h.chunk for h in plain.hits]


def test_cli_and_http_doors_pass_rerank(lib_path: Path) -> None:
    from fastapi.testclient import TestClient

    from mindory.server.app import create_app

    out = CliRunner().invoke(
        main, ["--db", str(lib_path), "search", QUESTION, "--rerank", "--json"]
    )
    assert out.exit_code == 0, out.output
    cli = json.loads(out.output)
    assert "rerank" in cli["timings"]
    with TestClient(create_app(lib_path), base_url="http://127.0.0.1") as client:
        r = client.get("/search", params={"q": QUESTION, "rerank": "true"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert "rerank" in body["timings"]
        assert [h["chunk"] for h in body["hits"]] == [h["chunk"] for h in cli["hits"]]
        assert client.get("/search", params={"q": QUESTION, "rerank": "maybe"}).status_code == 422
