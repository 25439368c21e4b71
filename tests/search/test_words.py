"""Word analysis per language, with real text: the same terms for a text and a query."""

from __future__ import annotations

from mindory.search.words import fingerprint, language_of, query_terms, text_terms


def test_english_plurals_and_inflections_meet_their_stem() -> None:
    text = text_terms("The captain's leg was carved from the jawbones of whales.", "en")
    assert set(query_terms("whale carving")) <= set(text)
    assert "the" not in text and "was" not in text  # stop words out
    # question words and question furniture never become terms
    assert query_terms("Why did the captain say what happened in the passage?") == ["captain"]


def test_simplified_and_traditional_are_one_term() -> None:
    traditional = text_terms("寶玉聽了，便走進來。", "zh")
    assert "宝玉" in traditional  # folded to Simplified
    assert query_terms("宝玉") == query_terms("寶玉") == ["宝玉"]
    assert query_terms("宋江为什么杀了阎婆惜") == query_terms("宋江為什麼殺了閻婆惜")
    assert "为什么" not in query_terms("宋江为什么杀了阎婆惜")  # question words out


def test_japanese_inflected_verbs_meet_their_dictionary_form() -> None:
    text = text_terms("智に働けば角が立つ。情に棹させば流される。", "ja")
    assert "働く" in text and "立つ" in text
    assert set(query_terms("働いた", ["ja"])) <= set(text)
    assert query_terms("美しかった", ["ja"]) == ["美しい"]
    assert "に" not in text and "が" not in text  # particles out


def test_mixed_scripts_go_to_their_own_analysers() -> None:
    terms = text_terms("Sōseki wrote 草枕 (Kusamakura) in 1906.", "ja")
    assert "1906" in terms and "kusamakura" in terms and "草枕" in terms


def test_language_from_tag_or_script() -> None:
    assert language_of("en-US") == "en" and language_of("zh-TW") == "zh"
    assert language_of("ja-jp") == "ja"
    assert language_of(None, "第一回 宋江殺惜") == "zh"
    assert language_of(None, "吾輩は猫である") == "ja"
    assert language_of(None, "It was winter when I went to bed") == "en"


def test_the_fingerprint_names_every_analyser_and_version() -> None:
    fp = fingerprint()
    for part in ("mindory-words-", "PyStemmer-", "opencc-pyo3-", "rjieba-", "SudachiPy-"):
        assert part in fp and f"{part}missing" not in fp


def test_a_chinese_question_has_the_same_terms_in_either_script() -> None:
    # Also beside Japanese books, whose analysis reads the question's kanji (issue 26).
    for languages in (["zh"], ["en", "zh"], ["en", "ja", "zh"]):
        assert query_terms("洪太尉為什麼非要打開伏魔殿裡那塊石碑", languages) == query_terms(
            "洪太尉为什么非要打开伏魔殿里那块石碑", languages
        ), languages
