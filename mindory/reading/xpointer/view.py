"""crengine's view of one content document, mapped onto mindory's source text.

:class:`CreView` rebuilds, from the lxml tree mindory's importer reads, the
element and text nodes crengine's DOM holds for the same ``<body>``, and keeps
for every character of every crengine text node the source offset (section-local
code points, DESIGN §1) it came from. The rules, each from crengine's source
(docs/koreader.md cites file and function):

* Text runs: every text between two pieces of markup (tags, comments, processing
  instructions) is one ``OnText`` call (``LVXMLParser::Parse`` / ``ReadText``);
  crengine never merges adjacent text nodes (``ldomNode::insertChildText``).
* Outside PRE, ``\\t \\r \\n`` become spaces and a run of spaces keeps its first
  (``PreProcessXmlString``); nothing is trimmed. In PRE, tabs expand to the next
  multiple of 8 columns (``ExpandTabs``), and a ``<pre>``/``<textarea>`` loses a
  leading newline (``ldomElementWriter::onText``, DOM >= 20210904).
* Text runs longer than 8,192 characters are cut after their last space or line
  break (``TEXT_SPLIT_SIZE`` in ``ReadText``).
* Dropped while parsing (``ldomElementWriter::onText``): text in elements whose
  type allows none (``_allowText``: ``table``, ``tr``, ``svg`` ...), and a
  whitespace-only run that would be the first child of a block element.
* Dropped at layout (``ldomNode::initNodeRendMethod``): in a block holding block
  children, whitespace-only text not between two inline siblings
  (``removeStandaloneWhitespaceTextChildrenInMixedContent`` / ``autoboxChildren``);
  in an inline holding blocks, whitespace next to each block; in ``<ruby>``,
  whitespace at its edges and next to ``rt``/``rp``/``rb``/``rtc``/``rbc``
  (``boxWrapChildren``). Boxing elements crengine inserts are transparent in
  xpointers (``ldomXPointer::toStringV2``), so they are not modelled.

A source offset maps **forward**: to the first crengine character whose source
position is at or after it (collapsed or dropped whitespace maps to the next
character crengine keeps; past the last one, to the end of the last text node).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from html.entities import html5
from typing import Any

import numpy as np
from lxml import etree

from mindory.errors import XPointerError
from mindory.importers.xhtml.parse import SVG_NS
from mindory.reading.xpointer.parse import XPointer, format_steps
from mindory.reading.xpointer.rules import (
    BLOCK,
    INLINE,
    INLINE_BLOCK,
    NONE,
    RUBY,
    SVG_TEXT,
    element_facts,
)

__all__ = ["TEXT_SPLIT_SIZE", "CrePoint", "CreView", "DOM_20240114", "DOM_20260812"]

DOM_20240114 = 20240114  # what KOReader's releases ship: [1] only when a same-name sibling exists
DOM_20260812 = 20260812  # [1] written on every step
TEXT_SPLIT_SIZE = 8192  # lvxml.cpp
_WS = frozenset(" \t\r\n")  # crengine's IsEmptySpace / PreProcessXmlString whitespace
_WS_RUN_RE = re.compile(r"[ \t\r\n]{2,}")
_RUBY_PARTS = frozenset({"rt", "rp", "rb", "rtc", "rbc"})
# A raw run between '>' and '<' (tags end with '>', text runs end at '<').
_LONG_RUN_STR_RE = re.compile(rf"(?<=>)[^<]{{{TEXT_SPLIT_SIZE},}}(?=<)")


@dataclass(eq=False)
class _Elem:
    name: str
    parent: int
    display: str
    pre: bool
    allow_text: bool
    invisible: bool
    in_svg: bool
    source_start: int
    source_end: int = 0
    children: list[tuple[bool, int]] = field(default_factory=list)  # (is text, index)
    strip_newline: bool = False
    same_index: int = 1
    same_count: int = 1


@dataclass(eq=False)
class _Text:
    parent: int
    source_start: int  # the source span the node was made from
    source_end: int
    chars: np.ndarray  # source position of each crengine character (non-decreasing)
    removed: bool = False
    index: int = 1  # among the parent's text nodes (1-based), after removals
    count: int = 1


@dataclass(frozen=True, slots=True)
class CrePoint:
    """A point in crengine's DOM: text node ``node`` (document order), ``offset`` in it."""

    node: int
    offset: int


def _cut_points(text: str) -> list[int]:
    """0, the ends of ReadText's nodes of one raw run, len(text): after the last space
    (or a line break not followed by its pair) of each 8,192-character window."""
    cuts = [0]
    a = 0
    while len(text) - a >= TEXT_SPLIT_SIZE:
        end = a + TEXT_SPLIT_SIZE
        cut = end
        for i in range(end - 1, a - 1, -1):
            ch = text[i]
            if ch == " ":
                cut = i + 1
                break
            if ch in "\r\n":
                nxt = text[i + 1] if i + 1 < end else ""
                if (ch == "\r" and nxt != "\n") or (ch == "\n" and nxt != "\r"):
                    cut = i + 1
                    break
        cuts.append(cut)
        a = cut
    if a < len(text):
        cuts.append(len(text))
    return cuts


_REF_RE = re.compile(r"&(?:#(\d+)|#[xX]([0-9a-fA-F]+)|([A-Za-z][A-Za-z0-9]*));|\r\n?")
_NAMED = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


def _expand(raw: str) -> str:
    """A raw text run as the XML parser hands it over: references expanded, line
    breaks normalized (what mindory's source text holds)."""

    def one(m: re.Match[str]) -> str:
        if m.group(0).startswith("\r"):
            return "\n"
        dec, hexa, name = m.groups()
        try:
            if dec is not None:
                return chr(int(dec))
            if hexa is not None:
                return chr(int(hexa, 16))
        except (ValueError, OverflowError):
            return m.group(0)
        return _NAMED.get(name) or html5.get(f"{name};", m.group(0))

    return _REF_RE.sub(one, raw)


def _long_raw_runs(raw: bytes) -> dict[str, str]:
    """Text runs of 8,192+ raw characters, keyed by their expanded text."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return {}  # another encoding: fall back to counting the expanded text
    found: dict[str, str] = {}
    for m in _LONG_RUN_STR_RE.finditer(text):
        run = m.group(0)
        if "]]>" in run or "-->" in run or "?>" in run:
            continue  # the end of a CDATA section, comment or PI: not one text run
        found.setdefault(_expand(run), run)
    return found


def _is_ws_text(chars: np.ndarray, source: str) -> bool:
    return all(source[int(i)] in _WS for i in chars)


class CreView:
    """crengine's text nodes of one document, each character tied to a source offset."""

    def __init__(self, body: Any, *, svg_root: bool = False, raw: bytes | None = None) -> None:
        self.elems: list[_Elem] = []
        self.texts: list[_Text] = []
        self._pieces: list[str] = []
        self._pos = 0
        # Only a document with a text run of 8,192+ characters can have split nodes.
        self.may_split = raw is None or (
            len(raw) >= TEXT_SPLIT_SIZE and max(map(len, raw.split(b"<"))) >= TEXT_SPLIT_SIZE
        )
        self._raw_runs = _long_raw_runs(raw) if raw is not None and self.may_split else {}
        if body is not None:
            self._build(body, svg_root)
        self.source_text = "".join(self._pieces)
        self._layout()
        self._finish()

    # ------------------------------------------------------------------ building
    def _new_elem(self, name: str, parent: int, el: Any, in_svg: bool) -> int:
        up = self.elems[parent] if parent >= 0 else None
        parent_pre = up.pre if up is not None else False
        if in_svg:
            allow = name in SVG_TEXT
            display, pre = INLINE, allow
        else:
            allow, display, pre = element_facts(name, el, parent_pre)
        invisible = display == NONE or (up is not None and up.invisible)
        elem = _Elem(name, parent, display, pre, allow, invisible, in_svg, self._pos)
        elem.strip_newline = name in ("pre", "textarea") and not in_svg
        k = len(self.elems)
        self.elems.append(elem)
        if up is not None:
            up.children.append((False, k))
            up.strip_newline = False  # a child element: no leading newline to strip any more
        return k

    def _build(self, body: Any, svg_root: bool) -> None:
        stack: list[int] = []
        if svg_root:
            # An SVG spine item: crengine wraps it as <body><autoBoxing><svg> (epubfmt.cpp);
            # autoBoxing is transparent in xpointers.
            stack.append(self._new_elem("body", -1, None, False))
        for event, el in etree.iterwalk(body, events=("start", "end", "comment", "pi")):
            if event == "start":
                tag = el.tag
                if not isinstance(tag, str):  # an entity node (parse removes them): no text
                    stack.append(stack[-1])
                    continue
                local = tag.rsplit("}", 1)[-1]
                in_svg = (
                    tag.startswith(f"{{{SVG_NS}}}")
                    or local == "svg"
                    or (bool(stack) and self.elems[stack[-1]].in_svg)
                )
                # LVHTMLParser lowercases names (m_citags), except inside SVG.
                name = local if in_svg else local.lower()
                if not stack and not svg_root:
                    name = "body"
                k = self._new_elem(name, stack[-1] if stack else -1, el, in_svg)
                stack.append(k)
                if el.text:
                    self._on_text(k, el.text)
            elif event == "end":
                k = stack.pop()
                self.elems[k].source_end = self._pos
                if len(stack) > (1 if svg_root else 0) and el.tail:
                    self._on_text(stack[-1], el.tail)
            elif el.tail:  # a comment or PI: gone in crengine, but it ends a text run
                self._on_text(stack[-1], el.tail)
        if svg_root:
            self.elems[stack.pop()].source_end = self._pos

    def _on_text(self, parent: int, s: str) -> None:
        start = self._pos
        self._pieces.append(s)
        self._pos = start + len(s)
        elem = self.elems[parent]
        if not elem.allow_text:
            return
        for a, b in self._chunks(s):
            self._on_chunk(elem, parent, s, a, b, start)

    def _chunks(self, s: str) -> list[tuple[int, int]]:
        """ReadText's cuts of one text run into nodes (at most 8,192 raw characters)."""
        if not self.may_split or len(s) < TEXT_SPLIT_SIZE // 16:
            return [(0, len(s))]
        raw = self._raw_runs.get(s)
        if raw is None:  # no raw run expands to s: count s itself (exact without references)
            if len(s) < TEXT_SPLIT_SIZE:
                return [(0, len(s))]
            cuts = _cut_points(s)
            return list(zip(cuts, cuts[1:], strict=False))
        # crengine cuts the raw run (references at full length): expand each prefix
        cuts = [len(_expand(raw[:c])) for c in _cut_points(raw)]
        return list(zip(cuts, cuts[1:], strict=False))

    def _on_chunk(self, elem: _Elem, parent: int, s: str, a: int, b: int, base: int) -> None:
        if elem.pre:
            chars = self._pre_chars(s, a, b, base)
        else:
            sub = s[a:b]
            blank = not sub.strip(" \t\r\n")
            if blank and elem.display not in (INLINE, RUBY, NONE) and not elem.children:
                return  # IsEmptySpace: the first, blank child of a block
            if "  " in sub or "\t" in sub or "\n" in sub or "\r" in sub:
                keep = np.ones(len(sub), dtype=bool)
                for m in _WS_RUN_RE.finditer(sub):  # a space after a space goes
                    keep[m.start() + 1 : m.end()] = False
                chars = np.flatnonzero(keep) + (base + a)
            else:
                chars = np.arange(base + a, base + b, dtype=np.int64)
        if elem.strip_newline:
            elem.strip_newline = False
            if len(chars) and not elem.children and s[int(chars[0]) - base] == "\n":
                chars = chars[1:]
        elem.children.append((True, len(self.texts)))
        self.texts.append(_Text(parent, base + a, base + b, chars))

    @staticmethod
    def _pre_chars(s: str, a: int, b: int, base: int) -> np.ndarray:
        if "\t" not in s[a:b]:
            return np.arange(base + a, base + b, dtype=np.int64)
        out: list[int] = []
        x = 0
        for i in range(a, b):
            ch = s[i]
            if ch in "\r\n":
                x = 0
            if ch == "\t":
                delta = 8 - (x & 7)
                x += delta
                out.extend([base + i] * delta)
            else:
                out.append(base + i)
                x += 1
        return np.array(out, dtype=np.int64)

    # -------------------------------------------------------------------- layout
    def _is_ws(self, child: tuple[bool, int]) -> bool:
        is_text, k = child
        if not is_text:
            return False
        t = self.texts[k]
        return not t.removed and _is_ws_text(t.chars, self.source_text)

    def _inline_ish(self, child: tuple[bool, int]) -> bool:
        is_text, k = child
        if is_text:
            return True
        e = self.elems[k]
        return not e.invisible and e.display in (INLINE, INLINE_BLOCK, RUBY)

    def _is_block_child(self, child: tuple[bool, int]) -> bool:
        is_text, k = child
        if is_text:
            return False
        e = self.elems[k]
        return not e.invisible and e.display == BLOCK

    def _layout(self) -> None:
        """initNodeRendMethod's removals of whitespace-only text nodes."""
        for elem in self.elems:
            if elem.invisible or elem.in_svg or not elem.children:
                continue
            kids = [c for c in elem.children if not (c[0] and self.texts[c[1]].removed)]
            if elem.display == RUBY:
                if not elem.pre:  # boxWrapChildren keeps blanks under white-space: pre*
                    self._layout_ruby(kids)
            elif not any(self._is_block_child(c) for c in kids):
                continue
            elif elem.display == INLINE:
                self._layout_inline(kids)
            elif not elem.pre:  # autoboxChildren keeps blanks under white-space: pre*
                self._layout_mixed(kids)

    def _drop(self, child: tuple[bool, int]) -> None:
        self.texts[child[1]].removed = True

    def _layout_mixed(self, kids: list[tuple[bool, int]]) -> None:
        # Each maximal run of inline siblings goes through autoboxChildren (the crengine
        # KOReader pins, 91521dbf): blank text nodes at the run's start go, and at its end
        # only the last one (its loop stops after one step); a run of blanks goes whole.
        i = 0
        while i < len(kids):
            if not self._inline_ish(kids[i]):
                i += 1
                continue
            j = i
            while j + 1 < len(kids) and self._inline_ish(kids[j + 1]):
                j += 1
            first = i
            while first <= j and self._is_ws(kids[first]):
                first += 1
            last = j
            if last >= first and self._is_ws(kids[last]):
                last -= 1
            if first > last:
                drop = kids[i : j + 1]
            else:
                drop = kids[i:first] + kids[last + 1 : j + 1]
            for c in drop:
                if c[0]:
                    self._drop(c)
            i = j + 1

    def _layout_inline(self, kids: list[tuple[bool, int]]) -> None:
        # An inline holding blocks: only blocks and blank text -> nothing removed;
        # otherwise the blank text right next to each block goes.
        has_content = any(
            (c[0] and not self._is_ws(c)) or (not c[0] and self._inline_ish(c)) for c in kids
        )
        if not has_content:
            return
        for i, c in enumerate(kids):
            if self._is_block_child(c):
                for n in (i - 1, i + 1):
                    if 0 <= n < len(kids) and self._is_ws(kids[n]):
                        self._drop(kids[n])

    def _layout_ruby(self, kids: list[tuple[bool, int]]) -> None:
        for i, c in enumerate(kids):
            if not self._is_ws(c):
                continue
            near = [kids[n] for n in (i - 1, i + 1) if 0 <= n < len(kids)]
            edge = i == 0 or i == len(kids) - 1
            if edge or any(not n[0] and self.elems[n[1]].name in _RUBY_PARTS for n in near):
                self._drop(c)

    def _finish(self) -> None:
        """Number siblings, and lay the kept characters out in one array."""
        for elem in self.elems:
            seen: dict[str, int] = {}
            counts: dict[str, int] = {}
            for is_text, k in elem.children:
                if not is_text:
                    name = self.elems[k].name
                    counts[name] = counts.get(name, 0) + 1
            text_nodes = [
                k for is_text, k in elem.children if is_text and not self.texts[k].removed
            ]
            for n, k in enumerate(text_nodes, 1):
                self.texts[k].index = n
                self.texts[k].count = len(text_nodes)
            for is_text, k in elem.children:
                if not is_text:
                    child = self.elems[k]
                    seen[child.name] = seen.get(child.name, 0) + 1
                    child.same_index = seen[child.name]
                    child.same_count = counts[child.name]
        self.nodes = [k for k, t in enumerate(self.texts) if not t.removed]
        starts = [0]
        for k in self.nodes:
            starts.append(starts[-1] + len(self.texts[k].chars))
        self.node_starts = starts  # crengine offset of each kept node in the flat array
        arrays = [self.texts[k].chars for k in self.nodes]
        self.cr_source = (
            np.concatenate(arrays).astype(np.int64) if arrays else np.zeros(0, dtype=np.int64)
        )

    # ------------------------------------------------------------------- lookups
    @property
    def total(self) -> int:
        """Characters in all of crengine's text nodes."""
        return len(self.cr_source)

    def node_text(self, node: int) -> str:
        """crengine's text of kept node ``node`` (whitespace as crengine holds it)."""
        t = self.texts[self.nodes[node]]
        src = self.source_text
        pre = self.elems[t.parent].pre
        out = []
        for i in t.chars:
            ch = src[int(i)]
            out.append(" " if ch in "\t\r\n" and not (pre and ch != "\t") else ch)
        return "".join(out)

    def point_at(self, source_offset: int) -> CrePoint | None:
        """The crengine point a source offset maps to (forward); None: no text at all."""
        if not 0 <= source_offset <= len(self.source_text):
            raise XPointerError(
                f"offset {source_offset} is outside the section [0, {len(self.source_text)}]"
            )
        if not self.nodes:
            return None
        k = int(np.searchsorted(self.cr_source, source_offset, side="left"))
        if k >= self.total:
            last = len(self.nodes) - 1
            return CrePoint(last, self.node_starts[last + 1] - self.node_starts[last])
        node = bisect_right(self.node_starts, k) - 1
        while self.node_starts[node + 1] == self.node_starts[node]:  # skip empty nodes
            node += 1
        return CrePoint(node, k - self.node_starts[node])

    def source_of(self, point: CrePoint) -> int:
        """The source offset of a crengine point (its character's; at a node's end, the
        end of the text the node was made from)."""
        t = self.texts[self.nodes[point.node]]
        length = len(t.chars)
        if not 0 <= point.offset <= length:
            raise XPointerError(
                f"offset {point.offset} is past the end of its text node ({length} characters)"
            )
        if point.offset == length:
            return t.source_end
        return int(t.chars[point.offset])

    def canonical(self, source_offset: int) -> int:
        """Where a source offset lands after a round trip through an xpointer."""
        point = self.point_at(source_offset)
        if point is None:  # no text node: the xpointer names the body's first child
            return self._element_point(0, 0) if self.elems else 0
        return self.source_of(point)

    # ------------------------------------------------------------------ strings
    def _elem_steps(self, k: int) -> list[tuple[str, int, int]]:
        chain: list[tuple[str, int, int]] = []
        while k >= 0:
            e = self.elems[k]
            chain.append((e.name, e.same_index, e.same_count))
            k = e.parent
        chain.reverse()
        return chain

    def path_of(self, point: CrePoint | None, *, explicit_first: bool) -> str:
        """The part of the xpointer after ``DocFragment[N]``."""
        if point is None:
            body = format_steps([("body", 1, 1)], explicit_first=explicit_first)
            return f"{body}.0"
        t = self.texts[self.nodes[point.node]]
        steps = self._elem_steps(t.parent)
        steps.append(("text()", t.index, t.count))
        return f"{format_steps(steps, explicit_first=explicit_first)}.{point.offset}"

    def resolve(self, xp: XPointer) -> int:
        """The source offset an xpointer names (steps after its DocFragment)."""
        if self.source_text == "" and not self.texts:
            return 0  # no document (crengine's placeholder fragment): the section's start
        if not xp.steps:
            if xp.text_index is not None:
                raise XPointerError("the xpointer has text() directly under DocFragment")
            return 0  # the DocFragment itself, or a point in it: the section's start
        name0, index0 = xp.steps[0]
        if name0 != "body" or (index0 or 1) != 1 or not self.elems:
            raise XPointerError(f"the xpointer's first step in the fragment is {name0!r}, not body")
        k = 0
        for name, index in xp.steps[1:]:
            k = self._child_elem(k, name, index or 1)
        elem = self.elems[k]
        if xp.text_index is None:
            return self._element_point(k, xp.offset)
        texts = [c for is_text, c in elem.children if is_text and not self.texts[c].removed]
        if xp.text_index > len(texts):
            raise XPointerError(
                f"<{elem.name}> has {len(texts)} text node(s) in crengine's view, "
                f"not text()[{xp.text_index}]"
            )
        node = bisect_left(self.nodes, texts[xp.text_index - 1])
        return self.source_of(CrePoint(node, xp.offset or 0))

    def _child_elem(self, k: int, name: str, index: int) -> int:
        found = [c for is_text, c in self.elems[k].children if not is_text]
        same = [c for c in found if self.elems[c].name == name]
        if not same:  # crengine interns names; be lenient about case
            same = [c for c in found if self.elems[c].name.lower() == name.lower()]
        if index > len(same):
            raise XPointerError(
                f"<{self.elems[k].name}> has {len(same)} <{name}> child element(s), "
                f"not {name}[{index}]"
            )
        return same[index - 1]

    def _element_point(self, k: int, offset: int | None) -> int:
        elem = self.elems[k]
        if offset is None:
            return elem.source_start
        kids = [c for c in elem.children if not (c[0] and self.texts[c[1]].removed)]
        if offset > len(kids):
            raise XPointerError(
                f"point .{offset} is past the {len(kids)} children of <{elem.name}>"
            )
        if offset == len(kids):
            return elem.source_end
        is_text, c = kids[offset]
        return self.texts[c].source_start if is_text else self.elems[c].source_start
