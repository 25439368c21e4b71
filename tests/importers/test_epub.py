"""EPUB importer: normalization details on small hand-built books."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from lxml import etree

from mindory.importers import epub as epub_mod
from mindory.importers.epub import read_epub
from mindory.importers.xhtml import (
    _UNICODE_SPACES,
    ParsedDocument,
    expand_html_entities,
    extract_text,
    parse_content,
)
from mindory.text.records import (
    CAPTION,
    HEADING,
    LIST_ITEM,
    PARAGRAPH,
    PREFORMATTED,
    QUOTE,
    TABLE_ROW,
    Book,
    NormalizeProfile,
    Section,
)

XHTML_HEAD = '<?xml version="1.0" encoding="utf-8"?>\n'


def xhtml(body: str, *, doctype: str = "", head: str = "<title>t</title>") -> str:
    return (
        f"{XHTML_HEAD}{doctype}"
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
        f"<head>{head}</head><body>{body}</body></html>"
    )


def make_epub(
    path: Path,
    docs: dict[str, str | bytes],
    *,
    media_types: dict[str, str] | None = None,
    extra_manifest: str = "",
    spine: str | None = None,
    metadata: str = "<dc:title>Test Book</dc:title><dc:language>en</dc:language>",
    spine_attrs: str = "",
    extra_files: dict[str, bytes | str] | None = None,
    hrefs: dict[str, str] | None = None,
) -> Path:
    """A minimal EPUB: OEBPS/content.opf lists ``docs`` (name -> content) in order."""
    media_types = media_types or {}
    hrefs = hrefs or {}
    items = "".join(
        f'<item id="d{i}" href="{hrefs.get(name, name)}" '
        f'media-type="{media_types.get(name, "application/xhtml+xml")}"/>'
        for i, name in enumerate(docs)
    )
    refs = (
        spine
        if spine is not None
        else "".join(f'<itemref idref="d{i}"/>' for i in range(len(docs)))
    )
    opf = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f'<dc:identifier id="id">urn:test:1</dc:identifier>{metadata}</metadata>'
        f"<manifest>{items}{extra_manifest}</manifest>"
        f"<spine{spine_attrs}>{refs}</spine></package>"
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        zf.writestr("OEBPS/content.opf", opf, compress_type=zipfile.ZIP_DEFLATED)
        for name, content in docs.items():
            zf.writestr(f"OEBPS/{name}", content, compress_type=zipfile.ZIP_DEFLATED)
        for name, content in (extra_files or {}).items():
            zf.writestr(name, content, compress_type=zipfile.ZIP_DEFLATED)
    return path


def check_section(section: Section) -> None:
    """The invariants every section keeps (DESIGN §1)."""
    text = section.normalized_text
    section.offset_map.check(section.source_text, text)
    assert text == text.strip()
    assert "\n\n\n" not in text
    prev = 0
    for block in section.blocks:
        piece = text[block.start : block.end]
        assert piece and piece == piece.strip(), block
        assert text[prev : block.start] == ("\n\n" if block.index else "")
        assert section.offset_map.source_span(block.start, block.end) == (
            block.source_start,
            block.source_end,
        )
        src = section.source_text[block.source_start : block.source_end]
        assert src == src.strip(), "trimmed whitespace inside a block's source span"
        prev = block.end
    assert prev == len(text)


def one(tmp_path: Path, body: str, **kwargs: object) -> Section:
    """Import a one-document book and return its checked section."""
    book = read_epub(make_epub(tmp_path / "b.epub", {"c.xhtml": xhtml(body)}, **kwargs))  # type: ignore[arg-type]
    assert book.format == "epub"
    section = book.sections[0]
    check_section(section)
    return section


def norm(tmp_path: Path, body: str) -> str:
    return one(tmp_path, body).normalized_text


# ----------------------------------------------------------------- whitespace


def test_inline_whitespace(tmp_path: Path) -> None:
    s = one(tmp_path, "<p>a <i>b</i> c</p>")
    assert s.source_text == "a b c"
    assert s.normalized_text == "a b c"
    assert [(b.kind, b.start, b.end) for b in s.blocks] == [(PARAGRAPH, 0, 5)]


def test_whitespace_collapses_and_trims(tmp_path: Path) -> None:
    s = one(tmp_path, "\n  <p>\n  Hello,\n\t  world  </p>\n<p>  Next </p>\n")
    assert s.normalized_text == "Hello, world\n\nNext"
    first = s.blocks[0]
    assert s.source_text[first.source_start : first.source_end] == "Hello,\n\t  world"


def test_spaces_across_inline_elements_do_not_double(tmp_path: Path) -> None:
    assert norm(tmp_path, "<p>a <b> b </b> c<i></i> <i> </i>d</p>") == "a b c d"


def test_leading_inline_element(tmp_path: Path) -> None:
    s = one(tmp_path, "<span>Lead</span> text <p>para</p> tail")
    assert s.normalized_text == "Lead text\n\npara\n\ntail"
    assert [b.kind for b in s.blocks] == [PARAGRAPH] * 3


def test_empty_paragraphs_make_no_blocks(tmp_path: Path) -> None:
    s = one(tmp_path, "<p></p><p> </p><p>&#160;</p><div>\n</div><p>x</p><p>\u3000</p>")
    assert s.normalized_text == "x"
    assert len(s.blocks) == 1


def test_nbsp_kept_inside_a_line(tmp_path: Path) -> None:
    assert (
        norm(tmp_path, "<p>Mr.&#160;<i>Pepys</i> and\u00a0wife</p>")
        == "Mr.\u00a0Pepys and\u00a0wife"
    )


# ------------------------------------------------------------------- breaks


def test_br_is_a_line_break(tmp_path: Path) -> None:
    s = one(tmp_path, "<p>line one <br/> line two<br/></p>")
    assert s.normalized_text == "line one\nline two"
    assert len(s.blocks) == 1


def test_br_runs_are_paragraph_breaks(tmp_path: Path) -> None:
    s = one(tmp_path, "<div><br/>a<br/><br/>b<br/>\n <br/><br/>c</div>")
    assert s.normalized_text == "a\n\nb\n\nc"
    assert len(s.blocks) == 3


def test_ideographic_indents_dropped_at_line_start(tmp_path: Path) -> None:
    body = "<div>\u3000\u3000第一<br/>\r\n\u3000\u3000第二\u3000中<br/><br/>\u3000第三</div>"
    s = one(tmp_path, body)
    assert s.normalized_text == "第一\n第二\u3000中\n\n第三"


def test_table_rows_and_cells(tmp_path: Path) -> None:
    body = (
        "<table><caption>Cap</caption><tr>\n<th>a</th>\n<td> b </td></tr>"
        "<tr><td></td><td>c</td></tr></table>"
    )
    s = one(tmp_path, body)
    assert s.normalized_text == "Cap\n\na\tb\n\nc"
    assert [b.kind for b in s.blocks] == [CAPTION, TABLE_ROW, TABLE_ROW]


def test_nested_blocks(tmp_path: Path) -> None:
    body = (
        "<div>intro<p>para</p>tail<section><h2>Head</h2></section></div>"
        "<blockquote><p>quoted</p>more</blockquote>"
        "<ul><li>one</li><li>two<ul><li><p>sub</p></li></ul></li></ul><hr/><dl><dt>t</dt><dd>d</dd></dl>"
    )
    s = one(tmp_path, body)
    assert s.normalized_text == (
        "intro\n\npara\n\ntail\n\nHead\n\nquoted\n\nmore\n\none\n\ntwo\n\nsub\n\nt\n\nd"
    )
    assert [b.kind for b in s.blocks] == [
        PARAGRAPH,
        PARAGRAPH,
        PARAGRAPH,
        HEADING,
        QUOTE,
        QUOTE,
        LIST_ITEM,
        LIST_ITEM,
        LIST_ITEM,
        LIST_ITEM,
        LIST_ITEM,
    ]


def test_heading_levels(tmp_path: Path) -> None:
    body = "".join(f"<h{n}>H{n}</h{n}>" for n in range(1, 7)) + "<p>p</p>"
    s = one(tmp_path, body)
    assert [(b.kind, b.level) for b in s.blocks] == [(HEADING, n) for n in range(1, 7)] + [
        (PARAGRAPH, None)
    ]


def test_pre_keeps_whitespace(tmp_path: Path) -> None:
    s = one(tmp_path, "<p>x</p><pre>\n  code  <b>x</b>\n\tindented\n\n\n\nend  \n</pre><p>y</p>")
    assert s.normalized_text == "x\n\ncode  x\n\tindented\n\nend\n\ny"
    assert [b.kind for b in s.blocks] == [PARAGRAPH, PREFORMATTED, PARAGRAPH]


# ----------------------------------------------------------- dropped content


def test_ruby_keeps_base_text_only(tmp_path: Path) -> None:
    s = one(
        tmp_path,
        "<p><ruby>漢<rp>(</rp><rt>かん</rt><rp>)</rp></ruby>字 <ruby>山路<rt>やまみち</rt></ruby></p>",
    )
    assert s.source_text == "漢(かん)字 山路やまみち"
    assert s.normalized_text == "漢字 山路"
    # The reading maps to nothing: the last block ends at the end of the base text.
    assert s.source_text[s.blocks[0].source_start : s.blocks[0].source_end] == "漢(かん)字 山路"


def test_structure_inside_dropped_content_adds_nothing(tmp_path: Path) -> None:
    body = "<p><ruby>漢<rt>か<br/>ん</rt></ruby>字 a<template><p>t</p><pre>x</pre></template>b</p><p>c</p>"
    s = one(tmp_path, body)
    assert s.normalized_text == "漢字 ab\n\nc"
    assert [b.kind for b in s.blocks] == [PARAGRAPH, PARAGRAPH]


def test_script_style_template_dropped(tmp_path: Path) -> None:
    body = "<p>a<script>var x = 1;</script>b</p><style>p {}</style><template><p>t</p></template><p>c</p>"
    s = one(tmp_path, body)
    assert s.normalized_text == "ab\n\nc"
    assert "var x = 1;" in s.source_text


def test_invisible_characters_deleted(tmp_path: Path) -> None:
    s = one(tmp_path, "<p>\ufeffhy\u00adphen zero\u200bwidth word\u2060joiner \u00ad end</p>")
    assert s.normalized_text == "hyphen zerowidth wordjoiner end"
    assert "\u00ad" in s.source_text


# ------------------------------------------------------- markup and entities


def test_comments_split_text_but_add_nothing(tmp_path: Path) -> None:
    s = one(tmp_path, "<p>foo<!-- a comment -->bar<?pi data?>baz</p><!-- x --> <p>z</p>")
    assert s.source_text == "foobarbaz z"
    assert s.normalized_text == "foobarbaz\n\nz"


def test_cdata_is_text(tmp_path: Path) -> None:
    s = one(tmp_path, "<p><![CDATA[x < y &nbsp;]]> ok</p>")
    assert s.source_text == "x < y &nbsp; ok"
    assert s.normalized_text == "x < y &nbsp; ok"


def test_html_named_entities_expanded(tmp_path: Path) -> None:
    body = "<p title='&eacute;'>a&nbsp;b&mdash;c &amp; &lt;d&gt; &hellip;<!-- &nbsp; --></p>"
    s = one(tmp_path, body)
    assert s.source_text == "a\u00a0b\u2014c & <d> \u2026"
    assert s.normalized_text == s.source_text
    assert s.dom.parser == "xml"


def test_entity_expansion_skips_comments_cdata_and_doctype() -> None:
    data = b'<!DOCTYPE x [<!ENTITY e "&nbsp;">]><x><!-- &nbsp; --><![CDATA[&nbsp;]]>&nbsp;&e;</x>'
    out, unknown = expand_html_entities(data)
    assert (
        out
        == b'<!DOCTYPE x [<!ENTITY e "&nbsp;">]><x><!-- &nbsp; --><![CDATA[&nbsp;]]>&#160;&e;</x>'
    )
    assert unknown == 1


def test_internal_dtd_entities_contribute_nothing(tmp_path: Path) -> None:
    doc = xhtml("<p>a&custom;b</p>", doctype='<!DOCTYPE html [<!ENTITY custom "XYZ">]>')
    book = read_epub(make_epub(tmp_path / "b.epub", {"c.xhtml": doc}))
    s = book.sections[0]
    check_section(s)
    assert s.source_text == "ab"
    assert s.dom.parser == "xml"
    assert any("entity reference" in w for w in book.warnings)
    assert not list(s.dom.root.iter(etree.Entity))


@pytest.mark.parametrize("name", ["foo-bar", "x.y", "_u", "émoi"])  # NCNames (namespaced XML)
def test_internal_dtd_entities_with_any_xml_name_contribute_nothing(
    tmp_path: Path, name: str
) -> None:
    """Entity names are XML Names, wider than HTML's: none may leave "&name;" in the text."""
    doc = xhtml(
        f"<p>a&{name};b <i>c</i>&{name};</p>",
        doctype=f'<!DOCTYPE html [<!ENTITY {name} "XYZ">]>',
    )
    book = read_epub(make_epub(tmp_path / "b.epub", {"c.xhtml": doc}))
    s = book.sections[0]
    check_section(s)
    assert s.source_text == "ab c"
    assert not list(s.dom.root.iter(etree.Entity))
    assert any("entity reference" in w for w in book.warnings)
    # The CFI table describes the same text: every position round-trips.
    for p in range(len(s.source_text) + 1):
        assert s.dom.cfi.resolve(s.dom.cfi.point(p)) == (p, p)


def test_unicode_normalization_nfc_and_nfkc(tmp_path: Path) -> None:
    body = "<p>Cafe\u0301 \ufe3d水滸傳\ufe3e</p>"
    path = make_epub(tmp_path / "b.epub", {"c.xhtml": xhtml(body)})
    nfc = read_epub(path).sections[0]
    check_section(nfc)
    assert nfc.normalized_text == "Caf\u00e9 \ufe3d水滸傳\ufe3e"
    nfkc = read_epub(path, NormalizeProfile(unicode_form="NFKC")).sections[0]
    check_section(nfkc)
    assert nfkc.normalized_text == "Caf\u00e9 \u300a水滸傳\u300b"
    raw = read_epub(path, NormalizeProfile(unicode_form=None)).sections[0]
    assert raw.normalized_text == raw.source_text


def test_edge_whitespace_set_matches_str_isspace() -> None:
    assert set(_UNICODE_SPACES) == {chr(c) for c in range(0x110000) if chr(c).isspace()}


# -------------------------------------------------------------- parsers


def test_malformed_document_falls_back_to_html(tmp_path: Path) -> None:
    doc = XHTML_HEAD + "<html><body><p>one &eacute;<br>two<p>three</body></html>"
    book = read_epub(make_epub(tmp_path / "b.epub", {"c.xhtml": doc}))
    s = book.sections[0]
    check_section(s)
    assert s.parser == "html" and s.dom.parser == "html"
    assert s.normalized_text == "one \u00e9\ntwo\n\nthree"
    assert any("parsed as HTML" in w for w in book.warnings)


def test_html_named_files_are_parsed_as_xml_first(tmp_path: Path) -> None:
    # An HTML parse would let the self-closed <a/> swallow the following text.
    doc = xhtml('<p><a id="note"/>Text after the anchor.</p>')
    book = read_epub(
        make_epub(tmp_path / "b.epub", {"c.html": doc}, media_types={"c.html": "text/html"})
    )
    s = book.sections[0]
    assert s.parser == "xml"
    assert s.media_type == "text/html"
    assert s.dom.id_offsets["note"] == 0
    anchor = s.dom.body.find(".//{http://www.w3.org/1999/xhtml}a")
    assert anchor.text is None and anchor.tail == "Text after the anchor."


def test_utf16_document(tmp_path: Path) -> None:
    doc = xhtml("<p>\u00e9t\u00e9 &nbsp;x</p>").replace('encoding="utf-8"', 'encoding="UTF-16"')
    book = read_epub(make_epub(tmp_path / "b.epub", {"c.xhtml": doc.encode("utf-16")}))
    assert book.sections[0].normalized_text == "\u00e9t\u00e9 \u00a0x"


def test_parse_content_and_extract_text_directly() -> None:
    root, body, parser, warnings = parse_content(xhtml("<p>x</p>").encode(), "c.xhtml", "book.epub")
    assert parser == "xml" and not warnings
    text = extract_text(body, "NFC")
    assert (text.source_text, text.normalized_text) == ("x", "x")
    empty = extract_text(None, "NFC")
    assert empty.normalized_text == "" and empty.blocks == ()


# ------------------------------------------------------------- the package


def test_metadata_linear_and_dom(tmp_path: Path) -> None:
    path = make_epub(
        tmp_path / "b.epub",
        {"a.xhtml": xhtml("<h1>First</h1><p>x</p>"), "b.xhtml": xhtml("<p>notes</p>")},
        spine='<itemref idref="d0" id="r0"/><itemref idref="d1" linear="no"/>',
        metadata=(
            "<dc:title> My\n Title </dc:title><dc:creator>Ann</dc:creator>"
            "<dc:creator>Bob</dc:creator><dc:language>fr</dc:language>"
            "<dc:identifier>isbn:1</dc:identifier>"
        ),
    )
    book = read_epub(path)
    assert isinstance(book, Book)
    assert book.title == "My Title"
    assert book.creators == ("Ann", "Bob")
    assert book.language == "fr"
    assert book.identifiers == ("urn:test:1", "isbn:1")
    assert book.file_name == "b.epub"
    assert len(book.sha256) == 64
    assert [s.linear for s in book.sections] == [True, False]
    assert [s.ordinal for s in book.sections] == [0, 1]
    assert [s.href for s in book.sections] == ["OEBPS/a.xhtml", "OEBPS/b.xhtml"]
    assert book.sections[0].title == "First"  # no TOC: first heading
    assert book.sections[1].title == ""
    dom = book.sections[0].dom
    assert isinstance(dom, ParsedDocument)
    assert (dom.spine_index, dom.idref, dom.itemref_id, dom.raw_bytes_href) == (
        0,
        "d0",
        "r0",
        "OEBPS/a.xhtml",
    )
    assert dom.body.tag == "{http://www.w3.org/1999/xhtml}body"


def test_import_is_deterministic(tmp_path: Path) -> None:
    path = make_epub(tmp_path / "b.epub", {"a.xhtml": xhtml("<p>a  b</p><p>c\u0301</p>")})
    first, second = read_epub(path), read_epub(path)
    assert first == second
    s1, s2 = first.sections[0], second.sections[0]
    assert s1.offset_map.to_bytes() == s2.offset_map.to_bytes()


def test_percent_encoded_non_ascii_href(tmp_path: Path) -> None:
    path = make_epub(
        tmp_path / "b.epub",
        {"一 章.xhtml": xhtml("<p>本文</p>")},
        hrefs={"一 章.xhtml": "%E4%B8%80%20%E7%AB%A0.xhtml"},
    )
    book = read_epub(path)
    assert book.sections[0].href == "OEBPS/一 章.xhtml"
    assert book.sections[0].normalized_text == "本文"


NAV = (
    '<nav epub:type="toc"><h1>Contents</h1><ol>'
    '<li><a href="a.xhtml">Part one</a><ol>'
    '<li><a href="a.xhtml#s2">Second <i>section</i></a></li>'
    '<li><a href="a.xhtml#missing">Lost</a></li></ol></li>'
    '<li><span>Heading only</span><ol><li><a href="b.xhtml">Bee</a></li></ol></li>'
    '<li><a href="http://example.com/">Web</a></li>'
    "</ol></nav>"
)


def test_nav_toc_resolves_to_offsets(tmp_path: Path) -> None:
    path = make_epub(
        tmp_path / "b.epub",
        {
            "nav.xhtml": xhtml(NAV),
            "a.xhtml": xhtml('<p>Intro text.</p><section id="s2"> <h2>Two</h2></section>'),
            "b.xhtml": xhtml("<p>b</p>"),
        },
        spine='<itemref idref="d1"/><itemref idref="d2"/>',
        extra_manifest="",
    )
    # Mark the nav item: rebuild the OPF with properties="nav".
    path = _with_nav_property(path, "d0")
    book = read_epub(path)
    top = book.toc
    assert [e.title for e in top] == ["Part one", "Heading only", "Web"]
    part, heading, web = top
    assert (part.section, part.source_offset, part.href) == (0, 0, "OEBPS/a.xhtml")
    second, lost = part.children
    assert second.title == "Second section"
    assert second.href == "OEBPS/a.xhtml#s2"
    assert second.section == 0
    text = book.sections[0].source_text
    assert text[second.source_offset :].lstrip().startswith("Two")
    assert second.source_offset == len("Intro text.")
    assert (lost.section, lost.source_offset) == (0, 0)
    assert any("'missing'" in w for w in book.warnings)
    assert (heading.section, heading.source_offset) == (None, None)
    assert heading.children[0].section == 1
    assert (web.section, web.source_offset) == (None, None)
    assert book.sections[0].title == "Part one"
    assert book.sections[1].title == "Bee"


def _with_nav_property(path: Path, item_id: str) -> Path:
    with zipfile.ZipFile(path) as zf:
        members = {info.filename: zf.read(info) for info in zf.infolist()}
    opf = members["OEBPS/content.opf"].decode()
    members["OEBPS/content.opf"] = opf.replace(
        f'<item id="{item_id}"', f'<item id="{item_id}" properties="nav"', 1
    ).encode()
    out = path.with_name("nav-" + path.name)
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


NCX = (
    '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
    "<navMap>"
    '<navPoint id="p1"><navLabel><text>Chapter  1</text></navLabel><content src="text/a.xhtml"/>'
    '<navPoint id="p2"><navLabel><text>Deep</text></navLabel><content src="text/a.xhtml#d"/>'
    "</navPoint></navPoint>"
    "</navMap></ncx>"
)


def test_ncx_toc_relative_to_ncx_folder(tmp_path: Path) -> None:
    path = make_epub(
        tmp_path / "b.epub",
        {"toc/toc.ncx": NCX, "toc/text/a.xhtml": xhtml('<p>x</p><p id="d">deep</p>')},
        media_types={"toc/toc.ncx": "application/x-dtbncx+xml"},
        spine='<itemref idref="d1"/>',
        spine_attrs=' toc="d0"',
    )
    book = read_epub(path)
    (chapter,) = book.toc
    assert (chapter.title, chapter.href, chapter.section, chapter.source_offset) == (
        "Chapter 1",
        "OEBPS/toc/text/a.xhtml",
        0,
        0,
    )
    assert chapter.children[0].source_offset == 1
    assert book.sections[0].title == "Chapter 1"


def test_ebooklib_failure_falls_back_to_own_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = make_epub(
        tmp_path / "b.epub",
        {"toc.ncx": NCX.replace("text/", ""), "a.xhtml": xhtml('<p>x</p><p id="d">deep</p>')},
        media_types={"toc.ncx": "application/x-dtbncx+xml"},
        spine='<itemref idref="d1"/>',
        spine_attrs=' toc="d0"',
        metadata="<dc:title>Fallback</dc:title><dc:creator>C</dc:creator>",
    )
    normal = read_epub(path)

    def boom(*args: object, **kwargs: object) -> None:
        raise KeyError("simulated ebooklib failure")

    monkeypatch.setattr(epub_mod, "metadata_and_toc_via_ebooklib", boom)
    fallback = read_epub(path)
    assert any("ebooklib could not read" in w for w in fallback.warnings)
    assert fallback.toc == normal.toc
    assert (fallback.title, fallback.creators, fallback.identifiers) == (
        normal.title,
        normal.creators,
        normal.identifiers,
    )


def test_nav_without_toc_nav_uses_ncx(tmp_path: Path) -> None:
    # ebooklib raises IndexError on a nav document without a toc <nav>.
    path = make_epub(
        tmp_path / "b.epub",
        {
            "nav.xhtml": xhtml("<p>no nav here</p>"),
            "toc.ncx": NCX.replace("text/", ""),
            "a.xhtml": xhtml('<p>x</p><p id="d">deep</p>'),
        },
        media_types={"toc.ncx": "application/x-dtbncx+xml"},
        spine='<itemref idref="d2"/>',
        spine_attrs=' toc="d1"',
    )
    book = read_epub(_with_nav_property(path, "d0"))
    assert [e.title for e in book.toc] == ["Chapter 1"]
    assert any("ebooklib could not read" in w for w in book.warnings)


def test_svg_and_non_document_spine_items(tmp_path: Path) -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg"><title>tooltip</title>'
        "<text>Cover words</text></svg>"
    )
    path = make_epub(
        tmp_path / "b.epub",
        {"cover.svg": svg, "pic.png": b"\x89PNG", "a.xhtml": xhtml("<p>text</p>")},
        media_types={"cover.svg": "image/svg+xml", "pic.png": "image/png"},
    )
    book = read_epub(path)
    assert [s.ordinal for s in book.sections] == [0, 1, 2]
    assert book.sections[0].normalized_text == "Cover words"
    assert book.sections[1].parser == "none" and book.sections[1].normalized_text == ""
    assert book.sections[2].normalized_text == "text"
    assert any("not a content document" in w for w in book.warnings)
