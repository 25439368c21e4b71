"""EPUB CFI: parser vectors, golden strings, the georgia-cfi sample, and round trips
over every spine document of the corpus, checked against independent oracles that
walk the lxml tree the way the specification (foliate-js) and epub.js 0.3 do."""

from __future__ import annotations

import html.entities
import posixpath
import random
import re
import time
import zipfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import lxml.html
import pytest
from lxml import etree

from mindory.errors import MindoryError
from mindory.importers.cfi import (
    CfiDocument,
    CfiError,
    CfiPath,
    ParsedCfi,
    escape_cfi,
    parse_cfi,
    spine_step_of,
)

XHTML_NS = "http://www.w3.org/1999/xhtml"


def _corpus_dir() -> Path | None:
    here = Path(__file__).resolve()
    for cand in (here.parents[3] / "shared" / "corpus", Path("/work/shared/corpus")):
        if cand.is_dir():
            return cand
    return None


CORPUS = _corpus_dir()
needs_corpus = pytest.mark.skipif(CORPUS is None, reason="shared/corpus not found")


def parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


def doc(
    body: str, *, spine_index: int = 0, itemref_id: str | None = None, **kw: Any
) -> CfiDocument:
    src = f'<html xmlns="{XHTML_NS}"><head><title>t</title></head>{body}</html>'
    root = etree.fromstring(src.encode(), parser())
    return CfiDocument.from_tree(root, None, spine_index=spine_index, itemref_id=itemref_id, **kw)


def xpath(node: Any, expr: str) -> list[Any]:
    result: Any = node.xpath(expr)
    return list(result)


def u16len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def cp_from_u16(s: str, u: int) -> int:
    """Code point index of UTF-16 offset ``u`` within ``s``."""
    acc = 0
    for i, ch in enumerate(s):
        if acc == u:
            return i
        acc += 2 if ord(ch) > 0xFFFF else 1
        if acc > u:
            raise AssertionError("offset splits a surrogate pair")
    assert acc == u, (acc, u)
    return len(s)


# ----------------------------------------------------------------------------- oracles
# Written independently of mindory.importers.cfi: they walk the lxml tree.


class TextMap:
    """Source start of every text piece, keyed by (node, is_tail), by a plain recursive walk."""

    def __init__(self, body: Any) -> None:
        self.keep: list[Any] = []  # hold the proxies so dict keys stay identical
        self.start: dict[tuple[int, bool], int] = {}
        self.parts: list[str] = []
        self.pos = 0
        self._walk(body)
        self.text = "".join(self.parts)

    def _add(self, node: Any, tail: bool, text: str | None) -> None:
        self.keep.append(node)
        self.start[(id(node), tail)] = self.pos
        self.parts.append(text or "")
        self.pos += len(text or "")

    def _walk(self, el: Any) -> None:
        self._add(el, False, el.text)
        for c in el:
            if isinstance(c.tag, str):
                self._walk(c)
            self._add(c, True, c.tail)

    def of(self, node: Any, tail: bool) -> int:
        return self.start[(id(node), tail)]


def _content_steps(path: CfiPath) -> list[Any]:
    k = next(i for i, s in enumerate(path.steps) if s.indirect)
    return list(path.steps[k:])


def spec_oracle(root: Any, tm: TextMap, path: CfiPath) -> int:
    """Resolve like the spec text: chunks of character data between element children."""
    node = root
    steps = _content_steps(path)
    for st in steps[:-1]:
        assert st.index % 2 == 0
        node = [c for c in node if isinstance(c.tag, str)][st.index // 2 - 1]
        assert st.id is None or node.get("id") == st.id
    last = steps[-1]
    if last.index % 2 == 0:
        node = [c for c in node if isinstance(c.tag, str)][last.index // 2 - 1]
        assert last.id is None or node.get("id") == last.id
        return tm.of(node, False)
    chunk = (last.index - 1) // 2
    pieces: list[tuple[Any, bool, str]] = []  # the chunk's text, across comments
    if chunk == 0:
        pieces.append((node, False, node.text or ""))
    seen = 0
    for c in node:
        if isinstance(c.tag, str):
            seen += 1
        if seen == chunk:
            pieces.append((c, True, c.tail or ""))
    # foliate-js maps an empty chunk to null (or to the first child element): never name one
    assert any(text for _, _, text in pieces), f"{path} names an empty chunk"
    off = path.offset or 0
    for nd, tail, text in pieces:
        if off <= u16len(text):
            return tm.of(nd, tail) + cp_from_u16(text, off)
        off -= u16len(text)
    raise AssertionError(f"offset beyond chunk in {path}")


def epubjs_split(cfi: str) -> tuple[str, list[str]]:
    """epub.js 0.3 EpubCFI.parse: plain string splitting, no ^ unescaping."""
    assert cfi.startswith("epubcfi(") and cfi.endswith(")")
    inner = cfi[8:-1]
    indirection = inner.split("!")
    path = indirection[1].split(",")[0]
    ranges = inner.split(",")
    return path, (ranges[1:] if len(ranges) == 3 else [])


def epubjs_component(comp: str) -> tuple[list[tuple[str, int, str | None]], int | None]:
    parts = comp.split(":")
    steps = parts[0].split("/")
    if steps[0] == "":
        steps.pop(0)
    out = []
    for s in steps:
        m = re.search(r"\[(.*)\]", s)
        num = int(re.match(r"\d+", s).group())  # type: ignore[union-attr]
        kind = "element" if num % 2 == 0 else "text"
        index = num // 2 - 1 if kind == "element" else (num - 1) // 2
        out.append((kind, index, m.group(1) if m and m.group(1) else None))
    offset = int(re.match(r"\d+", parts[1]).group()) if len(parts) > 1 else None  # type: ignore[union-attr]
    return out, offset


def epubjs_oracle(tree_root: Any, tm: TextMap, steps: list[Any], offset: int | None) -> int:
    """EpubCFI.findNode via XPath (./* from the document, text()[k], *[k] and @id) + setStart."""
    xp = ["/*"]
    for kind, index, ident in steps:
        pos = index + 1
        if ident:
            assert "'" not in ident
            xp.append(f"*[position()={pos} and @id='{ident}']")
        elif kind == "text":
            xp.append(f"text()[{pos}]")
        else:
            xp.append(f"*[{pos}]")
    found = xpath(tree_root.getroottree(), "/".join(xp))
    assert len(found) == 1, ("/".join(xp), found)
    node = found[0]
    if isinstance(node, str):  # a text node: lxml smart string
        smart: Any = node
        text = str(node)
        off = offset or 0
        assert off <= u16len(text), "epub.js setStart would throw"
        return tm.of(smart.getparent(), smart.is_tail) + cp_from_u16(text, off)
    assert not offset
    return tm.of(node, False)


def epubjs_resolve(tree_root: Any, tm: TextMap, cfi: str) -> tuple[int, int]:
    path, rng = epubjs_split(cfi)
    psteps, poff = epubjs_component(path)
    if not rng:
        p = epubjs_oracle(tree_root, tm, psteps, poff)
        return p, p
    s_steps, s_off = epubjs_component(rng[0])
    e_steps, e_off = epubjs_component(rng[1])
    return (
        epubjs_oracle(tree_root, tm, psteps + s_steps, s_off),
        epubjs_oracle(tree_root, tm, psteps + e_steps, e_off),
    )


# ----------------------------------------------------------------------------- parser


def test_parse_spec_examples() -> None:
    p = parse_cfi("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/3:10)")
    assert not p.is_range
    assert [s.index for s in p.path.steps] == [6, 4, 4, 10, 3]
    assert [s.id for s in p.path.steps] == [None, "chap01ref", "body01", "para05", None]
    assert [s.indirect for s in p.path.steps] == [False, False, True, False, False]
    assert p.path.offset == 10
    assert str(p) == "epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/3:10)"

    r = parse_cfi("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05],/2/1:1,/3:4)")
    assert r.is_range and r.start is not None and r.end is not None
    assert [s.index for s in r.start.steps] == [2, 1] and r.start.offset == 1
    assert [s.index for s in r.end.steps] == [3] and r.end.offset == 4
    assert [s.index for s in r.start_path().steps] == [6, 4, 4, 10, 2, 1]
    assert r.end_path().offset == 4
    assert str(r) == "epubcfi(/6/4[chap01ref]!/4[body01]/10[para05],/2/1:1,/3:4)"

    # text location assertion with escaped brackets
    t = parse_cfi("epubcfi(/6/14[chap05ref]!/4[body01]/10/2/1:3[2^[1^]])")
    assert t.path.text_before == "2[1]" and t.path.text_after is None
    assert str(t) == "epubcfi(/6/14[chap05ref]!/4[body01]/10/2/1:3[2^[1^]])"
    x = parse_cfi("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/1:3[xx,y])")
    assert (x.path.text_before, x.path.text_after) == ("xx", "y")
    y = parse_cfi("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2/1:3[,y])")
    assert (y.path.text_before, y.path.text_after) == (None, "y")

    # side bias
    b = parse_cfi("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2/1:3[;s=b])")
    assert b.path.side == "b" and not b.path.has_text_assertion
    b2 = parse_cfi("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2/1:3[yyy;s=b])")
    assert b2.path.side == "b" and b2.path.text_before == "yyy"
    b3 = parse_cfi("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2[;s=b])")
    assert b3.path.side == "b" and b3.path.steps[-1].id is None
    assert str(b3) == "epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2[;s=b])"
    intra = parse_cfi("../pub.opf#epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2/1:3[;s=b])")
    assert intra.href == "../pub.opf" and intra.path.side == "b"

    # temporal-spatial
    ts = parse_cfi("epubcfi(/6/4!/4/2/4~23.5@5.75:97.6)")
    assert ts.path.temporal == 23.5 and ts.path.spatial == (5.75, 97.6)
    assert str(ts) == "epubcfi(/6/4!/4/2/4~23.5@5.75:97.6)"


def test_parse_spec_escaping_layers() -> None:
    want = 'Ф-"spa ce"-99%-aa[bb]^'
    raw = 'epubcfi(/6/4!/4/10/2/1:3[Ф-"spa ce"-99%-aa^[bb^]^^])'
    iri = '#epubcfi(/6/4!/4/10/2/1:3[Ф-"spa%20ce"-99%25-aa^[bb^]^^])'
    uri = "#epubcfi(/6/4!/4/10/2/1:3[%d0%a4-%22spa%20ce%22-99%25-aa^[bb^]^^])"
    aggressive = (
        "#epubcfi(/6/4!/4/10/2/1:3%5B%D0%A4-%22spa%20ce%22-99%25-aa%5E%5Bbb%5E%5D%5E%5E%5D)"
    )
    for s in (raw, iri, uri, aggressive):
        p = parse_cfi(s)
        assert p.path.text_before == want, s
        assert p.path.offset == 3
    assert str(parse_cfi(raw)) == raw
    assert parse_cfi(raw, percent_decode=False).path.text_before == want


def test_parse_epubjs_vectors() -> None:
    # futurepress/epub.js test/epubcfi.js
    p = parse_cfi("epubcfi(/6/2[cover]!/6)")
    assert p.path.steps[1].index == 2 and p.path.steps[1].id == "cover"  # spinePos 0
    assert p.path.steps[2].indirect and p.path.offset is None
    assert parse_cfi("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2/1:3)").path.offset == 3
    for s in (
        "epubcfi(/6/2[cover]!/6)",
        "epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2/1:3)",
        "epubcfi(/6/4[chap01ref]!/4[body01]/10[para05],/2/1:1,/3:4)",
        "epubcfi(/6/4[chap01ref]!/4/2,/10/2[c001p0004]/1:6,/16/2[c001p0007]/1:27)",
        "epubcfi(/6/4[chap01ref]!/4/2/10/2[c001p0004],/1:0,/1:1)",
        "epubcfi(/6/4[chap01ref]!/4/6[p3]/3:4)",
    ):
        assert str(parse_cfi(s)) == s
    r = parse_cfi("epubcfi(/6/4[chap01ref]!/4/2,/10/2[c001p0004]/1:6,/16/2[c001p0007]/1:27)")
    assert r.start is not None and r.end is not None
    assert len(r.start.steps) == 3 and r.start.offset == 6
    assert len(r.end.steps) == 3 and r.end.offset == 27


def test_parse_readium_vectors() -> None:
    # readium/readium-cfi-js spec/models/cfi_parser_spec.js
    p = parse_cfi("epubcfi(/4/6/4)")
    assert [s.index for s in p.path.steps] == [4, 6, 4] and p.path.offset is None
    p = parse_cfi("epubcfi(/4/6!/4:9)")
    assert [s.indirect for s in p.path.steps] == [False, False, True] and p.path.offset == 9
    assert parse_cfi("epubcfi(/4[abc]/6!/4:9)").path.steps[0].id == "abc"
    assert parse_cfi("epubcfi(/4/6!/4[abc]:9)").path.steps[2].id == "abc"
    t = parse_cfi("epubcfi(/4/6!/4:9[aaa,bbb])").path
    assert (t.text_before, t.text_after, t.side) == ("aaa", "bbb", None)
    t = parse_cfi("epubcfi(/4/6!/4:9[aaa,])").path
    assert (t.text_before, t.text_after) == ("aaa", None)
    t = parse_cfi("epubcfi(/4/6!/4:9[,bbb])").path
    assert (t.text_before, t.text_after) == (None, "bbb")
    t = parse_cfi("epubcfi(/4/6!/4:9[aaa,bbb;s=b])").path
    assert (t.text_before, t.text_after, t.side) == ("aaa", "bbb", "b")
    t = parse_cfi("epubcfi(/4/6!/4:9[;s=b])").path
    assert (t.text_before, t.text_after, t.side) == (None, None, "b")
    t = parse_cfi("epubcfi(/4[4^^^[^]^(^)^,^;^=]/6!/4:9)").path
    assert t.steps[0].id == "4^[](),;="
    assert str(parse_cfi("epubcfi(/4[4^^^[^]^(^)^,^;^=]/6!/4:9)")) == (
        "epubcfi(/4[4^^^[^]^(^)^,^;^=]/6!/4:9)"
    )
    r = parse_cfi("epubcfi(/2/2/4,/2/4,/4/6)")
    assert r.start is not None and r.end is not None
    assert [s.index for s in r.path.steps] == [2, 2, 4]
    assert [s.index for s in r.start.steps] == [2, 4]
    assert [s.index for s in r.end.steps] == [4, 6]


def test_parse_foliate_vectors() -> None:
    # johnfactotum/foliate-js tests/epubcfi-tests.js
    assert parse_cfi("/6/4[chap0^]!/1ref^^]").path.steps[1].id == "chap0]!/1ref^"
    p = parse_cfi("epubcfi(/4[body0^]!/1^^]/10[para^]/0^,/5]/3:10)").path
    assert [s.id for s in p.steps] == ["body0]!/1^", "para]/0,/5", None]
    r = parse_cfi("/4[body0^]!/1^^]/10[para^]/0^,^/5],/3:1,/3:2")
    assert r.is_range and r.path.steps[1].id == "para]/0,/5"
    assert r.start is not None and r.start.offset == 1
    r = parse_cfi("/6/4[chap0^]!/1ref^^]!/4[body01^^],/10[para^]^,05^^],/15:10[foo^]]")
    assert r.path.steps[1].id == "chap0]!/1ref^" and r.path.steps[2].id == "body01^"
    assert r.start is not None and r.start.steps[0].id == "para],05^"
    assert r.end is not None and r.end.offset == 10 and r.end.text_before == "foo]"
    assert parse_cfi("/6/4!/2!/2").path.steps[2].indirect  # nested indirection parses


def test_parse_georgia_nav_hrefs() -> None:
    p = parse_cfi(
        "package.opf#epubcfi(/6/4[ct]!/4/2[d10e42]/12[d10e85]/6[d10e93]/1:1552[Bryan,%20and])"
    )
    assert p.href == "package.opf"
    assert (p.path.text_before, p.path.text_after, p.path.offset) == ("Bryan", " and", 1552)
    assert p.path.steps[1].id == "ct"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "epubcfi()",
        "epubcfi(/6/4!/4/1:3",
        "epubcfi(6/4)",
        "epubcfi(/6/a)",
        "epubcfi(/6/4[x)",
        "epubcfi(/6/4[a]b])",
        "epubcfi(/6/4!/4/1:3[a,b,c])",
        "epubcfi(/6/4!/4/1:3:4)",
        "epubcfi(/6/4!/4/1:3/2)",
        "epubcfi(/6/4!/4,/1:0)",
        "epubcfi(/6/4!/4/1:0,/1:0,/1:1)",
        "epubcfi(/6/4!/4,/1:0,/1:1,/1:2)",
        "epubcfi(/6/4!/4[a,b]/1:0)",
        "epubcfi(/6/4!/4/1:0[x;s])",
        "epubcfi(/6/4!/4/1:0^)",
        "foo#bar",
    ],
)
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(CfiError):
        parse_cfi(bad)


def test_cfi_error_is_mindory_error() -> None:
    assert issubclass(CfiError, MindoryError)
    with pytest.raises(MindoryError, match="epubcfi"):
        parse_cfi("epubcfi(/6/4!/4/1:3")


def test_escape() -> None:
    assert escape_cfi("a[b]c(d)e,f;g=h^i/j") == "a^[b^]c^(d^)e^,f^;g^=h^^i/j"


# ----------------------------------------------------------------------------- golden


def test_golden_hello_world() -> None:
    d = doc('<body><p id="a">Hello <b>world</b>!</p></body>', spine_index=2, itemref_id="c3")
    assert d.source_text == "Hello world!"
    assert d.point(0) == "epubcfi(/6/6[c3]!/4/2[a]/1:0)"
    assert d.point(6) == "epubcfi(/6/6[c3]!/4/2[a]/2/1:0)"  # start of "world", not end of "Hello "
    assert d.point(11) == "epubcfi(/6/6[c3]!/4/2[a]/3:0)"
    assert d.point(12) == "epubcfi(/6/6[c3]!/4/2[a]/3:1)"
    assert d.partial(6) == "/4/2[a]/2/1:0"
    # "world": both ends inside <b>, so <b> is the common parent
    assert d.range(6, 11) == "epubcfi(/6/6[c3]!/4/2[a]/2,/1:0,/1:5)"
    # "Hello " ends at the end of the first text node, not at /2/1:0
    assert d.range(0, 6) == "epubcfi(/6/6[c3]!/4/2[a],/1:0,/1:6)"
    assert d.range(0, 12) == "epubcfi(/6/6[c3]!/4/2[a],/1:0,/3:1)"
    assert d.range(3, 3) == "epubcfi(/6/6[c3]!/4/2[a],/1:3,/1:3)"
    # no leading inline element here, so epub.js numbers the same way
    for p in range(13):
        assert d.point(p, "epubjs") == d.point(p)
    assert d.range(6, 11, "epubjs") == d.range(6, 11)


def test_golden_leading_inline_element() -> None:
    d = doc("<body><p><i>x</i>y</p></body>")
    assert d.point(1) == "epubcfi(/6/2!/4/2/3:0)"
    assert d.point(1, "epubjs") == "epubcfi(/6/2!/4/2/1:0)"  # futurepress/epub.js#470
    assert d.range(0, 2) == "epubcfi(/6/2!/4/2,/2/1:0,/3:1)"
    assert d.range(0, 2, "epubjs") == "epubcfi(/6/2!/4/2,/2/1:0,/1:1)"
    assert d.resolve("epubcfi(/6/2!/4/2/3:0)") == (1, 1)
    assert d.resolve("epubcfi(/6/2!/4/2/1:0)", "epubjs") == (1, 1)
    # /1 exists (empty) in the spec, so it resolves to the start of the paragraph
    assert d.resolve("epubcfi(/6/2!/4/2/1:0)") == (0, 0)


def test_golden_br_br() -> None:
    d = doc("<body><p>a<br/><br/>b</p></body>")
    assert d.source_text == "ab"
    assert d.point(1) == "epubcfi(/6/2!/4/2/5:0)"
    assert d.point(1, "epubjs") == "epubcfi(/6/2!/4/2/3:0)"
    assert d.range(0, 2) == "epubcfi(/6/2!/4/2,/1:0,/5:1)"
    assert d.range(0, 2, "epubjs") == "epubcfi(/6/2!/4/2,/1:0,/3:1)"
    # the empty chunk between the two <br/> is addressable in the spec flavor
    assert d.resolve("epubcfi(/6/2!/4/2/3:0)") == (1, 1)
    with pytest.raises(CfiError):
        d.resolve("epubcfi(/6/2!/4/2/3:1)")
    with pytest.raises(CfiError):
        d.resolve("epubcfi(/6/2!/4/2/5:0)", "epubjs")  # epub.js has only two text nodes


def test_golden_comment_splits_text() -> None:
    d = doc("<body><p>ab<!-- note -->cd<?pi x?>ef</p></body>")
    assert d.source_text == "abcdef"
    # spec: one chunk, offsets continue across the comment and the PI
    assert d.point(3) == "epubcfi(/6/2!/4/2/1:3)"
    assert d.point(5) == "epubcfi(/6/2!/4/2/1:5)"
    # epub.js: three text nodes
    assert d.point(3, "epubjs") == "epubcfi(/6/2!/4/2/3:1)"
    assert d.point(5, "epubjs") == "epubcfi(/6/2!/4/2/5:1)"
    assert d.range(1, 5, "epubjs") == "epubcfi(/6/2!/4/2,/1:1,/5:1)"
    assert d.range(0, 2, "epubjs") == "epubcfi(/6/2!/4/2,/1:0,/1:2)"  # ends in the earlier node
    assert d.range(2, 4, "epubjs") == "epubcfi(/6/2!/4/2,/3:0,/3:2)"
    for p in range(7):
        assert d.resolve(d.point(p)) == (p, p)
        assert d.resolve(d.point(p, "epubjs"), "epubjs") == (p, p)


def test_golden_whitespace_only_nodes() -> None:
    d = doc('<body>\n  <p id="p1">a</p>\n  <p>b</p>\n</body>')
    assert d.source_text == "\n  a\n  b\n"
    assert d.point(0) == "epubcfi(/6/2!/4/1:0)"
    assert d.point(3) == "epubcfi(/6/2!/4/2[p1]/1:0)"
    assert d.point(4) == "epubcfi(/6/2!/4/3:0)"
    assert d.point(9) == "epubcfi(/6/2!/4/5:1)"
    assert d.range(3, 8) == "epubcfi(/6/2!/4,/2[p1]/1:0,/4/1:1)"
    for p in range(len(d.source_text) + 1):
        assert d.point(p, "epubjs") == d.point(p)  # whitespace nodes exist in the DOM too


def test_golden_non_bmp_offsets_are_utf16() -> None:
    d = doc("<body><p>\U0001d4b3\U0001d4b4ab<b>\U00020000c</b></p></body>")
    assert d.source_text == "\U0001d4b3\U0001d4b4ab\U00020000c"
    assert d.point(2) == "epubcfi(/6/2!/4/2/1:4)"
    assert d.point(3) == "epubcfi(/6/2!/4/2/1:5)"
    assert d.point(5) == "epubcfi(/6/2!/4/2/2/1:2)"
    assert d.range(1, 6) == "epubcfi(/6/2!/4/2,/1:2,/2/1:3)"
    assert d.resolve("epubcfi(/6/2!/4/2/1:4)") == (2, 2)
    with pytest.raises(CfiError, match="surrogate"):
        d.resolve("epubcfi(/6/2!/4/2/1:1)")
    with pytest.raises(CfiError):
        d.resolve("epubcfi(/6/2!/4/2/1:7)")


def test_golden_special_ids() -> None:
    d = doc(
        '<body id="b/1"><p id="p,1">a<span id="s^[x]">b</span><em id="ok">c</em></p></body>',
        itemref_id="ch(1)",
    )
    assert d.point(1) == "epubcfi(/6/2[ch^(1^)]!/4[b/1]/2[p^,1]/2[s^^^[x^]]/1:0)"
    assert d.point(2) == "epubcfi(/6/2[ch^(1^)]!/4[b/1]/2[p^,1]/4[ok]/1:0)"
    # epub.js splits on "/" and "," and never unescapes ^: those ids are left out
    assert d.point(1, "epubjs") == "epubcfi(/6/2!/4/2/2/1:0)"
    assert d.point(2, "epubjs") == "epubcfi(/6/2!/4/2/4[ok]/1:0)"
    parsed = parse_cfi(d.point(1))
    assert [s.id for s in parsed.path.steps] == [None, "ch(1)", "b/1", "p,1", "s^[x]", None]
    for p in range(4):
        assert d.resolve(d.point(p)) == (p, p)
        assert d.resolve(d.point(p, "epubjs"), "epubjs") == (p, p)
    assert d.resolve(d.range(0, 3)) == (0, 3)


def test_golden_ruby() -> None:
    d = doc("<body><p><ruby>漢<rp>(</rp><rt>かん</rt><rp>)</rp></ruby>字</p></body>")
    assert d.source_text == "漢(かん)字"
    assert d.point(0) == "epubcfi(/6/2!/4/2/2/1:0)"
    assert d.point(2) == "epubcfi(/6/2!/4/2/2/4/1:0)"
    assert d.point(5) == "epubcfi(/6/2!/4/2/3:0)"
    assert d.point(5, "epubjs") == "epubcfi(/6/2!/4/2/1:0)"
    assert d.range(0, 6) == "epubcfi(/6/2!/4/2,/2/1:0,/3:1)"
    assert d.range(2, 4) == "epubcfi(/6/2!/4/2/2/4,/1:0,/1:2)"


def test_golden_spec_example_chapter() -> None:
    page = (
        '<body id="body01">\n\t<p>…</p>\n\t<p>…</p>\n\t<p>…</p>\n\t<p>…</p>\n'
        '    <p id="para05">xxx<em>yyy</em>0123456789</p>\n\t<p>…</p>\n\t<p>…</p>\n'
        '\t<img id="svgimg" src="foo.svg" alt="…"/>\n\t<p>…</p>\n\t<p>…</p>\n</body>'
    )
    d = doc(page, spine_index=1, itemref_id="chap01ref")
    after9 = d.source_text.index("0123456789") + 10
    assert d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/3:10)") == (after9, after9)
    # a point takes the character at it (the newline after </p>); a range end the one before
    assert d.point(after9) == "epubcfi(/6/4[chap01ref]!/4[body01]/11:0)"
    assert d.range(after9 - 10, after9) == (
        "epubcfi(/6/4[chap01ref]!/4[body01]/10[para05],/3:0,/3:10)"
    )
    x = d.source_text.index("xxx")
    assert d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/1:0)")[0] == x
    assert d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2/1:0)")[0] == x + 3
    assert d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/2/1:3[yyy])")[0] == x + 6
    assert d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/1:3[xx,y])")[0] == x + 3
    assert d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05],/2/1:1,/3:4)") == (
        x + 4,
        x + 10,
    )
    img = d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/16[svgimg])")[0]
    assert d.source_text[:img].endswith("…\n\t")
    # virtual elements /0 and /n+2
    assert d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/0)")[0] == x
    assert d.resolve("epubcfi(/6/4[chap01ref]!/4[body01]/10[para05]/4)")[0] == after9


def test_foliate_page2_cdata_comments_charrefs() -> None:
    # foliate-js: the same paragraph split by CDATA, comments and character references
    page = (
        '<body id="body01"><p>…</p><p>…</p><p>…</p><p>…</p>'
        '<p id="para05">xxx<em>yyy</em><![CDATA[]]><!--comment1--><![CDATA[0123]]>4'
        "<!--comment2-->5<![CDATA[67]]>&#56;&#57;</p><p>…</p></body>"
    )
    d = doc(page)
    for i in range(10):
        s, e = d.resolve(f"epubcfi(/6/2!/4/10,/3:{i},/3:{i + 1})")
        assert d.source_text[s:e] == str(i)
    start = d.source_text.index("0123")
    assert d.point(start + 7) == "epubcfi(/6/2!/4[body01]/10[para05]/3:7)"


# ----------------------------------------------------------------------------- resolution


def test_resolve_id_assertion_wins() -> None:
    d = doc('<body><p id="a">one</p><p id="b">two</p></body>', itemref_id="x")
    assert d.resolve("epubcfi(/6/2[x]!/4/2[b]/1:1)") == (4, 4)  # index says p#a, id says p#b
    assert d.resolve("epubcfi(/6/2[x]!/4/2[b]/1:1)", "epubjs") == (4, 4)
    assert d.resolve("epubcfi(/6/8[x]!/4/4/1:1)") == (4, 4)  # the itemref id wins over /8
    with pytest.raises(CfiError, match="no element with id"):
        d.resolve("epubcfi(/6/2[x]!/4/2[zz]/1:1)")


def test_resolve_other_spine_item() -> None:
    d = doc("<body><p>one</p></body>", spine_index=1, itemref_id="ch1")
    with pytest.raises(CfiError, match="spine"):
        d.resolve("epubcfi(/6/6[ch2]!/4/2/1:0)")
    with pytest.raises(CfiError, match="spine"):
        d.resolve("epubcfi(/6/4[ch2]!/4/2/1:0)")  # right index, other id
    with pytest.raises(CfiError, match="spine"):
        d.resolve("epubcfi(/8/4[ch1]!/4/2/1:0)")  # not the spine step
    d2 = doc("<body><p>one</p></body>", spine_index=1)
    with pytest.raises(CfiError, match="spine"):
        d2.resolve("epubcfi(/6/6!/4/2/1:0)")
    assert d2.resolve("epubcfi(/6/4!/4/2/1:1)") == (1, 1)


def test_resolve_errors() -> None:
    d = doc("<body><p>one</p></body>")
    for bad in (
        "epubcfi(/6/2!/4/2/1:4)",  # past the end of the text
        "epubcfi(/6/2!/4/2/5:0)",  # no such chunk
        "epubcfi(/6/2!/4/8/1:0)",  # no such element
        "epubcfi(/6/2!/2/1:0)",  # <head>
        "epubcfi(/6/2!/4/2/1/2)",  # a step below text
        "epubcfi(/6/2/4/2/1:0)",  # no indirection
        "epubcfi(/6/2!/4/2/1:0[xyz])",  # text assertion fails
        "epubcfi(/6/2!/4/2/1:1[,xyz])",
        "epubcfi(/6/2!/4/2,/1:2,/1:1)",  # end before start
        "epubcfi(/6/2!/4/2/3~1.5)",
    ):
        with pytest.raises(CfiError):
            d.resolve(bad)
    assert d.resolve("epubcfi(/6/2!)") == (0, 0)  # the document itself
    with pytest.raises(CfiError, match="flavor"):
        d.point(0, "kindle")
    with pytest.raises(CfiError):
        d.point(1.0)  # type: ignore[arg-type]
    import numpy as np

    assert d.point(np.int64(1)) == d.point(1)  # type: ignore[arg-type]
    with pytest.raises(CfiError):
        d.point(99)
    with pytest.raises(CfiError):
        d.range(2, 1)


def test_resolve_text_assertion_collapses_whitespace() -> None:
    d = doc("<body><p>Bryan\n      and Effingham</p></body>")
    p = d.source_text.index("\n")
    assert d.resolve(f"epubcfi(/6/2!/4/2/1:{p}[Bryan,%20and%20Eff])") == (p, p)
    assert d.resolve(f"epubcfi(/6/2!/4/2/1:{p + 7}[Bryan%20,and])") == (p + 7, p + 7)
    with pytest.raises(CfiError, match="assertion"):
        d.resolve(f"epubcfi(/6/2!/4/2/1:{p}[Brian,%20and])")


def test_resolve_element_and_epubjs_generated_cfis() -> None:
    d = doc('<body><div id="d"><p>ab</p><img src="x.png"/><p>cd</p></div></body>')
    assert d.resolve("epubcfi(/6/2!/4/2[d]/4)") == (2, 2)  # the <img>
    assert d.resolve("epubcfi(/6/2!/4/2[d]/6)", "epubjs") == (2, 2)
    # what epub.js writes for a selection across paragraphs
    assert d.resolve("epubcfi(/6/2!/4/2[d],/2/1:1,/6/1:1)", "epubjs") == (1, 3)


def test_empty_document() -> None:
    d = doc('<body id="b"><img src="cover.png"/></body>')
    assert d.source_text == ""
    assert d.point(0) == "epubcfi(/6/2!/4[b])"
    assert d.point(0, "epubjs") == "epubcfi(/6/2!/4[b])"
    assert d.range(0, 0) == "epubcfi(/6/2!/4[b])"
    assert d.resolve(d.point(0)) == (0, 0)
    assert d.resolve("epubcfi(/6/2!/4[b]/1:0)") == (0, 0)


def test_empty_elements_and_boundaries() -> None:
    d = doc("<body><p>ab</p><p/><p></p><p><span/>cd<span></span></p></body>")
    n = len(d.source_text)
    assert d.source_text == "abcd"
    for p in range(n + 1):
        assert d.resolve(d.point(p)) == (p, p)
        for fl in ("spec", "epubjs"):
            for q in range(p, n + 1):
                assert d.resolve(d.range(p, q, fl), fl) == (p, q)
    assert d.range(0, 2) == "epubcfi(/6/2!/4/2,/1:0,/1:2)"  # stays in the first paragraph
    assert d.range(2, 4) == "epubcfi(/6/2!/4/8,/3:0,/3:2)"
    assert d.range(2, 4, "epubjs") == "epubcfi(/6/2!/4/8,/1:0,/1:2)"


def test_deep_nesting_is_iterative() -> None:
    depth = 2000  # above Python's recursion limit, below libxml2's HUGE cap (2048)
    body = "<body>" + "<span>x" * depth + "</span>" * depth + "</body>"
    src = f'<html xmlns="{XHTML_NS}"><head/>{body}</html>'
    root = etree.fromstring(src.encode(), parser())
    d = CfiDocument.from_tree(root, None, spine_index=0, itemref_id=None)
    assert len(d.source_text) == depth
    cfi = d.point(depth - 1)
    assert cfi == "epubcfi(/6/2!/4" + "/2" * depth + "/1:0)"
    assert d.resolve(cfi) == (depth - 1, depth - 1)


# ----------------------------------------------------------------------------- html tree


def test_html_root_swallowed_anchor() -> None:
    # A browser parsing "<a id='x'/>" as HTML opens <a> and puts the following text in it.
    xml = '<body><p>Hello <a id="x"/>world <b>!</b></p></body>'
    src = f'<html xmlns="{XHTML_NS}"><head><title>t</title></head>{xml}</html>'
    root = etree.fromstring(src.encode(), parser())
    browser = lxml.html.document_fromstring(
        '<html><head><title>t</title></head><body><p>Hello <a id="x">world <b>!</b></a></p>'
        "</body></html>"
    )
    d = CfiDocument.from_tree(root, None, spine_index=0, itemref_id=None, html_root=browser)
    assert d.epubjs_source == "html"
    w = d.source_text.index("world")
    assert d.point(w) == "epubcfi(/6/2!/4/2/3:0)"
    assert d.point(w, "epubjs") == "epubcfi(/6/2!/4/2/2[x]/1:0)"
    assert d.point(w + 6, "epubjs") == "epubcfi(/6/2!/4/2/2[x]/2/1:0)"
    assert d.range(0, w + 7, "epubjs") == "epubcfi(/6/2!/4/2,/1:0,/2[x]/2/1:1)"
    for p in range(len(d.source_text) + 1):
        assert d.resolve(d.point(p, "epubjs"), "epubjs") == (p, p)
    tm = TextMap(browser.find("body"))
    for p in range(len(d.source_text) + 1):
        assert epubjs_resolve(browser, tm, d.point(p, "epubjs")) == (p, p)
    again = CfiDocument.from_json(d.to_json())
    assert again == d and again.point(w, "epubjs") == d.point(w, "epubjs")


def test_html_root_trailing_text_is_clipped() -> None:
    # Browsers move the newline after </body> into <body>.
    src = f'<html xmlns="{XHTML_NS}"><head/><body><p>ab</p></body>\n</html>'
    root = etree.fromstring(src.encode())
    browser = lxml.html.document_fromstring("<html><head></head><body><p>ab</p>\n</body></html>")
    d = CfiDocument.from_tree(root, None, spine_index=0, itemref_id=None, html_root=browser)
    assert d.epubjs_source == "html"
    assert d.range(0, 2, "epubjs") == "epubcfi(/6/2!/4/2,/1:0,/1:2)"


def test_html_root_mismatch_falls_back() -> None:
    src = f'<html xmlns="{XHTML_NS}"><head/><body><p>ab<i>c</i></p></body></html>'
    root = etree.fromstring(src.encode())
    browser = lxml.html.document_fromstring("<html><body><p>something else</p></body></html>")
    d = CfiDocument.from_tree(root, None, spine_index=0, itemref_id=None, html_root=browser)
    assert d.epubjs_source == "xml-fallback"
    assert d.point(2, "epubjs") == "epubcfi(/6/2!/4/2/2/1:0)"
    assert CfiDocument.from_json(d.to_json()).epubjs_source == "xml-fallback"


# ----------------------------------------------------------------------------- json


def test_json_round_trip() -> None:
    d = doc('<body><p id="a">Hello <b>wörld</b> \U0001f600!<!--c-->x</p></body>', itemref_id="i")
    s = d.to_json()
    assert s == d.to_json()  # deterministic
    e = CfiDocument.from_json(s)
    assert e == d and e.source_text == d.source_text
    for p in range(len(d.source_text) + 1):
        for fl in ("spec", "epubjs"):
            assert e.point(p, fl) == d.point(p, fl)
    lean = d.to_json(include_text=False)
    assert d.source_text not in lean
    assert CfiDocument.from_json(lean, source_text=d.source_text) == d
    with pytest.raises(CfiError):
        CfiDocument.from_json(lean)
    with pytest.raises(CfiError):
        CfiDocument.from_json(lean, source_text=d.source_text + "x")
    with pytest.raises(CfiError):
        CfiDocument.from_json("{nope")
    with pytest.raises(CfiError):
        CfiDocument.from_json('{"v": 99}')
    with pytest.raises(CfiError, match="parent"):
        CfiDocument.from_json(s.replace('"parent":[-1,0,1,2]', '"parent":[-1,3,1,2]'))


def test_spine_step_of() -> None:
    opf = etree.fromstring(
        b'<package xmlns="http://www.idpf.org/2007/opf"><metadata/><manifest/>'
        b"<!-- c --><spine/></package>"
    )
    assert spine_step_of(opf) == 6
    opf2 = etree.fromstring(
        b'<package xmlns="http://www.idpf.org/2007/opf"><metadata/><x/><manifest/><spine/></package>'
    )
    assert spine_step_of(opf2) == 8
    root = etree.fromstring(f'<html xmlns="{XHTML_NS}"><body><p>a</p></body></html>'.encode())
    d = CfiDocument.from_tree(root, None, spine_index=0, itemref_id=None, spine_step=8)
    assert d.point(0) == "epubcfi(/8/2!/2/2/1:0)"  # no <head>: body is /2
    assert d.resolve("epubcfi(/8/2!/2/2/1:1)") == (1, 1)
    with pytest.raises(CfiError):
        d.resolve("epubcfi(/6/2!/2/2/1:1)")


# ----------------------------------------------------------------------------- corpus

_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")
_XML_ENTITIES = {"amp", "lt", "gt", "quot", "apos"}


def _replace_html_entities(raw: bytes) -> bytes:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name in _XML_ENTITIES or name not in html.entities.name2codepoint:
            return m.group(0)
        return chr(html.entities.name2codepoint[name])

    return _ENTITY.sub(sub, raw.decode("utf-8-sig")).encode()


def _parse_xml(raw: bytes) -> Any:
    try:
        return etree.fromstring(raw, parser())
    except etree.XMLSyntaxError:
        return etree.fromstring(_replace_html_entities(raw), parser())


class SpineDoc:
    def __init__(self, href: str, index: int, itemref_id: str | None, raw: bytes, step: int):
        self.href = href
        self.root = _parse_xml(raw)
        self.html = lxml.html.document_fromstring(raw)
        self.cfi = CfiDocument.from_tree(
            self.root,
            None,
            spine_index=index,
            itemref_id=itemref_id,
            html_root=self.html,
            spine_step=step,
        )


def _spine(z: zipfile.ZipFile) -> tuple[str, Any, list[tuple[str, str | None]]]:
    container = etree.fromstring(z.read("META-INF/container.xml"), parser())
    opf_path = str(xpath(container, "//*[local-name()='rootfile']/@full-path")[0])
    opf = etree.fromstring(z.read(opf_path), parser())
    items = {i.get("id"): i.get("href") for i in xpath(opf, "//*[local-name()='item']")}
    base = posixpath.dirname(opf_path)
    spine = []
    for ref in xpath(opf, "//*[local-name()='spine']/*[local-name()='itemref']"):
        href = posixpath.normpath(posixpath.join(base, unquote(items[ref.get("idref")])))
        spine.append((href, ref.get("id")))
    return opf_path, opf, spine


@cache
def load_book(name: str) -> tuple[SpineDoc, ...]:
    assert CORPUS is not None
    with zipfile.ZipFile(CORPUS / name) as z:
        _, opf, spine = _spine(z)
        step = spine_step_of(opf)
        return tuple(
            SpineDoc(href, i, ident, z.read(href), step) for i, (href, ident) in enumerate(spine)
        )


def corpus_books() -> list[str]:
    if CORPUS is None:
        return []
    return sorted(p.name for p in CORPUS.glob("*.epub"))


@needs_corpus
def test_georgia_nav_page_list() -> None:
    assert CORPUS is not None
    with zipfile.ZipFile(CORPUS / "epub3_en_georgia-cfi.epub") as z:
        opf_path, opf, spine = _spine(z)
        assert spine == [("EPUB/cover.xhtml", None), ("EPUB/georgia.xhtml", "ct")]
        nav = etree.fromstring(z.read("EPUB/nav.xhtml"), parser())
        raw = z.read("EPUB/georgia.xhtml")
    page_list = [
        n
        for n in nav.iter(f"{{{XHTML_NS}}}nav")
        if "page-list" in (n.get("{http://www.idpf.org/2007/ops}type") or "")
    ][0]
    hrefs = [str(a.get("href")) for a in page_list.iter(f"{{{XHTML_NS}}}a")]
    assert len(hrefs) == 7 and all(h.startswith("package.opf#epubcfi(") for h in hrefs)
    root = etree.fromstring(raw, parser())
    d = CfiDocument.from_tree(
        root, None, spine_index=1, itemref_id="ct", spine_step=spine_step_of(opf)
    )
    tm = TextMap(root.find(f"{{{XHTML_NS}}}body"))
    assert tm.text == d.source_text
    text = d.source_text
    asserted = 0
    for href in hrefs:
        parsed = parse_cfi(href)
        pos, end = d.resolve(href)
        assert pos == end
        assert spec_oracle(root, tm, parsed.path) == pos
        if parsed.path.text_before:
            asserted += 1
            assert text[:pos].endswith(parsed.path.text_before)
            assert parsed.path.text_after and text[pos:].startswith(parsed.path.text_after)
        # the generator writes the same CFI back (without the assertion)
        bare = str(ParsedCfi(CfiPath(parsed.path.steps, parsed.path.offset)))
        assert d.point(pos) == bare
        # no leading inline elements on these paths: epub.js reads the same string
        assert d.resolve(bare, "epubjs") == (pos, pos)
    assert asserted == 2
    first = d.resolve(hrefs[0])[0]
    assert text[:first].endswith("Bryan") and text[first:].startswith(" and Effingham")
    third = d.resolve(hrefs[2])[0]
    assert text[:third].endswith("for") and text[third:].startswith(" taxation")
    # a CFI of the georgia document does not resolve against the cover
    with zipfile.ZipFile(CORPUS / "epub3_en_georgia-cfi.epub") as z:
        cover = etree.fromstring(z.read("EPUB/cover.xhtml"), parser())
    c = CfiDocument.from_tree(cover, None, spine_index=0, itemref_id=None)
    with pytest.raises(CfiError, match="spine"):
        c.resolve(hrefs[0])


def _interesting_positions(d: CfiDocument, rng: random.Random, k: int) -> list[int]:
    """Random positions, half of them on or next to text-piece boundaries."""
    n = len(d.source_text)
    bounds = sorted(set(d._doc.starts) | set(d._html.starts if d._html else []))
    out = [0, n]
    for _ in range(k):
        if bounds and rng.random() < 0.5:
            b = rng.choice(bounds) + rng.choice((-1, 0, 0, 1))
            out.append(min(max(b, 0), n))
        else:
            out.append(rng.randint(0, n))
    return out


def _samples(name: str, total: int) -> Iterator[tuple[SpineDoc, list[int]]]:
    docs = load_book(name)
    rng = random.Random(f"cfi:{name}")
    per = max(2, total // len(docs))
    for sd in docs:
        yield sd, _interesting_positions(sd.cfi, rng, per)


@needs_corpus
@pytest.mark.parametrize("name", corpus_books())
def test_corpus_round_trip(name: str) -> None:
    rng = random.Random(f"ranges:{name}")
    checked = 0
    for sd, positions in _samples(name, 300):
        d = sd.cfi
        n = len(d.source_text)
        body = sd.root.find(f"{{{XHTML_NS}}}body")
        tm = TextMap(body)
        assert tm.text == d.source_text, sd.href
        html_tm = TextMap(sd.html.find("body")) if d.epubjs_source == "html" else tm
        ej_root = sd.html if d.epubjs_source == "html" else sd.root
        for p in positions:
            spec = d.point(p)
            ej = d.point(p, "epubjs")
            assert d.resolve(spec) == (p, p), (sd.href, p, spec)
            assert d.resolve(ej, "epubjs") == (p, p), (sd.href, p, ej)
            assert spec_oracle(sd.root, tm, parse_cfi(spec).path) == p, (sd.href, spec)
            assert epubjs_resolve(ej_root, html_tm, ej) == (p, p), (sd.href, ej)
            q = min(n, p + rng.choice((0, 1, 2, 17, 80, 800, 5000)))
            for fl in ("spec", "epubjs"):
                r = d.range(p, q, fl)
                assert d.resolve(r, fl) == (p, q), (sd.href, p, q, r)
            r = d.range(p, q)
            parsed = parse_cfi(r)
            assert spec_oracle(sd.root, tm, parsed.start_path()) == p
            assert spec_oracle(sd.root, tm, parsed.end_path()) == q
            assert epubjs_resolve(ej_root, html_tm, d.range(p, q, "epubjs")) == (p, q)
            checked += 1
        # the stored form makes the same CFIs without the tree
        e = CfiDocument.from_json(d.to_json())
        for p in positions[:5]:
            assert e.point(p) == d.point(p) and e.point(p, "epubjs") == d.point(p, "epubjs")
    assert checked >= 300


@needs_corpus
def test_generation_is_fast() -> None:
    docs = load_book("epub3_en_pepys-diary-large-endnotes.epub")
    big = max(docs, key=lambda sd: len(sd.cfi._doc.lens)).cfi
    assert len(big._doc.lens) > 50_000  # the 2 MB endnotes document
    rng = random.Random(7)
    n = len(big.source_text)
    positions = sorted(rng.randint(0, n) for _ in range(20_000))
    t0 = time.perf_counter()
    for p in positions:
        big.range(p, min(n, p + 800))
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, f"{elapsed:.2f}s for 20k ranges"
