"""The Embedder protocol, the hashed n-gram embedder, and the model backends."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mindory.errors import MindoryError
from mindory.search.embedders import (
    Embedder,
    FastEmbedEmbedder,
    HashedNgramEmbedder,
    Model2VecEmbedder,
    SentenceTransformerEmbedder,
    embed_text_for_chunk,
    get_embedder,
    l2_normalize,
    model_fingerprint,
)
from tests.conftest import corpus_file

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = [
    "The quick brown fox jumps over the lazy dog.",
    "話說天下大勢，分久必合，合久必分。",
    "吾輩は猫である。名前はまだ無い。",
    "나는 고양이로소이다",
    "Ça va? Straße — Ελληνικά, русский текст 1984",
    "mixed 中文 and English\r\n\ttabs",
    "",
]


def norms(v: np.ndarray) -> np.ndarray:
    return np.linalg.norm(v.astype(np.float64), axis=1)


# ------------------------------------------------------------------------- hashed


def test_shape_dtype_and_unit_rows() -> None:
    emb = HashedNgramEmbedder()
    assert isinstance(emb, Embedder)
    assert emb.dim == 384 and emb.id == "hashed-ngram-v1-384"
    v = emb.embed(SAMPLE)
    assert v.shape == (len(SAMPLE), 384) and v.dtype == np.float32 and v.flags.c_contiguous
    np.testing.assert_allclose(norms(v)[:-1], 1.0, atol=1e-5)
    assert emb.embed([]).shape == (0, 384)


@pytest.mark.parametrize("text", ["", "   \r\n\t", "!!! ... ---", "\x00\x00", "🙂🙂", "\ud800"])
def test_featureless_text_is_the_zero_vector(text: str) -> None:
    v = HashedNgramEmbedder().embed([text, "word"])
    assert not v[0].any()  # documented: no features → zero, never NaN
    assert abs(norms(v)[1] - 1.0) < 1e-5


def test_every_script_gives_features() -> None:
    v = HashedNgramEmbedder().embed(["𠀀𠀁", "ｶﾀｶﾅ", "한국어", "ελληνικά", "हिन्दी"])
    np.testing.assert_allclose(norms(v), 1.0, atol=1e-5)


def test_casefold_and_fullwidth_folding() -> None:
    emb = HashedNgramEmbedder()
    a, b, c, d = emb.embed(["Hello WORLD", "hello world", "ＨＥＬＬＯ　ｗｏｒｌｄ", "STRASSE"])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(d, emb.embed(["straße"])[0])


def test_batch_composition_does_not_change_a_row() -> None:
    emb = HashedNgramEmbedder()
    together = emb.embed(SAMPLE * 3)
    for i, text in enumerate(SAMPLE):
        np.testing.assert_array_equal(emb.embed([text])[0], together[i])
        np.testing.assert_array_equal(together[i], together[i + 2 * len(SAMPLE)])


def test_texts_with_nul_do_not_leak_into_neighbours() -> None:
    emb = HashedNgramEmbedder()
    v = emb.embed(["abc\x00def", "ghi"])
    np.testing.assert_array_equal(v[1], emb.embed(["ghi"])[0])


def test_similarity_follows_shared_ngrams() -> None:
    emb = HashedNgramEmbedder()
    q, near, far = emb.embed(
        ["the whale hunted", "Moby Dick, the white whale, was hunted", "tea and biscuits"]
    )
    assert q @ near > 0.3 > q @ far
    q, near, far = emb.embed(["曹操引兵", "却說曹操引兵至城下", "桃園三結義"])
    assert q @ near > 0.3 > q @ far


def test_dimension_is_respected() -> None:
    emb = HashedNgramEmbedder(768)
    assert emb.id == "hashed-ngram-v1-768" and emb.embed(SAMPLE).shape == (len(SAMPLE), 768)
    with pytest.raises(MindoryError):
        HashedNgramEmbedder(0)


def test_features_are_fixed() -> None:
    """Golden: which buckets and signs a text sets. A change here must bump VERSION.

    (Signs and bucket positions, not float bytes, so SIMD differences in log/sqrt
    between machines can't break it.)
    """
    v = HashedNgramEmbedder().embed(SAMPLE[:6])
    pattern = hashlib.sha256(np.sign(np.round(v, 4)).astype(np.int8).tobytes()).hexdigest()
    assert pattern == GOLDEN_SIGN_PATTERN


GOLDEN_SIGN_PATTERN = "a07b598bc996134079a3152eb8fa74f29e00bf0f447b915f89b5febbbfbfe979"


def test_deterministic_across_processes() -> None:
    """Same bytes in a fresh interpreter with a different hash seed."""
    code = (
        "import sys, hashlib; from mindory.search.embedders import HashedNgramEmbedder; "
        "from tests.search.test_embedders import SAMPLE; "
        "sys.stdout.write(hashlib.sha256(HashedNgramEmbedder().embed(SAMPLE).tobytes()).hexdigest())"
    )
    here = hashlib.sha256(HashedNgramEmbedder().embed(SAMPLE).tobytes()).hexdigest()
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout == here


def test_finds_the_chunk_a_span_came_from() -> None:
    """Real text: a 120-char (English) / 40-char (Chinese) span finds its 800-char chunk."""
    emb = HashedNgramEmbedder()
    en = corpus_file("txt_en_news-from-nowhere_ascii_crlf.txt").read_bytes().decode("ascii")
    zh = corpus_file("txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt").read_bytes().decode("utf-8")
    rng = np.random.default_rng(3)
    for text, qlen in ((en, 120), (zh, 40)):
        chunks = [text[i : i + 800] for i in range(0, 800 * 300, 800)]
        vecs = emb.embed(chunks)
        gold = rng.integers(0, len(chunks), 100)
        starts = rng.integers(0, 800 - qlen, 100)
        queries = [chunks[g][s : s + qlen] for g, s in zip(gold, starts)]
        top = np.argmax(emb.embed(queries) @ vecs.T, axis=1)
        assert np.mean(top == gold) >= 0.9


# ------------------------------------------------------------------------- helpers


def test_context_header() -> None:
    assert embed_text_for_chunk("body", context_header=False, title="T") == "body"
    assert embed_text_for_chunk("body", context_header=True) == "body"
    assert (
        embed_text_for_chunk(
            "body", title="Moby Dick", section_title="Loomings", context_header=True
        )
        == "Moby Dick › Loomings\n\nbody"
    )
    assert (
        embed_text_for_chunk("b", title=" T ", section_title=" ", context_header=True) == "T\n\nb"
    )
    assert embed_text_for_chunk("b", section_title="S", context_header=True) == "S\n\nb"


def test_l2_normalize_handles_zero_and_nan_rows() -> None:
    out = l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0], [np.nan, 1.0]]))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0], [0.0, 1.0]])
    assert out.dtype == np.float32


def test_get_embedder_specs() -> None:
    assert get_embedder("hashed").id == "hashed-ngram-v1-384"
    assert get_embedder(" hashed:768 ").dim == 768
    for bad in ("hashed:big", "nope:/x", "model2vec:", "word2vec"):
        with pytest.raises(MindoryError):
            get_embedder(bad)


# ------------------------------------------------------------------------- model2vec

VOCAB = ["[UNK]", "[PAD]", "hello", "world", "whale", "ship", "sea", "tea", "曹操"]


def require_model2vec() -> None:
    """model2vec is a dev dependency: skip loudly without it, but never on CI."""
    try:
        import model2vec  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("model2vec is not installed on CI: it belongs in the dev extra")
        pytest.skip("SKIPPED LOUDLY: model2vec is not installed (pip install model2vec)")


def make_model2vec(folder: Path, seed: int = 0, dim: int = 16) -> np.ndarray:
    """A tiny real model2vec model: WordLevel tokenizer + random vectors, saved to disk."""
    require_model2vec()
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.random.default_rng(seed).standard_normal((len(VOCAB), dim)).astype(np.float32)
    StaticModel(vectors=vectors, tokenizer=tok, normalize=False).save_pretrained(folder)
    return vectors


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Belt and braces: no test here may reach a model hub.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


def test_model2vec_loads_a_local_folder(tmp_path: Path) -> None:
    folder = tmp_path / "tiny-m2v"
    vectors = make_model2vec(folder)
    emb = Model2VecEmbedder(str(folder))
    assert isinstance(emb, Embedder)
    assert emb.dim == 16
    assert emb.id.startswith("model2vec-tiny-m2v-") and emb.id.endswith("-16")
    v = emb.embed(["hello world", "whale sea sea", "", "qwerty"])
    assert v.shape == (4, 16) and v.dtype == np.float32
    mean = (vectors[2] + vectors[3]) / 2  # model2vec mean-pools the token vectors
    np.testing.assert_allclose(v[0], mean / np.linalg.norm(mean), atol=1e-5)
    np.testing.assert_allclose(norms(v)[[0, 1]], 1.0, atol=1e-5)
    assert not v[2].any()  # empty text → zero vector, as the protocol says
    same = get_embedder(f"model2vec:{folder}")
    assert same.id == emb.id
    np.testing.assert_array_equal(same.embed(["hello world"]), v[:1])


def test_model2vec_id_follows_the_files(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a" / "m", tmp_path / "b" / "m", tmp_path / "c" / "m"
    make_model2vec(a, seed=1)
    make_model2vec(b, seed=1)
    make_model2vec(c, seed=2)
    assert model_fingerprint(a) == model_fingerprint(b) != model_fingerprint(c)
    (a / "README.md").write_text("an edited model card")
    assert model_fingerprint(a) == model_fingerprint(b)  # the card is not the model
    assert Model2VecEmbedder(str(a)).id == Model2VecEmbedder(str(b)).id
    assert Model2VecEmbedder(str(a)).id != Model2VecEmbedder(str(c)).id


def test_model2vec_name_from_the_local_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model name resolves through the local HF cache only (local_files_only)."""
    hub = pytest.importorskip("huggingface_hub")
    cache = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--someone--tiny-m2v"
    make_model2vec(repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(cache))
    emb = get_embedder("model2vec:someone/tiny-m2v")
    assert emb.id.startswith("model2vec-someone_tiny-m2v-") and emb.dim == 16
    with pytest.raises(MindoryError, match="never downloads"):
        Model2VecEmbedder("someone/not-cached")


def test_model2vec_bad_folder(tmp_path: Path) -> None:
    require_model2vec()
    (tmp_path / "empty").mkdir()
    with pytest.raises(MindoryError, match="cannot load model2vec model"):
        Model2VecEmbedder(str(tmp_path / "empty"))
    with pytest.raises(MindoryError, match="not found"):
        Model2VecEmbedder(str(tmp_path / "missing" / "dir"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(MindoryError, match="must be a folder"):
        Model2VecEmbedder(str(tmp_path / "file"))


@pytest.mark.parametrize(
    ("cls", "module", "extra"),
    [
        (Model2VecEmbedder, "model2vec", "model2vec"),
        (FastEmbedEmbedder, "fastembed", "fastembed"),
        (SentenceTransformerEmbedder, "sentence_transformers", "sentence-transformers"),
    ],
)
def test_missing_backend_package_is_a_clear_error(
    cls: type, module: str, extra: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(MindoryError) as info:
        cls(str(tmp_path))
    assert str(info.value) == (
        f"{module.replace('_', '-')} is not installed: pip install 'mindory[{extra}]'"
    )


# ------------------------------------------------------------------------- fastembed


def make_onnx_model(folder: Path, dim: int = 8) -> np.ndarray:
    """A tiny real ONNX "transformer" (an embedding lookup) with its tokenizer files."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True)
    vocab = ["[PAD]", *VOCAB[2:], "[UNK]"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    special = {"pad_token": "[PAD]", "unk_token": "[UNK]"}
    (folder / "tokenizer_config.json").write_text(json.dumps({**special, "model_max_length": 64}))
    (folder / "special_tokens_map.json").write_text(json.dumps(special))
    (folder / "config.json").write_text(json.dumps({"pad_token_id": 0}))
    table = np.random.default_rng(5).standard_normal((len(vocab), dim)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"], axis=0)],
        "tiny",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["b", "s", dim])],
        [numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(folder / "model.onnx"))
    return table


def test_fastembed_loads_a_local_folder(tmp_path: Path) -> None:
    pytest.importorskip("fastembed")
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    table = make_onnx_model(tmp_path / "tiny-onnx")
    name = "mindory-test/tiny-onnx"
    if not any(m["model"] == name for m in TextEmbedding.list_supported_models()):
        TextEmbedding.add_custom_model(
            model=name,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=name),
            dim=8,
            model_file="model.onnx",
        )
    emb = get_embedder(f"fastembed:{name}={tmp_path / 'tiny-onnx'}")
    assert emb.dim == 8 and emb.id.startswith("fastembed-mindory-test_tiny-onnx-")
    v = emb.embed(["hello world", "", "whale"])
    mean = table[1] + table[2]  # ids of "hello", "world"
    np.testing.assert_allclose(v[0], mean / np.linalg.norm(mean), atol=1e-5)
    assert not v[1].any() and abs(norms(v)[2] - 1.0) < 1e-5
    # the folder name alone identifies it too (`/` written as `--`)
    named = tmp_path / "mindory-test--tiny-onnx"
    (tmp_path / "tiny-onnx").rename(named)
    assert FastEmbedEmbedder(str(named)).dim == 8
    with pytest.raises(MindoryError, match="needs the model's name"):
        FastEmbedEmbedder(str(tmp_path))
