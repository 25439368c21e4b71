"""KOReader (crengine) xpointers: parsing both DOM spellings, crengine's text-node rules
on small documents, a round-trip property on every corpus EPUB, and golden xpointers
derived by hand from crengine's rules (docs/koreader.md)."""

from __future__ import annotations

import zipfile
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mindory.errors import MindoryError, XPointerError
from mindory.importers.epub import read_epub
from mindory.reading.xpointer import (
    DOM_20240114,
    DOM_20260812,
    CreView,
    TxtView,
    XPointer,
    fragment_count,
    fragment_of_section,
    offset_of_xpointer,
    parse_xpointer,
    section_of_fragment,
    view_of_document,
    xpointer_of_offset,
)
from tests.conftest import CORPUS, corpus_file

XHTML = "http://www.w3.org/1999/xhtml"
CORPUS_EPUBS = (
    "epub2_en_leaves-of-grass-gutenberg-calibre.epub",
    "epub2_en_romeo-and-juliet-feedbooks.epub",
    "epub2_zh-TW_shuihu-zhuan-haodoo.epub",
    "epub3_en_childrens-literature-nested-toc.epub",
    "epub3_en_georgia-cfi.epub",
    "epub3_en_moby-dick.epub",
    "epub3_en_pepys-diary-large-endnotes.epub",
    "epub3_en_wasteland-noterefs.epub",
    "epub3_ja_kusamakura-vertical-ruby.epub",
)
LEAVES = "epub2_en_leaves-of-grass-gutenberg-calibre.epub"
KUSAMAKURA = "epub3_ja_kusamakura-vertical-ruby.epub"


def doc(body: str, head: str = "") -> bytes:
    return (
        f'<?xml version="1.0" encoding="utf-8"?><html xmlns="{XHTML}"><head>{head}</head>'
        f"{body}</html>"
    ).encode()


def view(body: str) -> CreView:
    return view_of_document(doc(body))


def xp_at(v: CreView, offset: int, *, dom: int = DOM_20240114, fragment: int = 2) -> str:
    return xpointer_of_offset(v, offset, fragment=fragment, fragments=5, dom_version=dom)


def back(v: CreView, xpointer: str) -> int:
    return offset_of_xpointer(v, parse_xpointer(xpointer))


def texts(v: CreView) -> list[str]:
    return [v.node_text(k) for k in range(len(v.nodes))]


# --------------------------------------------------------------------------- parsing


def test_parse_the_kosync_form() -> None:
    xp = parse_xpointer("/body/DocFragment[12]/body/div[2]/p[5]/text().17")
    assert xp == XPointer(12, (("body", None), ("div", 2), ("p", 5)), 1, 17, (("body", None),))


def test_both_dom_spellings_name_the_same_node() -> None:
    old = parse_xpointer("/body/DocFragment[3]/body/div/p[2]/text().4")
    new = parse_xpointer("/body[1]/DocFragment[3]/body[1]/div[1]/p[2]/text()[1].4")
    assert (old.fragment, old.text_index, old.offset) == (new.fragment, new.text_index, new.offset)
    assert [(n, i or 1) for n, i in old.steps] == [(n, i or 1) for n, i in new.steps]
    v = view("<body><div><p>a</p><p>Hello world</p></div></body>")
    assert back(v, "/body/DocFragment[3]/body/div/p[2]/text().4") == back(
        v, "/body[1]/DocFragment[3]/body[1]/div[1]/p[2]/text()[1].4"
    )


def test_bare_forms() -> None:
    assert parse_xpointer("/body/DocFragment[3].0") == XPointer(3, (), None, 0, (("body", None),))
    xp = parse_xpointer("/body/DocFragment[3]/body/div/img")
    assert (xp.steps[-1], xp.text_index, xp.offset) == (("img", None), None, None)
    assert parse_xpointer("/body/DocFragment/body/p/text()").fragment == 1
    # the old non-normalized form (DOM < 20200223) names boxing elements: skipped
    assert parse_xpointer("/body/DocFragment[2]/body/autoBoxing/p/text().1").steps == (
        ("body", None),
        ("p", None),
    )
    plain = parse_xpointer("/FictionBook/body/p[3]/text().5")
    assert plain.fragment is None and plain.steps[0] == ("FictionBook", None)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "body/DocFragment[1]",
        "/body/DocFragment[0]/body",
        "/body/DocFragment[x]/body",
        "/body/DocFragment[1]/body/p/text().",
        "/body/DocFragment[1]/body/p/text().-1",
        "/body/DocFragment[1]/body/p/text().1.2",
        "/body/DocFragment[1]/body/p/text()/b",
        "/body/DocFragment[1]/body/p/node().1",
        "/body/DocFragment[1]/body/3/text().1",
        "/body/DocFragment[1]/DocFragment[2]/body",
        "/body/DocFragment[1]/body/p[1",
        "/body/DocFragment[1]//p",
        "/body/DocFragment[1]/body/p /text().1",
        "#chapter1",
        "/" + "a/" * 3000,
    ],
)
def test_malformed_xpointers_raise(bad: str) -> None:
    with pytest.raises(XPointerError):
        parse_xpointer(bad)
    assert issubclass(XPointerError, MindoryError)


# ------------------------------------------------------------------ crengine's rules


def test_whitespace_runs_collapse_to_one_space_not_trimmed() -> None:
    v = view("<body><p>  Hello \n\t world  </p></body>")
    # the run is the block's first child but not blank: kept, each run -> one space
    assert texts(v) == [" Hello world "]
    src = v.source_text
    assert xp_at(v, src.index("H")) == "/body/DocFragment[2]/body/p/text().1"
    assert xp_at(v, src.index("w")) == "/body/DocFragment[2]/body/p/text().7"
    # inside a collapsed run: forward to the next kept character
    assert back(v, xp_at(v, src.index("\t"))) == src.index("w")
    assert v.canonical(src.index("\n")) == src.index("w")


def test_blank_first_child_of_block_dropped_and_mixed_content_whitespace() -> None:
    v = view("<body>\n  <div>\n <p>One</p>\n <p>Two <i>x</i> <b>y</b></p>\n</div>\n</body>")
    assert texts(v) == ["One", "Two ", "x", " ", "y"]
    src = v.source_text
    assert xp_at(v, src.index("Two")) == "/body/DocFragment[2]/body/div/p[2]/text()[1].0"
    # the blank between </i> and <b> sits between two inlines: kept (text()[2])
    assert xp_at(v, src.index("x") + 1) == "/body/DocFragment[2]/body/div/p[2]/text()[2].0"
    # whitespace crengine removed maps forward to the next kept character
    assert v.canonical(src.index("One") + 3) == src.index("Two")


def test_whitespace_between_text_and_a_block_in_mixed_content() -> None:
    v = view("<body><div>Intro <p>para</p> tail <span>s</span> </div></body>")
    # mixed content: blanks next to the block go; text runs stay whole
    assert texts(v) == ["Intro ", "para", " tail ", "s"]


def test_trailing_blanks_split_by_comments_keep_all_but_the_last() -> None:
    # autoboxChildren in the crengine KOReader pins strips one trailing blank node only
    v = view("<body><div><p>a</p>x<!--c--> <!--d--> <p>b</p></div></body>")
    assert texts(v) == ["a", "x", " ", "b"]


def test_blanks_around_blocks_inside_pre_stay() -> None:
    v = view("<body><pre><div>a</div>\n<div>b</div></pre></body>")
    assert texts(v) == ["a", "\n", "b"]


def test_inline_holding_a_block() -> None:
    v = view("<body><p><span> <div>in</div> after</span></p></body>")
    # the blank next to the block inside an inline goes, the other text stays
    assert texts(v) == ["in", " after"]


def test_text_in_elements_without_text_is_dropped() -> None:
    v = view("<body><table>\n<tr>\n<td> a </td>\n<td>b</td></tr></table></body>")
    assert texts(v) == [" a ", "b"]
    assert xp_at(v, v.source_text.index("b")) == (
        "/body/DocFragment[2]/body/table/tr/td[2]/text().0"
    )


def test_pre_keeps_whitespace_expands_tabs_and_strips_a_leading_newline() -> None:
    v = view("<body><pre>\nab\tc\n  d</pre></body>")
    # ExpandTabs counts the newline as a column before crengine strips it: 5 spaces
    assert texts(v) == ["ab     c\n  d"]
    src = v.source_text
    assert xp_at(v, src.index("c")) == "/body/DocFragment[2]/body/pre/text().7"
    assert back(v, "/body/DocFragment[2]/body/pre/text().5") == src.index("\t")
    assert xp_at(v, 0) == "/body/DocFragment[2]/body/pre/text().0"  # the stripped newline


def test_comments_split_text_nodes() -> None:
    v = view("<body><p>one<!-- c -->two</p></body>")
    assert texts(v) == ["one", "two"]
    assert xp_at(v, v.source_text.index("two")) == "/body/DocFragment[2]/body/p/text()[2].0"


def test_same_name_siblings_and_explicit_first_index() -> None:
    v = view("<body><div><p>a</p></div><div><p>b</p><p>c</p></div></body>")
    src = v.source_text
    assert xp_at(v, src.index("a")) == "/body/DocFragment[2]/body/div[1]/p/text().0"
    assert xp_at(v, src.index("b")) == "/body/DocFragment[2]/body/div[2]/p[1]/text().0"
    assert xp_at(v, src.index("a"), dom=DOM_20260812) == (
        "/body[1]/DocFragment[2]/body[1]/div[1]/p[1]/text()[1].0"
    )
    only = xpointer_of_offset(v, 0, fragment=1, fragments=1)
    assert only.startswith("/body/DocFragment/body/")


def test_ruby_text_is_in_the_dom() -> None:
    v = view("<body><p><ruby> 漢 <rt>かん</rt> </ruby>字</p></body>")
    # the blank after <rt> (at the ruby's edge) goes; rt's text is a text node
    assert texts(v) == [" 漢 ", "かん", "字"]
    src = v.source_text
    assert xp_at(v, src.index("か")) == "/body/DocFragment[2]/body/p/ruby/rt/text().0"


def test_characters_outside_the_bmp_count_once() -> None:
    v = view("<body><p>a\U00020000b\U0001f600c</p></body>")
    src = v.source_text
    assert xp_at(v, src.index("c")) == "/body/DocFragment[2]/body/p/text().4"
    assert back(v, "/body/DocFragment[2]/body/p/text().2") == src.index("b")


def test_long_text_runs_split_at_8192() -> None:
    words = " ".join(["word"] * 3000)  # 14,999 characters, no markup
    v = view(f"<body><p>{words}</p></body>")
    assert [len(t) for t in texts(v)] == [8190, 6809]
    assert xp_at(v, 8190) == "/body/DocFragment[2]/body/p/text()[2].0"
    assert xp_at(v, 8189) == "/body/DocFragment[2]/body/p/text()[1].8189"


def test_the_8192_cut_counts_raw_characters() -> None:
    # "a&amp;b " is 8 raw characters and 4 of text: crengine cuts after 1,024 units
    v = view(f"<body><p>{'a&amp;b ' * 1500}</p></body>")
    assert [len(t) for t in texts(v)] == [4096, 1904]
    assert xp_at(v, 4096) == "/body/DocFragment[2]/body/p/text()[2].0"


def test_svg_spine_item() -> None:
    svg = (
        b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg">'
        b"<title>Map</title><g><text>North  <tspan>pole</tspan></text></g></svg>"
    )
    v = view_of_document(svg)
    src = v.source_text
    # body/autoBoxing/svg: autoBoxing is transparent; SVG text is parsed as PRE
    assert xp_at(v, src.index("pole")) == "/body/DocFragment[2]/body/svg/g/text/tspan/text().0"
    assert texts(v) == ["Map", "North  ", "pole"]


def test_no_text_and_placeholder_fragments() -> None:
    v = view_of_document(None)
    assert xp_at(v, 0) == "/body/DocFragment[2]/body.0"
    # crengine's placeholder for an item it cannot read holds no mindory text
    assert back(v, "/body/DocFragment[2]/body/pre/text().3") == 0
    img = view('<body><div><img src="a.png" alt=""/></div></body>')
    assert xp_at(img, 0) == "/body/DocFragment[2]/body.0"
    assert back(img, "/body/DocFragment[2]/body/div/img.0") == 0


def test_errors_name_the_problem() -> None:
    v = view("<body><p>short</p></body>")
    with pytest.raises(XPointerError, match="p\\[2\\]"):
        back(v, "/body/DocFragment[2]/body/p[2]/text().0")
    with pytest.raises(XPointerError, match="past the end"):
        back(v, "/body/DocFragment[2]/body/p/text().6")
    with pytest.raises(XPointerError, match="text\\(\\)\\[2\\]"):
        back(v, "/body/DocFragment[2]/body/p/text()[2].0")
    with pytest.raises(XPointerError, match="outside the section"):
        xp_at(v, 99)


def test_spine_mapping() -> None:
    types = [
        "application/xhtml+xml",
        "image/jpeg",
        "application/xhtml+xml",
        "image/svg+xml",
        "application/xhtml+xml",
    ]
    # DOM 20240114: every itemref has a DocFragment (image ones a placeholder)
    assert [fragment_of_section(k, types) for k in range(5)] == [1, 2, 3, 4, 5]
    assert section_of_fragment(4, types) == 3
    # older DOMs: only application/xhtml+xml itemrefs
    assert fragment_of_section(4, types, dom_version=20200824) == 3
    assert section_of_fragment(2, types, dom_version=20200824) == 2
    assert fragment_count(types, dom_version=20200824) == 3
    with pytest.raises(XPointerError, match="outside the spine"):
        section_of_fragment(6, types)


# ---------------------------------------------------------------- the corpus books


@cache
def corpus_book(name: str) -> tuple[Any, list[CreView], tuple[str, ...]]:
    path = corpus_file(name)
    book = read_epub(path)
    with zipfile.ZipFile(path) as z:
        views = [
            view_of_document(z.read(s.href) if s.parser != "none" else None) for s in book.sections
        ]
    return book, views, tuple(s.media_type for s in book.sections)


def test_views_rebuild_the_source_text_of_every_corpus_section() -> None:
    for name in CORPUS_EPUBS:
        book, views, _ = corpus_book(name)
        for section, v in zip(book.sections, views, strict=True):
            assert v.source_text == section.source_text, (name, section.ordinal)


def _crengine_char(source_char: str) -> set[str]:
    return {" ", "\n"} if source_char in "\t\r\n" else {source_char}


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_round_trip_on_corpus_epubs(data: st.DataObject) -> None:
    if not CORPUS.exists():
        corpus_file(CORPUS_EPUBS[0])  # skips loudly
    name = data.draw(st.sampled_from(CORPUS_EPUBS), label="book")
    book, views, types = corpus_book(name)
    ordinal = data.draw(st.integers(0, len(book.sections) - 1), label="section")
    v = views[ordinal]
    source = book.sections[ordinal].source_text
    offset = data.draw(st.integers(0, len(source)), label="offset")
    for dom in (DOM_20240114, DOM_20260812):
        xpointer = xpointer_of_offset(
            v,
            offset,
            fragment=fragment_of_section(ordinal, types, dom),
            fragments=fragment_count(types, dom),
            dom_version=dom,
        )
        xp = parse_xpointer(xpointer)
        assert section_of_fragment(xp.fragment or 0, types, dom) == ordinal
        back_offset = offset_of_xpointer(v, xp)
        assert back_offset == v.canonical(offset)
        point = v.point_at(offset)
        if point is None:
            continue
        node = v.node_text(point.node)
        if point.offset < len(node):
            # the named text node holds the character at the offset it returns...
            assert node[point.offset] in _crengine_char(source[back_offset])
            # ...and nothing crengine keeps lies between the offset and that character
            assert back_offset >= offset
            assert back_offset == offset or v.canonical(back_offset) == back_offset


# ------------------------------------------------------------------ golden cases


def _golden(name: str, ordinal: int, quote: str, skip: int = 0) -> tuple[str, int, CreView]:
    book, views, types = corpus_book(name)
    source = book.sections[ordinal].source_text
    offset = source.index(quote) + skip
    xpointer = xpointer_of_offset(
        views[ordinal],
        offset,
        fragment=fragment_of_section(ordinal, types),
        fragments=fragment_count(types),
    )
    return xpointer, offset, views[ordinal]


@pytest.mark.parametrize(
    ("ordinal", "quote", "expected"),
    [
        # "<h2 ...>As I Ponder'd in Silence</h2>": the body's blank first text is dropped
        (5, "As I Ponder'd", "/body/DocFragment[6]/body/h2/text().0"),
        # "<div class="pgmonospaced">&#160; As I ponder'd in silence,<br/>...": text()[1],
        # NBSP is no whitespace to crengine, so the line starts at .2
        (5, "As I ponder'd", "/body/DocFragment[6]/body/div[1]/text()[1].2"),
        (5, "Returning upon", "/body/DocFragment[6]/body/div[1]/text()[2].2"),
        # two <br/> in a row make no text node between them
        (5, "Be it so", "/body/DocFragment[6]/body/div[1]/text()[12].2"),
    ],
)
def test_golden_leaves_of_grass(ordinal: int, quote: str, expected: str) -> None:
    xpointer, offset, v = _golden(LEAVES, ordinal, quote)
    assert xpointer == expected
    assert back(v, expected) == offset


@pytest.mark.parametrize(
    ("quote", "expected"),
    [
        # <section><h2>一</h2><p><span><ruby>山路<rt>やまみち</rt></ruby>を登りながら…
        ("山路やまみち", "/body/DocFragment[3]/body/section/p[1]/span/ruby/text().0"),
        ("やまみち", "/body/DocFragment[3]/body/section/p[1]/span/ruby/rt/text().0"),
        ("を登りながら", "/body/DocFragment[3]/body/section/p[1]/span/text().0"),
        # <p><span><ruby>智<rt>ち</rt></ruby>に働けば<ruby>角<rt>かど</rt></ruby>が立つ。</span>
        ("智ち", "/body/DocFragment[3]/body/section/p[2]/span[1]/ruby[1]/text().0"),
        ("に働けば", "/body/DocFragment[3]/body/section/p[2]/span[1]/text()[1].0"),
        ("が立つ", "/body/DocFragment[3]/body/section/p[2]/span[1]/text()[2].0"),
        ("とかくに", "/body/DocFragment[3]/body/section/p[2]/span[4]/text().0"),
    ],
)
def test_golden_kusamakura_ruby(quote: str, expected: str) -> None:
    xpointer, offset, v = _golden(KUSAMAKURA, 2, quote)
    assert xpointer == expected
    assert back(v, expected) == offset


# ------------------------------------------------------------------ plain text


def test_plain_text_pre_formatted_lines() -> None:
    text = "line one\r\n\r\n  indented\tline\r\n-----\r\nlast"
    v = TxtView(text)
    assert [text[ln.start : ln.end] for ln in v.pre] == [
        "line one",
        "  indented\tline",
        "-----",
        "last",
    ]
    assert len(v.empty) == 1
    # verbatim: leading blanks and tabs count
    assert v.xpointer_at(text.index("indented")) == "/FictionBook/body/pre[2]/text().2"
    assert v.xpointer_at(text.index("line\r\n-")) == "/FictionBook/body/pre[2]/text().11"
    assert v.xpointer_at(text.index("ne one")) == "/FictionBook/body/pre[1]/text().2"
    new = v.xpointer_at(text.index("ne one"), explicit_first=True)
    assert new == "/FictionBook[1]/body[1]/pre[1]/text()[1].2"
    # a line break and a blank line map forward to the next line
    assert v.xpointer_at(text.index("\r\n")) == "/FictionBook/body/pre[2]/text().0"
    # a rule line is "* * *" in crengine: its inside maps to its start
    rule = text.index("-----")
    assert v.xpointer_at(rule + 3) == "/FictionBook/body/pre[3]/text().0"
    assert v.resolve(parse_xpointer("/FictionBook/body/pre[3]/text().3")) == rule
    assert v.resolve(parse_xpointer("/FictionBook/body/empty-line")) == text.index("\r\n") + 2
    # past the last character: the end of the last line
    assert v.xpointer_at(len(text)) == "/FictionBook/body/pre[4]/text().4"
    for offset in range(len(text) + 1):
        back_offset = v.resolve(parse_xpointer(v.xpointer_at(offset)))
        assert back_offset == v.canonical(offset)
        inside_rule = rule < offset < rule + 5
        assert back_offset >= offset or inside_rule or offset > text.index("last")


def test_plain_text_long_lines_and_gutenberg_header() -> None:
    long = "x" * 1999 + " " + "y" * 10
    v = TxtView(long)
    assert [ln.end - ln.start for ln in v.pre] == [2000, 10]
    assert v.xpointer_at(2000) == "/FictionBook/body/pre[2]/text().0"
    header = "The Project Gutenberg Etext of Walden, by Thoreau\n...\n*END* legal\n\nWALDEN\n"
    g = TxtView(header)
    assert [header[ln.start : ln.end] for ln in g.pre] == ["WALDEN"]
    assert g.xpointer_at(0) == "/FictionBook/body/pre/text().0"


def test_plain_text_errors() -> None:
    v = TxtView("one\ntwo\n")
    with pytest.raises(XPointerError, match="Auto-detect TXT"):
        v.resolve(parse_xpointer("/FictionBook/body/section/p[3]/text().1"))
    with pytest.raises(XPointerError, match="pre\\[9\\]"):
        v.resolve(parse_xpointer("/FictionBook/body/pre[9]/text().0"))
    with pytest.raises(XPointerError, match="past the end"):
        v.resolve(parse_xpointer("/FictionBook/body/pre[2]/text().4"))
    with pytest.raises(XPointerError, match="starts /FictionBook/body"):
        v.resolve(parse_xpointer("/html/body/p/text().0"))


@pytest.mark.parametrize(
    "name",
    ["txt_en_news-from-nowhere_ascii_crlf.txt", "txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt"],
)
def test_plain_text_round_trip_on_corpus(name: str) -> None:
    from mindory.text.encoding import decode_bytes

    text = decode_bytes(corpus_file(name).read_bytes()).text
    v = TxtView(text)
    step = max(1, len(text) // 3000)
    for offset in range(0, len(text) + 1, step):
        xp = parse_xpointer(v.xpointer_at(offset))
        back_offset = v.resolve(xp)
        assert back_offset == v.canonical(offset)
        assert back_offset >= offset or offset >= v.pre[-1].start
        if back_offset < len(text) and back_offset < v.pre[-1].end:
            assert text[back_offset] not in "\r\n"
