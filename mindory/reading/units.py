"""The reading room's fixed sizes and the identifiers of the selector kinds it writes.

Kept apart from :mod:`mindory.reading.locate` so that a door can name a default (a page
of render blocks) without loading the geometry.
"""

CONTEXT_CHARS = 64  # text.before / text.after, code points
QUOTE_CHARS = 32  # TextQuoteSelector prefix / suffix, code points
POSITION_CHARS = 1024  # Readium: one position per 1024 characters of a resource
DEFAULT_PAGE_SIZE = 20  # render blocks per page

CFI_CONFORMS_TO = "http://www.idpf.org/epub/linking/cfi/epub-cfi.html"
RFC5147_CONFORMS_TO = "http://tools.ietf.org/rfc/rfc5147"
