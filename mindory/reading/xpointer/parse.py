"""KOReader (crengine) xpointer strings: parse and format, nothing else.

The grammar is crengine's ``ParseXPathStep`` (crengine/src/lvtinydom.cpp), as
``ldomDocument::createXPointerV2`` walks it: ``/name``, ``/name[N]``,
``/text()``, ``/text()[N]`` steps, then an optional point ``.N``. A step without
``[N]`` means the first match (``index == -1`` there), so ``p`` and ``p[1]`` are
the same node; DOM version 20240114 omits ``[1]`` unless a same-name sibling
exists, 20260812 writes it on every step (``ldomXPointer::toStringV2``). Both
spellings parse to the same :class:`XPointer`; :func:`format_steps` writes either.

An EPUB xpointer starts ``/body/DocFragment[N]`` (crengine's ``epubfmt.cpp``
wraps each spine item's ``<body>`` in one ``DocFragment``); ``N`` is kept as
:attr:`XPointer.fragment` and the steps after it as :attr:`XPointer.steps`.
Other paths (a plain-text book's ``/FictionBook/body/...``) keep every step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mindory.errors import XPointerError

__all__ = ["MAX_XPOINTER_CHARS", "XPointer", "format_steps", "parse_xpointer"]

MAX_XPOINTER_CHARS = 4096
# A step name: what ParseXPathStep reads up to '[', '/' or '.' (text() included).
_STEP_RE = re.compile(r"/([^/\[\].]+)(?:\[([^\]/.]*)\])?")
_POINT_RE = re.compile(r"\.(\d+)")
_DIGITS_RE = re.compile(r"\d+")
# crengine's internal boxing elements: transparent in normalized (V2) xpointers,
# written by the old toStringV1 (DOM < 20200223); skipped when read.
BOXING = frozenset({"autoBoxing", "tabularBox", "rubyBox", "mathBox", "floatBox", "inlineBox"})

Step = tuple[str, int | None]  # element name, 1-based index among same-name siblings (None: first)


@dataclass(frozen=True, slots=True)
class XPointer:
    """One parsed xpointer.

    ``fragment``: the 1-based DocFragment index (``DocFragment`` alone is 1), None
    when the path has no DocFragment step. ``steps``: element steps after the
    DocFragment (every element step when there is none), boxing elements left out.
    ``text_index``: the 1-based ``text()`` index (``text()`` alone is 1), None when
    the path ends at an element. ``offset``: the ``.N`` point (code points into the
    text node, or a child index for an element), None when absent.
    """

    fragment: int | None
    steps: tuple[Step, ...]
    text_index: int | None
    offset: int | None
    prefix: tuple[Step, ...] = ()  # steps before DocFragment (``/body``)


def _index(raw: str | None, text: str, name: str) -> int | None:
    if raw is None:
        return None
    if not _DIGITS_RE.fullmatch(raw):
        raise XPointerError(f"xpointer {text!r}: step {name!r} has a bad index [{raw}]")
    value = int(raw)
    if value < 1:
        raise XPointerError(
            f"xpointer {text!r}: step {name!r} has index [{raw}]; indices start at 1"
        )
    return value


def parse_xpointer(text: str) -> XPointer:
    """Parse an xpointer such as ``/body/DocFragment[12]/body/div[2]/p[5]/text().17``.

    Also the bare forms KOReader sends: ``/body/DocFragment[3].0`` (a point in an
    element) and a path ending at an element. Raises :class:`XPointerError` naming
    what is wrong.
    """
    if not isinstance(text, str):
        raise XPointerError(f"an xpointer is a string, not {type(text).__name__}")
    if not text:
        raise XPointerError("empty xpointer")
    if len(text) > MAX_XPOINTER_CHARS:
        raise XPointerError(f"xpointer of {len(text)} characters (limit {MAX_XPOINTER_CHARS})")
    if any(ord(ch) < 0x20 or ch.isspace() for ch in text):
        raise XPointerError(f"xpointer {text!r} contains whitespace or control characters")
    if text.startswith("#"):
        raise XPointerError(f"xpointer {text!r} names an element id, not a position")
    if not text.startswith("/"):
        raise XPointerError(f"xpointer {text!r} does not start with '/'")
    pos = 0
    steps: list[Step] = []
    text_index: int | None = None
    offset: int | None = None
    while pos < len(text):
        if text[pos] == ".":
            m = _POINT_RE.fullmatch(text, pos)
            if m is None:
                raise XPointerError(
                    f"xpointer {text!r}: '{text[pos:]}' is not a point '.N' at the end"
                )
            offset = int(m.group(1))
            break
        m = _STEP_RE.match(text, pos)
        if m is None:
            raise XPointerError(f"xpointer {text!r}: cannot read a step at {text[pos:]!r}")
        if text_index is not None:
            raise XPointerError(f"xpointer {text!r}: a step follows text()")
        name, raw = m.group(1), m.group(2)
        if _DIGITS_RE.fullmatch(name):
            raise XPointerError(
                f"xpointer {text!r}: numeric node steps (/{name}) are not supported; "
                "KOReader writes element names"
            )
        if name.endswith("()") and name != "text()":
            raise XPointerError(f"xpointer {text!r}: unknown node test {name!r}")
        if name != "text()" and ("(" in name or ")" in name):
            raise XPointerError(f"xpointer {text!r}: bad step name {name!r}")
        index = _index(raw, text, name)
        if name == "text()":
            text_index = index or 1
        elif name not in BOXING:
            steps.append((name, index))
        pos = m.end()
    for k, (name, index) in enumerate(steps):
        if name == "DocFragment":
            if any(n == "DocFragment" for n, _ in steps[k + 1 :]):
                raise XPointerError(f"xpointer {text!r}: more than one DocFragment step")
            return XPointer(
                fragment=index or 1,
                steps=tuple(steps[k + 1 :]),
                text_index=text_index,
                offset=offset,
                prefix=tuple(steps[:k]),
            )
    return XPointer(None, tuple(steps), text_index, offset)


def format_steps(steps: list[tuple[str, int, int]], *, explicit_first: bool) -> str:
    """``/name[i]...`` from ``(name, index, same-name sibling count)`` triples.

    ``explicit_first`` (DOM 20260812) writes ``[1]`` everywhere; otherwise (DOM
    20240114) an index is written only when the count is more than one, as
    ``ldomXPointer::toStringV2`` does. A name ``text()`` follows the same rule.
    """
    out = []
    for name, index, count in steps:
        if explicit_first or count > 1:
            out.append(f"/{name}[{index}]")
        else:
            out.append(f"/{name}")
    return "".join(out)
