"""The fuzzy re-anchoring strategy: a bounded edit-distance match of the quote.

Candidate windows come from rare n-grams of prefix + quote + suffix (and the
expected place); each is scored together with its context and accepted by the
rule in :func:`_fuzzy_accepted` (docs/anchoring.md, "Thresholds").
"""

from __future__ import annotations

from mindory.reading.anchoring.anchors import Reanchor
from mindory.reading.anchoring.distance import _edits_after, _edits_before, _myers, _peq
from mindory.reading.anchoring.job import (
    _Candidate,
    _describe_change,
    _fold_pattern,
    _FoldedPattern,
    _Job,
    _orphan,
    _result,
    _where,
)
from mindory.reading.anchoring.thresholds import (
    _ENDS,
    _GRAMS,
    _RARE,
    _WINDOWS,
    FUZZY_MIN_CONFIDENCE,
    FUZZY_MIN_CONFIDENCE_IN_CONTEXT,
    FUZZY_MIN_CONFIDENCE_MOVED,
    FUZZY_MIN_QUOTE_SIMILARITY,
    FUZZY_MIN_QUOTE_SIMILARITY_IN_CONTEXT,
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
