"""crengine's per-element facts that decide its text nodes, as tables.

From ``crengine/include/fb2def.h`` (the element table: ``XS_TAG1`` = block, no
text; ``XS_TAG1T`` = block, text; ``XS_TAG1I`` = inline, text; ``XS_TAG1OBJ`` =
inline object, no text; ``XS_TAG1D(name, text, display, white-space)``), read by
``ldomElementWriter::ldomElementWriter`` (``_allowText``, ``TXTFLG_PRE``) in
``crengine/src/lvtinydom.cpp``, and the default stylesheet KOReader loads,
``cr3gui/data/html5.css`` (``display: none`` for ``head``, ``script``, ``style``,
``template``, ``title`` ..., ``[hidden]``, ``span[type=pagebreak]``;
``inline-block`` for ``input``, ``button``, ``marquee``). An element crengine does
not know has no type entry: text allowed, ``display: inline`` (DOM 20180524).
A book's own stylesheets can change ``display`` and ``white-space``; only the
``style`` attribute is read here (docs/koreader.md lists the limits).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["BLOCK", "INLINE", "INLINE_BLOCK", "NONE", "RUBY", "element_facts"]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Display kinds, as they matter to crengine's text nodes.
INLINE, INLINE_BLOCK, RUBY, BLOCK, NONE = "inline", "inline-block", "ruby", "block", "none"

# fb2def.h: elements whose _allowText is false (text children are dropped while parsing).
_NO_TEXT = _names(
    "DocFragment html head base basefont bgsound meta link svg table colgroup col thead "
    "tbody tfoot tr applet object area track embed input keygen param audio source img "
    "FictionBook annotation author coverpage epigraph part poem stanza description image "
    "document-info empty-line publish-info src-title-info title-info"
)
# fb2def.h: display inline (XS_TAG1I / XS_TAG1OBJ); everything else in the table is
# block-like (block, list-item, table parts) unless listed in _NONE.
_INLINE = _names(
    "svg object option embed picture meter progress wbr img a b big code em font i nobr s "
    "small strike strong tt u abbr acronym bdi bdo blink br cite data del dfn emphasis ins "
    "kbd label mark q samp slot spacer span sub sup time var rbc rb rtc rt rp switch case "
    "default pagebreak spacing strikethrough underline image first-name last-name "
    "middle-name text textPath tspan desc metadata math mglyph mi mn mo mtext mspace ms "
    "mrow mstyle merror mphantom mpadded menclose mfenced mfrac msqrt mroot munder mover "
    "munderover msub msup msubsup mmultiscripts mprescripts none mtable mtr mlabeledtr mtd "
    "maligngroup malignmark mstack mlongdiv msgroup msrow mscarries mscarry msline maction "
    "semantics annotation-xml"
)
# Every other element fb2def.h knows (block-like: block, list-item, table parts).
_KNOWN_BLOCK = _names(
    "DocFragment html head title style script base basefont bgsound meta link body hr form "
    "pre blockquote div h1 h2 h3 h4 h5 h6 p output section ol ul li dl dt dd table caption "
    "colgroup col thead tbody tfoot tr th td address article aside canvas fieldset "
    "figcaption figure footer header hgroup legend main nav noscript video center dir menu "
    "multicol noframes search listing textarea plaintext xmp details dialog summary frame "
    "frameset iframe noembed template select button marquee applet optgroup datalist map "
    "area track input keygen param audio source FictionBook annotation author coverpage "
    "epigraph part poem stanza binary description genre stylesheet city date email history "
    "id isbn keywords lang nickname publisher sequence subtitle v version year "
    "document-info empty-line publish-info src-title-info title-info book-name book-title "
    "custom-info home-page program-used src-lang src-ocr src-url text-author"
)
# fb2def.h display none, and html5.css "Hidden elements".
_NONE = _names(
    "style script base basefont bgsound meta link binary description genre stylesheet "
    "area datalist head noembed param template title"
)
# html5.css: display inline-block.
_INLINE_BLOCK = frozenset({"input", "button", "marquee"})
# fb2def.h white-space: pre (and html5.css pre / pre-wrap for these).
_PRE = frozenset({"style", "pre", "listing", "textarea", "plaintext", "xmp"})
# Inside <svg> only these hold text, parsed as PRE (ldomElementWriter's _insideSVG).
SVG_TEXT = frozenset({"style", "text", "tspan", "textPath", "title", "desc", "metadata"})

_DISPLAY_RE = re.compile(r"(?:^|;)\s*display\s*:\s*([a-z-]+)", re.IGNORECASE)
_WS_RE = re.compile(r"(?:^|;)\s*white-space\s*:\s*([a-z-]+)", re.IGNORECASE)
_INLINE_DISPLAYS = {"inline": INLINE, "inline-block": INLINE_BLOCK, "inline-table": INLINE_BLOCK}


def _local(name: str) -> str:
    return name.rsplit("}", 1)[-1]


def element_facts(name: str, el: Any, parent_pre: bool) -> tuple[bool, str, bool]:
    """``(allow_text, display, pre)`` of an element named ``name`` (outside SVG)."""
    allow = name not in _NO_TEXT
    if name in _NONE:
        display = NONE
    elif name == "ruby":
        display = RUBY
    elif name in _INLINE_BLOCK:
        display = INLINE_BLOCK
    elif name in _INLINE or name not in _KNOWN_BLOCK:
        display = INLINE
    else:
        display = BLOCK
    pre = parent_pre or name in _PRE
    if el is not None:
        attrs = el.attrib
        if attrs:
            for key, value in attrs.items():
                if _hides(name, _local(str(key)), str(value)):
                    display = NONE
            style = attrs.get("style")
            if style:
                display, pre = _style_facts(str(style), display, pre)
    return allow, display, pre


def _hides(name: str, attr: str, value: str) -> bool:
    """html5.css: ``[hidden]``, ``span[type=pagebreak]`` (EPUB's epub:type, whose
    prefix crengine drops), ``input[type=hidden]`` are ``display: none``."""
    if attr == "hidden":
        return True
    if attr != "type":
        return False
    return (name == "span" and value.strip() == "pagebreak") or (
        name == "input" and value.strip().lower() == "hidden"
    )


def _style_facts(style: str, display: str, pre: bool) -> tuple[str, bool]:
    """The ``style`` attribute's ``display`` and ``white-space`` (last one wins)."""
    found = _DISPLAY_RE.findall(style)
    if found:
        value = found[-1].lower()
        if value == "none":
            display = NONE
        elif value in _INLINE_DISPLAYS:
            display = _INLINE_DISPLAYS[value]
        elif value == "ruby":
            display = RUBY
        elif value not in ("inherit", "initial", "unset", "revert", "contents"):
            display = BLOCK
    ws = _WS_RE.findall(style)
    if ws:
        value = ws[-1].lower()
        if value in ("pre", "pre-wrap", "pre-line", "break-spaces"):
            pre = True
        elif value in ("normal", "nowrap"):
            pre = False
    return display, pre
