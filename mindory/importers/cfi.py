"""EPUB CFI: parse, generate and resolve Canonical Fragment Identifiers.

A section's **source text** is the concatenation of every text node under
``<body>`` in document order (DESIGN §1). This module maps positions in that
text (code points) to CFIs and back, in two flavors:

``spec`` (the ``cfi`` field)
    The EPUB CFI 1.1 specification, as foliate-js reads it. Below an element,
    even steps count element children (``/2`` is the first), odd steps are the
    *chunks* of character data between them: ``/1`` before the first element,
    ``/3`` between the first and the second, ... — every gap counts, empty or
    not, and text split only by a comment or processing instruction is one
    chunk (``:N`` continues across the comment).

``epubjs`` (the ``cfi_epubjs`` field)
    The same place written for epub.js 0.3. epub.js numbers only the text
    nodes that exist in its DOM (futurepress/epub.js#470): the k-th text node
    child of an element (0-based) is ``/2k+1``, whatever the elements between
    them, and two text nodes split by a comment are two steps. It resolves
    element steps with XPath ``*[position()=N and @id='x']`` and parses the
    string by plain ``split`` on ``/ , : !`` without ``^`` unescaping, so id
    assertions that need escaping or contain those characters are omitted.

``:N`` offsets are UTF-16 code units in both flavors.

Where a position falls on the boundary between two text nodes the choice is
deterministic: a point and a range start go to the non-empty text piece that
holds the character *at* the position (the start of the later piece), a range
end to the non-empty piece holding the character *before* it (the end of the
earlier piece). So a highlight's start and end always land inside text that is
highlighted, and no generated CFI ever names an empty chunk (which foliate-js
and epub.js cannot resolve). A document with no text at all gets the body
element itself (``…!/4``), which every reader maps to the start of the body.

Everything here is pure: :class:`CfiDocument` holds a compact table (one row
per text piece, one per element) built once from the lxml tree, and generation
is a bisect per position.
"""

from __future__ import annotations

import json
import operator
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple
from urllib.parse import unquote

from mindory.errors import MindoryError
from mindory.text.offsets import Utf16Index

__all__ = [
    "EPUBJS",
    "SPEC",
    "CfiColumns",
    "CfiDocument",
    "CfiError",
    "CfiPath",
    "CfiStep",
    "ParsedCfi",
    "escape_cfi",
    "parse_cfi",
    "cfi_start_columns",
    "spine_step_of",
]

SPEC = "spec"
EPUBJS = "epubjs"
_FLAVORS = {
    "spec": SPEC,
    "cfi": SPEC,
    "foliate": SPEC,
    "epubjs": EPUBJS,
    "epub.js": EPUBJS,
    "cfi_epubjs": EPUBJS,
}
SERIAL_VERSION = 1


class CfiError(MindoryError):
    """A CFI that cannot be parsed, generated or resolved against this document."""


# --------------------------------------------------------------------------- parsing

_SPECIAL = "^[](),;="
_ESCAPE_RE = re.compile(r"([\^\[\](),;=])")
# What epub.js 0.3 cannot carry in an assertion: it splits the string on / , : !
# before looking at brackets, never unescapes ^, and puts ids into an XPath
# '...' literal. Anything the spec would escape is out too (epub.js would keep
# the ^ as part of the id).
_EPUBJS_UNSAFE_RE = re.compile(r"[\^\[\](),;=/:!'\"%\s\x00-\x1f\x7f]")
_WS_RE = re.compile(r"\s+")


def escape_cfi(value: str) -> str:
    """Escape the CFI special characters ``^ [ ] ( ) , ; =`` with ``^``."""
    return _ESCAPE_RE.sub(r"^\1", value)


def _epubjs_safe(value: str) -> bool:
    return bool(value) and _EPUBJS_UNSAFE_RE.search(value) is None


@dataclass(frozen=True, slots=True)
class CfiStep:
    """One ``/N`` step; ``indirect`` when it directly follows a ``!``."""

    index: int
    id: str | None = None  # the (unescaped) ID assertion
    indirect: bool = False
    params: tuple[tuple[str, str], ...] = ()  # e.g. (("s", "b"),) from "/2[;s=b]"

    def __str__(self) -> str:
        out = ("!" if self.indirect else "") + f"/{self.index}"
        if self.id is not None or self.params:
            out += "[" + escape_cfi(self.id or "") + _params_str(self.params) + "]"
        return out


@dataclass(frozen=True, slots=True)
class CfiPath:
    """A sequence of steps and its terminal (offset, assertions)."""

    steps: tuple[CfiStep, ...] = ()
    offset: int | None = None  # ":N", UTF-16 code units
    temporal: float | None = None  # "~T"
    spatial: tuple[float, float] | None = None  # "@x:y"
    text_before: str | None = None  # text location assertion, before the point
    text_after: str | None = None  # ... and after it
    params: tuple[tuple[str, str], ...] = ()  # terminal assertion parameters
    trailing_indirection: bool = False  # "…!" with nothing after it

    @property
    def side(self) -> str | None:
        """Side bias ``"a"``/``"b"`` (``;s=``) of the terminal or of the last step."""
        for name, value in self.params:
            if name == "s":
                return value
        if self.steps:
            for name, value in self.steps[-1].params:
                if name == "s":
                    return value
        return None

    @property
    def has_text_assertion(self) -> bool:
        return bool(self.text_before) or bool(self.text_after)

    def __str__(self) -> str:
        out = "".join(str(s) for s in self.steps)
        if self.trailing_indirection:
            out += "!"
        if self.offset is not None:
            out += f":{self.offset}"
        if self.temporal is not None:
            out += f"~{_num(self.temporal)}"
        if self.spatial is not None:
            out += f"@{_num(self.spatial[0])}:{_num(self.spatial[1])}"
        if self.has_text_assertion or self.params:
            text = escape_cfi(self.text_before or "")
            if self.text_after:
                text += "," + escape_cfi(self.text_after)
            out += "[" + text + _params_str(self.params) + "]"
        return out


@dataclass(frozen=True, slots=True)
class ParsedCfi:
    """A parsed CFI: a point (``path``) or a range (``path`` + ``start`` + ``end``)."""

    path: CfiPath
    start: CfiPath | None = None
    end: CfiPath | None = None
    href: str | None = None  # the IRI before "#epubcfi(", e.g. "package.opf"

    @property
    def is_range(self) -> bool:
        return self.start is not None

    def start_path(self) -> CfiPath:
        """The full path of the point, or of the range start."""
        return _join(self.path, self.start) if self.start is not None else self.path

    def end_path(self) -> CfiPath:
        """The full path of the point, or of the range end."""
        return _join(self.path, self.end) if self.end is not None else self.path

    def __str__(self) -> str:
        inner = str(self.path)
        if self.start is not None and self.end is not None:
            inner += f",{self.start},{self.end}"
        return f"epubcfi({inner})"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _params_str(params: tuple[tuple[str, str], ...]) -> str:
    return "".join(f";{escape_cfi(k)}={escape_cfi(v)}" for k, v in params)


def _join(parent: CfiPath, sub: CfiPath) -> CfiPath:
    if parent.offset is not None or parent.text_before or parent.text_after:
        raise CfiError("the parent path of a range cannot carry an offset or text assertion")
    return CfiPath(
        steps=parent.steps + sub.steps,
        offset=sub.offset,
        temporal=sub.temporal,
        spatial=sub.spatial,
        text_before=sub.text_before,
        text_after=sub.text_after,
        params=sub.params,
        trailing_indirection=sub.trailing_indirection,
    )


def parse_cfi(s: str, *, percent_decode: bool = True) -> ParsedCfi:
    """Parse ``epubcfi(...)``, ``href#epubcfi(...)`` or a bare path like ``/6/4!/4/1:0``.

    ``percent_decode`` decodes ``%HH`` sequences first (IRI layer), before the
    ``^`` escapes are read (CFI layer), as the spec orders the two layers; a
    ``%`` not followed by two hex digits is kept. Pass ``False`` for a raw CFI
    whose assertions contain a literal ``%HH``.
    """
    if not isinstance(s, str):
        raise CfiError(f"a CFI must be a string, not {type(s).__name__}")
    text = s.strip()
    original = text
    k = text.find("epubcfi(")
    if k < 0 and percent_decode and "%" in text:
        text = _percent_decode(text, original)
        k = text.find("epubcfi(")
    href: str | None = None
    if k >= 0:
        prefix = text[:k]
        if prefix:
            if not prefix.endswith("#"):
                raise CfiError(f"unexpected text before 'epubcfi(': {original!r}")
            href = prefix[:-1] or None
        if not text.endswith(")"):
            raise CfiError(f"missing closing ')': {original!r}")
        text = text[k + 8 : -1]
    if percent_decode and "%" in text:
        text = _percent_decode(text, original)
    if not text:
        raise CfiError(f"empty CFI: {original!r}")
    parts = _split_top(text, original)
    if len(parts) == 1:
        return ParsedCfi(_parse_path(parts[0], original), href=href)
    if len(parts) != 3:
        raise CfiError(f"a range CFI has exactly three parts (parent,start,end): {original!r}")
    parent = _parse_path(parts[0], original)
    if not parent.steps:
        raise CfiError(f"the parent path of a range must not be empty: {original!r}")
    if parent.offset is not None or parent.has_text_assertion:
        raise CfiError(f"the parent path of a range cannot end in an offset: {original!r}")
    start = _parse_path(parts[1], original, local=True)
    end = _parse_path(parts[2], original, local=True)
    return ParsedCfi(parent, start, end, href=href)


def _percent_decode(text: str, original: str) -> str:
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError as exc:
        raise CfiError(f"percent-encoding is not UTF-8: {original!r}") from exc


def _split_top(text: str, original: str) -> list[str]:
    """Split at unescaped commas outside ``[...]``."""
    parts: list[str] = []
    cur: list[str] = []
    i, n, in_bracket = 0, len(text), False
    while i < n:
        c = text[i]
        if c == "^":
            if i + 1 >= n:
                raise CfiError(f"dangling '^' at the end: {original!r}")
            cur.append(text[i : i + 2])
            i += 2
            continue
        if c == "[":
            if in_bracket:
                raise CfiError(f"unescaped '[' inside an assertion: {original!r}")
            in_bracket = True
        elif c == "]":
            if not in_bracket:
                raise CfiError(f"unbalanced ']': {original!r}")
            in_bracket = False
        elif c == "," and not in_bracket:
            parts.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    if in_bracket:
        raise CfiError(f"unterminated '[': {original!r}")
    parts.append("".join(cur))
    return parts


_INT_RE = re.compile(r"\d+")
_NUM_RE = re.compile(r"\d+(?:\.\d+)?")
_SPATIAL_RE = re.compile(r"(\d+(?:\.\d+)?):(\d+(?:\.\d+)?)")


def _parse_path(text: str, original: str, *, local: bool = False) -> CfiPath:
    steps: list[CfiStep] = []
    offset: int | None = None
    temporal: float | None = None
    spatial: tuple[float, float] | None = None
    before: str | None = None
    after: str | None = None
    params: tuple[tuple[str, str], ...] = ()
    indirect = False
    terminal = False  # an offset has been read: only an assertion may follow
    asserted = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if asserted:
            raise CfiError(f"unexpected {text[i:]!r} after the text assertion: {original!r}")
        if c == "!":
            if indirect or terminal or (not steps and not local):
                raise CfiError(f"misplaced '!': {original!r}")
            indirect = True
            i += 1
        elif c == "/":
            if terminal:
                raise CfiError(f"a step cannot follow an offset: {original!r}")
            m = _INT_RE.match(text, i + 1)
            if m is None:
                raise CfiError(f"'/' must be followed by an integer: {original!r}")
            index = int(m.group())
            i = m.end()
            sid: str | None = None
            sparams: tuple[tuple[str, str], ...] = ()
            if i < n and text[i] == "[":
                content, i = _read_bracket(text, i, original)
                values, sparams = _split_assertion(content, original)
                if len(values) > 1:
                    raise CfiError(f"unescaped ',' in an ID assertion: {original!r}")
                sid = values[0] or None
            steps.append(CfiStep(index, sid, indirect, sparams))
            indirect = False
        elif c == ":":
            if terminal or indirect:
                raise CfiError(f"misplaced ':': {original!r}")
            m = _INT_RE.match(text, i + 1)
            if m is None:
                raise CfiError(f"':' must be followed by an integer: {original!r}")
            offset = int(m.group())
            terminal = True
            i = m.end()
        elif c == "~":
            if temporal is not None or spatial is not None or indirect:
                raise CfiError(f"misplaced '~': {original!r}")
            m = _NUM_RE.match(text, i + 1)
            if m is None:
                raise CfiError(f"'~' must be followed by a number: {original!r}")
            temporal = float(m.group())
            terminal = True
            i = m.end()
        elif c == "@":
            if spatial is not None or indirect:
                raise CfiError(f"misplaced '@': {original!r}")
            m = _SPATIAL_RE.match(text, i + 1)
            if m is None:
                raise CfiError(f"'@' must be followed by x:y: {original!r}")
            spatial = (float(m.group(1)), float(m.group(2)))
            terminal = True
            i = m.end()
        elif c == "[":
            if not terminal:
                raise CfiError(f"a text assertion must follow an offset: {original!r}")
            content, i = _read_bracket(text, i, original)
            values, params = _split_assertion(content, original)
            if len(values) > 2:
                raise CfiError(f"a text assertion has at most two parts: {original!r}")
            before = values[0] or None
            after = (values[1] or None) if len(values) == 2 else None
            asserted = True
        else:
            raise CfiError(f"unexpected {c!r} in {text!r}: {original!r}")
    if not steps and not local:
        raise CfiError(f"a CFI path starts with a step: {original!r}")
    if not steps and offset is None and not indirect and local:
        raise CfiError(f"empty range subpath: {original!r}")
    return CfiPath(
        steps=tuple(steps),
        offset=offset,
        temporal=temporal,
        spatial=spatial,
        text_before=before,
        text_after=after,
        params=params,
        trailing_indirection=indirect,
    )


# A bracket's content as characters, each marked escaped or not.
_Chars = list[tuple[str, bool]]


def _read_bracket(text: str, i: int, original: str) -> tuple[_Chars, int]:
    """Read ``[...]`` starting at ``text[i] == '['``; return its characters and the next index."""
    out: _Chars = []
    i += 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "^":
            if i + 1 >= n:
                raise CfiError(f"dangling '^': {original!r}")
            out.append((text[i + 1], True))
            i += 2
        elif c == "]":
            return out, i + 1
        elif c == "[":
            raise CfiError(f"unescaped '[' inside an assertion: {original!r}")
        else:
            out.append((c, False))
            i += 1
    raise CfiError(f"unterminated '[': {original!r}")


def _split_assertion(chars: _Chars, original: str) -> tuple[list[str], tuple[tuple[str, str], ...]]:
    """Split bracket content into its comma-separated values and ``;name=value`` params."""
    groups: list[_Chars] = [[]]
    for c, esc in chars:
        if c == ";" and not esc:
            groups.append([])
        else:
            groups[-1].append((c, esc))
    values: list[str] = [""]
    for c, esc in groups[0]:
        if c == "," and not esc:
            values.append("")
        elif c in "()" and not esc:
            raise CfiError(f"unescaped {c!r} in an assertion: {original!r}")
        else:
            values[-1] += c
    params: list[tuple[str, str]] = []
    for g in groups[1:]:
        name, value, seen_eq = "", "", False
        for c, esc in g:
            if c == "=" and not esc and not seen_eq:
                seen_eq = True
            elif seen_eq:
                value += c
            else:
                name += c
        if not seen_eq or not name:
            raise CfiError(f"an assertion parameter is name=value: {original!r}")
        params.append((name, value))
    return values, tuple(params)


# --------------------------------------------------------------------------- the table


class _LazyUtf16:
    """A text's Utf16Index, made on first use and shared by a document's trees.

    Making one scans the whole text; an import stores the CFI table without
    converting a single position, so it should not pay for that scan.
    """

    __slots__ = ("_index", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._index: Utf16Index | None = None

    def get(self) -> Utf16Index:
        if self._index is None:
            self._index = Utf16Index(self._text)
        return self._index


class _PieceIndex(NamedTuple):
    starts: list[int]
    nz: list[int]
    nz_starts: list[int]
    spec_off: list[int]
    ej_step: list[int]
    first_piece: list[int]
    last_piece: list[int]


class _NodeIndex(NamedTuple):
    children: dict[tuple[int, int], int]
    nchild: list[int]
    by_id: dict[str, int]


@dataclass(frozen=True, eq=False)
class _Tree:
    """Elements and text pieces of one parsed document, plus derived lookups.

    Elements: ``parent`` index (-1 for the root ``<html>``), ``step`` (even
    child step from the parent, 0 for the root) and ``ids``. Only the root, the
    ancestors of ``<body>`` and the body subtree are kept.

    Pieces, in document order: one for every element's ``.text`` and one for
    every child's ``.tail`` (elements, comments, PIs alike), empty ones
    included, so every spec chunk has at least one piece. ``lens`` in code
    points, ``node`` the element holding it, ``tstep`` its odd spec step.
    """

    parent: tuple[int, ...]
    step: tuple[int, ...]
    ids: tuple[str | None, ...]
    body: int
    lens: tuple[int, ...]
    node: tuple[int, ...]
    tstep: tuple[int, ...]
    utf16: _LazyUtf16 = field(repr=False)
    _runs: dict[tuple[int, int], list[int]] = field(init=False, repr=False)
    _ej: dict[tuple[int, int], int] = field(init=False, repr=False)
    _paths: dict[tuple[int, str], str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "_runs", {})
        setattr_(self, "_ej", {})
        setattr_(self, "_paths", {})

    # Every lookup below is made on first use, not at construction: an import
    # only stores the columns (``to_json``), so making them there is wasted work.

    @cached_property
    def u16(self) -> Utf16Index:
        return self.utf16.get()

    @cached_property
    def _pieces(self) -> _PieceIndex:
        lens, node, tstep = self.lens, self.node, self.tstep
        nnodes, npieces = len(self.parent), len(lens)
        u16 = self.u16
        length = u16.length
        # Without characters outside the BMP a UTF-16 position is the code
        # point position; to_utf16 is then only called to reject a bad one.
        astral = u16.utf16_length != length
        starts = [0] * npieces
        spec_off = [0] * npieces
        ej_step = [0] * npieces
        nz: list[int] = []
        first = [-1] * nnodes
        last = [-1] * nnodes
        text_nodes = [0] * nnodes
        pos = 0
        prev_nd = prev_ts = -1
        prev_u = 0
        for i in range(npieces):
            ln, nd, ts = lens[i], node[i], tstep[i]
            starts[i] = pos
            u_start = u16.to_utf16(pos) if astral or not 0 <= pos <= length else pos
            if nd == prev_nd and ts == prev_ts:
                # Same chunk as the previous piece (split by a comment): offsets
                # continue; pieces are contiguous, so its length is the difference.
                spec_off[i] = spec_off[i - 1] + (u_start - prev_u)
            prev_nd, prev_ts, prev_u = nd, ts, u_start
            if ln:
                nz.append(i)
                ej_step[i] = 2 * text_nodes[nd] + 1
                text_nodes[nd] += 1
            if first[nd] < 0:
                first[nd] = i
            last[nd] = i
            pos += ln
        nz_starts = [starts[i] for i in nz]
        return _PieceIndex(starts, nz, nz_starts, spec_off, ej_step, first, last)

    @cached_property
    def _nodes(self) -> _NodeIndex:
        parent, step, ids = self.parent, self.step, self.ids
        children: dict[tuple[int, int], int] = {}
        nchild = [0] * len(parent)
        by_id: dict[str, int] = {}
        for k in range(len(parent)):
            p = parent[k]
            if p >= 0:
                children[(p, step[k])] = k
                nchild[p] = max(nchild[p], step[k] // 2)
            ident = ids[k]
            if ident is not None and ident not in by_id:
                by_id[ident] = k  # the first one, as getElementById does
        return _NodeIndex(children, nchild, by_id)

    def derive(self) -> None:
        """Make every lookup now (a stored table is checked this way when it is read)."""
        self._pieces  # noqa: B018
        self._nodes  # noqa: B018

    @cached_property
    def starts(self) -> list[int]:
        return self._pieces.starts

    @cached_property
    def nz(self) -> list[int]:
        """Indices of the non-empty pieces."""
        return self._pieces.nz

    @cached_property
    def nz_starts(self) -> list[int]:
        return self._pieces.nz_starts

    @cached_property
    def spec_off(self) -> list[int]:
        """UTF-16 offset of each piece in its spec chunk."""
        return self._pieces.spec_off

    @cached_property
    def ej_step(self) -> list[int]:
        """epub.js odd step of each piece (0: no text node)."""
        return self._pieces.ej_step

    @cached_property
    def first_piece(self) -> list[int]:
        return self._pieces.first_piece

    @cached_property
    def last_piece(self) -> list[int]:
        return self._pieces.last_piece

    @cached_property
    def children(self) -> dict[tuple[int, int], int]:
        return self._nodes.children

    @cached_property
    def nchild(self) -> list[int]:
        return self._nodes.nchild

    @cached_property
    def by_id(self) -> dict[str, int]:
        return self._nodes.by_id

    def columns(self) -> tuple[Any, ...]:
        return (self.parent, self.step, self.ids, self.body, self.lens, self.node, self.tstep)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Tree) and self.columns() == other.columns()

    def __hash__(self) -> int:
        return hash(self.columns())

    @property
    def total(self) -> int:
        return self.starts[-1] + self.lens[-1] if self.lens else 0

    # -- choosing a piece for a position (bisect; see the module doc for the rule)

    def piece_at(self, pos: int) -> int | None:
        """The non-empty piece holding the character at ``pos`` (or ending at the end)."""
        if not self.nz:
            return None
        k = bisect_right(self.nz_starts, pos) - 1
        return self.nz[max(k, 0)]

    def piece_before(self, pos: int) -> int | None:
        """The non-empty piece holding the character before ``pos`` (or starting at 0)."""
        if not self.nz:
            return None
        k = bisect_left(self.nz_starts, pos) - 1
        return self.nz[max(k, 0)]

    def u16_len(self, i: int) -> int:
        s = self.starts[i]
        return self.u16.to_utf16(s + self.lens[i]) - self.u16.to_utf16(s)

    # -- strings

    def path(self, node: int, flavor: str) -> str:
        """``/4[body]/2/6[x]`` for an element (empty for the root ``<html>``)."""
        key = (node, flavor)
        got = self._paths.get(key)
        if got is not None:
            return got
        chain: list[int] = []
        k = node
        while k > 0 and (k, flavor) not in self._paths:
            chain.append(k)
            k = self.parent[k]
        out = self._paths.get((k, flavor), "")
        for k in reversed(chain):
            out += self._step_str(k, flavor)
            self._paths[(k, flavor)] = out
        return out

    def _step_str(self, k: int, flavor: str) -> str:
        ident = self.ids[k]
        if ident is None or (flavor == EPUBJS and not _epubjs_safe(ident)):
            return f"/{self.step[k]}"
        return f"/{self.step[k]}[{escape_cfi(ident)}]"

    def ancestry(self, node: int) -> list[int]:
        """Element indices from the root down to ``node``."""
        chain = [node]
        while self.parent[chain[-1]] >= 0:
            chain.append(self.parent[chain[-1]])
        chain.reverse()
        return chain

    def text_step(self, i: int, pos: int, flavor: str) -> tuple[int, int]:
        """(odd step, UTF-16 offset in it) of source position ``pos`` inside piece ``i``."""
        within = self.u16.to_utf16(pos) - self.u16.to_utf16(self.starts[i])
        if flavor == EPUBJS:
            return self.ej_step[i], within
        return self.tstep[i], self.spec_off[i] + within

    # -- resolution helpers

    def run(self, node: int, tstep: int) -> list[int]:
        """Pieces of spec chunk ``tstep`` of ``node``."""
        if not self._runs:
            runs: dict[tuple[int, int], list[int]] = {}
            for i in range(len(self.lens)):
                runs.setdefault((self.node[i], self.tstep[i]), []).append(i)
            self._runs.update(runs)
        return self._runs.get((node, tstep), [])

    def ej_piece(self, node: int, step: int) -> int | None:
        if not self._ej:
            self._ej.update({(self.node[i], self.ej_step[i]): i for i in self.nz})
        return self._ej.get((node, step))

    def element_start(self, node: int) -> int:
        i = self.first_piece[node]
        return self.starts[i] if i >= 0 else 0

    def element_end(self, node: int) -> int:
        i = self.last_piece[node]
        return self.starts[i] + self.lens[i] if i >= 0 else self.total

    def to_dict(self) -> dict[str, Any]:
        return {
            "parent": list(self.parent),
            "step": list(self.step),
            "id": list(self.ids),
            "body": self.body,
            "len": list(self.lens),
            "node": list(self.node),
            "tstep": list(self.tstep),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], u16: _LazyUtf16) -> _Tree:
        try:
            tree = cls(
                parent=tuple(int(x) for x in d["parent"]),
                step=tuple(int(x) for x in d["step"]),
                ids=tuple(None if x is None else str(x) for x in d["id"]),
                body=int(d["body"]),
                lens=tuple(int(x) for x in d["len"]),
                node=tuple(int(x) for x in d["node"]),
                tstep=tuple(int(x) for x in d["tstep"]),
                utf16=u16,
            )
            tree.derive()
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CfiError(f"corrupt CFI table: {exc!r}") from exc
        tree.check()
        return tree

    def check(self) -> None:
        n = len(self.parent)
        if not (len(self.step) == len(self.ids) == n) or not 0 <= self.body < n:
            raise CfiError("corrupt CFI table: element columns disagree")
        # Parents come first (document order); this also rules out cycles.
        if self.parent[0] != -1 or any(not 0 <= self.parent[k] < k for k in range(1, n)):
            raise CfiError("corrupt CFI table: bad parent link")
        if not (len(self.lens) == len(self.node) == len(self.tstep)):
            raise CfiError("corrupt CFI table: piece columns disagree")
        if any(not 0 <= x < n for x in self.node) or any(x < 0 for x in self.lens):
            raise CfiError("corrupt CFI table: bad piece")
        if self.total != self.u16.length:
            raise CfiError(
                f"corrupt CFI table: pieces cover {self.total} characters, "
                f"the source text has {self.u16.length}"
            )


def _is_element(node: Any) -> bool:
    # lxml gives comments, PIs and entities a non-string tag.
    return isinstance(node.tag, str)


def _local_name(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].lower()


def _element_index(el: Any) -> int:
    """0-based index of ``el`` among its parent's element children."""
    parent = el.getparent()
    k = 0
    for c in parent:
        if c is el:
            return k
        if _is_element(c):
            k += 1
    raise CfiError("element not found under its parent")  # pragma: no cover


# The table's columns (lists while a walk fills them, or tuples), keyed as in the
# serialized form (``_Tree.to_dict``).
CfiColumns = dict[str, Any]


def cfi_start_columns(root: Any, body: Any) -> CfiColumns:
    """Columns holding ``root`` and the ancestors of ``body`` (``body`` last), no text yet.

    The body subtree's rows are appended by a walk in document order: this
    module's :func:`_build`, or the importer's text walk, which makes the
    same rows while it reads the text (one walk over the tree, not two).
    """
    chain: list[Any] = []
    el = body
    while el is not root:
        chain.append(el)
        el = el.getparent()
        if el is None:
            raise CfiError("<body> is not inside the given root element")
    parent: list[int] = [-1]
    step: list[int] = [0]
    ids: list[str | None] = [_id_of(root)]
    for el in reversed(chain):
        parent.append(len(parent) - 1)
        step.append(2 * (_element_index(el) + 1))
        ids.append(_id_of(el))
    return {
        "parent": parent,
        "step": step,
        "id": ids,
        "body": len(parent) - 1,
        "len": [],
        "node": [],
        "tstep": [],
    }


def _id_of(el: Any) -> str | None:
    ident = el.get("id")
    return None if ident is None else str(ident)


def _build(root: Any, body: Any) -> tuple[CfiColumns, str]:
    """Walk ``body`` (iteratively: books nest deeper than Python's recursion limit)."""
    cols = cfi_start_columns(root, body)
    parent: list[int] = cols["parent"]
    step: list[int] = cols["step"]
    ids: list[str | None] = cols["id"]
    lens: list[int] = cols["len"]
    pnode: list[int] = cols["node"]
    tstep: list[int] = cols["tstep"]
    texts: list[str] = []

    def add_node(p: int, s: int, el: Any) -> int:
        parent.append(p)
        step.append(s)
        ids.append(_id_of(el))
        return len(parent) - 1

    def emit(text: str | None, nd: int, ts: int) -> None:
        t = text or ""
        texts.append(t)
        lens.append(len(t))
        pnode.append(nd)
        tstep.append(ts)

    body_node: int = cols["body"]

    # Frame: children iterator, element index, element children seen, tail to
    # emit after the subtree (text, parent index, its odd step).
    Frame = tuple[Iterator[Any], int, list[int], tuple[str | None, int, int] | None]
    emit(body.text, body_node, 1)
    stack: list[Frame] = [(iter(body), body_node, [0], None)]
    while stack:
        it, nd, count, tail = stack[-1]
        c = next(it, None)
        if c is None:
            stack.pop()
            if tail is not None:
                emit(*tail)
            continue
        if _is_element(c):
            count[0] += 1
            k = count[0]
            cn = add_node(nd, 2 * k, c)
            emit(c.text, cn, 1)
            stack.append((iter(c), cn, [0], (c.tail, nd, 2 * k + 1)))
        else:
            # Comment / PI / entity: no text of its own; its tail joins the current chunk.
            emit(c.tail, nd, 2 * count[0] + 1)
    return cols, "".join(texts)


def _find_body(root: Any) -> Any | None:
    for c in root:
        if _is_element(c) and _local_name(c.tag) == "body":
            return c
    for c in root.iter():
        if _is_element(c) and _local_name(c.tag) == "body":
            return c
    return None


def _as_root(tree_or_el: Any) -> Any:
    getroot = getattr(tree_or_el, "getroot", None)
    return getroot() if callable(getroot) else tree_or_el


def spine_step_of(package_root: Any) -> int:
    """The even CFI step of ``<spine>`` under the OPF ``<package>`` element (usually 6)."""
    root = _as_root(package_root)
    k = 0
    for c in root:
        if _is_element(c):
            k += 1
            if _local_name(c.tag) == "spine":
                return 2 * k
    raise CfiError("the package document has no <spine>")


# --------------------------------------------------------------------------- CfiDocument


def _flavor(flavor: str) -> str:
    try:
        return _FLAVORS[flavor]
    except KeyError:
        raise CfiError(f"unknown CFI flavor {flavor!r} (use 'spec' or 'epubjs')") from None


@dataclass(frozen=True)
class CfiDocument:
    """What CFI generation and resolution need about one spine document, serializable.

    ``epubjs_source`` says which tree the epub.js flavor was computed on:
    ``"xml"`` (no HTML tree given), ``"html"`` (the HTML-parsed tree, text
    identical or with extra trailing text), ``"xml-fallback"`` (an HTML tree
    was given but its text differs from the source text, so the XML tree is
    used).
    """

    spine_index: int
    itemref_id: str | None
    source_text: str = field(repr=False)
    spine_step: int = 6
    epubjs_source: str = "xml"
    _doc: _Tree = field(default=None, repr=False)  # type: ignore[assignment]
    _html: _Tree | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self._doc is None:
            raise CfiError("CfiDocument is built with from_tree() or from_json()")
        if self.spine_index < 0:
            raise CfiError(f"spine index must be >= 0, not {self.spine_index}")
        if self.spine_step <= 0 or self.spine_step % 2:
            raise CfiError(f"the spine step must be a positive even number, not {self.spine_step}")

    # -- construction

    @classmethod
    def from_tree(
        cls,
        root: Any,
        body: Any = None,
        *,
        spine_index: int,
        itemref_id: str | None,
        html_root: Any = None,
        spine_step: int = 6,
    ) -> CfiDocument:
        """Build the table from the lxml tree of one spine document.

        ``root`` is the document element (``<html>``, or its ElementTree);
        ``body`` its ``<body>`` (found when ``None``). ``html_root`` is the same
        document as a browser's HTML parser builds it (for epub.js, which
        renders through an HTML parser); when its body text differs from the
        XML tree's the epub.js flavor falls back to the XML tree.
        """
        root = _as_root(root)
        if body is None:
            body = _find_body(root)
            if body is None:
                raise CfiError("the document has no <body>")
        cols, text = _build(root, body)
        return cls.from_columns(
            cols,
            text,
            spine_index=spine_index,
            itemref_id=itemref_id,
            html_root=html_root,
            spine_step=spine_step,
        )

    @classmethod
    def from_columns(
        cls,
        cols: CfiColumns,
        text: str,
        *,
        spine_index: int,
        itemref_id: str | None,
        html_root: Any = None,
        spine_step: int = 6,
    ) -> CfiDocument:
        """Build the table from columns already made by a walk of the document.

        ``cols`` are :func:`cfi_start_columns` completed with the body's rows
        in document order; ``text`` is the concatenation of their pieces (the
        source text). The rest is as in :meth:`from_tree`.
        """
        u16 = _LazyUtf16(text)
        doc = _tree(cols, u16)
        html: _Tree | None = None
        source = "xml"
        if html_root is not None:
            source = "xml-fallback"
            hroot = _as_root(html_root)
            hbody = _find_body(hroot)
            if hbody is not None:
                hcols, htext = _build(hroot, hbody)
                if htext == text or htext.startswith(text):
                    if htext != text:
                        # A browser moves text after </body> into the body: the
                        # shared prefix keeps its positions, clip the rest.
                        _clip(hcols, len(text))
                    html = _tree(hcols, u16)
                    source = "html"
        return cls(
            spine_index=spine_index,
            itemref_id=itemref_id,
            source_text=text,
            spine_step=spine_step,
            epubjs_source=source,
            _doc=doc,
            _html=html,
        )

    def to_json(self, *, include_text: bool = True) -> str:
        """Compact, deterministic JSON. Without the text, pass it to :meth:`from_json`."""
        data: dict[str, Any] = {
            "v": SERIAL_VERSION,
            "spine_index": self.spine_index,
            "itemref_id": self.itemref_id,
            "spine_step": self.spine_step,
            "epubjs_source": self.epubjs_source,
            "doc": self._doc.to_dict(),
            "html": self._html.to_dict() if self._html is not None else None,
        }
        if include_text:
            data["text"] = self.source_text
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, s: str | bytes, source_text: str | None = None) -> CfiDocument:
        try:
            data = json.loads(s)
        except ValueError as exc:
            raise CfiError(f"CFI table is not JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("v") != SERIAL_VERSION:
            raise CfiError("CFI table has an unknown format version")
        text = data.get("text", source_text)
        if source_text is not None and text != source_text:
            raise CfiError("the stored CFI table belongs to a different source text")
        if not isinstance(text, str):
            raise CfiError("the CFI table holds no text: pass source_text")
        u16 = _LazyUtf16(text)
        doc = _Tree.from_dict(data["doc"], u16)
        html = _Tree.from_dict(data["html"], u16) if data.get("html") else None
        try:
            return cls(
                spine_index=int(data["spine_index"]),
                itemref_id=data["itemref_id"],
                source_text=text,
                spine_step=int(data["spine_step"]),
                epubjs_source=str(data["epubjs_source"]),
                _doc=doc,
                _html=html,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CfiError(f"corrupt CFI table: {exc!r}") from exc

    # -- generation

    def _tree_for(self, flavor: str) -> _Tree:
        if flavor == EPUBJS and self._html is not None:
            return self._html
        return self._doc

    def _base(self, flavor: str) -> str:
        base = f"/{self.spine_step}/{2 * (self.spine_index + 1)}"
        ident = self.itemref_id
        if ident and (flavor == SPEC or _epubjs_safe(ident)):
            base += f"[{escape_cfi(ident)}]"
        return base

    def _pos(self, p: Any) -> int:
        """``p`` as a source position; numpy integers (OffsetMap) are fine, floats not."""
        try:
            q = operator.index(p)
        except TypeError:
            raise CfiError(f"a source position is an integer, not {p!r}") from None
        n = len(self.source_text)
        if not 0 <= q <= n:
            raise CfiError(f"source position {q} outside [0, {n}]")
        return q

    def _local(self, tree: _Tree, piece: int | None, pos: int, flavor: str) -> str:
        if piece is None:  # no text at all: the body element itself
            return tree.path(tree.body, flavor)
        ts, off = tree.text_step(piece, pos, flavor)
        return f"{tree.path(tree.node[piece], flavor)}/{ts}:{off}"

    def point(self, source_pos: int, flavor: str = SPEC) -> str:
        """The CFI of a caret position (the text piece holding the character at it)."""
        fl = _flavor(flavor)
        source_pos = self._pos(source_pos)
        tree = self._tree_for(fl)
        local = self._local(tree, tree.piece_at(source_pos), source_pos, fl)
        return f"epubcfi({self._base(fl)}!{local})"

    def partial(self, source_pos: int) -> str:
        """The part after ``!`` of the spec point CFI (Readium ``partialCfi``)."""
        source_pos = self._pos(source_pos)
        tree = self._doc
        return self._local(tree, tree.piece_at(source_pos), source_pos, SPEC)

    def range(self, source_start: int, source_end: int, flavor: str = SPEC) -> str:
        """``epubcfi(P,S,E)`` for source ``[start, end)``; P is the deepest common element."""
        fl = _flavor(flavor)
        source_start, source_end = self._pos(source_start), self._pos(source_end)
        if source_start > source_end:
            raise CfiError(f"range start {source_start} is after its end {source_end}")
        tree = self._tree_for(fl)
        a = tree.piece_at(source_start)
        if a is None:
            return self.point(source_start, fl)
        # An empty range is one caret: both ends in the same piece.
        b = a if source_start == source_end else tree.piece_before(source_end)
        assert b is not None
        chain_a = tree.ancestry(tree.node[a])
        chain_b = tree.ancestry(tree.node[b])
        k = 0
        while k < min(len(chain_a), len(chain_b)) and chain_a[k] == chain_b[k]:
            k += 1
        common = chain_a[k - 1]
        parent = tree.path(common, fl)
        ts_a, off_a = tree.text_step(a, source_start, fl)
        ts_b, off_b = tree.text_step(b, source_end, fl)
        rel_a = "".join(tree._step_str(n, fl) for n in chain_a[k:])
        rel_b = "".join(tree._step_str(n, fl) for n in chain_b[k:])
        return f"epubcfi({self._base(fl)}!{parent},{rel_a}/{ts_a}:{off_a},{rel_b}/{ts_b}:{off_b})"

    # -- resolution

    def resolve(self, cfi: str | ParsedCfi, flavor: str = SPEC) -> tuple[int, int]:
        """Source ``(pos, pos)`` of a point CFI, ``(start, end)`` of a range CFI.

        ID assertions win over step indices. Text assertions are checked
        against the source text (whitespace-collapsed, as the spec compares
        them). Raises :class:`CfiError` for a CFI of another spine item, a
        failed assertion, or a path that does not exist in this document.
        """
        fl = _flavor(flavor)
        parsed = cfi if isinstance(cfi, ParsedCfi) else parse_cfi(cfi)
        if parsed.is_range:
            start = self._resolve_path(parsed.start_path(), fl)
            end = self._resolve_path(parsed.end_path(), fl)
            if start > end:
                raise CfiError(f"range start is after its end in {parsed}")
            return start, end
        pos = self._resolve_path(parsed.path, fl)
        return pos, pos

    def _resolve_path(self, path: CfiPath, flavor: str) -> int:
        steps = path.steps
        k = next((i for i, s in enumerate(steps) if s.indirect), None)
        if k is None:
            if path.trailing_indirection:
                self._check_spine(steps, path)
                return 0
            raise CfiError(f"{path}: no '!' step into a content document")
        self._check_spine(steps[:k], path)
        content = steps[k:]
        if any(s.indirect for s in content[1:]) or path.trailing_indirection:
            raise CfiError(f"{path}: indirection below a content document is not supported")
        if path.temporal is not None or path.spatial is not None:
            raise CfiError(f"{path}: temporal/spatial offsets do not address text")
        pos = self._walk(self._tree_for(flavor), content, path, flavor)
        self._check_text_assertion(pos, path)
        return pos

    def _check_spine(self, pkg: Sequence[CfiStep], path: CfiPath) -> None:
        if len(pkg) != 2:
            raise CfiError(f"{path}: expected /spine/itemref before '!'")
        if pkg[0].index != self.spine_step:
            raise CfiError(f"{path}: /{pkg[0].index} is not the spine step (/{self.spine_step})")
        item = pkg[1]
        own = 2 * (self.spine_index + 1)
        if item.id is not None and self.itemref_id is not None:
            if item.id != self.itemref_id:  # the ID assertion wins over the index
                raise CfiError(
                    f"{path}: for spine item [{item.id}], this document is "
                    f"[{self.itemref_id}] (spine index {self.spine_index})"
                )
        elif item.index != own:  # no id on one side: the index decides
            raise CfiError(
                f"{path}: for spine step /{item.index}, this document is /{own} "
                f"(spine index {self.spine_index})"
            )

    def _walk(self, tree: _Tree, content: Sequence[CfiStep], path: CfiPath, flavor: str) -> int:
        node = 0  # the root <html>
        last = len(content) - 1
        for i, st in enumerate(content):
            if st.index % 2 == 0:
                if st.id is not None:
                    target = tree.by_id.get(st.id)
                    if target is None:
                        raise CfiError(f"{path}: no element with id {st.id!r} in <body>")
                    node = target
                    continue
                child = tree.children.get((node, st.index))
                if child is None:
                    if i == last and node >= tree.body and flavor == SPEC:
                        # The "virtual" elements before the first / after the last chunk.
                        if st.index == 0:
                            return tree.element_start(node)
                        if st.index == 2 * tree.nchild[node] + 2:
                            return tree.element_end(node)
                    raise CfiError(f"{path}: step /{st.index} does not exist in <body>")
                node = child
            else:
                if i != last:
                    raise CfiError(f"{path}: text step /{st.index} must be the last step")
                if node < tree.body:
                    raise CfiError(f"{path}: text step /{st.index} is outside <body>")
                return self._text_pos(tree, node, st.index, path.offset or 0, path, flavor)
        if path.offset:
            raise CfiError(f"{path}: a character offset needs a text step")
        return tree.element_start(node)

    def _text_pos(
        self, tree: _Tree, node: int, step: int, off: int, path: CfiPath, flavor: str
    ) -> int:
        u16 = tree.u16
        if flavor == EPUBJS:
            piece = tree.ej_piece(node, step)
            if piece is None:
                raise CfiError(f"{path}: there is no text node /{step} here")
            if off > tree.u16_len(piece):
                raise CfiError(f"{path}: offset {off} is past the end of text node /{step}")
            base = 0
        else:
            run = tree.run(node, step)
            if not run:
                raise CfiError(f"{path}: there is no character data step /{step} here")
            piece = run[-1]
            for i in run:
                if tree.spec_off[i] + tree.u16_len(i) >= off:
                    piece = i
                    break
            else:
                raise CfiError(f"{path}: offset {off} is past the end of chunk /{step}")
            base = tree.spec_off[piece]
        try:
            return u16.from_utf16(u16.to_utf16(tree.starts[piece]) + off - base)
        except IndexError as exc:
            raise CfiError(f"{path}: {exc}") from None

    def _check_text_assertion(self, pos: int, path: CfiPath) -> None:
        text = self.source_text
        if path.text_before and not _matches_before(text, pos, path.text_before):
            got = text[max(0, pos - len(path.text_before)) : pos]
            raise CfiError(
                f"{path}: text assertion failed: expected {path.text_before!r} before "
                f"the position, found {got!r}"
            )
        if path.text_after and not _matches_after(text, pos, path.text_after):
            got = text[pos : pos + len(path.text_after)]
            raise CfiError(
                f"{path}: text assertion failed: expected {path.text_after!r} after "
                f"the position, found {got!r}"
            )


def _tree(cols: CfiColumns, u16: _LazyUtf16) -> _Tree:
    return _Tree(
        parent=tuple(cols["parent"]),
        step=tuple(cols["step"]),
        ids=tuple(cols["id"]),
        body=cols["body"],
        lens=tuple(cols["len"]),
        node=tuple(cols["node"]),
        tstep=tuple(cols["tstep"]),
        utf16=u16,
    )


def _clip(cols: dict[str, Any], total: int) -> None:
    pos = 0
    lens: list[int] = cols["len"]
    for i, ln in enumerate(lens):
        keep = max(0, min(ln, total - pos))
        lens[i] = keep
        pos += keep


def _collapse(s: str) -> str:
    return _WS_RE.sub(" ", s)


def _matches_before(text: str, pos: int, want: str) -> bool:
    if text.endswith(want, 0, pos):
        return True
    # The spec compares with white space collapsed; widen the window until the
    # collapsed text is safely longer than the assertion.
    target = _collapse(want)
    width = len(want) + 16
    while True:
        lo = max(0, pos - width)
        window = _collapse(text[lo:pos])
        if lo == 0 or len(window) > len(target) + 1:
            return window.endswith(target)
        width *= 2


def _matches_after(text: str, pos: int, want: str) -> bool:
    if text.startswith(want, pos):
        return True
    target = _collapse(want)
    width = len(want) + 16
    while True:
        hi = min(len(text), pos + width)
        window = _collapse(text[pos:hi])
        if hi == len(text) or len(window) > len(target) + 1:
            return window.startswith(target)
        width *= 2
