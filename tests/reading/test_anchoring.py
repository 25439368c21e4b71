"""Anchoring: quote calibration, and highlights re-anchored on real edits of corpus books.

Every scenario makes highlights at seeded positions of a real book, builds a new
edition by editing its source text, re-anchors, and asserts the precise outcome
of every highlight — and, for every placed highlight, that the new span holds
text that matches (``check_placed``).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.importers import load_book
from mindory.reading.anchoring import (
    CONTEXT_CHARS,
    DEFAULT_MIN_PREFIX,
    DEFAULT_MIN_PREFIX_CJK,
    FUZZY_MIN_CONFIDENCE,
    FUZZY_MIN_CONFIDENCE_IN_CONTEXT,
    FUZZY_MIN_QUOTE_SIMILARITY,
    FUZZY_MIN_QUOTE_SIMILARITY_IN_CONTEXT,
    Reanchor,
    SectionText,
    StoredAnchor,
    _myers,
    calibrate_quote,
    edit_distance,
    fold,
    reanchor,
    reanchor_all,
)
from tests.conftest import SAMPLES, corpus_file

NEWS = SAMPLES / "news-from-nowhere.txt"
QIAOSHI = SAMPLES / "qiaoshi-yanyi.txt"
MOBY = "epub3_en_moby-dick.epub"

WORD_RE = re.compile(r"\S+")
LONG_WORD_RE = re.compile(r"[A-Za-z]{5,}")
HAN_RE = re.compile(r"[\u4e00-\u9fff]")

# ============================================================== helpers


@cache
def news_text() -> str:
    return str(load_book(NEWS).source.text)


@cache
def news_whole() -> SectionText:
    """The whole file as one text (its fold is cached on the object)."""
    return SectionText(0, news_text())


@cache
def news_sections() -> tuple[SectionText, ...]:
    return SectionText.from_book(load_book(NEWS))


@cache
def moby_sections() -> tuple[SectionText, ...]:
    return SectionText.from_book(load_book(corpus_file(MOBY)))


def txt_edition(text: str, tmp_path: Path, name: str) -> tuple[SectionText, ...]:
    """Sections of a plain-text edition, imported from a file like any book."""
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    book = load_book(path)
    assert book.source.text == text
    return SectionText.from_book(book)


def section_of(sections: Sequence[SectionText], ordinal: int) -> SectionText:
    return next(s for s in sections if s.ordinal == ordinal)


def section_at(sections: Sequence[SectionText], pos: int) -> SectionText:
    """The plain-text section holding file position ``pos``."""
    return next(s for s in sections if s.source_start <= pos < s.source_end)


def word_spans(
    section: SectionText,
    rng: random.Random,
    n: int,
    *,
    words: tuple[int, int] = (1, 30),
    lo: int = 0,
    hi: int | None = None,
    gap: int = 2 * CONTEXT_CHARS,
) -> list[tuple[int, int]]:
    """``n`` non-overlapping spans of whole words (book coordinates), ``gap`` apart.

    ``lo`` / ``hi`` limit them to a part of the section (section-local).
    """
    text = section.source_text
    ws = [m.span() for m in WORD_RE.finditer(text, lo, len(text) if hi is None else hi)]
    out: list[tuple[int, int]] = []
    for _ in range(50 * n):
        if len(out) == n:
            break
        k = rng.randrange(len(ws))
        j = min(len(ws) - 1, k + rng.randint(*words) - 1)
        a, b = ws[k][0], ws[j][1]
        if any(a < e + gap and s < b + gap for s, e in out):
            continue
        out.append((a, b))
    assert len(out) == n, "could not place the requested highlights"
    return [(section.source_start + a, section.source_start + b) for a, b in sorted(out)]


def anchors_in(
    section: SectionText, spans: Sequence[tuple[int, int]], tag: str
) -> list[StoredAnchor]:
    return [StoredAnchor.from_span(section, a, b, id=f"{tag}{k}") for k, (a, b) in enumerate(spans)]


def check_placed(r: Reanchor, new: Sequence[SectionText]) -> None:
    """A placed highlight lies on text that matches; an orphan carries no place."""
    a = r.anchor
    assert 0.0 <= r.confidence <= 1.0
    json.dumps(r.to_json())
    if not r.placed:
        assert r.status == "orphaned"
        assert r.section is None and r.source_start is None and r.exact is None
        assert r.note.startswith("orphaned, not moved")
        return
    assert r.section is not None and r.source_start is not None and r.source_end is not None
    sec = section_of(new, r.section)
    s, e = r.source_start - sec.source_start, r.source_end - sec.source_start
    assert 0 <= s < e <= len(sec.source_text)
    assert sec.source_text[s:e] == r.exact
    assert r.prefix == sec.source_text[max(0, s - CONTEXT_CHARS) : s]
    assert r.suffix == sec.source_text[e : e + CONTEXT_CHARS]
    assert r.href == sec.href
    old_f, new_f = fold(a.exact).text.strip(" "), fold(r.exact or "").text.strip(" ")
    if r.status in ("position", "exact"):
        assert r.exact == a.exact and not r.changed and r.edits is None
    elif r.status == "normalized":
        assert new_f == old_f
    else:
        assert r.status == "fuzzy"
        assert r.edits is not None and r.confidence >= FUZZY_MIN_CONFIDENCE
        # at most a quarter of the quote edited, or half of it when the context stands
        limit = 1 - FUZZY_MIN_QUOTE_SIMILARITY
        if r.confidence >= FUZZY_MIN_CONFIDENCE_IN_CONTEXT:
            limit = 1 - FUZZY_MIN_QUOTE_SIMILARITY_IN_CONTEXT
        assert edit_distance(old_f, new_f) <= limit * len(old_f) + 1


def run_all(
    anchors: Sequence[StoredAnchor],
    old: Sequence[SectionText],
    new: Sequence[SectionText],
) -> dict[str, Reanchor]:
    results = reanchor_all(anchors, old, new)
    for r in results:
        check_placed(r, new)
    return {r.anchor.id or "": r for r in results}


def swap_typo(text: str, a: int, b: int, rng: random.Random) -> tuple[str, int]:
    """Swap two inner letters of a word in the middle of ``text[a:b]``; the position."""
    words = list(LONG_WORD_RE.finditer(text, a, b))
    inner = [m for m in words if m.start() > a + 8 and m.end() < b - 8]
    for m in rng.sample(inner, len(inner)):
        w = m.group()
        for i in range(1, len(w) - 2):
            if w[i] != w[i + 1]:
                p = m.start() + i
                return text[:p] + text[p + 1] + text[p] + text[p + 2 :], p
    raise AssertionError("no word to misspell")


# ============================================================== building blocks


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="abcde", min_size=1, max_size=14),
    st.text(alphabet="abcdef", max_size=30),
    st.booleans(),
)
def test_myers_matches_a_plain_dynamic_program(pattern: str, text: str, anchored: bool) -> None:
    m = len(pattern)
    prev = list(range(m + 1))
    expect = []
    for j, c in enumerate(text):
        cur = [j + 1 if anchored else 0]
        for i in range(1, m + 1):
            cur.append(min(prev[i] + 1, cur[i - 1] + 1, prev[i - 1] + (pattern[i - 1] != c)))
        prev = cur
        expect.append(cur[m])
    assert _myers(pattern, text, anchored=anchored) == expect


def test_edit_distance() -> None:
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
    assert edit_distance("abc", "") == 3
    assert edit_distance("recieve", "receive") == 2
    assert edit_distance("a" * 300, "a" * 150 + "b" + "a" * 149) == 1  # long bit vectors


NASTY = "ab \r\n\t\u3000\xa0\u00ad\u200b“”‘’—–ＡＢ１，。玄德曰ﬁ…½e\u0301\U00020000\U0001d400"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=NASTY, max_size=40))
def test_fold_map_covers_the_source_in_order(text: str) -> None:
    f = fold(text)
    assert f.map.source_length == len(text)
    assert f.map.normalized_length == len(f.text)
    prev = (0, 0)
    for i in range(len(f.text)):
        s, e = f.source_span(i, i + 1)
        assert 0 <= s < e <= len(text)  # every folded character comes from some source
        assert s >= prev[0] and e >= prev[1]  # in order
        assert (s, e) == prev or s >= prev[1]  # one source piece, or the next one
        prev = (s, e)
    assert "\r" not in f.text and "\n" not in f.text and "  " not in f.text
    if not re.search("[\u200b\u00ad]\u0301", text):  # (an invisible between e and its accent)
        assert fold(f.text).text == f.text  # idempotent


def test_fold_examples() -> None:
    f = fold("Hello,\r\n  “world” — ﬁne\u3000ｆｕｌｌ\u00adwidth 玄德\r\n曰：「吾」 e\u0301")
    assert f.text == 'Hello, "world" - fine fullwidth 玄德曰:"吾" é'
    assert f.source_span(6, 7) == (6, 10)  # the collapsed "\r\n  "
    assert f.source_span(f.text.index("é"), len(f.text)) == (45, 47)  # e + U+0301
    i = f.text.index("fi")
    assert f.source_span(i, i + 1) == f.source_span(i + 1, i + 2) == (20, 21)  # ligature


def test_fold_is_fast_on_a_seven_megabyte_section() -> None:
    text = news_text() * 16  # 7.2 MB, CRLF line ends
    t = time.perf_counter()
    f = fold(text)
    assert time.perf_counter() - t < 5.0
    assert len(f.text) < len(text)
    zh = (QIAOSHI.read_bytes().decode("big5hkscs", errors="replace")) * 16
    t = time.perf_counter()
    fold(zh)
    assert time.perf_counter() - t < 5.0


# ============================================================== quote calibration


def test_literal_quote_gives_the_exact_span() -> None:
    sec = section_of(news_sections(), 3)
    a = sec.source_text.index("I lingered a little behind")
    quote = sec.source_text[a : a + 120]
    r = calibrate_quote([sec], quote)
    assert r.method == "exact"
    assert (r.source_start, r.source_end) == (sec.source_start + a, sec.source_start + a + 120)
    assert r.exact == quote and r.quote == quote and r.section == 3
    assert r.matched_length == r.quote_length == 120 and r.occurrences == 1
    # Surrounding whitespace in the quote is not part of the span.
    r2 = calibrate_quote([sec], "\n  " + quote + " \n")
    assert r2.method == "exact" and r2.exact == quote and r2.matched_length == 3 + 120


def test_the_occurrence_nearest_the_hint_is_taken() -> None:
    text = news_text()
    needle = "said Dick"
    starts = [m.start() for m in re.finditer(needle, text)]
    assert len(starts) > 5
    whole = news_whole()
    for target in (starts[1], starts[-2]):
        r = calibrate_quote([whole], needle, hint=(target - 300, target + 500))
        assert r.method == "exact" and r.source_start == target
        assert r.occurrences == len(starts)
    r = calibrate_quote([whole], needle)
    assert r.source_start == starts[0]


def test_chunk_slice_with_offset_reports_source_coordinates() -> None:
    sec = section_of(news_sections(), 5)
    off = 2000
    chunk = SectionText(5, sec.source_text[off : off + 800], source_start=sec.source_start + off)
    quote = chunk.source_text[100:180]
    r = calibrate_quote([chunk, sec], quote)
    assert r.method == "exact"
    assert r.source_start == sec.source_start + off + 100
    assert news_text()[r.source_start : r.source_end] == quote


def test_crlf_and_whitespace_differences_match_normalized() -> None:
    sec = section_of(news_sections(), 3)
    text = sec.source_text
    a = text.index("It was a longish building")
    b = text.index(".", a + 200) + 1
    original = text[a:b]
    assert "\r\n" in original
    for quote in (
        original.replace("\r\n", " "),
        original.replace("\r\n", "\n"),
        "  " + re.sub(r"\s+", "   ", original) + "\n",
        original.replace("\r\n", "\n\n"),
    ):
        r = calibrate_quote([sec], quote)
        assert r.method == "normalized", quote
        assert (r.source_start, r.source_end) == (sec.source_start + a, sec.source_start + b)
        assert r.exact == original  # a slice of the source, CRLF and all
        assert r.matched_length == len(quote.rstrip())


def test_full_width_and_half_width_match_each_other() -> None:
    text = "第三回：ＡＢＣ公司於１９９５年成立，"
    r = calibrate_quote([text], "ABC公司於1995年成立,")
    assert r.method == "normalized" and r.exact == "ＡＢＣ公司於１９９５年成立，"
    assert (r.source_start, r.source_end) == (4, 4 + len(r.exact))
    r = calibrate_quote(["model ABC-1995 was built"], "ＡＢＣ－１９９５")
    assert r.method == "normalized" and r.exact == "ABC-1995"


def test_curly_quotes_and_dashes_from_an_assistant_match() -> None:
    sec = next(s for s in moby_sections() if s.href == "OPS/chapter_001.xhtml")
    text = sec.source_text
    a = text.index("Call me Ishmael")
    b = text.index(".", text.index("knocking people")) + 1
    original = text[a:b]
    assert "’" in original and "—" in original
    quote = original.replace("’", "'").replace("—", "--").replace("\n", " ")
    quote = quote.replace("--", "-")
    r = calibrate_quote([sec], quote)
    assert r.method == "normalized"
    assert (r.source_start, r.source_end) == (a, b) and r.exact == original


def test_case_and_surrounding_quotation_marks() -> None:
    sec = section_of(news_sections(), 3)
    r = calibrate_quote([sec], "the guest house and breakfast therein")
    assert r.method == "normalized" and r.case_insensitive
    assert r.exact == "THE GUEST HOUSE AND BREAKFAST THEREIN"
    a = sec.source_text.index("I lingered a little behind")
    original = sec.source_text[a : a + 60]
    r = calibrate_quote([sec], f"“{original}”")
    assert r.method == "normalized" and r.exact == original and not r.case_insensitive
    assert r.matched_length == 1 + len(original)


def test_truncated_and_hallucinated_tail_keeps_the_prefix() -> None:
    sec = section_of(news_sections(), 3)
    text = sec.source_text
    a = text.index("I lingered a little behind")
    cut = text.index("at this house", a) + 5
    real = text[a:cut]  # "I lingered ... to have a stare at th"
    quote = real + "e whale, who sang opera in the moonlight"  # "... a stare at the whale"
    r = calibrate_quote([sec], quote)
    assert r.method == "prefix"
    assert r.source_start == sec.source_start + a
    assert r.exact == text[a : r.source_end - sec.source_start]
    assert real.startswith(r.exact)  # never extended beyond what occurs
    assert r.exact == text[a : cut - 3]  # cut back to a word boundary: no partial "th"
    assert len(r.exact) >= DEFAULT_MIN_PREFIX
    assert r.matched_length == len(r.exact)
    assert quote[: r.matched_length] == r.exact
    # Truncated mid-word by the assistant: still the same place.
    r2 = calibrate_quote([sec], real[:40] + "xq")
    assert r2.method == "prefix" and r2.source_start == sec.source_start + a


def test_pure_hallucination_is_rejected() -> None:
    secs = news_sections()
    r = calibrate_quote(secs, "The whale sang opera beneath the purple moons of Neptune.")
    assert r.method == "rejected"
    assert r.exact is None and r.source_start is None and r.section is None
    assert r.quote == "The whale sang opera beneath the purple moons of Neptune."
    # A short real prefix is not enough.
    r = calibrate_quote(secs, "It was the zebra-striped hovercraft of doom")
    assert r.method == "rejected" and "fewer than" in r.note
    assert calibrate_quote(secs, "   ").method == "rejected"
    assert calibrate_quote(secs, "\u200b\u00ad").method == "rejected"


def test_cjk_quotes() -> None:
    book = load_book(QIAOSHI)
    secs = SectionText.from_book(book)
    text = book.source.text
    # A passage over a paragraph break (CRLF + ideographic-space indent), cited without it.
    m = re.search(r"[\u4e00-\u9fff，。]{12}\r\n\u3000\u3000[\u4e00-\u9fff，。]{12}", text)
    assert m is not None
    original = m.group()
    quote = original.replace("\r\n\u3000\u3000", "")
    r = calibrate_quote(secs, quote)
    assert r.method == "normalized"
    assert (r.source_start, r.source_end) == m.span() and r.exact == original
    # The same with a hallucinated tail: the CJK minimum is shorter.
    line = re.search(r"[\u4e00-\u9fff]{8}", text)
    assert line is not None
    r = calibrate_quote(secs, line.group()[:DEFAULT_MIN_PREFIX_CJK] + "哈利波特與魔法石")
    assert r.method == "prefix"
    assert r.source_start == line.start()
    assert r.exact == line.group()[: r.source_end - r.source_start]
    assert r.source_end - r.source_start >= DEFAULT_MIN_PREFIX_CJK
    assert calibrate_quote(secs, "哈利波特與魔法石").method == "rejected"
    short = line.group()[: DEFAULT_MIN_PREFIX_CJK - 1] + "哈利波特與魔法石"
    assert calibrate_quote(secs, short).method == "rejected"


def test_min_prefix_can_be_set() -> None:
    sec = section_of(news_sections(), 3)
    a = sec.source_text.index("I lingered a little behind")
    quote = sec.source_text[a : a + 40] + " qqq zzz"
    assert calibrate_quote([sec], quote).method == "prefix"
    r = calibrate_quote([sec], quote, min_prefix=60)
    assert r.method == "rejected" and "fewer than 60" in r.note


def test_cjk_positions_after_characters_outside_the_bmp() -> None:
    book = load_book(QIAOSHI)
    text = book.source.text
    k = next(i for i, c in enumerate(text) if ord(c) > 0xFFFF)
    quote = text[k - 5 : k + 10]
    r = calibrate_quote(SectionText.from_book(book), quote.replace("\r\n", ""))
    assert r.method in ("exact", "normalized")
    assert text[r.source_start : r.source_end] == r.exact
    assert r.source_start == k - 5  # code points, not UTF-16 units


def test_quote_calibration_on_a_seven_megabyte_section_is_fast() -> None:
    text = news_text() * 16
    whole = SectionText(0, text)
    a = len(text) - 300_000
    real = text[a : a + 80]
    t = time.perf_counter()
    r = calibrate_quote([whole], real.replace("\r\n", " ") + " and a hallucinated tail here")
    took = time.perf_counter() - t
    assert r.method == "prefix" and r.exact is not None
    assert took < 5.0
    t = time.perf_counter()
    calibrate_quote([whole], "entirely invented words that occur nowhere at all, none")
    assert time.perf_counter() - t < 2.0  # the fold is cached on the SectionText


def test_quote_match_json_has_stable_keys() -> None:
    r = calibrate_quote(["alpha beta gamma"], "beta")
    assert list(r.to_json()) == [
        "method",
        "quote",
        "exact",
        "section",
        "source",
        "quoteLength",
        "matchedLength",
        "caseInsensitive",
        "occurrences",
        "note",
        "rubyIgnored",
    ]
    assert r.to_json()["source"] == {"start": 6, "end": 10}
    assert calibrate_quote(["alpha"], "omega").to_json()["source"] is None


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_rewhitespaced_quotes_are_found_at_their_place(data: st.DataObject) -> None:
    text = news_text()
    start = data.draw(st.integers(0, len(text) - 400))
    m = WORD_RE.search(text, start)
    assert m is not None
    words = list(WORD_RE.finditer(text, m.start(), m.start() + 300))[
        : data.draw(st.integers(3, 20))
    ]
    a, b = words[0].start(), words[-1].end()
    seps = data.draw(
        st.lists(st.sampled_from([" ", "\n", "\r\n", "  ", "\t"]), min_size=len(words))
    )
    quote = "".join(w.group() + s for w, s in zip(words, seps)).strip()
    r = calibrate_quote([news_whole()], quote, hint=(a, b))
    assert r.method in ("exact", "normalized")
    assert (r.source_start, r.source_end) == (a, b)


# ============================================================== re-anchoring basics


def test_unchanged_edition_keeps_every_highlight_in_place() -> None:
    secs = moby_sections()
    rng = random.Random(1)
    anchors = []
    for sec in secs[6:30]:
        anchors += anchors_in(sec, word_spans(sec, rng, 3), f"s{sec.ordinal}-")
    results = run_all(anchors, secs, secs)
    for a in anchors:
        r = results[a.id or ""]
        assert r.status == "position" and r.confidence == 1.0
        assert (r.section, r.source_start, r.source_end) == (
            a.section,
            a.source_start,
            a.source_end,
        )
        assert (r.prefix, r.suffix) == (a.prefix, a.suffix)


def test_stored_anchor_round_trips_through_w3c_selectors() -> None:
    sec = section_of(news_sections(), 2)
    a = StoredAnchor.from_span(sec, sec.source_start + 100, sec.source_start + 140, id="x")
    b = StoredAnchor.from_selectors(a.selectors(), section=2, id="x")
    assert a == b
    with pytest.raises(ValueError):
        StoredAnchor(section=0, source_start=0, source_end=3, exact="ab")
    with pytest.raises(ValueError):
        StoredAnchor.from_span(sec, 0, 10)  # outside the section (plain text is file-global)


def test_reanchor_json_has_stable_keys() -> None:
    sec = section_of(news_sections(), 2)
    a = StoredAnchor.from_span(sec, sec.source_start + 100, sec.source_start + 140, id="x")
    r = reanchor(a, news_sections(), old_section_hint=sec.hint)
    assert r.status == "position"
    assert list(r.to_json()) == [
        "id",
        "status",
        "confidence",
        "section",
        "href",
        "source",
        "selector",
        "changed",
        "edits",
        "old",
        "note",
    ]
    assert r.to_json()["selector"]["type"] == "TextQuoteSelector"


# ============================================================== (a) chapter inserted

INSERTED_CHAPTER = (
    "CHAPTER Interlude: A CHAPTER ADDED IN THE SECOND EDITION\r\n\r\n\r\n"
    + "".join(
        f"This paragraph number {k} was written for the second edition and tells of a "
        f"journey that never happened, on a day of weather number {k * 7}.\r\n\r\n"
        for k in range(12)
    )
    + "\r\n\r\n"
)


def test_txt_chapter_inserted_before_highlighted_chapters(tmp_path: Path) -> None:
    old = news_sections()
    text = news_text()
    at = section_of(old, 3).source_start
    new = txt_edition(text[:at] + INSERTED_CHAPTER + text[at:], tmp_path, "a.txt")
    assert len(new) == len(old) + 1
    assert new[3].title.startswith("CHAPTER Interlude")
    rng = random.Random(2)
    anchors: list[StoredAnchor] = []
    for sec in old[1:9]:
        anchors += anchors_in(sec, word_spans(sec, rng, 5), f"c{sec.ordinal}-")
    results = run_all(anchors, old, new)
    shift = len(INSERTED_CHAPTER)
    for a in anchors:
        r = results[a.id or ""]
        after = a.source_start >= at
        assert r.status == "position", r.note
        assert r.confidence == 1.0
        assert r.section == a.section + (1 if after else 0)
        assert r.source_start == a.source_start + (shift if after else 0)
        assert r.source_end == a.source_end + (shift if after else 0)


def test_txt_chapter_inserted_without_titles_falls_back_to_the_quote(tmp_path: Path) -> None:
    """Sections known by ordinal only: the shifted chapters are found by their quotes."""
    text = news_text()
    at = section_of(news_sections(), 3).source_start
    old = [replace(s, title="") for s in news_sections()]
    new = [
        replace(s, title="")
        for s in txt_edition(text[:at] + INSERTED_CHAPTER + text[at:], tmp_path, "a.txt")
    ]
    rng = random.Random(3)
    anchors: list[StoredAnchor] = []
    for sec in old[1:7]:
        anchors += anchors_in(sec, word_spans(sec, rng, 4), f"c{sec.ordinal}-")
    results = run_all(anchors, old, new)
    for a in anchors:
        r = results[a.id or ""]
        if a.source_start < at:
            assert r.status == "position"
            assert (r.section, r.source_start) == (a.section, a.source_start)
        else:
            assert r.status == "exact", r.note
            assert r.section == a.section + 1
            assert r.source_start == a.source_start + len(INSERTED_CHAPTER)
            assert "moved to another section" in r.note


def test_epub_chapter_inserted_before_highlighted_chapters() -> None:
    old = moby_sections()
    k = next(i for i, s in enumerate(old) if s.href == "OPS/chapter_003.xhtml")
    new_chapter = SectionText(
        ordinal=k,
        source_text="\n\nChapter 2½. An Interlude.\n" + INSERTED_CHAPTER.replace("\r\n", "\n"),
        href="OPS/chapter_002b.xhtml",
        title="Chapter 2½. An Interlude.",
    )
    new = [
        *old[:k],
        new_chapter,
        *(replace(s, ordinal=s.ordinal + 1) for s in old[k:]),
    ]
    rng = random.Random(4)
    anchors: list[StoredAnchor] = []
    for sec in old[6:16]:
        anchors += anchors_in(sec, word_spans(sec, rng, 4), f"m{sec.ordinal}-")
    results = run_all(anchors, old, new)
    for a in anchors:
        r = results[a.id or ""]
        assert r.status == "position", r.note
        assert r.href == a.href
        assert r.section == a.section + (1 if a.section >= k else 0)
        assert (r.source_start, r.source_end) == (a.source_start, a.source_end)


# ============================================================== (b) typo fixed


def test_txt_typo_fixed_inside_highlights(tmp_path: Path) -> None:
    text = news_text()
    fixed_secs = news_sections()
    rng = random.Random(5)
    spans: list[tuple[int, int]] = []
    for sec in fixed_secs[2:10]:
        spans += word_spans(sec, rng, 4, words=(10, 40))
    # The old edition had typos inside every other highlight (same length).
    typo_text = text
    typos: dict[int, int] = {}
    for k, (a, b) in enumerate(spans):
        if k % 2 == 0:
            typo_text, p = swap_typo(typo_text, a, b, rng)
            typos[k] = p
    old = txt_edition(typo_text, tmp_path, "old.txt")
    anchors = [
        StoredAnchor.from_span(section_at(old, a), a, b, id=str(k))
        for k, (a, b) in enumerate(spans)
    ]
    results = run_all(anchors, old, fixed_secs)
    for k, (a, b) in enumerate(spans):
        r = results[str(k)]
        if k in typos:
            assert r.status == "fuzzy", r.note
            assert (r.source_start, r.source_end) == (a, b)
            assert r.exact == text[a:b] != anchors[k].exact
            assert r.changed and r.edits == 2
            assert "quote changed" in r.note and "→" in r.note
        else:
            assert r.status == "position", r.note
            assert (r.source_start, r.source_end) == (a, b)


def test_epub_typo_fixed_inside_highlights() -> None:
    fixed = moby_sections()
    rng = random.Random(6)
    old: list[SectionText] = list(fixed)
    expected: dict[str, tuple[int, int, int, str]] = {}
    anchors: list[StoredAnchor] = []
    for idx in range(6, 26):
        sec = fixed[idx]
        text = sec.source_text
        for j, (a, b) in enumerate(word_spans(sec, rng, 2, words=(8, 40))):
            if j == 0:
                text, _ = swap_typo(text, a, b, rng)
            hid = f"{sec.ordinal}-{j}"
            expected[hid] = (sec.ordinal, a, b, sec.source_text[a:b])
        old[idx] = replace(sec, source_text=text)
        for hid, (o, a, b, _) in expected.items():
            if o == sec.ordinal:
                anchors.append(StoredAnchor.from_span(old[idx], a, b, id=hid))
    results = run_all(anchors, old, fixed)
    for a in anchors:
        r = results[a.id or ""]
        o, s, e, fixed_text = expected[a.id or ""]
        assert (r.section, r.source_start, r.source_end) == (o, s, e), r.note
        assert r.exact == fixed_text
        if (a.id or "").endswith("-0"):
            assert r.status == "fuzzy" and r.edits == 2, r.note
        else:
            assert r.status == "position", r.note


# ============================================================== (c) paragraph deleted


def _paragraphs(text: str, sep: str) -> list[tuple[int, int]]:
    out, pos = [], 0
    for part in text.split(sep):
        out.append((pos, pos + len(part)))
        pos += len(part) + len(sep)
    return out


def test_txt_paragraph_deleted(tmp_path: Path) -> None:
    text = news_text()
    old = news_sections()
    sec = section_of(old, 5)
    local = sec.source_text
    paras = [
        (a, b)
        for a, b in _paragraphs(local, "\r\n\r\n")
        if b - a > 900 and text.count(local[a:b]) == 1 and a > 2000
    ]
    pa, pb = paras[0]
    cut_a, cut_b = sec.source_start + pa, sec.source_start + pb + 4  # with its blank line
    new = txt_edition(text[:cut_a] + text[cut_b:], tmp_path, "c.txt")
    gone = cut_b - cut_a
    rng = random.Random(7)
    inside = word_spans(sec, rng, 5, words=(1, 25), lo=pa, hi=pb, gap=20)
    # the paragraph's first and last words too
    first = WORD_RE.search(local, pa)
    last = list(WORD_RE.finditer(local, pa, pb))[-3:]
    assert first is not None
    inside += [
        (sec.source_start + first.start(), sec.source_start + first.end()),
        (sec.source_start + last[0].start(), sec.source_start + last[-1].end()),
    ]
    before = word_spans(sec, rng, 4, hi=pa - 40)
    after = word_spans(sec, rng, 4, lo=pb + 40)
    elsewhere = word_spans(section_of(old, 3), rng, 3) + word_spans(section_of(old, 9), rng, 3)
    groups = {"in": inside, "before": before, "after": after, "else": elsewhere}
    anchors = [
        StoredAnchor.from_span(section_at(old, a), a, b, id=f"{g}{k}")
        for g, spans in groups.items()
        for k, (a, b) in enumerate(spans)
    ]
    results = run_all(anchors, old, new)
    for a in anchors:
        r = results[a.id or ""]
        g = (a.id or "").rstrip("0123456789")
        if g == "in":
            assert r.status == "orphaned", (a.exact, r.note)
        elif g == "before":
            assert r.status == "position" and r.source_start == a.source_start
        elif g == "after":
            assert r.status == "exact", r.note
            assert r.source_start == a.source_start - gone and r.section == 5
        else:
            shift = gone if a.source_start > cut_a else 0
            assert r.status == "position"
            assert r.source_start == a.source_start - shift


def test_epub_paragraph_deleted() -> None:
    old = moby_sections()
    idx = next(i for i, s in enumerate(old) if s.href == "OPS/chapter_003.xhtml")
    sec = old[idx]
    local = sec.source_text
    paras = [(a, b) for a, b in _paragraphs(local, "\n") if b - a > 700 and a > 3000]
    pa, pb = paras[1]
    assert sum(s.source_text.count(local[pa:pb]) for s in old) == 1
    new = list(old)
    new[idx] = replace(sec, source_text=local[:pa] + local[pb + 1 :])
    gone = pb + 1 - pa
    rng = random.Random(8)
    inside = word_spans(sec, rng, 6, words=(1, 30), lo=pa, hi=pb, gap=20)
    before = word_spans(sec, rng, 3, hi=pa - 40)
    after = word_spans(sec, rng, 3, lo=pb + 40)
    groups = {"in": inside, "before": before, "after": after}
    anchors = [
        StoredAnchor.from_span(sec, a, b, id=f"{g}{k}")
        for g, spans in groups.items()
        for k, (a, b) in enumerate(spans)
    ]
    anchors += anchors_in(old[idx + 1], word_spans(old[idx + 1], rng, 3), "next")
    results = run_all(anchors, old, new)
    for a in anchors:
        r = results[a.id or ""]
        g = (a.id or "").rstrip("0123456789")
        if g == "in":
            assert r.status == "orphaned", (a.exact, r.note)
        elif g == "after":
            assert r.status == "exact" and r.source_start == a.source_start - gone
        else:
            assert r.status == "position" and r.source_start == a.source_start


# ============================================================== (d) re-wrapped


def rewrap(text: str, width: int) -> str:
    """Every paragraph re-filled at ``width`` with LF line ends (only whitespace changes)."""
    out = []
    for para in re.split(r"(?:\r?\n){2,}", text):
        lines: list[str] = []
        line = ""
        for w in para.split():
            if line and len(line) + 1 + len(w) > width:
                lines.append(line)
                line = w
            else:
                line = f"{line} {w}" if line else w
        lines.append(line)
        out.append("\n".join(lines))
    return "\n\n".join(out)


def _nonspace_index(text: str) -> list[int]:
    return [i for i, c in enumerate(text) if not c.isspace()]


def test_txt_whole_text_rewrapped(tmp_path: Path) -> None:
    text = news_text()
    old = news_sections()
    new_text = rewrap(text, 55)
    new = txt_edition(new_text, tmp_path, "d.txt")
    old_ns, new_ns = _nonspace_index(text), _nonspace_index(new_text)
    rank = {p: k for k, p in enumerate(old_ns)}
    rng = random.Random(9)
    anchors: list[StoredAnchor] = []
    for sec in old[1:12]:
        anchors += anchors_in(sec, word_spans(sec, rng, 4, words=(1, 40)), f"w{sec.ordinal}-")
    results = run_all(anchors, old, new)
    statuses = set()
    for a in anchors:
        r = results[a.id or ""]
        statuses.add(r.status)
        assert r.status in ("exact", "normalized"), r.note
        # the same words: k-th non-space character of the old text -> k-th of the new
        assert r.source_start == new_ns[rank[a.source_start]]
        assert r.source_end == new_ns[rank[a.source_end - 1]] + 1
    assert "normalized" in statuses


def test_txt_crlf_to_lf(tmp_path: Path) -> None:
    text = news_text()
    old = news_sections()
    new = txt_edition(text.replace("\r\n", "\n"), tmp_path, "lf.txt")
    rng = random.Random(10)
    anchors: list[StoredAnchor] = []
    for sec in old[1:8]:
        anchors += anchors_in(sec, word_spans(sec, rng, 4, words=(1, 40)), f"l{sec.ordinal}-")
    results = run_all(anchors, old, new)
    for a in anchors:
        r = results[a.id or ""]
        before = text.count("\r\n", 0, a.source_start)
        inside = a.exact.count("\r\n")
        assert r.status == ("normalized" if inside else "exact") or (
            r.status == "normalized" and "\r\n" in a.prefix + a.suffix
        ), r.note
        assert r.source_start == a.source_start - before
        assert r.source_end == a.source_end - before - inside


# ============================================================== (e) repeated text


def _repeated_edition() -> tuple[str, int, int, int]:
    """The old edition: a paragraph of chapter 6 repeated right after itself.

    Returns (text, start of copy 1, start of copy 2, passage length).
    """
    text = news_text()
    sec = section_of(news_sections(), 6)
    local = sec.source_text
    pa, pb = next(
        (a, b) for a, b in _paragraphs(local, "\r\n\r\n") if 300 < b - a < 700 and a > 3000
    )
    a, b = sec.source_start + pa, sec.source_start + pb
    passage = text[a:b]
    old_text = text[:b] + "\r\n\r\n" + passage + text[b:]
    return old_text, a, b + 4, len(passage)


def _insert_at_chapter_start(text: str, sections: Sequence[SectionText], ordinal: int) -> str:
    sec = section_of(sections, ordinal)
    at = text.index("\r\n\r\n", sec.source_start) + 4
    added = (
        "A paragraph added at the start of the chapter in the new edition, long enough "
        "to move everything after it by more than the length of the repeated passage. " * 6
    )
    return text[:at] + added + "\r\n\r\n" + text[at:]


def test_txt_repeated_passage_highlight_stays_on_its_copy(tmp_path: Path) -> None:
    old_text, c1, c2, n = _repeated_edition()
    old = txt_edition(old_text, tmp_path, "old.txt")
    new_text = _insert_at_chapter_start(old_text, old, 6)
    shift = len(new_text) - len(old_text)
    assert shift > n  # a length-scaled guess of the old place would land on the wrong copy
    new = txt_edition(new_text, tmp_path, "new.txt")
    rng = random.Random(11)
    sec = section_at(old, c2)
    lo1, lo2 = c1 - sec.source_start, c2 - sec.source_start
    spans2 = word_spans(sec, rng, 4, words=(1, 12), lo=lo2 + 40, hi=lo2 + n - 40, gap=10)
    spans1 = [(a - (c2 - c1), b - (c2 - c1)) for a, b in spans2]
    assert all(old_text[a:b] == old_text[x:y] for (a, b), (x, y) in zip(spans1, spans2))
    whole2 = [(c2, c2 + n)]
    anchors = (
        anchors_in(sec, spans2, "second")
        + anchors_in(sec, spans1, "first")
        + anchors_in(sec, whole2, "whole")
    )
    assert lo1 < lo2
    results = run_all(anchors, old, new)
    for a in anchors:
        r = results[a.id or ""]
        assert r.status == "exact", r.note
        assert r.source_start == a.source_start + shift, (a.id, r.note)
        if not (a.id or "").startswith("whole"):
            assert "fit equally well" in r.note and "landmark" in r.note


def test_txt_repeated_passage_with_typo_fixed_in_both_copies(tmp_path: Path) -> None:
    base_text, c1, c2, n = _repeated_edition()
    rng = random.Random(12)
    # the fixed text (new edition) has the passage twice; the old one had a typo in both
    p_typo, p = swap_typo(base_text[c1 : c1 + n], 0, n, rng)
    old_text = base_text[:c1] + p_typo + base_text[c1 + n : c2] + p_typo + base_text[c2 + n :]
    old = txt_edition(old_text, tmp_path, "old.txt")
    new_text = _insert_at_chapter_start(base_text, old, 6)
    shift = len(new_text) - len(base_text)
    new = txt_edition(new_text, tmp_path, "new.txt")
    sec = section_at(old, c2)
    a2 = (c2 + max(0, p - 30), c2 + min(n, p + 40))
    a1 = (a2[0] - (c2 - c1), a2[1] - (c2 - c1))
    anchors = [
        StoredAnchor.from_span(sec, *a2, id="second"),
        StoredAnchor.from_span(sec, *a1, id="first"),
    ]
    results = run_all(anchors, old, new)
    for a in anchors:
        r = results[a.id or ""]
        assert r.status == "fuzzy" and r.edits == 2, r.note
        assert r.source_start == a.source_start + shift, (a.id, r.note)
        assert r.exact == new_text[r.source_start : r.source_end]
        assert edit_distance(r.exact, a.exact) == 2


# ============================================================== never moved silently


def test_highlights_on_text_that_is_gone_are_orphaned_not_moved() -> None:
    """Every highlight of a chapter, against a book without that chapter."""
    old = moby_sections()
    idx = next(i for i, s in enumerate(old) if s.href == "OPS/chapter_005.xhtml")
    new = [s for i, s in enumerate(old) if i != idx]
    rng = random.Random(13)
    sec = old[idx]
    anchors = anchors_in(sec, word_spans(sec, rng, 25, words=(1, 30), gap=10), "gone")
    results = run_all(anchors, old, new)
    for a in anchors:
        r = results[a.id or ""]
        # a quote that still occurs elsewhere with enough of its context would be a
        # legitimate match; none of these do
        assert r.status == "orphaned", (a.exact, r.note)


def _cjk_spans(
    sec: SectionText, rng: random.Random, n: int, lo: int = 0, hi: int | None = None
) -> list[tuple[int, int]]:
    """``n`` spans of 1–30 characters that start and end on Han characters."""
    t = sec.source_text
    hi = len(t) if hi is None else hi
    out: list[tuple[int, int]] = []
    while len(out) < n:
        a = rng.randrange(lo, hi - 2)
        b = min(hi, a + rng.randint(1, 30))
        if not (HAN_RE.match(t[a]) and HAN_RE.match(t[b - 1])):
            continue
        if not any(a < e + 2 * CONTEXT_CHARS and s < b + 2 * CONTEXT_CHARS for s, e in out):
            out.append((a, b))
    return [(sec.source_start + a, sec.source_start + b) for a, b in sorted(out)]


def test_cjk_edition_with_fixed_characters_deleted_paragraph_and_hard_wraps(
    tmp_path: Path,
) -> None:
    """A Chinese novel (CRLF, ideographic-space indents, astral characters)."""
    book = load_book(QIAOSHI)
    text = str(book.source.text)
    fixed = SectionText.from_book(book)
    rng = random.Random(15)
    # (b) one wrong character inside every other highlight of the old edition
    spans: list[tuple[int, int]] = []
    for sec in fixed[1:12]:
        spans += _cjk_spans(sec, rng, 2)
    typo_text, typos = text, set()
    for k, (a, b) in enumerate(spans):
        if k % 2 == 0 and b - a >= 4:
            p = rng.randrange(a + 1, b - 1)
            if HAN_RE.match(text[p]):
                typo_text = typo_text[:p] + ("己" if text[p] != "己" else "已") + typo_text[p + 1 :]
                typos.add(k)
    assert len(typos) >= 5
    old = txt_edition(typo_text, tmp_path, "old.txt")
    anchors = [
        StoredAnchor.from_span(section_at(old, a), a, b, id=str(k))
        for k, (a, b) in enumerate(spans)
    ]
    results = run_all(anchors, old, fixed)
    for k, (a, b) in enumerate(spans):
        r = results[str(k)]
        assert r.status == ("fuzzy" if k in typos else "position"), r.note
        assert (r.source_start, r.source_end) == (a, b) and r.exact == text[a:b]
    # (c) a paragraph deleted
    sec = fixed[5]
    pa, pb = next(
        (a, b) for a, b in _paragraphs(sec.source_text, "\r\n") if b - a > 300 and a > 1000
    )
    cut_a, cut_b = sec.source_start + pa, sec.source_start + pb + 2
    new = txt_edition(text[:cut_a] + text[cut_b:], tmp_path, "c.txt")
    inside = _cjk_spans(sec, rng, 5, lo=pa, hi=pb)
    before = _cjk_spans(sec, rng, 3, hi=pa - 70)
    after = _cjk_spans(sec, rng, 3, lo=pb + 70)
    anchors = anchors_in(sec, inside, "in") + anchors_in(sec, before + after, "out")
    for r in reanchor_all(anchors, fixed, new):
        check_placed(r, new)
        a = r.anchor
        if (a.id or "").startswith("in"):
            assert r.status == "orphaned", (a.exact, r.note)
        else:
            shift = cut_b - cut_a if a.source_start > cut_a else 0
            assert r.placed and r.source_start == a.source_start - shift
    # (d) hard-wrapped every 35 characters with LF: whitespace between CJK characters
    # vanishes when folding, so the quotes are found at the same characters
    wrapped = "\n".join(
        "\n".join(line[i : i + 35] for i in range(0, max(1, len(line)), 35))
        for line in text.split("\r\n")
    )
    new = txt_edition(wrapped, tmp_path, "d.txt")
    old_ns = [i for i, c in enumerate(text) if c not in "\r\n"]
    new_ns = [i for i, c in enumerate(wrapped) if c != "\n"]
    rank = {p: k for k, p in enumerate(old_ns)}
    anchors = []
    for sec in fixed[1:20]:
        anchors += anchors_in(sec, _cjk_spans(sec, rng, 3), f"w{sec.ordinal}-")
    results = run_all(anchors, fixed, new)
    assert {r.status for r in results.values()} <= {"position", "exact", "normalized"}
    for a in anchors:
        r = results[a.id or ""]
        assert r.source_start == new_ns[rank[a.source_start]]
        assert r.source_end == new_ns[rank[a.source_end - 1]] + 1


def test_reanchor_with_only_a_section_hint(tmp_path: Path) -> None:
    """Without the old section's text (only its ordinal, title, start and length)."""
    text = news_text()
    old = news_sections()
    at = section_of(old, 3).source_start
    new = txt_edition(text[:at] + INSERTED_CHAPTER + text[at:], tmp_path, "a.txt")
    sec = section_of(old, 4)
    (a, b) = word_spans(sec, random.Random(14), 1)[0]
    r = reanchor(StoredAnchor.from_span(sec, a, b), new, old_section_hint=sec.hint)
    assert r.status == "position" and r.source_start == a + len(INSERTED_CHAPTER)


def test_a_folded_match_inside_the_hint_beats_a_literal_one_far_away() -> None:
    """Found by Hypothesis: the quote's line break exists literally only chapters away."""
    text = news_text()
    far = text.index("he Project\r\nGutenberg")
    assert text.startswith("The Project Gutenberg") and far > 400_000
    r = calibrate_quote([news_whole()], "he Project\r\nGutenberg", hint=(1, 21))
    assert r.method == "normalized" and (r.source_start, r.source_end) == (1, 21)
    r = calibrate_quote([news_whole()], "he Project\r\nGutenberg")  # no hint: literal wins
    assert r.method == "exact" and r.source_start == far
