"""Normalization of plain text: layout rules and every DESIGN §1 invariant."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.text.normalize import detect_hard_wrap, normalize
from mindory.text.records import NormalizeProfile
from tests.strategies import messy_text

INVISIBLE = "\u00ad\u200b\u2060\ufeff"


def test_hard_wrapped_prose_is_unwrapped() -> None:
    src = (
        "  CHAPTER I\r\n\r\n"
        "It was a dark and stormy night; the rain fell  in torrents,\r\n"
        "except at occasional intervals.\r\n\r\n"
        "    Second paragraph, which is also\r\n"
        "wrapped across lines.\r\n"
        "And a third line.\r\n\r\n"
        "Third para\r\n"
        "on two lines.\r\n"
    )
    nt = normalize(src, unwrap=True)
    assert nt.text == (
        "CHAPTER I\n\n"
        "It was a dark and stormy night; the rain fell in torrents, except at occasional intervals.\n\n"
        "Second paragraph, which is also wrapped across lines. And a third line.\n\n"
        "Third para on two lines."
    )
    nt.offset_map.check(src, nt.text)
    kinds = [b.kind for b in nt.blocks]
    assert kinds == ["heading", "paragraph", "paragraph", "paragraph"]
    first = nt.blocks[1]
    assert src[first.source_start : first.source_end].startswith("It was")
    assert src[first.source_start : first.source_end].endswith("intervals.")
    assert detect_hard_wrap(src * 3)


def test_one_line_per_paragraph_chinese() -> None:
    src = "第一回　宴桃园豪杰三结义\r\n\u3000\u3000滚滚长江东逝水，浪花淘尽英雄。\r\n\u3000\u3000是非成败转头空。\r\n"
    assert not detect_hard_wrap(src * 10)
    nt = normalize(src)
    assert (
        nt.text == "第一回　宴桃园豪杰三结义\n\n滚滚长江东逝水，浪花淘尽英雄。\n\n是非成败转头空。"
    )
    assert [b.kind for b in nt.blocks] == ["heading", "paragraph", "paragraph"]


def test_cjk_lines_join_without_space_when_unwrapping() -> None:
    nt = normalize("天下大势，\n分久必合。\n\nA line\nwraps.", unwrap=True)
    assert nt.text == "天下大势，分久必合。\n\nA line wraps."


def test_invisibles_tabs_and_wide_spaces() -> None:
    src = "beau\u00adti\u200bful\tday  \u3000x\u00a0y\ufeff"
    nt = normalize(src, unwrap=False)
    assert nt.text == "beautiful day x\u00a0y"
    nt.offset_map.check(src, nt.text)


def test_nfc_and_nfkc() -> None:
    src = "Cafe\u0301 ︽書︾ ﬁne"
    nfc = normalize(src)
    assert nfc.text == "Café ︽書︾ ﬁne"
    nfkc = normalize(src, NormalizeProfile(unicode_form="NFKC"))
    assert nfkc.text == "Café 《書》 fine"
    for nt in (nfc, nfkc):
        nt.offset_map.check(src, nt.text)
        # "é" maps back to both source characters.
        assert nt.offset_map.source_span(3, 4) == (3, 5)


def test_empty_and_whitespace_only() -> None:
    for src in ("", "   \r\n\t\u3000\r\n"):
        nt = normalize(src)
        assert nt.text == ""
        assert len(nt.blocks) == 0


def _check_invariants(src: str, nt_text: str, omap, blocks) -> None:  # type: ignore[no-untyped-def]
    omap.check(src, nt_text)
    # Monotone map.
    starts = [omap.to_source(i) for i in range(len(nt_text) + 1)]
    assert starts == sorted(starts)
    # Layout: no CR, newlines only as exact "\n\n" separators, no edge or double spaces.
    assert "\r" not in nt_text and "\t" not in nt_text
    assert nt_text == nt_text.strip(" \n\u3000\u00a0")
    assert "\n\n\n" not in nt_text
    assert "  " not in nt_text
    for ch in INVISIBLE:
        assert ch not in nt_text
    # Blocks tile the text between separators, with exact source spans.
    joined = "\n\n".join(nt_text[b.start : b.end] for b in blocks)
    assert joined == nt_text
    for b in blocks:
        assert omap.source_span(b.start, b.end) == (b.source_start, b.source_end)


@given(messy_text, st.booleans(), st.sampled_from(["NFC", "NFKC", None]))
@settings(max_examples=400, deadline=None)
def test_normalize_invariants(src: str, unwrap: bool, form: str | None) -> None:
    nt = normalize(src, NormalizeProfile(unicode_form=form), unwrap=unwrap)
    _check_invariants(src, nt.text, nt.offset_map, nt.blocks)
    if not unwrap:
        assert "\n" not in nt.text.replace("\n\n", "")
    if form == "NFC" and not any(c in src for c in INVISIBLE):
        assert unicodedata.is_normalized("NFC", nt.text)


@given(messy_text)
@settings(max_examples=100, deadline=None)
def test_normalize_is_deterministic(src: str) -> None:
    a = normalize(src)
    b = normalize(src)
    assert a.text == b.text
    assert a.offset_map.to_bytes() == b.offset_map.to_bytes()
    assert list(a.blocks) == list(b.blocks)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_endings_unified(newline: str) -> None:
    src = newline.join(["one", "two", "", "three"])
    nt = normalize(src, unwrap=False)
    assert nt.text == "one\n\ntwo\n\nthree"
