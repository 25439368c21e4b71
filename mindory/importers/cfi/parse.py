"""The CFI grammar: parse a CFI string into steps, escape and print one back.

:func:`parse_cfi` reads ``epubcfi(...)``, ``href#epubcfi(...)`` or a bare path
into :class:`ParsedCfi` / :class:`CfiPath` / :class:`CfiStep` (whose ``str()``
is the CFI again); :func:`escape_cfi` and the epub.js safety test are the
escaping rules generation shares. No document is needed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from mindory.errors import MindoryError

SPEC = "spec"
EPUBJS = "epubjs"


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
