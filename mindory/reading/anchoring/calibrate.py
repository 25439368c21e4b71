"""Quote calibration: find the exact source span a cited quote came from.

:func:`calibrate_quote` answers ``exact``, ``normalized``, ``prefix`` or
``rejected`` (see its docstring); the result's ``exact`` is always a slice of
the source text — nothing is invented or extended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mindory.reading.anchoring.folding import FoldedText, _is_cjk_text, _is_word_char, fold
from mindory.reading.anchoring.ruby import ReaderText
from mindory.reading.anchoring.sections import SectionText, _find_near
from mindory.reading.anchoring.thresholds import DEFAULT_MIN_PREFIX, DEFAULT_MIN_PREFIX_CJK

QuoteMethod = Literal["exact", "normalized", "prefix", "rejected"]
_View = FoldedText | ReaderText  # a folded text to search, with its way back to source


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
    ``ruby_ignored``: the quote matched the text without ruby annotations
    (furigana); the span still covers whole ``<ruby>`` elements.
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
    ruby_ignored: bool = False

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
            "rubyIgnored": self.ruby_ignored,
        }


def _as_section_texts(texts: Sequence[SectionText | str]) -> list[SectionText]:
    out: list[SectionText] = []
    for i, t in enumerate(texts):
        out.append(t if isinstance(t, SectionText) else SectionText(ordinal=i, source_text=t))
    return out


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
       then case-insensitive. A text with ruby (:attr:`SectionText.ruby`) is
       also searched without its ruby annotations (``<rt>``/``<rp>``: a quote
       typed without furigana); such a match says ``ruby_ignored``.
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

    Where the text has ruby, every span found is widened to whole ``<ruby>``
    elements (it starts at or before a ruby element's start and ends at or
    after its end), and a place whose widening adds no visible text is
    preferred to one that cuts a ruby base.
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

    def finish(
        method: QuoteMethod,
        t: SectionText,
        s: int,
        e: int,
        matched: int,
        ci: bool,
        count: int,
        note: str,
        level: int,
    ) -> _Found:
        """A match at section-local source ``[s, e)``, grown to whole ruby elements."""
        idx = t.ruby_index
        clean, mixed = True, False
        if idx is not None:
            ws, we = idx.widen(s, e)
            clean = idx.is_clean(s, e)
            mixed = level < 2 and idx.hides(s, e)
            if (ws, we) != (s, e):
                note += "; the span widened to whole ruby elements"
                s, e = ws, we
        m = QuoteMatch(
            method,
            quote,
            t.source_text[s:e],
            t.ordinal,
            t.source_start + s,
            t.source_start + e,
            n_raw,
            matched,
            ci,
            count,
            note,
            level == 2,
        )
        gap = _span_distance(t.source_start + s, t.source_start + e, hint)[0]
        return _Found(m, gap, clean, mixed, level)

    def exact_in(t: SectionText) -> _Found | None:
        occ = _find_near(t.source_text, stripped, _hint_local(t, hint))
        if not occ:
            return None
        n = len(stripped)

        def key(x: int) -> tuple[int, int, int]:
            gap, near = _span_distance(t.source_start + x, t.source_start + x + n, hint)
            return (gap, _cuts(t, x, x + n), near)

        best = min(occ, key=key)
        more = f"; {len(occ)} occurrences, the nearest to the hint taken" if len(occ) > 1 else ""
        return finish(
            "exact",
            t,
            best,
            best + n,
            lead + n,
            False,
            len(occ),
            "the quote occurs literally" + more,
            0,
        )

    def normalized_in(t: SectionText, view: _View | None, level: int) -> _Found | None:
        if view is None:
            return None
        for ci in (False, True):
            for needle0, off, how in variants:
                needle = needle0.lower() if ci else needle0
                found = _best_folded(t, view, view.haystack(ci), needle, hint)
                if found is None:
                    continue
                fs, fe, count = found
                s, e = view.source_span(fs, fe)
                what = (
                    "the quote occurs in the text without ruby annotations (furigana), "
                    "after folding whitespace, width, quote marks and dashes"
                    if level == 2
                    else "the quote occurs after folding whitespace, width, quote marks and dashes"
                )
                return finish(
                    "normalized",
                    t,
                    s,
                    e,
                    raw_end(off, len(needle0)),
                    ci,
                    count,
                    what + (", ignoring case" if ci else "") + how,
                    level,
                )
        return None

    # 1.–2. exact, else normalized (on the source text, then on the text without ruby
    # annotations) — per text, in order. With a hint, a folded match inside the hint
    # beats a literal one outside it (the quote "a\r\nb" cited from a chunk holding
    # "a b" is that chunk's text, not a line-broken copy chapters away); a match that
    # would cut a ruby element's visible text gives way to one that does not, and one
    # across ruby annotations to one in the text without them.
    for t in items:
        found: list[_Found] = []
        for level in (0, 1, 2):
            if level == 0:
                one = exact_in(t)
            else:
                one = normalized_in(t, t.folded if level == 1 else t.reader, level)
            if one is None:
                continue
            if one.gap == 0 and one.clean and not one.mixed:
                return one.match
            found.append(one)
        if found:
            return min(found, key=lambda f: (f.gap > 0, not f.clean, f.mixed, f.level)).match
    if not qf:
        return rejected("the quote holds only invisible characters")

    # 3. prefix
    floor = min_prefix
    if floor is None:
        floor = DEFAULT_MIN_PREFIX_CJK if _is_cjk_text(qf) else DEFAULT_MIN_PREFIX
    floor = max(1, floor)
    best_len = 0
    best_at: tuple[SectionText, _View, int, bool, str, int] | None = None
    for ci in (False, True):
        for needle0, off, _ in variants:
            needle = needle0.lower() if ci else needle0
            for t in items:
                views: list[tuple[_View, int]] = [(t.folded, 1)]
                if t.reader is not None:
                    views.append((t.reader, 2))
                for view, level in views:
                    n = _trim_prefix(needle0, _longest_prefix(view.haystack(ci), needle))
                    if n > best_len:
                        best_len, best_at = n, (t, view, level, ci, needle0, off)
    if best_at is not None and best_len >= floor:
        t, view, level, ci, needle0, off = best_at
        needle = (needle0.lower() if ci else needle0)[:best_len]
        hit = _best_folded(t, view, view.haystack(ci), needle, hint)
        assert hit is not None
        fs, fe, count = hit
        s, e = view.source_span(fs, fe)
        return finish(
            "prefix",
            t,
            s,
            e,
            raw_end(off, best_len),
            ci,
            count,
            f"only the first {best_len} of {len(needle0)} characters (after folding) occur"
            + (" in the text without ruby annotations (furigana)" if level == 2 else "")
            + (", ignoring case" if ci else "")
            + "; the rest of the quote is not in the text",
            level,
        ).match
    if best_len:
        return rejected(
            f"the longest prefix that occurs has {best_len} characters (after folding), "
            f"fewer than {floor}"
        )
    return rejected("no part of the quote occurs in the text")


@dataclass(frozen=True, slots=True)
class _Found:
    """A candidate match in one text: how far from the hint, whether it keeps the
    visible text of every ruby element whole, whether it matched across ruby
    annotations in the source text (``mixed``: what a reader sees there is not the
    quote, so a match in the text without annotations is preferred), and its level
    (0 exact, 1 folded, 2 folded without ruby annotations)."""

    match: QuoteMatch
    gap: int
    clean: bool
    mixed: bool
    level: int


def _cuts(t: SectionText, start: int, end: int) -> int:
    """1 when section-local ``[start, end)`` cuts the visible text of a ruby element."""
    idx = t.ruby_index
    return 0 if idx is None or idx.is_clean(start, end) else 1


def _best_folded(
    t: SectionText, view: _View, hay: str, needle: str, hint: tuple[int, int] | None
) -> tuple[int, int, int] | None:
    """The occurrence of ``needle`` in folded ``hay`` nearest ``hint``: (start, end, count).

    Among equally near ones, one that keeps ruby elements whole is preferred."""
    around = view.to_folded(_hint_local(t, hint))
    occ = _find_near(hay, needle, around)
    if not occ:
        return None
    n = len(needle)

    def key(x: int) -> tuple[int, int, int]:
        s, e = view.source_span(x, x + n)
        gap, near = _span_distance(t.source_start + s, t.source_start + e, hint)
        return (gap, _cuts(t, s, e), near)

    best = occ[0] if hint is None and t.ruby_index is None else min(occ, key=key)
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
