"""The built-in sentence embedder (all-MiniLM-L6-v2 on ONNX Runtime): shape, norms,
determinism across batches, no vector for Chinese and Japanese, sensible neighbours, and
a run's bytes do not depend on the thread count (so runs could go side by side)."""

from __future__ import annotations

import numpy as np
import pytest

from mindory.library.pipeline import chunk_file
from mindory.search.embedders import get_embedder
from mindory.search.minilm import BATCH, MiniLMEmbedder, _folded_model, cjk_share
from mindory.search.onnx_cache import ParallelRuns, cpu_session
from mindory.text.records import Settings
from tests.conftest import corpus_file


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    emb = get_embedder("minilm")
    assert isinstance(emb, MiniLMEmbedder)
    return emb


def test_vectors_are_unit_rows_of_384(minilm: MiniLMEmbedder) -> None:
    v = minilm.embed(["The whale rose beside the ship.", "", "   "])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert abs(float(np.linalg.norm(v[0])) - 1.0) < 1e-5
    assert not v[1].any() and not v[2].any()  # no text: the zero vector
    assert minilm.id.startswith("minilm-l6-v2-onnx-") and minilm.id.endswith("-384")


def test_a_text_gets_the_same_bytes_alone_or_in_any_batch(minilm: MiniLMEmbedder) -> None:
    texts = [
        "It was winter when I went to bed the last night.",
        "How clear the water is this morning! " * 20,
        "a short one",
    ]
    together = minilm.embed(texts)
    for i, t in enumerate(texts):
        assert minilm.embed([t])[0].tobytes() == together[i].tobytes()
    assert minilm.embed(list(reversed(texts)))[::-1].tobytes() == together.tobytes()


def test_chinese_and_japanese_get_no_vector(minilm: MiniLMEmbedder) -> None:
    v = minilm.embed(["宋江為什麼殺了閻婆惜", "智に働けば角が立つ。", "Café naïve 宋江"])
    assert not v[0].any() and not v[1].any() and v[2].any()
    assert cjk_share("宋江殺惜 wrote") > 0.3 > cjk_share("Sōseki wrote a novel")


def test_a_paraphrase_is_nearer_than_a_stranger(minilm: MiniLMEmbedder) -> None:
    q, near, far = minilm.embed(
        [
            "what was the captain's artificial leg carved from",
            "his leg had been fashioned from the polished jaw of a sperm whale",
            "the price of coal in London rose again this winter",
        ]
    )
    assert float(q @ near) > float(q @ far) + 0.1


def test_vectors_do_not_depend_on_batch_or_threads(minilm: MiniLMEmbedder) -> None:
    """The embedder (runs of 16 on two intra-op threads) against each text alone on a
    one-thread session: the same bytes, whatever the batch or the thread count."""
    _, chunks = chunk_file(corpus_file("epub2_en_romeo-and-juliet-feedbooks.epub"), Settings())
    texts = [c.text for c in chunks[::4]][: 2 * BATCH + 5]  # three runs, the last short
    session = cpu_session(_folded_model()[0], 1)
    reference = np.zeros((len(texts), 384), dtype=np.float32)
    for i, text in enumerate(texts):  # one text a run: rows do not depend on their batch
        ids = np.array([minilm._tokenizer.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in minilm._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feed)[0]
        reference[i] = hidden.sum(axis=1)[0] / ids.shape[1]
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    assert minilm.embed(texts).tobytes() == reference.tobytes()


def test_parallel_runs_keep_order_and_survive_a_fork() -> None:
    runs = ParallelRuns(2)
    assert runs.map(lambda x: x * x, range(9)) == [x * x for x in range(9)]
    runs._pid = -1  # as in a forked child, where the pool's threads do not exist
    assert runs.map(lambda x: -x, [1, 2, 3]) == [-1, -2, -3]
