"""Re-anchoring's entry points and its literal strategies.

:func:`reanchor` tries, in order: ``position`` (same place, same text),
``exact`` (the quote elsewhere), ``normalized`` (the same under folding), then
:mod:`.fuzzy`; nothing is placed without enough evidence (see
:func:`_enough_evidence`), and an orphan is never moved.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mindory.reading.anchoring.anchors import Reanchor, StoredAnchor
from mindory.reading.anchoring.fuzzy import _by_fuzzy
from mindory.reading.anchoring.job import (
    _Candidate,
    _describe_change,
    _fold_pattern,
    _Job,
    _result,
    _where,
)
from mindory.reading.anchoring.sections import SectionHint, SectionText, _find_near
from mindory.reading.anchoring.thresholds import SIDE_MIN


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
    """Place ``highlight`` in the new edition's sections (see :mod:`mindory.reading.anchoring`).

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
