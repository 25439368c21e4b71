"""Anchoring quotes to exact source spans, and highlights to a new edition (pure).

Two jobs, no database, no file access (see ``docs/anchoring.md``):

* :func:`calibrate_quote` — a reading assistant (often an LLM) cites a quote;
  find the exact source span it came from: ``exact`` (literal occurrence),
  ``normalized`` (whitespace-, width-, quote/dash- and then case-insensitive),
  ``prefix`` (the longest prefix that occurs, at least ``min_prefix``
  characters) or ``rejected``. Nothing is ever invented or extended: the
  result's ``exact`` is always a slice of the source text.
* :func:`reanchor` — a highlight stored in source coordinates with a W3C
  ``TextQuoteSelector`` (exact, prefix, suffix) is placed in a new edition:
  ``position`` (same place, same text), ``exact`` (the quote elsewhere, the
  occurrence with the most surviving context, then the nearest to the old
  place), ``normalized`` (the same comparison under folding: re-wrapped lines,
  CRLF → LF, changed quote marks), ``fuzzy`` (a bounded edit-distance match of
  the quote, scored together with its prefix and suffix) or ``orphaned``.
  Nothing is placed without enough evidence; an orphan is never moved.

Coordinates (DESIGN §1, :mod:`mindory.text.records`): half-open ranges of code
points of a section's **source text**; a :class:`SectionText` carries the
offset of its text in book source coordinates (``source_start``: file-global
for plain text, 0 for EPUB sections — or the offset of a slice, e.g. a chunk's
source text), and every position in a result is in book source coordinates.

The package, one job per module (each imports only the ones listed before it):
``thresholds`` (the tunable numbers), ``folding`` (the normalized comparison),
``sections`` (the texts searched), ``calibrate`` (quote calibration),
``distance`` (edit distance), ``anchors`` (what is stored, what re-anchoring
answers), ``job`` (one re-anchoring's state and results), ``fuzzy`` (the
fuzzy strategy) and ``reanchoring`` (the other strategies and the entry points).
"""

from __future__ import annotations

from mindory.reading.anchoring.anchors import Reanchor, StoredAnchor
from mindory.reading.anchoring.calibrate import QuoteMatch, calibrate_quote
from mindory.reading.anchoring.distance import _myers as _myers
from mindory.reading.anchoring.distance import edit_distance
from mindory.reading.anchoring.folding import FoldedText, fold
from mindory.reading.anchoring.folding import _is_cjk_text as _is_cjk_text
from mindory.reading.anchoring.reanchoring import reanchor, reanchor_all
from mindory.reading.anchoring.sections import SectionHint, SectionText
from mindory.reading.anchoring.thresholds import (
    CONTEXT_CHARS,
    DEFAULT_MIN_PREFIX,
    DEFAULT_MIN_PREFIX_CJK,
    EVIDENCE_MIN,
    EVIDENCE_MIN_CJK,
    FUZZY_MIN_CONFIDENCE,
    FUZZY_MIN_CONFIDENCE_IN_CONTEXT,
    FUZZY_MIN_CONFIDENCE_MOVED,
    FUZZY_MIN_QUOTE_SIMILARITY,
    FUZZY_MIN_QUOTE_SIMILARITY_IN_CONTEXT,
    SIDE_MIN,
)

__all__ = [
    "CONTEXT_CHARS",
    "DEFAULT_MIN_PREFIX",
    "DEFAULT_MIN_PREFIX_CJK",
    "EVIDENCE_MIN",
    "EVIDENCE_MIN_CJK",
    "FUZZY_MIN_CONFIDENCE",
    "FUZZY_MIN_CONFIDENCE_MOVED",
    "FUZZY_MIN_CONFIDENCE_IN_CONTEXT",
    "FUZZY_MIN_QUOTE_SIMILARITY",
    "FUZZY_MIN_QUOTE_SIMILARITY_IN_CONTEXT",
    "SIDE_MIN",
    "FoldedText",
    "QuoteMatch",
    "Reanchor",
    "SectionHint",
    "SectionText",
    "StoredAnchor",
    "calibrate_quote",
    "edit_distance",
    "fold",
    "reanchor",
    "reanchor_all",
]
