"""Content and package documents: bytes -> lxml tree, safely.

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

This module also owns :class:`ParsedDocument` (what later stages keep of one
spine document) and the names and limits both steps share.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from html.entities import html5
from typing import Any

from lxml import etree
from lxml import html as lxml_html

from mindory.errors import BookFormatError, LimitError
from mindory.importers.cfi import CfiColumns, CfiDocument
from mindory.importers.epub_safety import safe_xml_parser

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
