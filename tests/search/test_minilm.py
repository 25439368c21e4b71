"""The built-in sentence embedder (all-MiniLM-L6-v2 on ONNX Runtime): shape, norms,
determinism across batches, no vector for Chinese and Japanese, sensible neighbours."""

from __future__ import annotations

import numpy as np
import pytest

from mindory.search.embedders import get_embedder
from mindory.search.minilm import MiniLMEmbedder, cjk_share


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
