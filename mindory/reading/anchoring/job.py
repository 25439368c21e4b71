"""One re-anchoring's working state and the pieces every strategy shares.

:class:`_Job` (the old place, the corresponding new section, the expected
position), :class:`_Candidate`, the folded selector pattern, and the makers of
results (:func:`_result`, :func:`_orphan`, :func:`_describe_change`). The
strategies themselves live in :mod:`.reanchoring` and :mod:`.fuzzy`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

from mindory.reading.anchoring.anchors import Reanchor, ReanchorStatus, StoredAnchor
from mindory.reading.anchoring.distance import edit_distance
from mindory.reading.anchoring.folding import _is_cjk_text, _is_word_char, fold
from mindory.reading.anchoring.sections import SectionHint, SectionText
from mindory.reading.anchoring.thresholds import CONTEXT_CHARS, EVIDENCE_MIN, EVIDENCE_MIN_CJK


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
