"""Content documents: bytes -> DOM -> source text, normalized text, blocks.

**Source text** (DESIGN §1) is what a browser's ``document.body.textContent``
holds for the document parsed as XML: every text node under ``<body>`` in
document order (whitespace-only nodes and CDATA included, comments and
processing instructions excluded, their tails included, ``body``'s own tail
excluded). For an lxml tree that is ``"".join(body.itertext())`` once entity
reference nodes are gone (see below).

Parsing decisions (the specification is silent on these):

* Every content document is parsed as XML first, whatever its name or media
  type (``.html``, ``.xml``, ``text/html``): EPUB content documents are XHTML,
  and the XML parse keeps self-closed elements such as ``<a id="x"/>`` empty,
  where an HTML parse (epub.js does one for ``.html``) lets them swallow the
  following text. Only a document that is not well-formed XML falls back to
  lxml's HTML parser (libxml2, HTML5 tokenizer); ``parser`` then says "html"
  and a warning names the document.
* HTML named entities (``&nbsp;``, ``&mdash;`` ...) that EPUB 2 books use
  without a DTD are expanded before parsing, by rewriting them as numeric
  character references (outside comments, CDATA, processing instructions and
  the DOCTYPE). Nothing else is expanded: entities declared in an internal
  DTD and external entities are never resolved (no XXE, no billion laughs);
  their reference nodes are removed from the tree and contribute **no text**,
  like a browser that refuses them, and a warning counts them.
* Nesting deeper than ``MAX_NESTING`` elements is refused with LimitError:
  libxml2 stops at 2048 levels (XML raises, HTML silently drops the text), so
  a clear error is the only way never to lose text silently.

**Normalized text** is built in one walk over the tree, by MapBuilder's rules
(the same walk makes the rows of the CFI table, :mod:`.cfi`). Block
elements are separated by exactly ``"\\n\\n"``; ``<br/>`` is ``"\\n"`` and
two or more in a row (only whitespace between) are a paragraph break; table
cells are separated by ``"\\t"`` (as ``innerText`` does) and rows are blocks;
runs of ASCII whitespace collapse to one space; whitespace (any Unicode space,
including NBSP and U+3000 indents) is trimmed at block and line edges; soft
hyphen, U+200B, U+2060 and U+FEFF are deleted; ``<rt>``, ``<rp>``, ``<script>``,
``<style>``, ``<template>`` (and MathML annotations, SVG ``title``/``desc``) are
deleted; ``<pre>`` keeps its whitespace (line endings unified, three or more
newlines reduced to two). Trimmed whitespace is always its own delete run, so
a block or chunk never has it inside its source span's edges.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from html.entities import html5
from typing import Any
from unicodedata import is_normalized

import numpy as np
from lxml import etree
from lxml import html as lxml_html

from mindory.errors import BookFormatError, LimitError
from mindory.importers.cfi import CfiColumns, CfiDocument, cfi_start_columns
from mindory.importers.epub_safety import safe_xml_parser
from mindory.text.offsets import MapBuilder, OffsetMap, UnicodeForm
from mindory.text.records import (
    CAPTION,
    HEADING,
    LIST_ITEM,
    PARAGRAPH,
    PREFORMATTED,
    QUOTE,
    TABLE_ROW,
    Block,
)

__all__ = [
    "MAX_NESTING",
    "ParsedDocument",
    "SectionText",
    "XHTML_NS",
    "expand_html_entities",
    "extract_text",
    "parse_content",
    "parse_package_xml",
    "strip_entity_nodes",
]

XHTML_NS = "http://www.w3.org/1999/xhtml"
SVG_NS = "http://www.w3.org/2000/svg"
MATHML_NS = "http://www.w3.org/1998/Math/MathML"

# Deepest element nesting under <body> we accept (libxml2's own cap is 2048
# levels from the root; staying below it means the HTML parser's silent
# truncation is always caught here).
MAX_NESTING = 2000


@dataclass(frozen=True)
class ParsedDocument:
    """What later stages (EPUB CFI) need from one spine document.

    ``root``/``body`` are lxml elements of the tree the source text was read
    from (``body`` is None for a document without one; for an SVG spine
    document it is the ``<svg>`` root). Entity reference nodes have been
    removed; comments and processing instructions remain (CFI skips them).
    ``id_offsets`` maps each element id under ``body`` to the source offset of
    the first text at or after that element. ``spine_step`` is the even CFI
    step of ``<spine>`` in the package document (usually 6). ``raw_bytes`` is
    kept only for ``.html``/``.htm`` documents, which epub.js parses as HTML
    (see :attr:`html_root`). ``cfi_columns`` and ``source_text``, when set,
    are the CFI rows the text walk already made (:func:`extract_text`), so
    :attr:`cfi` does not walk the tree again.
    """

    root: Any
    body: Any
    parser: str  # "xml" | "html" | "none" (no document at this spine position)
    spine_index: int
    idref: str
    itemref_id: str | None
    raw_bytes_href: str  # path of the document inside the ZIP
    id_offsets: Mapping[str, int] = field(default_factory=dict, repr=False)
    spine_step: int = 6
    raw_bytes: bytes | None = field(default=None, repr=False, compare=False)
    cfi_columns: CfiColumns | None = field(default=None, repr=False, compare=False)
    source_text: str | None = field(default=None, repr=False, compare=False)

    @cached_property
    def html_root(self) -> Any:
        """The tree a browser's HTML parser builds (epub.js does so for .html names)."""
        if self.raw_bytes is None:
            return None
        root, _ = _parse_html(self.raw_bytes)
        return root

    @cached_property
    def cfi(self) -> Any:
        """The CFI table of this document (:class:`mindory.importers.cfi.CfiDocument`)."""
        if self.cfi_columns is not None and self.source_text is not None:
            return CfiDocument.from_columns(
                self.cfi_columns,
                self.source_text,
                spine_index=self.spine_index,
                itemref_id=self.itemref_id,
                html_root=self.html_root,
                spine_step=self.spine_step,
            )
        return CfiDocument.from_tree(
            self.root,
            self.body,
            spine_index=self.spine_index,
            itemref_id=self.itemref_id,
            html_root=self.html_root,
            spine_step=self.spine_step,
        )


@dataclass(frozen=True)
class SectionText:
    """Source and normalized text of one document, with map and blocks.

    ``cfi_columns``: the document's CFI rows, when :func:`extract_text` was
    given the root element and they describe ``source_text``.
    """

    source_text: str
    normalized_text: str
    offset_map: OffsetMap
    blocks: tuple[Block, ...]
    id_offsets: dict[str, int]
    cfi_columns: CfiColumns | None = field(default=None, repr=False, compare=False)


# --------------------------------------------------------------------- entities

_XML_PREDEFINED = frozenset({"amp", "lt", "gt", "quot", "apos"})
# Any named reference that XML would not know by itself.
_NAMED_REF_RE = re.compile(rb"&(?!(?:amp|lt|gt|quot|apos);)[A-Za-z][A-Za-z0-9]*;")
# After expansion: an "&" that may still start an entity reference. Entity
# names are XML Names ("foo-bar", "x.y", non-ASCII letters), wider than the
# HTML names above; an "&" in a comment or CDATA section also matches, which
# only costs a search of the tree for entity nodes.
_MAYBE_ENTITY_REF_RE = re.compile(rb"&(?!#|(?:amp|lt|gt|quot|apos);)[^\s&;<>]")
# Regions where '&name;' is not a reference (or must stay as written), then a reference.
_ENTITY_SCAN_RE = re.compile(
    rb"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<!DOCTYPE[^\[>]*(?:\[.*?\]\s*)?>"
    rb"|&([A-Za-z][A-Za-z0-9]{0,40});",
    re.DOTALL,
)
_ENTITY_BYTES: dict[bytes, bytes] = {
    name[:-1].encode("ascii"): "".join(f"&#{ord(ch)};" for ch in value).encode("ascii")
    for name, value in html5.items()
    if name.endswith(";") and name[:-1] not in _XML_PREDEFINED
}


def expand_html_entities(data: bytes) -> tuple[bytes, int]:
    """Rewrite HTML named references as numeric ones; count the unknown names left.

    Numeric references are ASCII, so this is correct in any ASCII-compatible
    encoding; byte positions change, which is fine because every position in
    mindory is counted in the DOM text.
    """
    if not _NAMED_REF_RE.search(data):
        return data, 0
    unknown = 0

    def replace(match: re.Match[bytes]) -> bytes:
        nonlocal unknown
        name = match.group(1)
        if name is None:
            return match.group(0)  # comment, CDATA, PI or DOCTYPE: untouched
        repl = _ENTITY_BYTES.get(name)
        if repl is not None:
            return repl
        if name.decode("ascii") not in _XML_PREDEFINED:
            unknown += 1
        return match.group(0)

    return _ENTITY_SCAN_RE.sub(replace, data), unknown


_XML_DECL_ENCODING_RE = re.compile(r"^(\s*<\?xml[^>]*?encoding\s*=\s*)([\"'])[^\"']*\2")


def _utf16_to_utf8(data: bytes) -> bytes:
    """UTF-16 documents (with BOM) become UTF-8 so byte-level entity work applies."""
    if not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data
    text = data.decode("utf-16")
    text = _XML_DECL_ENCODING_RE.sub(r"\1\2UTF-8\2", text, count=1)
    return text.encode("utf-8")


def strip_entity_nodes(root: Any) -> int:
    """Remove entity reference nodes, keeping their tails; return how many.

    They are the unexpanded references (internal-DTD or external entities):
    they contribute no text, and later stages never meet an odd node type.
    """
    entities = list(root.iter(etree.Entity))
    for ent in entities:
        parent = ent.getparent()
        if parent is None:
            continue
        tail = ent.tail
        if tail:
            prev = ent.getprevious()
            if prev is not None:
                prev.tail = (prev.tail or "") + tail
            else:
                parent.text = (parent.text or "") + tail
        ent.tail = None
        parent.remove(ent)
    return len(entities)


# ---------------------------------------------------------------------- parsing

_DEPTH_MARKERS = ("Excessive depth",)
_AMPLIFICATION_MARKERS = ("amplification", "entity reference loop", "entity loop")


def _classify_xml_error(exc: etree.XMLSyntaxError, where: str, path: str) -> None:
    """Hostile-looking XML errors become LimitError instead of an HTML fallback."""
    msg = str(exc)
    if any(marker in msg for marker in _DEPTH_MARKERS):
        raise LimitError(
            f"{where}: elements nested deeper than the parser allows (limit {MAX_NESTING} "
            "levels); refusing rather than losing text",
            path=path,
        ) from exc
    if any(marker in msg for marker in _AMPLIFICATION_MARKERS):
        raise LimitError(
            f"{where}: entity expansion limit exceeded (billion-laughs style DTD); refused",
            path=path,
        ) from exc


def parse_package_xml(data: bytes, where: str, path: str) -> tuple[Any, list[str]]:
    """Parse a package-level XML file (container, OPF, NCX) safely.

    Not well-formed: one retry in libxml2's recover mode (real EPUB 2
    packages have stray ``&`` and the like), with a warning.
    """
    warnings: list[str] = []
    data, unknown = expand_html_entities(_utf16_to_utf8(data))
    try:
        root = etree.fromstring(data, safe_xml_parser())
    except etree.XMLSyntaxError as exc:
        _classify_xml_error(exc, where, path)
        try:
            root = etree.fromstring(data, safe_xml_parser(recover=True))
        except etree.XMLSyntaxError as exc2:
            raise BookFormatError(f"{where} is not readable XML: {exc2}", path=path) from exc2
        if root is None:
            raise BookFormatError(f"{where} is not readable XML: {exc}", path=path) from exc
        warnings.append(f"{where} is not well-formed XML ({exc}); read in recovery mode")
    if (unknown or _MAYBE_ENTITY_REF_RE.search(data)) and strip_entity_nodes(root):
        warnings.append(f"{where}: entity references left unexpanded (no DTD entities are read)")
    return root, warnings


_META_CHARSET_RE = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?([A-Za-z0-9._-]+)", re.IGNORECASE)
_XML_DECL_RE = re.compile(rb"^\s*<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]+)")


def _decode_for_html(data: bytes) -> tuple[str, bool]:
    """Decode bytes for the HTML fallback: BOM, XML declaration, meta charset, UTF-8."""
    encoding = "utf-8"
    for bom, name in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            encoding = name
            break
    else:
        match = _XML_DECL_RE.match(data) or _META_CHARSET_RE.search(data[:4096])
        if match:
            encoding = match.group(1).decode("ascii")
    try:
        codecs.lookup(encoding)
    except LookupError:
        encoding = "utf-8"
    try:
        return data.decode(encoding), False
    except UnicodeDecodeError:
        return data.decode(encoding, errors="replace"), True


def _html_parser() -> lxml_html.HTMLParser:
    return lxml_html.HTMLParser(
        encoding="utf-8",
        recover=True,
        no_network=True,
        remove_comments=False,
        remove_pis=False,
        remove_blank_text=False,
        huge_tree=True,
    )


def _parse_html(data: bytes) -> tuple[Any, bool]:
    text, lossy = _decode_for_html(data)
    # A browser's input stream turns CRLF/CR into LF before tokenizing.
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return None, lossy
    try:
        root = lxml_html.document_fromstring(text.encode("utf-8"), parser=_html_parser())
    except etree.ParserError:
        return None, lossy
    return root, lossy


def _find_body(root: Any) -> Any:
    if root is None:
        return None
    tag = root.tag
    if tag == f"{{{SVG_NS}}}svg" or tag == "svg":
        return root  # an SVG content document: its text is the whole tree
    for child in root:
        if child.tag in (f"{{{XHTML_NS}}}body", "body"):
            return child
    return None


def parse_content(data: bytes, where: str, path: str) -> tuple[Any, Any, str, list[str]]:
    """Parse one content document: ``(root, body, parser, warnings)``.

    XML first (see module doc), HTML fallback for documents that are not
    well-formed. ``root`` and ``body`` may be None for an empty document.
    """
    warnings: list[str] = []
    prepared, unknown = expand_html_entities(_utf16_to_utf8(data))
    try:
        root = etree.fromstring(prepared, safe_xml_parser())
        parser = "xml"
        if unknown or _MAYBE_ENTITY_REF_RE.search(prepared):
            removed = strip_entity_nodes(root)
            if removed:
                warnings.append(
                    f"{where}: {removed} entity reference(s) not expanded (undefined or "
                    "DTD-declared entities are never read); they contribute no text"
                )
    except etree.XMLSyntaxError as exc:
        _classify_xml_error(exc, where, path)
        root, lossy = _parse_html(data)
        parser = "html"
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.append(f"{where} is not well-formed XML ({first_line}); parsed as HTML")
        if lossy:
            warnings.append(f"{where}: undecodable bytes replaced with U+FFFD")
    body = _find_body(root)
    if root is not None and body is None:
        warnings.append(f"{where} has no <body>; it holds no text")
    return root, body, parser, warnings


# ------------------------------------------------------------- normalization

# Roles of elements in the normalizing walk (anything else is inline).
_BLOCK, _PRE, _CELL, _BR, _DROP = 1, 2, 3, 4, 5
# Separator pending before the next visible character, weakest first.
_NONE, _TAB, _NEWLINE, _PARA = 0, 1, 2, 3

_Role = tuple[int, str | None, int | None]  # role, block kind (None: inherit), heading level


def _role_table() -> dict[str, _Role]:
    table: dict[str, _Role] = {}
    inherit = (
        "address article aside body center details dialog dir div dl fieldset figure "
        "footer form header hgroup hr html legend main menu nav noscript ol p search "
        "section summary table tbody tfoot thead ul"
    )
    for name in inherit.split():
        table[name] = (_BLOCK, None, None)
    for level in range(1, 7):
        table[f"h{level}"] = (_BLOCK, HEADING, level)
    for name in ("li", "dt", "dd"):
        table[name] = (_BLOCK, LIST_ITEM, None)
    table["blockquote"] = (_BLOCK, QUOTE, None)
    table["tr"] = (_BLOCK, TABLE_ROW, None)
    table["caption"] = (_BLOCK, CAPTION, None)
    table["figcaption"] = (_BLOCK, CAPTION, None)
    for name in ("pre", "listing", "xmp", "plaintext"):
        table[name] = (_PRE, PREFORMATTED, None)
    table["td"] = (_CELL, None, None)
    table["th"] = (_CELL, None, None)
    table["br"] = (_BR, None, None)
    for name in ("rt", "rp", "script", "style", "template"):
        table[name] = (_DROP, None, None)
    # Both the XHTML (namespaced, XML parse) and the plain (HTML parse) names.
    out = dict(table)
    out.update({f"{{{XHTML_NS}}}{name}": role for name, role in table.items()})
    for name in ("annotation", "annotation-xml"):
        out[f"{{{MATHML_NS}}}{name}"] = (_DROP, None, None)
    for name in ("title", "desc"):
        out[f"{{{SVG_NS}}}{name}"] = (_DROP, None, None)
    return out


_ROLES = _role_table()

# Characters trimmed at block and line edges: every Unicode space plus the
# invisible characters (which are deleted everywhere anyway).
_INVISIBLE = "\u00ad\u200b\u2060\ufeff"
# Every character for which str.isspace() is true (checked by a test).
_UNICODE_SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
    "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_EDGE = _UNICODE_SPACES + _INVISIBLE
# Inside a line: ASCII whitespace runs (HTML's collapsible white space) and
# invisible characters; a single " " needs no edit and is not matched.
# Written as "a non-space special, then more" | "a space, then more": the same
# matches as "two or more of the class, or one non-space", scanned ~25% faster.
_SPECIAL_RE = re.compile(
    r"[\t\n\r\f\u00ad\u200b\u2060\ufeff][ \t\n\r\f\u00ad\u200b\u2060\ufeff]*"
    r"| [ \t\n\r\f\u00ad\u200b\u2060\ufeff]+"
)
_ASCII_WS_RE = re.compile(r"[ \t\n\r\f]")
_ASCII_WS_RUN_RE = re.compile(r"[ \t\n\r\f]*")
_PRE_SPECIAL_RE = re.compile(r"\r\n?|\n{3,}|[\u00ad\u200b\u2060\ufeff]+")

_Pending = tuple[int, int, str | None, bool]  # source start, end, text (None: dropped), verbatim
# A finished block: kind, heading level, normalized [start, end), source [start, end).
_RawBlock = tuple[str, int | None, int, int, int, int]


class _NeedsBuilder(Exception):
    """Raised by the direct map building at text that Unicode normalization changes."""


class _Normalizer:
    """One walk's state: the map being built, pending separator and whitespace, blocks.

    The map follows MapBuilder's rules (copy, edit, delete, insert in source
    order) but is built here, directly: a text node then costs a few list
    appends instead of a dozen method calls, and this walk is most of an EPUB
    import. ``edits`` holds the edit runs flat (``a, n, b, m, a, n, ...``).
    Only MapBuilder splits a copy that Unicode normalization changes into
    runs, so at the first such copy the direct building gives up
    (:class:`_NeedsBuilder`) and the document is walked again with a
    ``builder``: then every run goes through it (``source`` is the whole
    source text, which MapBuilder copies from).
    """

    __slots__ = (
        "any",
        "builder",
        "block_kind",
        "block_source",
        "block_start",
        "blocks",
        "drop",
        "edits",
        "form",
        "kinds",
        "last_space",
        "out_s",
        "parts",
        "pend",
        "pieces",
        "pos",
        "pos_n",
        "pos_s",
        "pre",
        "sep",
        "source",
    )

    def __init__(self, unicode_form: UnicodeForm | None, source: str | None = None) -> None:
        self.form = unicode_form
        self.source = source or ""
        self.builder = MapBuilder(unicode_form) if source is not None else None
        self.pieces: list[str] = []  # every text node, in order: the source text
        self.pos = 0  # source position of the next text node
        self.parts: list[str] = []  # the normalized text
        self.edits: list[int] = []
        self.pos_n = 0  # normalized length so far
        self.pos_s = 0  # source consumed so far (pos_s <= pos: the rest is pending)
        self.out_s = 0  # source end of the run that made the last normalized character
        self.any = False  # has any visible character been emitted?
        self.sep = _NONE
        self.last_space = False  # does the normalized text end with a collapsible space?
        self.pend: list[_Pending] = []  # source not yet consumed
        self.drop = 0  # depth inside dropped elements (rt, script, ...)
        self.pre = 0  # depth inside <pre>
        self.kinds: list[tuple[str, int | None]] = [(PARAGRAPH, None)]
        self.block_start = 0
        self.block_source = 0
        self.block_kind: tuple[str, int | None] = (PARAGRAPH, None)
        self.blocks: list[_RawBlock] = []

    # -------------------------------------------------------------- elements
    def open(self, role: _Role) -> None:
        kind = role[0]
        if kind == _DROP:
            self.drop += 1
        elif self.drop:
            return  # structure inside dropped content (a <br/> in <rt>) adds nothing
        elif kind in (_BLOCK, _PRE):
            self.sep = _PARA
            self.kinds.append((role[1], role[2]) if role[1] is not None else self.kinds[-1])
            if kind == _PRE:
                self.pre += 1
        elif kind == _BR:
            if self.sep < _PARA:
                # A second <br/> with only whitespace since the first: paragraph break.
                self.sep = _PARA if self.sep == _NEWLINE else _NEWLINE
        elif kind == _CELL and self.sep < _TAB:
            self.sep = _TAB

    def close(self, role: _Role) -> None:
        # Mirrors open(): an element closes at the same drop depth it opened at.
        kind = role[0]
        if kind == _DROP:
            self.drop -= 1
        elif self.drop:
            return
        elif kind in (_BLOCK, _PRE):
            self.sep = _PARA
            self.kinds.pop()
            if kind == _PRE:
                self.pre -= 1

    # ------------------------------------------------------------------ text
    def text(self, s: str) -> None:
        self.pieces.append(s)
        p = self.pos
        n = len(s)
        self.pos = p + n
        if self.drop:
            self.pend.append((p, p + n, None, False))
            return
        verbatim = self.pre > 0
        end = len(s.rstrip(_EDGE))
        if end == 0:  # nothing visible: decide later what this whitespace becomes
            self.pend.append((p, p + n, s, verbatim))
            return
        lead = 0
        if not self.any or self.sep >= (_PARA if verbatim else _NEWLINE):
            lead = n - len(s.lstrip(_EDGE))
            if lead:
                self.pend.append((p, p + lead, None, False))  # trimmed at the edge
        if self.pend or self.sep or not self.any:
            self._resolve()
        if verbatim:
            self._emit_verbatim(s, lead, end, p)
        else:
            self._emit_inline(s, lead, end, p)
        if end < n:
            self.pend.append((p + end, p + n, s[end:], verbatim))

    def _resolve(self) -> None:
        """Emit what stands between the last visible character and the next one."""
        sep = self.sep
        if not self.any:
            self._drop_pending()
            self.any = True
            self._open_block()
        elif sep >= _NEWLINE:
            self._drop_pending()
            if sep == _PARA:
                self._close_block()
                self._edit("\n\n", self.pos_s, self.pos_s)
                self._open_block()
            else:
                self._edit("\n", self.pos_s, self.pos_s)
            self.last_space = False
        elif sep == _TAB:
            self._drop_pending()
            self._edit("\t", self.pos_s, self.pos_s)
            self.last_space = True  # a cell's leading whitespace collapses into the tab
        elif self.pend:
            self._replay_pending()
        self.sep = _NONE

    def _drop_pending(self) -> None:
        pend = self.pend
        if pend:
            self._edit("", pend[0][0], pend[-1][1])
            pend.clear()

    def _replay_pending(self) -> None:
        """Whitespace between inline content: collapse (or keep, in <pre>) it now."""
        for start, end, text, verbatim in self.pend:
            if text is None:
                self._edit("", start, end)
            elif verbatim:
                self._emit_verbatim(text, 0, end - start, start)
            else:
                self._emit_inline(text, 0, end - start, start)
        self.pend.clear()

    def _emit_inline(self, s: str, i: int, j: int, p: int) -> None:
        """Emit ``s[i:j]`` (source ``p + i``): collapse whitespace, drop invisibles."""
        last_space = self.last_space
        if last_space:
            k = _ASCII_WS_RUN_RE.match(s, i, j).end()  # type: ignore[union-attr]
            if k > i:
                self._edit("", p + i, p + k)
                i = k
        if s.isprintable() and "  " not in s:
            # Nothing to collapse or delete: what _SPECIAL_RE matches is either
            # not printable or two spaces. These two scans are ~4x faster than
            # the regex, and almost every text node takes this path.
            if j > i:
                self._copy(s[i:j], p + i)
                self.last_space = s[j - 1] == " "
            return
        last = i
        for m in _SPECIAL_RE.finditer(s, i, j):
            a, e = m.span()
            if a > last:
                self._copy(s[last:a], p + last)
                last_space = s[a - 1] == " "
            if last_space or _ASCII_WS_RE.search(s, a, e) is None:
                # Only invisible characters, or a space was just emitted (" \n" after " ").
                self._edit("", p + a, p + e)
            else:
                self._edit(" ", p + a, p + e)
                last_space = True
            last = e
        if j > last:
            self._copy(s[last:j], p + last)
            last_space = s[j - 1] == " "
        self.last_space = last_space

    def _emit_verbatim(self, s: str, i: int, j: int, p: int) -> None:
        """Emit ``s[i:j]`` of a ``<pre>``: whitespace kept, line endings unified."""
        last = i
        for m in _PRE_SPECIAL_RE.finditer(s, i, j):
            a, e = m.span()
            if a > last:
                self._copy(s[last:a], p + last)
            ch = s[a]
            if ch == "\r":
                self._edit("\n", p + a, p + e)
            elif ch == "\n":
                self._edit("\n\n", p + a, p + e)
            else:
                self._edit("", p + a, p + e)
            last = e
        if j > last:
            self._copy(s[last:j], p + last)
        self.last_space = False

    # ------------------------------------------------------------ the map
    def _copy(self, text: str, start: int) -> None:
        """``text``, found at source ``start``, is copied (normalized if a form is set)."""
        end = start + len(text)
        builder = self.builder
        if builder is not None:
            builder.copy(self.source, start, end)
            self.pos_n = builder.normalized_length
        else:
            # MapBuilder.copy's own test for "copied as it is".
            form = self.form
            if not (form is None or text.isascii() or is_normalized(form, text)):
                raise _NeedsBuilder
            self.parts.append(text)
            self.pos_n += len(text)
        self.pos_s = self.out_s = end

    def _edit(self, replacement: str, start: int, end: int) -> None:
        """Source ``[start, end)`` becomes ``replacement`` (one edit run; never empty)."""
        n = len(replacement)
        if self.builder is not None:
            self.builder.edit(replacement, start, end)
        else:
            self.edits += (self.pos_n, n, start, end - start)
            if n:
                self.parts.append(replacement)
        if n:
            self.pos_n += n
            self.out_s = end
        self.pos_s = end

    # ---------------------------------------------------------------- blocks
    def _open_block(self) -> None:
        # A block opens just before its first visible character is emitted,
        # so the source consumed so far is where that character's run starts.
        self.block_start = self.pos_n
        self.block_source = self.pos_s
        self.block_kind = self.kinds[-1]

    def _close_block(self) -> None:
        # Trimmed whitespace after the last visible character is still pending
        # or deleted with no output, so ``out_s`` is the end of the block's source.
        kind, level = self.block_kind
        self.blocks.append(
            (kind, level, self.block_start, self.pos_n, self.block_source, self.out_s)
        )

    def finish(self) -> tuple[str, str, OffsetMap, list[_RawBlock]]:
        """``(source text, normalized text, map, blocks)``."""
        self._drop_pending()
        if self.any:
            self._close_block()
        source = "".join(self.pieces)
        if self.builder is not None:
            text, omap = self.builder.build()
        else:
            text = "".join(self.parts)
            edits = np.array(self.edits, dtype=np.int64).reshape(-1, 4)
            omap = OffsetMap(edits, self.pos_n, self.pos_s)
        if self.pos_s != len(source) or self.pos_n != len(text):
            raise AssertionError(f"normalizer consumed {self.pos_s} of {len(source)} characters")
        return source, text, omap, self.blocks


_WALK_EVENTS = ("start", "end", "comment", "pi")


def _walk(
    body: Any, norm: _Normalizer, ids: dict[str, int], cols: CfiColumns, where: str, path: str
) -> bool:
    """Feed every text node under ``body`` to ``norm`` in document order.

    The same walk completes ``cols`` (the CFI rows of the body's ancestors)
    with the rows of the body subtree, exactly as :meth:`CfiDocument.from_tree`
    would make them: one walk over the tree instead of two. Returns False when
    the rows do not describe the source text: libxml2 gives an entity
    reference node text, which the source keeps and CFI does not.
    """
    roles = _ROLES
    text = norm.text
    elements: list[Any] = []  # new CFI element rows, flat: parent row, even step, id, ...
    pieces: list[int] = []  # CFI piece rows, flat: length, element row, odd step, ...
    next_row = len(cols["parent"])
    # Per open node: its CFI element row, element children seen so far, role.
    stack: list[list[Any]] = []
    usable = True
    for event, el in etree.iterwalk(body, events=_WALK_EVENTS):
        if event == "start":
            if len(stack) >= MAX_NESTING:
                raise LimitError(
                    f"{where}: elements nested deeper than {MAX_NESTING} levels; refused",
                    path=path,
                )
            tag = el.tag
            eid = el.get("id")
            if eid is not None and eid not in ids:
                ids[eid] = norm.pos
            role = roles.get(tag)
            if role is not None:
                norm.open(role)
            t = el.text
            if t:
                text(t)
            if not stack:  # <body>: its element row is already in cols
                row = cols["body"]
            elif isinstance(tag, str):
                top = stack[-1]
                top[1] += 1
                row = next_row
                next_row += 1
                elements += (top[0], 2 * top[1], eid)
            else:  # an entity reference node: no element, its text is not CFI text
                usable = False
                stack.append([-1, 0, None])
                continue
            pieces += (len(t) if t else 0, row, 1)
            stack.append([row, 0, role])
        elif event == "end":
            role = stack.pop()[2]
            if role is not None:
                norm.close(role)
            if stack:  # body's own tail is outside the body
                t = el.tail
                if t:
                    text(t)
                top = stack[-1]
                pieces += (len(t) if t else 0, top[0], 2 * top[1] + 1)
        else:  # comment / processing instruction: its text is not DOM text, its tail is
            t = el.tail
            if t:
                text(t)
            top = stack[-1]
            pieces += (len(t) if t else 0, top[0], 2 * top[1] + 1)
    # As tuples: the CFI table keeps them without another copy.
    cols["parent"] = tuple(cols["parent"] + elements[0::3])
    cols["step"] = tuple(cols["step"] + elements[1::3])
    cols["id"] = tuple(cols["id"] + elements[2::3])
    cols["len"] = tuple(cols["len"] + pieces[0::3])
    cols["node"] = tuple(cols["node"] + pieces[1::3])
    cols["tstep"] = tuple(cols["tstep"] + pieces[2::3])
    return usable


def extract_text(
    body: Any,
    unicode_form: UnicodeForm | None,
    where: str = "",
    path: str = "",
    *,
    root: Any = None,
) -> SectionText:
    """Source text, normalized text, offset map and blocks of one ``<body>``.

    With ``root`` (the document element holding ``body``), the result also
    carries the document's CFI rows (:attr:`SectionText.cfi_columns`).
    """
    if body is None:
        empty = MapBuilder(unicode_form)
        text, omap = empty.build()
        return SectionText("", text, omap, (), {})
    cfi_root = root if root is not None else body
    ids: dict[str, int] = {}
    cols = cfi_start_columns(cfi_root, body)
    norm = _Normalizer(unicode_form)
    try:
        usable = _walk(body, norm, ids, cols, where, path)
    except _NeedsBuilder:  # see _Normalizer: again, through MapBuilder
        ids.clear()
        cols = cfi_start_columns(cfi_root, body)
        norm = _Normalizer(unicode_form, "".join(body.itertext()))
        usable = _walk(body, norm, ids, cols, where, path)
    source, normalized, omap, raw_blocks = norm.finish()
    blocks = _make_blocks(raw_blocks)
    columns = cols if usable and root is not None else None
    return SectionText(source, normalized, omap, blocks, ids, columns)


def _make_blocks(raw: list[_RawBlock]) -> tuple[Block, ...]:
    return tuple(
        Block(
            index=k,
            kind=kind,
            start=start,
            end=end,
            source_start=source_start,
            source_end=source_end,
            level=level,
        )
        for k, (kind, level, start, end, source_start, source_end) in enumerate(raw)
    )
