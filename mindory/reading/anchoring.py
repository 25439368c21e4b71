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

Folding (the "normalized" comparison) is done once per text and cached on the
:class:`SectionText`: a 1:1 translation through a code point lookup array
(width, quote marks, dashes, single whitespace characters), then two regex
scans for what changes length (whitespace runs collapse to one space,
whitespace between CJK characters and invisible characters vanish, NFKC
expansions and combining sequences). The
length-changing edits are kept as an :class:`~mindory.text.offsets.OffsetMap`
(folded ↔ source, binary search over the edits, so memory grows with the
number of edits and never with the text); every match in folded text is mapped
back to the smallest source span that produced it — never re-found with
``str.find`` on the original.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Literal

import numpy as np

from mindory.text.offsets import OffsetMap
from mindory.text.records import Book, Section

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

QuoteMethod = Literal["exact", "normalized", "prefix", "rejected"]
ReanchorStatus = Literal["position", "exact", "normalized", "fuzzy", "orphaned"]

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


# ================================================================== folding


_IGNORABLE = (
    "\u00ad\u034f\u061c\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
)
_PUNCT_FOLD = {
    **dict.fromkeys(map(ord, "\u2018\u2019\u201a\u201b\u2032\u02bc"), "'"),
    **dict.fromkeys(map(ord, "\u201c\u201d\u201e\u201f\u2033\u300c\u300d\u300e\u300f"), '"'),
    **dict.fromkeys(map(ord, "\ufe41\ufe42\ufe43\ufe44\uff62\uff63"), '"'),
    **dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58"), "-"),
}
# Letters of scripts written without spaces between words, and their punctuation.
_CJK_LETTER = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303c\u3040-\u30ff\u3100-\u312f"
    "\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003ffff"
)
# CJK punctuation and full-width forms; then punctuation CJK text shares with others.
_CJK_WIDE = "\u3001-\u3004\u3008-\u3020\u3030\u303d\u30fb\ufe10-\ufe4f\uff01-\uff65"
_SHARED_PUNCT = "\u2014\u2026\u201c\u201d\u2018\u2019\u00b7"
_CJK_PUNCT = _CJK_WIDE + _SHARED_PUNCT
_HANGUL = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
_CJK_OR_HANGUL_RE = re.compile(f"[{_CJK_LETTER}{_HANGUL}]")


def _fold_chars(s: str) -> str:
    """Fold a short string character by character (used to build the tables)."""
    out: list[str] = []
    for c in unicodedata.normalize("NFKC", s):
        if c.isspace():
            out.append(" ")
        elif c in _IGNORABLE:
            continue
        else:
            out.append(c.translate(_PUNCT_FOLD))
    return "".join(out)


def _char_class(cps: Iterable[int]) -> str:
    """A regex character class body for a set of code points (as ranges)."""
    parts: list[str] = []
    run: list[int] = []
    for cp in sorted(cps):
        if run and cp == run[1] + 1:
            run[1] = cp
            continue
        if run:
            parts.append(_range(run[0], run[1]))
        run = [cp, cp]
    if run:
        parts.append(_range(run[0], run[1]))
    return "".join(parts)


def _range(a: int, b: int) -> str:
    if a == b:
        return re.escape(chr(a))
    return f"{re.escape(chr(a))}-{re.escape(chr(b))}"


@dataclass(frozen=True)
class _Tables:
    translate: dict[int, str]  # 1:1 replacements (position-preserving)
    lut: np.ndarray  # the same as a lookup array over all code points
    rare_re: re.Pattern[str]  # one character that may change length when folded
    spaces_re: re.Pattern[str]  # spaces that may change length ("  ", " " before CJK)
    run_re: re.Pattern[str]  # a whitespace run (with invisible characters)
    marks_re: re.Pattern[str]  # a run of combining marks
    blank: frozenset[str]  # whitespace and invisible characters
    expand: dict[str, str]  # single characters whose folding changes the length


@cache
def _tables() -> _Tables:
    """Folding tables, built once per process (planes 0–2, ~60 ms)."""
    one: dict[int, str] = {}
    expand: dict[str, str] = {}
    marks: list[int] = []
    blank: set[int] = {ord(c) for c in _IGNORABLE}
    for cp in range(0x30000):
        c = chr(cp)
        if unicodedata.category(c).startswith("M") or 0x1160 <= cp <= 0x11FF:
            marks.append(cp)
            continue
        if c.isspace():
            blank.add(cp)
            if c != " ":
                one[cp] = " "
            continue
        if c in _IGNORABLE:
            expand[c] = ""
            continue
        if not unicodedata.decomposition(c) and cp not in _PUNCT_FOLD:
            continue
        f = _fold_chars(c)
        if f == c:
            continue
        if len(f) == 1:
            one[cp] = f
        else:
            expand[c] = f
    lut = np.arange(0x110000, dtype=np.uint32)
    for cp, c in one.items():
        lut[cp] = ord(c)
    # One character class finds every spot that may change length, except plain
    # spaces: the regex engine skips to members of a single class at C speed, which
    # an alternation of patterns would not. Classes stay in the BMP (a class with
    # hundreds of astral ranges costs a range test each); astral characters are
    # matched by one range and sorted out in Python.
    bmp = {cp for cp in blank if cp != 0x20 and cp < 0x10000}
    bmp |= {cp for cp in marks if cp < 0x10000}
    bmp |= {ord(c) for c in expand if ord(c) < 0x10000}
    blank_class = _char_class(blank)
    return _Tables(
        translate=one,
        lut=lut,
        rare_re=re.compile(f"[{_char_class(bmp)}\U00010000-\U0010ffff][{blank_class}]*"),
        spaces_re=re.compile(f"  +| (?=[{_CJK_LETTER}{_CJK_PUNCT}])"),
        run_re=re.compile(f"[{blank_class}]+"),
        marks_re=re.compile(f"[{_char_class(marks)}]+"),
        blank=frozenset(chr(cp) for cp in blank),
        expand=expand,
    )


class FoldedText:
    """A text folded for whitespace/width/quote-insensitive matching, with its map.

    ``text`` is the folded text; ``map`` is an :class:`OffsetMap` whose
    "normalized" side is the folded text and whose source side is the original
    text (its copy runs are 1:1 in position; the characters there may differ by
    a 1:1 fold such as full-width → ASCII). ``lower`` is ``text`` lower-cased,
    position for position.
    """

    def __init__(self, text: str, fmap: OffsetMap, original_length: int) -> None:
        self.text = text
        self.map = fmap
        self.original_length = original_length

    @cached_property
    def lower(self) -> str:
        low = self.text.lower()
        if len(low) == len(self.text):
            return low
        # "İ".lower() is two characters: keep such letters as they are.
        return "".join(c.lower() if len(c.lower()) == 1 else c for c in self.text)

    def haystack(self, case_insensitive: bool) -> str:
        return self.lower if case_insensitive else self.text

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """Smallest original span that produced folded ``[start, end)``."""
        return self.map.source_span(start, end)

    def to_folded(self, pos: int) -> int:
        """Folded position of original position ``pos`` (clamped to the text)."""
        return self.map.to_normalized(min(max(pos, 0), self.original_length))


def fold(text: str) -> FoldedText:
    """Fold ``text``: see the module doc and docs/anchoring.md ("Folding")."""
    tables = _tables()
    if len(text) < 4096:
        translated = text.translate(tables.translate)
    else:  # the same through a lookup array: ~10x faster on long non-ASCII text
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        translated = tables.lut[codes].astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
    # Spots that may change length: (start, end, kind), kind "ws" | "seq" (marks; the
    # character before them joins) | "seq+" (a character and its marks) | "exp".
    spots: list[tuple[int, int, str]] = []
    blank, expand = tables.blank, tables.expand
    run_match, marks_match = tables.run_re.match, tables.marks_re.match
    covered = 0
    for m in tables.rare_re.finditer(text):
        # one rare character, and the blanks after it
        p, b = m.span()
        if p >= covered:
            c = text[p]
            if c in blank:
                a = p
                while a > 0 and text[a - 1] in blank:
                    a -= 1
                spots.append((a, b, "ws"))
                covered = b
                continue
            if unicodedata.category(c).startswith("M") or "\u1160" <= c <= "\u11ff":
                ms = marks_match(text, p)
                covered = ms.end() if ms is not None else p + 1
                spots.append((p, covered, "seq"))
            elif c in expand:
                ms = marks_match(text, p + 1)
                if ms is not None:  # marks after it fold with it: ﬁ + U+0301 -> fí
                    spots.append((p, ms.end(), "seq+"))
                    covered = ms.end()
                else:
                    spots.append((p, p + 1, "exp"))
                    covered = p + 1
            else:
                covered = p + 1
        if b > covered and text[covered] in blank:
            run = run_match(text, covered)
            assert run is not None
            spots.append((covered, run.end(), "ws"))
            covered = run.end()
    for m in tables.spaces_re.finditer(text):
        a, b = m.span()
        while a > 0 and text[a - 1] in blank:
            a -= 1
        run = run_match(text, b)
        spots.append((a, run.end() if run is not None else b, "ws"))
    if not spots:
        return FoldedText(translated, OffsetMap((), len(text), len(text)), len(text))
    spots.sort(key=lambda t: (t[0], -t[1]))
    parts: list[str] = []
    edits: list[tuple[int, int, int, int]] = []
    last = 0
    pos = 0  # folded length so far
    for a, b, kind in spots:
        if a < last:
            continue  # inside a run already handled
        if kind == "ws":
            seg = text[a:b]
            invisible = not seg.isascii() and all(ch in _IGNORABLE for ch in seg)
            repl = "" if invisible or _between_cjk(text, a, b) else " "
        elif kind == "seq":
            if a > last:
                a -= 1  # with the character before the marks
            repl = _fold_chars(text[a:b])
        elif kind == "seq+":
            repl = _fold_chars(text[a:b])
        else:
            repl = expand[text[a]]
        if repl == translated[a:b]:
            continue  # a single line break, a sequence that folds to itself
        if a > last:
            parts.append(translated[last:a])
            pos += a - last
        edits.append((pos, len(repl), a, b - a))
        parts.append(repl)
        pos += len(repl)
        last = b
    if not edits:
        return FoldedText(translated, OffsetMap((), len(text), len(text)), len(text))
    parts.append(translated[last:])
    pos += len(text) - last
    return FoldedText("".join(parts), OffsetMap(edits, pos, len(text)), len(text))


_CJK_STRONG_RE = re.compile(f"[{_CJK_LETTER}{_CJK_WIDE}]")
_CJK_ANY_RE = re.compile(f"[{_CJK_LETTER}{_CJK_PUNCT}]")


def _between_cjk(text: str, a: int, b: int) -> bool:
    """Whitespace ``text[a:b]`` sits between CJK characters (a line wrap, an indent).

    Both neighbours are CJK letters or punctuation, and at least one is a CJK
    letter or CJK/full-width punctuation (so ``”\n“`` in English stays a space).
    """
    if a == 0 or b >= len(text):
        return False
    before, after = text[a - 1], text[b]
    if before < "\u00b7" or after < "\u00b7":
        return False
    if not (_CJK_ANY_RE.match(before) and _CJK_ANY_RE.match(after)):
        return False
    return bool(_CJK_STRONG_RE.match(before) or _CJK_STRONG_RE.match(after))


def _is_cjk_text(s: str) -> bool:
    """Mostly Han / kana / Hangul (at least half of the non-space characters)."""
    letters = sum(1 for c in s if not c.isspace())
    return letters > 0 and 2 * len(_CJK_OR_HANGUL_RE.findall(s)) >= letters


def _is_word_char(c: str) -> bool:
    """A character inside a space-separated word (CJK letters are words by themselves)."""
    return c.isalnum() and not _CJK_OR_HANGUL_RE.match(c)


# ================================================================== sections


@dataclass(frozen=True)
class SectionText:
    """A section's source text (or a slice of it) and where it sits.

    ``source_start`` is the offset of ``source_text`` in book source
    coordinates: file-global for plain text, 0 for a whole EPUB section, the
    slice start for a chunk's slice. ``ordinal`` / ``href`` / ``title``
    identify the section (used to match sections across editions). The folded
    text is computed on first use and cached: reuse the same objects for many
    quotes or highlights.
    """

    ordinal: int
    source_text: str
    source_start: int = 0
    href: str | None = None
    title: str = ""

    @classmethod
    def from_section(cls, section: Section) -> SectionText:
        return cls(
            ordinal=section.ordinal,
            source_text=section.source_text,
            source_start=section.source_start,
            href=section.href,
            title=section.title,
        )

    @classmethod
    def from_book(cls, book: Book) -> tuple[SectionText, ...]:
        return tuple(cls.from_section(s) for s in book.sections)

    @property
    def source_end(self) -> int:
        return self.source_start + len(self.source_text)

    @cached_property
    def folded(self) -> FoldedText:
        return fold(self.source_text)

    @property
    def hint(self) -> SectionHint:
        return SectionHint(
            ordinal=self.ordinal,
            source_start=self.source_start,
            length=len(self.source_text),
            href=self.href,
            title=self.title,
        )


@dataclass(frozen=True, slots=True)
class SectionHint:
    """What re-anchoring needs to know about a highlight's section in the OLD edition."""

    ordinal: int
    source_start: int = 0
    length: int | None = None
    href: str | None = None
    title: str = ""


# ================================================================== quote calibration


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    """The outcome of :func:`calibrate_quote`.

    ``method`` says what happened; ``quote`` is the raw quote as given.
    ``source_start`` / ``source_end`` are book source coordinates (code points)
    and ``exact`` is exactly the source text there (``None`` when rejected).
    ``matched_length`` counts code points of the raw quote, from its start,
    covered by the match (``quote[:matched_length]`` minus surrounding
    whitespace is what matched; the whole quote for exact/normalized).
    ``section`` is the ordinal of the :class:`SectionText` that matched (for a
    bare string: its index in the sequence). ``occurrences`` is how many
    places matched equally well (the one nearest the hint was taken).
    """

    method: QuoteMethod
    quote: str
    exact: str | None
    section: int | None
    source_start: int | None
    source_end: int | None
    quote_length: int
    matched_length: int
    case_insensitive: bool
    occurrences: int
    note: str

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "quote": self.quote,
            "exact": self.exact,
            "section": self.section,
            "source": (
                None
                if self.source_start is None
                else {"start": self.source_start, "end": self.source_end}
            ),
            "quoteLength": self.quote_length,
            "matchedLength": self.matched_length,
            "caseInsensitive": self.case_insensitive,
            "occurrences": self.occurrences,
            "note": self.note,
        }


def _as_section_texts(texts: Sequence[SectionText | str]) -> list[SectionText]:
    out: list[SectionText] = []
    for i, t in enumerate(texts):
        out.append(t if isinstance(t, SectionText) else SectionText(ordinal=i, source_text=t))
    return out


def _find_near(hay: str, needle: str, around: int, limit: int = MAX_OCCURRENCES) -> list[int]:
    """Start positions of ``needle`` in ``hay`` (overlapping), the ``limit`` nearest ``around``.

    Searches forward from ``around`` and backward from it, so a needle with a
    huge number of occurrences costs ``limit`` finds, not a scan of all.
    """
    if not needle:
        return []
    around = min(max(around, 0), len(hay))
    out: list[int] = []
    i = hay.find(needle, around)
    while i >= 0 and len(out) < limit:
        out.append(i)
        i = hay.find(needle, i + 1)
    back: list[int] = []
    end = around + len(needle) - 1
    j = hay.rfind(needle, 0, end)
    while j >= 0 and len(back) < limit:
        if j < around:
            back.append(j)
        j = hay.rfind(needle, 0, j + len(needle) - 1) if j > 0 else -1
    back.reverse()
    return back + out


def _span_distance(a: int, b: int, hint: tuple[int, int] | None) -> tuple[int, int]:
    """Sort key: a match inside the hint first, then the nearest to its start."""
    if hint is None:
        return (0, a)
    hs, he = hint
    gap = max(0, hs - b, a - he)
    return (gap, abs(a - hs))


def _hint_local(t: SectionText, hint: tuple[int, int] | None) -> int:
    if hint is None:
        return 0
    return min(max(hint[0] - t.source_start, 0), len(t.source_text))


def calibrate_quote(
    section_texts: Sequence[SectionText | str],
    quote: str,
    *,
    hint: tuple[int, int] | None = None,
    min_prefix: int | None = None,
) -> QuoteMatch:
    """Find the exact source span of ``quote`` in the given texts.

    ``section_texts`` are searched in order (a bare string is a text at source
    offset 0): put the chunk's slice or the hinted section first. Levels:

    1. ``exact`` — the quote (surrounding whitespace stripped) occurs literally.
    2. ``normalized`` — it occurs after folding both sides (whitespace runs,
       line breaks and CRLF → one space, whitespace between CJK characters
       dropped, NFKC width folding, curly quotes → straight, dashes → ``-``,
       soft hyphens and zero-width characters ignored); case-sensitive first,
       then case-insensitive.
    3. ``prefix`` — the longest prefix of the folded quote that occurs (cut
       back to a word boundary for space-separated scripts, trailing spaces
       dropped), if at least ``min_prefix`` folded code points long (default
       :data:`DEFAULT_MIN_PREFIX`, or :data:`DEFAULT_MIN_PREFIX_CJK` for a
       mostly-CJK quote).
    4. ``rejected``.

    Levels 1–2 are tried text by text: the first text with a match answers,
    exact before normalized — except that with a ``hint`` (a source span in
    book coordinates, e.g. the chunk the assistant read) a normalized match
    inside the hint beats an exact one outside it. Level 3 takes the longest
    prefix over all texts (the earlier text on a tie). Among several
    occurrences the one inside / nearest the hint is taken, else the first.
    """
    items = _as_section_texts(section_texts)
    stripped = quote.strip()
    lead = len(quote) - len(quote.lstrip())
    n_raw = len(quote)

    def rejected(note: str) -> QuoteMatch:
        return QuoteMatch("rejected", quote, None, None, None, None, n_raw, 0, False, 0, note)

    if not stripped:
        return rejected("empty quote")

    # The folded quote, and the same without quotation marks around it (assistants
    # often wrap what they cite in quotes): (text, offset in qf, note).
    qfold = fold(stripped)
    qf = qfold.text.strip(" ")
    q_lead = len(qfold.text) - len(qfold.text.lstrip(" "))
    variants: list[tuple[str, int, str]] = [(qf, 0, "")] if qf else []
    core = qf.strip("\"' ")
    if core and core != qf:
        variants.append(
            (core, len(qf) - len(qf.lstrip("\"' ")), "; quotation marks around it ignored")
        )

    def raw_end(off: int, n: int) -> int:
        """End of folded quote[off:off+n] in the raw quote."""
        return lead + qfold.map.to_source_end(q_lead + off + n)

    def exact_in(t: SectionText) -> tuple[QuoteMatch, int] | None:
        occ = _find_near(t.source_text, stripped, _hint_local(t, hint))
        if not occ:
            return None
        n = len(stripped)
        best = min(
            occ, key=lambda x: _span_distance(t.source_start + x, t.source_start + x + n, hint)
        )
        s = t.source_start + best
        more = f"; {len(occ)} occurrences, the nearest to the hint taken" if len(occ) > 1 else ""
        m = QuoteMatch(
            "exact",
            quote,
            t.source_text[best : best + n],
            t.ordinal,
            s,
            s + n,
            n_raw,
            lead + n,
            False,
            len(occ),
            "the quote occurs literally" + more,
        )
        return m, _span_distance(s, s + n, hint)[0]

    def normalized_in(t: SectionText) -> tuple[QuoteMatch, int] | None:
        f = t.folded
        for ci in (False, True):
            for needle0, off, how in variants:
                needle = needle0.lower() if ci else needle0
                found = _best_folded(t, f.haystack(ci), needle, hint)
                if found is None:
                    continue
                fs, fe, count = found
                s, e = f.source_span(fs, fe)
                m = QuoteMatch(
                    "normalized",
                    quote,
                    t.source_text[s:e],
                    t.ordinal,
                    t.source_start + s,
                    t.source_start + e,
                    n_raw,
                    raw_end(off, len(needle0)),
                    ci,
                    count,
                    "the quote occurs after folding whitespace, width, quote marks and dashes"
                    + (", ignoring case" if ci else "")
                    + how,
                )
                return m, _span_distance(t.source_start + s, t.source_start + e, hint)[0]
        return None

    # 1.–2. exact, else normalized — per text, in order. With a hint, a folded match
    # inside the hint beats a literal one outside it (the quote "a\r\nb" cited from a
    # chunk holding "a b" is that chunk's text, not a line-broken copy chapters away).
    for t in items:
        ex = exact_in(t)
        if ex is not None and (hint is None or ex[1] == 0):
            return ex[0]
        no = normalized_in(t)
        if no is not None and (ex is None or no[1] == 0):
            return no[0]
        if ex is not None:
            return ex[0]
    if not qf:
        return rejected("the quote holds only invisible characters")

    # 3. prefix
    floor = min_prefix
    if floor is None:
        floor = DEFAULT_MIN_PREFIX_CJK if _is_cjk_text(qf) else DEFAULT_MIN_PREFIX
    floor = max(1, floor)
    best_len = 0
    best_at: tuple[SectionText, bool, str, int] | None = None
    for ci in (False, True):
        for needle0, off, _ in variants:
            needle = needle0.lower() if ci else needle0
            for t in items:
                n = _trim_prefix(needle0, _longest_prefix(t.folded.haystack(ci), needle))
                if n > best_len:
                    best_len, best_at = n, (t, ci, needle0, off)
    if best_at is not None and best_len >= floor:
        t, ci, needle0, off = best_at
        f = t.folded
        needle = (needle0.lower() if ci else needle0)[:best_len]
        found = _best_folded(t, f.haystack(ci), needle, hint)
        assert found is not None
        fs, fe, count = found
        s, e = f.source_span(fs, fe)
        return QuoteMatch(
            "prefix",
            quote,
            t.source_text[s:e],
            t.ordinal,
            t.source_start + s,
            t.source_start + e,
            n_raw,
            raw_end(off, best_len),
            ci,
            count,
            f"only the first {best_len} of {len(needle0)} characters (after folding) occur"
            + (", ignoring case" if ci else "")
            + "; the rest of the quote is not in the text",
        )
    if best_len:
        return rejected(
            f"the longest prefix that occurs has {best_len} characters (after folding), "
            f"fewer than {floor}"
        )
    return rejected("no part of the quote occurs in the text")


def _best_folded(
    t: SectionText, hay: str, needle: str, hint: tuple[int, int] | None
) -> tuple[int, int, int] | None:
    """The occurrence of ``needle`` in folded ``hay`` nearest ``hint``: (start, end, count)."""
    f = t.folded
    around = f.to_folded(_hint_local(t, hint))
    occ = _find_near(hay, needle, around)
    if not occ:
        return None
    n = len(needle)

    def key(x: int) -> tuple[int, int]:
        s, e = f.source_span(x, x + n)
        return _span_distance(t.source_start + s, t.source_start + e, hint)

    best = occ[0] if hint is None else min(occ, key=key)
    return best, best + n, len(occ)


def _longest_prefix(hay: str, needle: str) -> int:
    """Length of the longest prefix of ``needle`` occurring in ``hay`` (binary search)."""
    lo, hi = 0, len(needle)  # needle[:lo] occurs; needle[:hi+1] is beyond
    if hay.find(needle) >= 0:
        return len(needle)
    hi = len(needle) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if hay.find(needle[:mid]) >= 0:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _trim_prefix(qf: str, n: int) -> int:
    """Cut a partial prefix back to a word boundary; drop trailing spaces."""
    if 0 < n < len(qf) and _is_word_char(qf[n - 1]) and _is_word_char(qf[n]):
        while n > 0 and _is_word_char(qf[n - 1]):
            n -= 1
    while n > 0 and qf[n - 1] == " ":
        n -= 1
    return n


# ================================================================== edit distance


def _peq(pattern: str) -> dict[str, int]:
    peq: dict[str, int] = {}
    for i, c in enumerate(pattern):
        peq[c] = peq.get(c, 0) | (1 << i)
    return peq


def _myers(
    pattern: str, text: str, *, anchored: bool, peq: dict[str, int] | None = None
) -> list[int]:
    """Bit-parallel edit distances (Myers 1999, Hyyrö's formulation).

    ``out[j]`` is, for the text prefix ending after ``text[j]``:

    * ``anchored=False`` (search): the smallest edit distance between
      ``pattern`` and any substring of ``text`` ending there;
    * ``anchored=True`` (global): the edit distance between ``pattern`` and
      ``text[:j+1]``.

    Python integers make the bit vectors as long as the pattern, so one text
    character costs a dozen big-integer operations.
    """
    m = len(pattern)
    if m == 0:
        return [j + 1 if anchored else 0 for j in range(len(text))]
    if peq is None:
        peq = _peq(pattern)
    mask = (1 << m) - 1
    high = 1 << (m - 1)
    carry = 1 if anchored else 0
    pv, mv, score = mask, 0, m
    out = [0] * len(text)
    get = peq.get
    for j, c in enumerate(text):
        eq = get(c, 0)
        xv = eq | mv
        xh = ((((eq & pv) + pv) & mask) ^ pv) | eq
        ph = mv | (~(xh | pv) & mask)
        mh = pv & xh
        if ph & high:
            score += 1
        elif mh & high:
            score -= 1
        ph = ((ph << 1) | carry) & mask
        mh = (mh << 1) & mask
        pv = mh | (~(xv | ph) & mask)
        mv = ph & xv
        out[j] = score
    return out


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions; code points)."""
    if not a:
        return len(b)
    if not b:
        return len(a)
    return _myers(a, b, anchored=True)[-1]


def _edits_before(pattern: str, text_before: str) -> int:
    """Fewest edits turning ``pattern`` into some text ending where ``text_before`` ends."""
    if not pattern:
        return 0
    return min([len(pattern), *_myers(pattern[::-1], text_before[::-1], anchored=True)])


def _edits_after(pattern: str, text_after: str) -> int:
    """Fewest edits turning ``pattern`` into some text starting where ``text_after`` starts."""
    if not pattern:
        return 0
    return min([len(pattern), *_myers(pattern, text_after, anchored=True)])


# ================================================================== re-anchoring


@dataclass(frozen=True, slots=True)
class StoredAnchor:
    """A highlight as stored: source span + W3C TextQuoteSelector, in the OLD edition.

    ``source_start`` / ``source_end`` are book source coordinates of the old
    edition (file-global for plain text, section-local for EPUB); ``section``
    is the old section's ordinal and ``href`` its content document (EPUB).
    """

    section: int
    source_start: int
    source_end: int
    exact: str
    prefix: str = ""
    suffix: str = ""
    href: str | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if not self.exact:
            raise ValueError("a stored anchor needs a non-empty exact quote")
        if self.source_end - self.source_start != len(self.exact):
            raise ValueError(
                f"source span [{self.source_start}, {self.source_end}) does not hold the "
                f"{len(self.exact)} characters of the exact quote"
            )

    @classmethod
    def from_span(
        cls, section: SectionText, source_start: int, source_end: int, *, id: str | None = None
    ) -> StoredAnchor:
        """The anchor of source ``[source_start, source_end)`` (book coordinates) of ``section``."""
        a, b = source_start - section.source_start, source_end - section.source_start
        text = section.source_text
        if not 0 <= a < b <= len(text):
            raise ValueError(
                f"span [{source_start}, {source_end}) is empty or outside section "
                f"{section.ordinal} [{section.source_start}, {section.source_end})"
            )
        return cls(
            section=section.ordinal,
            source_start=source_start,
            source_end=source_end,
            exact=text[a:b],
            prefix=text[max(0, a - CONTEXT_CHARS) : a],
            suffix=text[b : b + CONTEXT_CHARS],
            href=section.href,
            id=id,
        )

    @classmethod
    def from_selectors(
        cls,
        selectors: Iterable[Mapping[str, Any]],
        *,
        section: int,
        href: str | None = None,
        id: str | None = None,
    ) -> StoredAnchor:
        """From W3C selectors: a TextQuoteSelector and a TextPositionSelector."""
        quote: Mapping[str, Any] | None = None
        position: Mapping[str, Any] | None = None
        for sel in selectors:
            if sel.get("type") == "TextQuoteSelector":
                quote = sel
            elif sel.get("type") == "TextPositionSelector":
                position = sel
        if quote is None or position is None:
            raise ValueError("need a TextQuoteSelector and a TextPositionSelector")
        return cls(
            section=section,
            source_start=int(position["start"]),
            source_end=int(position["end"]),
            exact=str(quote["exact"]),
            prefix=str(quote.get("prefix", "")),
            suffix=str(quote.get("suffix", "")),
            href=href,
            id=id,
        )

    def selectors(self) -> list[dict[str, str | int]]:
        return [
            {
                "type": "TextQuoteSelector",
                "exact": self.exact,
                "prefix": self.prefix,
                "suffix": self.suffix,
            },
            {"type": "TextPositionSelector", "start": self.source_start, "end": self.source_end},
        ]


@dataclass(frozen=True, slots=True)
class Reanchor:
    """Where a highlight went in the new edition, how, and how sure.

    ``status``: ``position`` | ``exact`` | ``normalized`` | ``fuzzy`` |
    ``orphaned``. For a placed highlight ``section`` / ``href`` name the new
    section, ``source_start`` / ``source_end`` are new book source coordinates
    and ``exact`` / ``prefix`` / ``suffix`` the new TextQuoteSelector (``exact``
    is always the new source text there). ``confidence`` (0–1) is the weighted
    share of the stored selector (prefix + exact + suffix) found again —
    literally for position/exact, after folding for normalized, by edit
    distance for fuzzy; for an orphan, the best score a rejected candidate
    reached. ``edits`` is the edit distance between old and new quote (folded
    text) for fuzzy matches, ``changed`` says whether the quote text differs.
    """

    status: ReanchorStatus
    anchor: StoredAnchor
    section: int | None
    href: str | None
    source_start: int | None
    source_end: int | None
    exact: str | None
    prefix: str | None
    suffix: str | None
    confidence: float
    changed: bool
    edits: int | None
    note: str

    @property
    def placed(self) -> bool:
        return self.status != "orphaned"

    def to_json(self) -> dict[str, Any]:
        a = self.anchor
        return {
            "id": a.id,
            "status": self.status,
            "confidence": round(self.confidence, 4),
            "section": self.section,
            "href": self.href,
            "source": (
                None
                if self.source_start is None
                else {"start": self.source_start, "end": self.source_end}
            ),
            "selector": (
                None
                if self.exact is None
                else {
                    "type": "TextQuoteSelector",
                    "exact": self.exact,
                    "prefix": self.prefix,
                    "suffix": self.suffix,
                }
            ),
            "changed": self.changed,
            "edits": self.edits,
            "old": {
                "section": a.section,
                "href": a.href,
                "source": {"start": a.source_start, "end": a.source_end},
                "exact": a.exact,
            },
            "note": self.note,
        }


@dataclass
class _Candidate:
    section: int  # index into new_sections
    start: int  # section-local source positions
    end: int
    score: float  # ranking score (higher is better)
    distance: float  # relative distance from the expected place (lower is better)
    confidence: float
    edits: int | None = None
    detail: str = ""
    accepted: bool = True
    extra: dict[str, float] = field(default_factory=dict)


class _Job:
    """Everything one re-anchoring needs, computed once."""

    def __init__(
        self,
        anchor: StoredAnchor,
        sections: Sequence[SectionText],
        old: SectionHint,
        old_text: str | None = None,
    ) -> None:
        self.anchor = anchor
        self.sections = sections
        self.old = old
        self.old_text = old_text
        self._expected: dict[int, int] = {}
        self.landmark: str | None = None
        self.old_local = anchor.source_start - old.source_start
        old_len = old.length if old.length else None
        self.old_rel = (self.old_local / old_len) if old_len else None
        self.primary = self._primary()
        order = list(range(len(sections)))
        if self.primary is not None:
            p_ord = sections[self.primary].ordinal
            order.sort(key=lambda i: (i != self.primary, abs(sections[i].ordinal - p_ord), i))
        self.order = order
        cjk = _is_cjk_text(anchor.exact)
        self.evidence_min = EVIDENCE_MIN_CJK if cjk else EVIDENCE_MIN
        self.cjk = cjk

    def _primary(self) -> int | None:
        """The new section that corresponds to the old one: same href, else title, else ordinal."""
        secs = self.sections
        href = self.old.href or self.anchor.href
        if href:
            for i, s in enumerate(secs):
                if s.href == href:
                    return i
        title = self.old.title.strip()
        if title:
            same = [i for i, s in enumerate(secs) if s.title.strip() == title]
            if len(same) == 1:
                return same[0]
        for i, s in enumerate(secs):
            if s.ordinal == self.old.ordinal:
                return i
        return None

    def expected_local(self, i: int) -> int:
        """Where the highlight would start in new section ``i``.

        In the corresponding section, when the old section's text is known: by
        the nearest landmark (see :meth:`_landmark`); otherwise the old position
        scaled by the change of the section's length.
        """
        got = self._expected.get(i)
        if got is not None:
            return got
        n = len(self.sections[i].source_text)
        at: int | None = None
        if i == self.primary and self.old_text is not None:
            at = self._landmark(self.sections[i].source_text)
        if at is None:
            if self.old_rel is not None:
                at = round(self.old_rel * n)
            else:
                at = self.old_local
        at = min(n, max(0, at))
        self._expected[i] = at
        return at

    def _landmark(self, new: str) -> int | None:
        """The old position carried over by the nearest unchanged, unique landmark.

        A landmark is :data:`CONTEXT_CHARS` characters of the old section that
        occur exactly once in the old and once in the new section, searched at
        growing distances before and after the highlight; the highlight's offset
        from it is kept. This separates copies of a repeated passage that a
        length-scaled guess cannot.
        """
        old = self.old_text
        assert old is not None
        x, n = self.old_local, CONTEXT_CHARS
        end = x + len(self.anchor.exact)
        for d in (0, 64, 256, 1024, 4096, 16384, 65536):
            for ws in (x - d - n, end + d):
                if ws < 0 or ws + n > len(old):
                    continue
                w = old[ws : ws + n]
                if not w.strip() or old.find(w, old.find(w) + 1) >= 0:
                    continue
                j = new.find(w)
                if j < 0 or new.find(w, j + 1) >= 0:
                    continue
                self.landmark = f"landmark {d + n} characters {'before' if ws < x else 'after'}"
                return j + (x - ws)
        return None

    def moved(self, i: int) -> bool:
        """Section ``i`` is not the one corresponding to the old section (or there is none)."""
        return i != self.primary

    def rough_local(self, i: int) -> int:
        """A cheap guess of :meth:`expected_local` (where to start searching)."""
        got = self._expected.get(i)
        if got is not None:
            return got
        n = len(self.sections[i].source_text)
        at = round(self.old_rel * n) if self.old_rel is not None else self.old_local
        return min(n, max(0, at))

    def distance(self, i: int, local: int) -> float:
        n = len(self.sections[i].source_text)
        if not n:
            return 0.0
        return abs(local - self.expected_local(i)) / n


def _context_match(text: str, start: int, end: int, prefix: str, suffix: str) -> tuple[int, int]:
    """Characters of ``prefix`` / ``suffix`` that still stand right before / after the span."""
    cp = 0
    lp = len(prefix)
    while cp < lp and start - cp - 1 >= 0 and text[start - cp - 1] == prefix[lp - cp - 1]:
        cp += 1
    cs = 0
    ls = len(suffix)
    while cs < ls and end + cs < len(text) and text[end + cs] == suffix[cs]:
        cs += 1
    return cp, cs


def _enough_evidence(
    q: int, cp: int, cs: int, lp: int, ls: int, evidence_min: int, moved: bool = False
) -> bool:
    """An identical quote is accepted where enough of its context survives.

    Either both sides keep :data:`SIDE_MIN` characters of context, or quote and
    kept context make :data:`EVIDENCE_MIN` contiguous characters. Moving to
    another section than the corresponding one needs both.
    """
    sides = cp >= min(lp, SIDE_MIN) and cs >= min(ls, SIDE_MIN)
    long = q + cp + cs >= evidence_min
    return (sides and long) if moved else (sides or long)


def reanchor(
    highlight: StoredAnchor,
    new_sections: Sequence[SectionText],
    *,
    old_section_hint: SectionHint | SectionText,
) -> Reanchor:
    """Place ``highlight`` in the new edition's sections (see the module doc).

    ``old_section_hint`` describes the highlight's section in the OLD edition
    (its ordinal, href, title, source start and length — e.g.
    ``old_section.hint``): it picks the corresponding new section (same href,
    else the one section with the same title, else the same ordinal) and turns
    the old position into a section-local one.
    """
    if isinstance(old_section_hint, SectionText):
        old, old_text = old_section_hint.hint, old_section_hint.source_text
    else:
        old, old_text = old_section_hint, None
    job = _Job(highlight, new_sections, old, old_text)
    for step in (_by_position, _by_exact, _by_normalized):
        found = step(job)
        if found is not None:
            return found
    return _by_fuzzy(job)


def reanchor_all(
    highlights: Iterable[StoredAnchor],
    old_sections: Sequence[SectionText | SectionHint],
    new_sections: Sequence[SectionText],
) -> list[Reanchor]:
    """Re-anchor many highlights; the old section of each is found by its ordinal.

    Pass the old sections as :class:`SectionText` when their text is at hand
    (landmarks then carry old positions over precisely); reuse the same
    ``new_sections`` objects so each new section is folded once.
    """
    hints: dict[int, SectionHint | SectionText] = {}
    for s in old_sections:
        hints[s.ordinal] = s
    out: list[Reanchor] = []
    for a in highlights:
        hint = hints.get(a.section)
        if hint is None:
            raise ValueError(f"highlight {a.id or ''} names old section {a.section}, not given")
        out.append(reanchor(a, new_sections, old_section_hint=hint))
    return out


def _result(
    job: _Job,
    status: ReanchorStatus,
    cand: _Candidate,
    note: str,
) -> Reanchor:
    sec = job.sections[cand.section]
    text = sec.source_text
    a, b = cand.start, cand.end
    exact = text[a:b]
    return Reanchor(
        status=status,
        anchor=job.anchor,
        section=sec.ordinal,
        href=sec.href,
        source_start=sec.source_start + a,
        source_end=sec.source_start + b,
        exact=exact,
        prefix=text[max(0, a - CONTEXT_CHARS) : a],
        suffix=text[b : b + CONTEXT_CHARS],
        confidence=cand.confidence,
        changed=exact != job.anchor.exact,
        edits=cand.edits,
        note=note,
    )


def _where(job: _Job, cand: _Candidate) -> str:
    sec = job.sections[cand.section]
    moved = "" if cand.section == job.primary else " (moved to another section)"
    return f"section {sec.ordinal} at {sec.source_start + cand.start}{moved}"


def _by_position(job: _Job) -> Reanchor | None:
    i = job.primary
    if i is None:
        return None
    a = job.anchor
    text = job.sections[i].source_text
    s = job.old_local
    e = s + len(a.exact)
    if s < 0 or e > len(text) or text[s:e] != a.exact:
        return None
    cp, cs = _context_match(text, s, e, a.prefix, a.suffix)
    lp, ls = len(a.prefix), len(a.suffix)
    if not _enough_evidence(len(a.exact), cp, cs, lp, ls, job.evidence_min):
        return None
    conf = (len(a.exact) + cp + cs) / (len(a.exact) + lp + ls)
    cand = _Candidate(i, s, e, 0.0, 0.0, conf)
    ctx = "" if cp == lp and cs == ls else f"; context kept: {cp}/{lp} before, {cs}/{ls} after"
    return _result(job, "position", cand, f"same place, same text: {_where(job, cand)}{ctx}")


def _pick(job: _Job, cands: list[_Candidate]) -> tuple[_Candidate, str]:
    """The candidate with the most surviving context; ties go to the nearest to the old place."""
    top = max(c.score for c in cands)
    ties = [c for c in cands if c.score == top]
    if len(ties) == 1:
        more = (
            f"; {len(cands)} occurrences, the one with most context kept" if len(cands) > 1 else ""
        )
        return ties[0], more
    for c in ties:
        c.distance = job.distance(c.section, c.start)
    best = min(ties, key=lambda c: (c.distance, c.section, c.start))
    how = job.landmark or "the old position scaled to the new section length"
    return best, f"; {len(ties)} occurrences fit equally well, the nearest to the old place ({how})"


def _by_exact(job: _Job) -> Reanchor | None:
    a = job.anchor
    q = a.exact
    lp, ls = len(a.prefix), len(a.suffix)
    cands: list[_Candidate] = []
    for i in job.order:
        text = job.sections[i].source_text
        for x in _find_near(text, q, job.rough_local(i)):
            cp, cs = _context_match(text, x, x + len(q), a.prefix, a.suffix)
            if not _enough_evidence(len(q), cp, cs, lp, ls, job.evidence_min, job.moved(i)):
                continue
            conf = (len(q) + cp + cs) / (len(q) + lp + ls)
            cands.append(_Candidate(i, x, x + len(q), float(cp + cs), 0.0, conf))
            cands[-1].extra.update(cp=cp, cs=cs)
        if cands and i == job.primary:
            break  # the corresponding section first
    if not cands:
        return None
    best, more = _pick(job, cands)
    cp, cs = int(best.extra["cp"]), int(best.extra["cs"])
    return _result(
        job,
        "exact",
        best,
        f"the quote occurs unchanged: {_where(job, best)}; context kept: {cp}/{lp} before, "
        f"{cs}/{ls} after{more}",
    )


@dataclass(frozen=True)
class _FoldedPattern:
    prefix: str
    quote: str
    suffix: str


def _fold_pattern(anchor: StoredAnchor) -> _FoldedPattern:
    """Fold prefix + exact + suffix together (so edges fold as in the text) and split."""
    whole = anchor.prefix + anchor.exact + anchor.suffix
    f = fold(whole)
    a = f.map.to_normalized(len(anchor.prefix))
    b = f.map.to_normalized(len(anchor.prefix) + len(anchor.exact))
    return _FoldedPattern(f.text[:a], f.text[a:b], f.text[b:])


def _by_normalized(job: _Job) -> Reanchor | None:
    pat = _fold_pattern(job.anchor)
    q = pat.quote
    if not q.strip(" "):
        return None
    lp, ls = len(pat.prefix), len(pat.suffix)
    cands: list[_Candidate] = []
    for i in job.order:
        f = job.sections[i].folded
        hay = f.text
        for x in _find_near(hay, q, f.to_folded(job.rough_local(i))):
            cp, cs = _context_match(hay, x, x + len(q), pat.prefix, pat.suffix)
            if not _enough_evidence(len(q), cp, cs, lp, ls, job.evidence_min, job.moved(i)):
                continue
            s, e = f.source_span(x, x + len(q))
            conf = (len(q) + cp + cs) / (len(q) + lp + ls)
            cands.append(_Candidate(i, s, e, float(cp + cs), 0.0, conf))
            cands[-1].extra.update(cp=cp, cs=cs)
        if cands and i == job.primary:
            break
    if not cands:
        return None
    best, more = _pick(job, cands)
    cp, cs = int(best.extra["cp"]), int(best.extra["cs"])
    new = job.sections[best.section].source_text[best.start : best.end]
    what = _describe_change(job.anchor.exact, new)
    return _result(
        job,
        "normalized",
        best,
        f"the quote occurs after folding: {_where(job, best)}; {what}; context kept "
        f"(folded): {cp}/{lp} before, {cs}/{ls} after{more}",
    )


def _grams(pattern: str, q: int) -> list[tuple[int, str]]:
    """Up to ``_GRAMS`` n-grams spread evenly over ``pattern``: (offset, gram)."""
    if len(pattern) < q:
        return [(0, pattern)] if pattern.strip(" ") else []
    span = len(pattern) - q + 1
    step = max(1, span // _GRAMS)
    out: list[tuple[int, str]] = []
    for off in range(0, span, step):
        g = pattern[off : off + q]
        if g.strip(" "):
            out.append((off, g))
    return out[: _GRAMS + 1]


def _vote_windows(
    hay: str, pat: _FoldedPattern, grams: list[tuple[int, str]], tol: int
) -> list[int]:
    """Folded quote starts suggested by rare n-grams of prefix + quote + suffix."""
    votes: list[tuple[int, int]] = []  # (quote start, gram index)
    for k, (off, g) in enumerate(grams):
        n = hay.count(g)
        if n == 0 or n > _RARE:
            continue
        i = hay.find(g)
        while i >= 0:
            votes.append((i - off + len(pat.prefix), k))
            i = hay.find(g, i + 1)
    if not votes:
        return []
    votes.sort()
    clusters: list[list[tuple[int, int]]] = [[votes[0]]]
    for v in votes[1:]:
        if v[0] - clusters[-1][-1][0] <= tol:
            clusters[-1].append(v)
        else:
            clusters.append([v])
    need = 2 if len(grams) > 2 else 1
    scored: list[tuple[int, int]] = []
    for c in clusters:
        distinct = len({k for _, k in c})
        if distinct >= need:
            scored.append((distinct, c[len(c) // 2][0]))
    scored.sort(key=lambda t: -t[0])
    return [pos for _, pos in scored[:_WINDOWS]]


def _fuzzy_window(
    job: _Job,
    i: int,
    pat: _FoldedPattern,
    center: int,
    slack: int,
    kmax: int,
    peq: dict[str, int],
    rpeq: dict[str, int],
) -> list[_Candidate]:
    """Best approximate matches of the folded quote near folded position ``center``."""
    sec = job.sections[i]
    f = sec.folded
    hay = f.text
    q = pat.quote
    m = len(q)
    lo = max(0, center - slack)
    hi = min(len(hay), center + m + slack)
    if hi - lo <= 0:
        return []
    scores = _myers(q, hay[lo:hi], anchored=False, peq=peq)
    expected_end = center + m - lo - 1
    # Group the ends that reach the threshold; keep the best end of each group.
    groups: list[tuple[int, int]] = []  # (distance, index)
    gap = max(1, m // 4)
    last = -(10**9)
    for j, d in enumerate(scores):
        if d > kmax:
            continue
        if j - last > gap or not groups:
            groups.append((d, j))
        else:
            bd, bj = groups[-1]
            if d < bd or (d == bd and abs(j - expected_end) < abs(bj - expected_end)):
                groups[-1] = (d, j)
        last = j
    groups.sort(key=lambda t: (t[0], abs(t[1] - expected_end)))
    out: list[_Candidate] = []
    for d, j in groups[:_ENDS]:
        fe = lo + j + 1
        back_lo = max(0, fe - m - kmax - 1)
        rscores = _myers(q[::-1], hay[back_lo:fe][::-1], anchored=True, peq=rpeq)
        if not rscores:
            continue
        d = min(rscores)
        best_len = -1
        for length_minus_1, sc in enumerate(rscores):
            if sc == d and (best_len < 0 or abs(length_minus_1 + 1 - m) < abs(best_len - m)):
                best_len = length_minus_1 + 1
        fs = fe - best_len
        fs, fe, d, dp, ds = _refine(hay, pat, fs, fe, d, peq)
        lp, ls = len(pat.prefix), len(pat.suffix)
        sq = 1.0 - d / m
        sp = 1.0 - dp / lp if lp else 1.0
        ss = 1.0 - ds / ls if ls else 1.0
        conf = (m * sq + lp * sp + ls * ss) / (m + lp + ls)
        s, e = f.source_span(fs, fe)
        if e <= s:
            continue
        out.append(
            _Candidate(
                i,
                s,
                e,
                conf,
                job.distance(i, s),
                conf,
                edits=d,
                accepted=_fuzzy_accepted(sq, conf, job.moved(i)),
                extra={"sq": sq, "sp": sp, "ss": ss},
            )
        )
    return out


_REFINE = 4  # fuzzy match boundaries are re-examined this many characters either way


def _refine(
    hay: str, pat: _FoldedPattern, fs: int, fe: int, d: int, peq: dict[str, int]
) -> tuple[int, int, int, int, int]:
    """Settle the boundaries of a fuzzy match with the help of its context.

    The quote alone cannot tell "wlil" from "will" at its end: "wil" is as
    close. Around the first guess, the boundaries that need the fewest edits
    for prefix + quote + suffix together win (then the length closest to the
    old quote's, then the smallest move). Returns (start, end, quote edits,
    prefix edits, suffix edits), in folded positions.
    """
    q, lp, ls = pat.quote, len(pat.prefix), len(pat.suffix)
    m = len(q)
    before = {
        s: _edits_before(pat.prefix, hay[max(0, s - lp - 8) : s])
        for s in range(max(0, fs - _REFINE), min(fs + _REFINE, fe - 1) + 1)
    }
    after = {
        e: _edits_after(pat.suffix, hay[e : e + ls + 8])
        for e in range(max(fs - _REFINE + 1, fe - _REFINE, 1), min(len(hay), fe + _REFINE) + 1)
    }
    if d == 0 and before[fs] == 0 and after[fe] == 0:
        return fs, fe, 0, 0, 0
    best: tuple[tuple[int, int, int], int, int, int] | None = None
    for s, dp in before.items():
        top = min(len(hay), fe + _REFINE)
        if top <= s:
            continue
        scores = _myers(q, hay[s:top], anchored=True, peq=peq)  # scores[k]: q vs hay[s:s+k+1]
        for e, ds in after.items():
            if e <= s:
                continue
            dq = scores[e - s - 1]
            key = (dq + dp + ds, abs(e - s - m), abs(s - fs) + abs(e - fe))
            if best is None or key < best[0]:
                best = (key, s, e, dq)
    if best is None:
        return fs, fe, d, before.get(fs, lp), after.get(fe, ls)
    _, s, e, dq = best
    return s, e, dq, before[s], after[e]


def _fuzzy_accepted(sq: float, conf: float, moved: bool) -> bool:
    """The fuzzy acceptance rule (docs/anchoring.md, "Thresholds")."""
    if moved:
        return sq >= FUZZY_MIN_QUOTE_SIMILARITY and conf >= FUZZY_MIN_CONFIDENCE_MOVED
    if sq >= FUZZY_MIN_QUOTE_SIMILARITY and conf >= FUZZY_MIN_CONFIDENCE:
        return True
    # a short quote whose context stands nearly intact: e.g. «recieve» -> «receive»
    return sq >= FUZZY_MIN_QUOTE_SIMILARITY_IN_CONTEXT and conf >= FUZZY_MIN_CONFIDENCE_IN_CONTEXT


def _by_fuzzy(job: _Job) -> Reanchor:
    a = job.anchor
    pat = _fold_pattern(a)
    q = pat.quote
    m = len(q)
    if m == 0:
        return _orphan(job, 0.0, "the quote is only whitespace and is no longer there")
    kmax = int(m * (1.0 - FUZZY_MIN_QUOTE_SIMILARITY_IN_CONTEXT) + 1e-9)
    peq, rpeq = _peq(q), _peq(q[::-1])
    whole = pat.prefix + q + pat.suffix
    grams = _grams(whole, 4 if job.cjk else 8)
    tol = max(16, kmax + 8)
    best: _Candidate | None = None
    best_rejected: _Candidate | None = None
    seen: set[tuple[int, int, int]] = set()
    for i in job.order:
        f = job.sections[i].folded
        centers: list[tuple[int, int]] = []
        if i == job.primary:
            centers.append((f.to_folded(job.expected_local(i)), max(512, m)))
        centers += [(c, max(48, 2 * kmax + 16)) for c in _vote_windows(f.text, pat, grams, tol)]
        for center, slack in centers:
            for cand in _fuzzy_window(job, i, pat, center, slack, kmax, peq, rpeq):
                key = (cand.section, cand.start, cand.end)
                if key in seen:
                    continue
                seen.add(key)
                if not cand.accepted:
                    if best_rejected is None or cand.score > best_rejected.score:
                        best_rejected = cand
                    continue
                if best is None or (cand.score, -cand.distance) > (best.score, -best.distance):
                    best = cand
        if best is not None and i == job.primary:
            break
    if best is None:
        if best_rejected is None:
            return _orphan(job, 0.0, "no similar text found near the old place or elsewhere")
        sq = best_rejected.extra["sq"]
        if job.moved(best_rejected.section):
            need = f"{FUZZY_MIN_CONFIDENCE_MOVED:.2f} in another section"
        else:
            need = f"{FUZZY_MIN_CONFIDENCE:.2f} ({FUZZY_MIN_CONFIDENCE_IN_CONTEXT:.2f} for a quote "
            need += f"similarity under {FUZZY_MIN_QUOTE_SIMILARITY:.2f})"
        return _orphan(
            job,
            best_rejected.confidence,
            f"best candidate ({_where(job, best_rejected)}) scored {best_rejected.confidence:.2f}"
            f" (quote similarity {sq:.2f}); needed {need}",
        )
    new = job.sections[best.section].source_text[best.start : best.end]
    x = best.extra
    return _result(
        job,
        "fuzzy",
        best,
        f"similar text found: {_where(job, best)}; {_describe_change(a.exact, new)}; "
        f"similarity quote {x['sq']:.2f}, prefix {x['sp']:.2f}, suffix {x['ss']:.2f}",
    )


def _orphan(job: _Job, confidence: float, why: str) -> Reanchor:
    return Reanchor(
        status="orphaned",
        anchor=job.anchor,
        section=None,
        href=None,
        source_start=None,
        source_end=None,
        exact=None,
        prefix=None,
        suffix=None,
        confidence=confidence,
        changed=True,
        edits=None,
        note=f"orphaned, not moved: {why}",
    )


def _clip(s: str, n: int = 24) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _widen(s: str, i: int, j: int) -> tuple[int, int]:
    """Extend ``s[i:j]`` to whole words (letters and digits of space-separated scripts)."""
    while i > 0 and _is_word_char(s[i - 1]):
        i -= 1
    while j < len(s) and _is_word_char(s[j]):
        j += 1
    return i, j


def _describe_change(old: str, new: str) -> str:
    """A short human-readable account of how ``old`` became ``new``."""
    if old == new:
        return "quote unchanged"
    fo, fn = fold(old).text.strip(" "), fold(new).text.strip(" ")
    if fo == fn:
        return "only whitespace, line breaks, quote marks, dashes or character width differ"
    if len(fo) + len(fn) > 8000:
        return f"quote changed ({edit_distance(fo, fn)} edits)"
    # Changes widened to whole words (of space-separated scripts) and merged, so a
    # swapped letter reads «recieve» → «receive», not as two one-letter edits.
    ops: list[list[int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, fo, fn, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        i1, i2 = _widen(fo, i1, i2)
        j1, j2 = _widen(fn, j1, j2)
        if ops and (i1 <= ops[-1][1] or j1 <= ops[-1][3]):
            ops[-1][1], ops[-1][3] = max(ops[-1][1], i2), max(ops[-1][3], j2)
        else:
            ops.append([i1, i2, j1, j2])
    shown: list[str] = []
    for i1, i2, j1, j2 in ops[:3]:
        if i2 == i1:
            shown.append(f"inserted «{_clip(fn[j1:j2])}»")
        elif j2 == j1:
            shown.append(f"removed «{_clip(fo[i1:i2])}»")
        else:
            shown.append(f"«{_clip(fo[i1:i2])}» → «{_clip(fn[j1:j2])}»")
    more = f" and {len(ops) - 3} more" if len(ops) > 3 else ""
    return "quote changed: " + ", ".join(shown) + more
