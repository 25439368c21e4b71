"""Edit distance: bit-parallel Levenshtein distances (Myers / Hyyrö), pure Python.

Used by the fuzzy re-anchoring strategy (search and anchored forms) and to
describe how a quote changed.
"""

from __future__ import annotations


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
