"""Dialogue: finding the turns of a chat log or a play, and merging them into units.

:func:`find_turns` recognizes chat logs (``>`` lines, ``---`` separators) and
plays (speaker labels: upper-case names, recurring title-case names, or inline
``NAME.`` openings); :func:`_dialogue_units` makes every turn one atomic unit
(up to ``max_turn``) for the ``structured`` packer.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence

import regex

from mindory.text.records import HEADING, Block
from mindory.text.strategies.units import (
    _ATOMIC,
    _HEAD,
    R_TURN,
    Span,
    Unit,
    _section_units,
    _tiles,
    _units,
)
from mindory.text.windows import _WS

_CHAT_RE = re.compile(r"(?m)^>")
_CHAT_SEP_RE = re.compile(r"(?m)^-{3,}[ \t]*$")
_CAPS_WORD = r"\p{Lu}[\p{Lu}'’\-]*\.?"
_CAPS_LABEL_RE = regex.compile(rf"{_CAPS_WORD}(?: {_CAPS_WORD}){{0,3}}:?")
_TITLE_LABEL_RE = regex.compile(r"\p{Lu}\p{Ll}+(?: \p{Lu}\p{Ll}+){0,2}[.:]?")
_INLINE_LABEL_RE = regex.compile(r"(\p{Lu}[\p{Lu}'’\-]+(?: \p{Lu}[\p{Lu}'’\-]+){0,3})[.:] (?=\S)")
_ROMAN_RE = re.compile(r"[IVXLCDM]+\.?")
_LABEL_MAX = 40
# Words that start structural lines, not speaker names.
_NOT_SPEAKERS = frozenset(
    (
        "ACT", "SCENE", "PROLOGUE", "EPILOGUE", "CHAPTER", "BOOK", "PART", "VOLUME",
        "CONTENTS", "INDEX", "FINIS", "PREFACE", "INTRODUCTION", "APPENDIX", "NOTE", "NOTES",
        "FOOTNOTE", "FOOTNOTES", "DRAMATIS", "PERSONAE", "CANTO", "SECTION", "END", "TABLE",
        "FIGURE",
    )
)  # fmt: skip


def _caps_label(line: str) -> bool:
    """An upper-case speaker name: ``ROMEO``, ``LADY CAPULET.``, ``HAMLET:``."""
    if len(line) > _LABEL_MAX or not line.isupper() or not _CAPS_LABEL_RE.fullmatch(line):
        return False
    first = line.split()[0].strip(".:")
    if len(line.rstrip(".:")) < 2 or first in _NOT_SPEAKERS:
        return False
    return not _ROMAN_RE.fullmatch(line.rstrip(":"))


def find_turns(text: str, blocks: Sequence[Block] | None = None) -> tuple[str, list[Span]]:
    """The dialogue turns of a section: ``("chat" | "play" | "", [(start, end), ...])``.

    Spans are ``[start, end)`` ranges of normalized text (a chat turn's end may
    include the whitespace before the next turn); see :mod:`mindory.text.strategies` for the
    markers. Chat wins when it has at least three turns.
    """
    kind, turns, _ = _find_turns(text, _section_units(text, blocks))
    return kind, turns


def _find_turns(text: str, units: list[Unit]) -> tuple[str, list[Span], list[Span] | None]:
    """Kind, turn spans and, for plays, each turn as a range of unit indices."""
    n = len(text)
    # Chat logs.
    chat: list[int] = []
    if ">" in text:
        prev_end = -1
        for m in _CHAT_RE.finditer(text):
            line_end = text.find("\n", m.start())
            line_end = n if line_end < 0 else line_end
            if prev_end >= 0 and not text[prev_end : m.start()].strip(_WS):
                prev_end = line_end  # a continued user turn
                continue
            chat.append(m.start())
            prev_end = line_end
    if len(chat) >= 3:
        heads = [u[0] for u in units if u[2] & _HEAD]
        seps = [m.end() for m in _CHAT_SEP_RE.finditer(text)] if "---" in text else []
        return "chat", _turn_spans(chat, sorted(set(heads) | set(seps)), n), None
    # Plays: speaker labels are blocks (units that are not headings, tables or
    # preformatted text), judged once per distinct text.
    short = [k for k, u in enumerate(units) if not u[2] and u[1] - u[0] <= _LABEL_MAX]
    texts = [text[units[k][0] : units[k][1]] for k in short]
    certain = "\0"  # the verdict of an upper-case label
    verdict: dict[str, str | None] = {}
    for block in set(texts):
        if _caps_label(block):
            verdict[block] = certain
        elif block.istitle() and _TITLE_LABEL_RE.fullmatch(block):
            first = block.split()[0].rstrip(".:").upper()
            verdict[block] = None if first in _NOT_SPEAKERS else block.rstrip(".:")
        else:
            verdict[block] = None
    title_counts = Counter(v for b in texts if (v := verdict[b]) is not None and v != certain)
    labels = {
        k
        for k, b in zip(short, texts)
        if (v := verdict[b]) is not None and (v == certain or title_counts[v] >= 2)
    }
    # Blocks that begin with an upper-case name ("ROMEO. But soft!"), looked for
    # when the names are not blocks of their own.
    inline = (
        [
            k
            for k, (p, q, fl, _) in enumerate(units)
            if not fl
            and q - p > 3
            and text[p + 1].isupper()
            and text[p].isupper()
            and k not in labels
        ]
        if len(labels) < 3
        else []
    )
    for k in inline:
        p, q = units[k][0], units[k][1]
        m = _INLINE_LABEL_RE.match(text, p, q)
        if m is not None and _caps_label(m.group(1)):
            labels.add(k)
    if len(labels) < 3:
        return "", [], None
    order = sorted(labels)
    heads = [k for k, u in enumerate(units) if u[2] & _HEAD]
    ranges: list[Span] = []
    j = 0
    count = len(units)
    for t, label in enumerate(order):
        end = order[t + 1] if t + 1 < len(order) else count
        while j < len(heads) and heads[j] <= label:
            j += 1
        if j < len(heads) and heads[j] < end:
            end = heads[j]
        ranges.append((label, end))
    return "play", [(units[a][0], units[e - 1][1]) for a, e in ranges], ranges


def _turn_spans(turn_starts: list[int], breaks: list[int], n: int) -> list[Span]:
    """Each turn runs to the next turn start or the first break after it (both sorted)."""
    out: list[Span] = []
    j = 0
    nb = len(breaks)
    last = len(turn_starts) - 1
    for k, t in enumerate(turn_starts):
        end = turn_starts[k + 1] if k < last else n
        while j < nb and breaks[j] <= t:
            j += 1
        if j < nb and breaks[j] < end:
            end = breaks[j]
        out.append((t, end))
    return out


def _dialogue_units(
    text: str,
    blocks: Sequence[Block] | None,
    units: list[Unit],
    turns: list[Span],
    ranges: list[Span] | None,
    max_turn: int,
) -> list[Unit]:
    """Units with every turn merged into one (atomic up to ``max_turn``)."""
    if ranges is not None:
        return _merge_ranges(units, ranges, max_turn)
    merged = _merge_turns(units, turns)
    if merged is None:
        # A turn starts or ends inside a block (a ">" line, a "---" line): split
        # the tiles there and merge them as regions.
        starts, kinds = _tiles(text, blocks)
        extra = {p for span in turns for p in span if 0 < p < len(text)} - set(starts)
        if extra:
            kind_at = dict(zip(starts, kinds))
            new_starts = sorted(set(starts) | extra)
            new_kinds = []
            for p in new_starts:
                if p in kind_at:
                    new_kinds.append(kind_at[p])
                else:
                    k = kinds[bisect_right(starts, p) - 1]
                    new_kinds.append("paragraph" if k == HEADING else k)
            starts, kinds = new_starts, new_kinds
        regions = [(a, b, _ATOMIC, R_TURN) for a, b in turns if b > a]
        merged = _units(text, starts, kinds, regions)
    # A turn longer than the limit is cut like any long unit.
    return [
        (s, e, 0, "") if why == R_TURN and e - s > max_turn else (s, e, f, why)
        for s, e, f, why in merged
    ]


def _merge_ranges(units: list[Unit], ranges: list[Span], max_turn: int) -> list[Unit]:
    """Merge each range ``[a, e)`` of unit indices (a play's turns) into one unit."""
    atomic = [k for k, u in enumerate(units) if u[2] & _ATOMIC]
    out: list[Unit] = []
    prev = 0
    for a, e in ranges:
        if prev < a:
            out.extend(units[prev:a])
        s, t = units[a][0], units[e - 1][1]
        i = bisect_left(atomic, a) if atomic else 0
        if atomic and i < len(atomic) and atomic[i] < e:
            # A table, preformatted block or code fence inside: never split.
            out.append((s, t, _ATOMIC, units[atomic[i]][3]))
        elif t - s > max_turn:
            out.append((s, t, 0, ""))  # cut like any long unit
        else:
            out.append((s, t, _ATOMIC, R_TURN))
        prev = e
    out.extend(units[prev:])
    return out


def _merge_turns(units: list[Unit], turns: list[Span]) -> list[Unit] | None:
    """Merge the units of each turn; ``None`` when a turn edge falls inside a unit."""
    out: list[Unit] = []
    i = 0
    count = len(units)
    for a, b in turns:
        while i < count and units[i][1] <= a:
            out.append(units[i])
            i += 1
        if i == count or units[i][0] >= b:
            continue  # a turn of whitespace only
        if units[i][0] < a:
            return None
        first = i
        atomic = ""
        while i < count and units[i][0] < b:
            if units[i][2] & _ATOMIC and not atomic:
                atomic = units[i][3]
            i += 1
        if units[i - 1][1] > b:
            return None
        out.append((units[first][0], units[i - 1][1], _ATOMIC, atomic or R_TURN))
    out.extend(units[i:])
    return out
