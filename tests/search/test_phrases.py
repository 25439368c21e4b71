"""Remembered phrases and keyword lists (mindory.search.phrases) and how fusion uses them."""

from __future__ import annotations

from mindory.search.fusion import fuse, weights_for
from mindory.search.phrases import (
    KEYWORD_VECTOR_WEIGHT,
    PHRASE_DEPTH,
    is_keyword_list,
    longest_run,
    with_phrase_bonus,
    words_of,
)

JULIET = (
    "But, soft! what light through yonder window breaks? It is the east, and Juliet is the sun."
)


def test_words_keep_apostrophes_and_fold_case() -> None:
    assert words_of("What’s in a NAME? rose") == ["what's", "in", "a", "name", "rose"]


def test_longest_run_counts_words_in_the_books_order() -> None:
    assert longest_run(words_of("soft what light yonder window"), JULIET) == 3
    assert longest_run(words_of("yonder window breaks"), JULIET) == 3
    assert longest_run(words_of("window yonder"), JULIET) == 1
    # A run of stop words alone is no phrase.
    assert longest_run(words_of("it is the"), JULIET) == 0
    assert longest_run([], JULIET) == 0


def test_keyword_lists() -> None:
    assert is_keyword_list("Nell Gwyn Drury Lane smock")
    assert not is_keyword_list("what's in a name rose")  # stop words: a remembered line
    assert not is_keyword_list("Tybalt mask ball?")
    assert not is_keyword_list("one two three four five six seven")
    assert not is_keyword_list("")


def test_keyword_lists_do_not_use_their_vector() -> None:
    assert weights_for("minilm-x", "latin")["vector"] == 1.0
    assert weights_for("minilm-x", "latin", keyword_list=True)["vector"] == KEYWORD_VECTOR_WEIGHT
    assert KEYWORD_VECTOR_WEIGHT == 0.0
    assert weights_for("hashed-x", "latin", keyword_list=True)["vector"] == 0.0
    assert weights_for("minilm-x", "zh", 6, keyword_list=True)["vector"] == 0.0


def test_the_phrase_bonus_lifts_the_remembered_line_and_keeps_ties_in_order() -> None:
    # The vector prefers a paraphrase (id 2); the text holding "what light ... yonder
    # window" word for word (id 1) is lifted above it.
    fused = fuse(
        {"words": [(1, 5.0), (2, 4.9)], "vector": [(2, 0.9), (1, 0.8)]},
        weights_for("minilm-x", "latin"),
    )
    assert [f.id for f in fused] == [2, 1]
    texts = {1: JULIET, 2: "A lamp glowed in the east as the lovers met."}
    order = with_phrase_bonus(
        [f.score for f in fused], [texts[f.id] for f in fused], words_of("soft what light")
    )
    assert [fused[n].id for n in order] == [1, 2]
    # No phrase: the fused order stands; beyond PHRASE_DEPTH no bonus is looked for.
    assert with_phrase_bonus([1.0, 1.0], ["x", "y"], words_of("soft what light")) == [0, 1]
    scores = [1.0] * (PHRASE_DEPTH + 1)
    texts_deep: list[str | None] = [None] * PHRASE_DEPTH + [JULIET]
    assert with_phrase_bonus(scores, texts_deep, words_of("soft what light"))[-1] == PHRASE_DEPTH


def test_fusion_is_deterministic_and_ignores_negative_and_empty_lists() -> None:
    lists = {"words": [(3, 2.0), (4, 2.0)], "vector": [(4, -0.3)], "lexical": []}
    a = fuse(lists, {"words": 1.0, "vector": 1.0, "lexical": 1.0})
    b = fuse(dict(reversed(list(lists.items()))), {"words": 1.0, "vector": 1.0, "lexical": 1.0})
    assert [f.id for f in a] == [f.id for f in b] == [3, 4]
    assert a[0].score == a[1].score == 1.0
