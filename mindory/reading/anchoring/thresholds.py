"""The tunable numbers of quote calibration and re-anchoring, in one place.

docs/anchoring.md explains each choice; the modules that use them import them
from here, so a change of policy is a change of this file only.
"""


# -- thresholds (docs/anchoring.md explains each choice) ---------------------------

CONTEXT_CHARS = 32  # TextQuoteSelector prefix / suffix, code points (as mindory.reading.locate)
DEFAULT_MIN_PREFIX = 16  # quote calibration: shortest usable prefix, folded code points
DEFAULT_MIN_PREFIX_CJK = 5  # ... when the quote is mostly Han / kana / Hangul
SIDE_MIN = 8  # re-anchoring: context characters that must survive on each side ...
EVIDENCE_MIN = 64  # ... unless quote + surviving context reach this many characters
EVIDENCE_MIN_CJK = 32  # ... (mostly CJK quotes)
FUZZY_MIN_QUOTE_SIMILARITY = 0.75  # fuzzy: at most a quarter of the quote edited ...
FUZZY_MIN_CONFIDENCE = 0.80  # ... and quote + context similarity (weighted) this high
FUZZY_MIN_CONFIDENCE_MOVED = 0.90  # ... this high in another section than the old one's
FUZZY_MIN_QUOTE_SIMILARITY_IN_CONTEXT = 0.5  # or: half the quote kept, when the context ...
FUZZY_MIN_CONFIDENCE_IN_CONTEXT = 0.90  # ... lifts the weighted similarity this high

MAX_OCCURRENCES = 4000  # occurrences examined per text, nearest to the expected place
_GRAMS = 16  # fuzzy candidate search: n-grams sampled from prefix + quote + suffix
_RARE = 48  # an n-gram occurring more often than this in a section does not vote
_WINDOWS = 4  # candidate windows per section from n-gram votes
_ENDS = 8  # candidate match ends per window
