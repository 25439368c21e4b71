"""Content documents: bytes -> DOM -> source text, normalized text, blocks.

Two steps, one module each: ``parse`` (bytes -> lxml tree: entity expansion,
encoding fixes, XML first with an HTML fallback, the package files too) and
``walk`` (one walk over ``<body>`` -> source text, normalized text, offset map,
blocks and the CFI rows). ``walk`` imports ``parse``, never the reverse.
"""

from __future__ import annotations

from mindory.importers.xhtml.parse import (
    MAX_NESTING,
    XHTML_NS,
    ParsedDocument,
    expand_html_entities,
    parse_content,
    parse_package_xml,
    strip_entity_nodes,
)
from mindory.importers.xhtml.walk import _UNICODE_SPACES as _UNICODE_SPACES
from mindory.importers.xhtml.walk import SectionText, extract_text

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
