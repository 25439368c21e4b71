"""The text walk: one ``<body>`` -> source text, normalized text, map, blocks, CFI rows.

**Source text** (DESIGN §1) is what a browser's ``document.body.textContent``
holds for the document parsed as XML: every text node under ``<body>`` in
document order (whitespace-only nodes and CDATA included, comments and
processing instructions excluded, their tails included, ``body``'s own tail
excluded). For an lxml tree that is ``"".join(body.itertext())`` once entity
reference nodes are gone (see :mod:`.parse`).

**Normalized text** is built in one walk over the tree, by MapBuilder's rules
(the same walk makes the rows of the CFI table, :mod:`mindory.importers.cfi`). Block
elements are separated by exactly ``"\\n\\n"``; ``<br/>`` is ``"\\n"`` and
two or more in a row (only whitespace between) are a paragraph break; table
cells are separated by ``"\\t"`` (as ``innerText`` does) and rows are blocks;
runs of ASCII whitespace collapse to one space; whitespace (any Unicode space,
including NBSP and U+3000 indents) is trimmed at block and line edges; soft
hyphen, U+200B, U+2060 and U+FEFF are deleted; ``<rt>``, ``<rp>``, ``<script>``,
``<style>``, ``<template>`` (and MathML annotations, SVG ``title``/``desc``) are
deleted; ``<pre>`` keeps its whitespace (line endings unified, three or more
newlines reduced to two). Trimmed whitespace is always its own delete run, so
a block or chunk never has it inside its source span's edges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from unicodedata import is_normalized

import numpy as np
from lxml import etree

from mindory.errors import LimitError
from mindory.importers.cfi import CfiColumns, cfi_start_columns
from mindory.importers.xhtml.parse import MATHML_NS, MAX_NESTING, SVG_NS, XHTML_NS
from mindory.text.offsets import MapBuilder, OffsetMap, UnicodeForm
from mindory.text.records import (
    CAPTION,
    HEADING,
    LIST_ITEM,
    PARAGRAPH,
    PREFORMATTED,
    QUOTE,
    TABLE_ROW,
    Block,
)


@dataclass(frozen=True)
class SectionText:
    """Source and normalized text of one document, with map and blocks.

    ``cfi_columns``: the document's CFI rows, when :func:`extract_text` was
    given the root element and they describe ``source_text``.
    """

    source_text: str
    normalized_text: str
    offset_map: OffsetMap
    blocks: tuple[Block, ...]
    id_offsets: dict[str, int]
    cfi_columns: CfiColumns | None = field(default=None, repr=False, compare=False)


# ------------------------------------------------------------- normalization

# Roles of elements in the normalizing walk (anything else is inline).
_BLOCK, _PRE, _CELL, _BR, _DROP = 1, 2, 3, 4, 5
# Separator pending before the next visible character, weakest first.
_NONE, _TAB, _NEWLINE, _PARA = 0, 1, 2, 3

_Role = tuple[int, str | None, int | None]  # role, block kind (None: inherit), heading level


def _role_table() -> dict[str, _Role]:
    table: dict[str, _Role] = {}
    inherit = (
        "address article aside body center details dialog dir div dl fieldset figure "
        "footer form header hgroup hr html legend main menu nav noscript ol p search "
        "section summary table tbody tfoot thead ul"
    )
    for name in inherit.split():
        table[name] = (_BLOCK, None, None)
    for level in range(1, 7):
        table[f"h{level}"] = (_BLOCK, HEADING, level)
    for name in ("li", "dt", "dd"):
        table[name] = (_BLOCK, LIST_ITEM, None)
    table["blockquote"] = (_BLOCK, QUOTE, None)
    table["tr"] = (_BLOCK, TABLE_ROW, None)
    table["caption"] = (_BLOCK, CAPTION, None)
    table["figcaption"] = (_BLOCK, CAPTION, None)
    for name in ("pre", "listing", "xmp", "plaintext"):
        table[name] = (_PRE, PREFORMATTED, None)
    table["td"] = (_CELL, None, None)
    table["th"] = (_CELL, None, None)
    table["br"] = (_BR, None, None)
    for name in ("rt", "rp", "script", "style", "template"):
        table[name] = (_DROP, None, None)
    # Both the XHTML (namespaced, XML parse) and the plain (HTML parse) names.
    out = dict(table)
    out.update({f"{{{XHTML_NS}}}{name}": role for name, role in table.items()})
    for name in ("annotation", "annotation-xml"):
        out[f"{{{MATHML_NS}}}{name}"] = (_DROP, None, None)
    for name in ("title", "desc"):
        out[f"{{{SVG_NS}}}{name}"] = (_DROP, None, None)
    return out


_ROLES = _role_table()

# Characters trimmed at block and line edges: every Unicode space plus the
# invisible characters (which are deleted everywhere anyway).
_INVISIBLE = "\u00ad\u200b\u2060\ufeff"
# Every character for which str.isspace() is true (checked by a test).
_UNICODE_SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
    "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_EDGE = _UNICODE_SPACES + _INVISIBLE
# Inside a line: ASCII whitespace runs (HTML's collapsible white space) and
# invisible characters; a single " " needs no edit and is not matched.
# Written as "a non-space special, then more" | "a space, then more": the same
# matches as "two or more of the class, or one non-space", scanned ~25% faster.
_SPECIAL_RE = re.compile(
    r"[\t\n\r\f\u00ad\u200b\u2060\ufeff][ \t\n\r\f\u00ad\u200b\u2060\ufeff]*"
    r"| [ \t\n\r\f\u00ad\u200b\u2060\ufeff]+"
)
_ASCII_WS_RE = re.compile(r"[ \t\n\r\f]")
_ASCII_WS_RUN_RE = re.compile(r"[ \t\n\r\f]*")
_PRE_SPECIAL_RE = re.compile(r"\r\n?|\n{3,}|[\u00ad\u200b\u2060\ufeff]+")

_Pending = tuple[int, int, str | None, bool]  # source start, end, text (None: dropped), verbatim
# A finished block: kind, heading level, normalized [start, end), source [start, end).
_RawBlock = tuple[str, int | None, int, int, int, int]


class _NeedsBuilder(Exception):
    """Raised by the direct map building at text that Unicode normalization changes."""


class _Normalizer:
    """One walk's state: the map being built, pending separator and whitespace, blocks.

    The map follows MapBuilder's rules (copy, edit, delete, insert in source
    order) but is built here, directly: a text node then costs a few list
    appends instead of a dozen method calls, and this walk is most of an EPUB
    import. ``edits`` holds the edit runs flat (``a, n, b, m, a, n, ...``).
    Only MapBuilder splits a copy that Unicode normalization changes into
    runs, so at the first such copy the direct building gives up
    (:class:`_NeedsBuilder`) and the document is walked again with a
    ``builder``: then every run goes through it (``source`` is the whole
    source text, which MapBuilder copies from).
    """

    __slots__ = (
        "any",
        "builder",
        "block_kind",
        "block_source",
        "block_start",
        "blocks",
        "drop",
        "edits",
        "form",
        "kinds",
        "last_space",
        "out_s",
        "parts",
        "pend",
        "pieces",
        "pos",
        "pos_n",
        "pos_s",
        "pre",
        "sep",
        "source",
    )

    def __init__(self, unicode_form: UnicodeForm | None, source: str | None = None) -> None:
        self.form = unicode_form
        self.source = source or ""
        self.builder = MapBuilder(unicode_form) if source is not None else None
        self.pieces: list[str] = []  # every text node, in order: the source text
        self.pos = 0  # source position of the next text node
        self.parts: list[str] = []  # the normalized text
        self.edits: list[int] = []
        self.pos_n = 0  # normalized length so far
        self.pos_s = 0  # source consumed so far (pos_s <= pos: the rest is pending)
        self.out_s = 0  # source end of the run that made the last normalized character
        self.any = False  # has any visible character been emitted?
        self.sep = _NONE
        self.last_space = False  # does the normalized text end with a collapsible space?
        self.pend: list[_Pending] = []  # source not yet consumed
        self.drop = 0  # depth inside dropped elements (rt, script, ...)
        self.pre = 0  # depth inside <pre>
        self.kinds: list[tuple[str, int | None]] = [(PARAGRAPH, None)]
        self.block_start = 0
        self.block_source = 0
        self.block_kind: tuple[str, int | None] = (PARAGRAPH, None)
        self.blocks: list[_RawBlock] = []

    # -------------------------------------------------------------- elements
    def open(self, role: _Role) -> None:
        kind = role[0]
        if kind == _DROP:
            self.drop += 1
        elif self.drop:
            return  # structure inside dropped content (a <br/> in <rt>) adds nothing
        elif kind in (_BLOCK, _PRE):
            self.sep = _PARA
            self.kinds.append((role[1], role[2]) if role[1] is not None else self.kinds[-1])
            if kind == _PRE:
                self.pre += 1
        elif kind == _BR:
            if self.sep < _PARA:
                # A second <br/> with only whitespace since the first: paragraph break.
                self.sep = _PARA if self.sep == _NEWLINE else _NEWLINE
        elif kind == _CELL and self.sep < _TAB:
            self.sep = _TAB

    def close(self, role: _Role) -> None:
        # Mirrors open(): an element closes at the same drop depth it opened at.
        kind = role[0]
        if kind == _DROP:
            self.drop -= 1
        elif self.drop:
            return
        elif kind in (_BLOCK, _PRE):
            self.sep = _PARA
            self.kinds.pop()
            if kind == _PRE:
                self.pre -= 1

    # ------------------------------------------------------------------ text
    def text(self, s: str) -> None:
        self.pieces.append(s)
        p = self.pos
        n = len(s)
        self.pos = p + n
        if self.drop:
            self.pend.append((p, p + n, None, False))
            return
        verbatim = self.pre > 0
        end = len(s.rstrip(_EDGE))
        if end == 0:  # nothing visible: decide later what this whitespace becomes
            self.pend.append((p, p + n, s, verbatim))
            return
        lead = 0
        if not self.any or self.sep >= (_PARA if verbatim else _NEWLINE):
            lead = n - len(s.lstrip(_EDGE))
            if lead:
                self.pend.append((p, p + lead, None, False))  # trimmed at the edge
        if self.pend or self.sep or not self.any:
            self._resolve()
        if verbatim:
            self._emit_verbatim(s, lead, end, p)
        else:
            self._emit_inline(s, lead, end, p)
        if end < n:
            self.pend.append((p + end, p + n, s[end:], verbatim))

    def _resolve(self) -> None:
        """Emit what stands between the last visible character and the next one."""
        sep = self.sep
        if not self.any:
            self._drop_pending()
            self.any = True
            self._open_block()
        elif sep >= _NEWLINE:
            self._drop_pending()
            if sep == _PARA:
                self._close_block()
                self._edit("\n\n", self.pos_s, self.pos_s)
                self._open_block()
            else:
                self._edit("\n", self.pos_s, self.pos_s)
            self.last_space = False
        elif sep == _TAB:
            self._drop_pending()
            self._edit("\t", self.pos_s, self.pos_s)
            self.last_space = True  # a cell's leading whitespace collapses into the tab
        elif self.pend:
            self._replay_pending()
        self.sep = _NONE

    def _drop_pending(self) -> None:
        pend = self.pend
        if pend:
            self._edit("", pend[0][0], pend[-1][1])
            pend.clear()

    def _replay_pending(self) -> None:
        """Whitespace between inline content: collapse (or keep, in <pre>) it now."""
        for start, end, text, verbatim in self.pend:
            if text is None:
                self._edit("", start, end)
            elif verbatim:
                self._emit_verbatim(text, 0, end - start, start)
            else:
                self._emit_inline(text, 0, end - start, start)
        self.pend.clear()

    def _emit_inline(self, s: str, i: int, j: int, p: int) -> None:
        """Emit ``s[i:j]`` (source ``p + i``): collapse whitespace, drop invisibles."""
        last_space = self.last_space
        if last_space:
            k = _ASCII_WS_RUN_RE.match(s, i, j).end()  # type: ignore[union-attr]
            if k > i:
                self._edit("", p + i, p + k)
                i = k
        if s.isprintable() and "  " not in s:
            # Nothing to collapse or delete: what _SPECIAL_RE matches is either
            # not printable or two spaces. These two scans are ~4x faster than
            # the regex, and almost every text node takes this path.
            if j > i:
                self._copy(s[i:j], p + i)
                self.last_space = s[j - 1] == " "
            return
        last = i
        for m in _SPECIAL_RE.finditer(s, i, j):
            a, e = m.span()
            if a > last:
                self._copy(s[last:a], p + last)
                last_space = s[a - 1] == " "
            if last_space or _ASCII_WS_RE.search(s, a, e) is None:
                # Only invisible characters, or a space was just emitted (" \n" after " ").
                self._edit("", p + a, p + e)
            else:
                self._edit(" ", p + a, p + e)
                last_space = True
            last = e
        if j > last:
            self._copy(s[last:j], p + last)
            last_space = s[j - 1] == " "
        self.last_space = last_space

    def _emit_verbatim(self, s: str, i: int, j: int, p: int) -> None:
        """Emit ``s[i:j]`` of a ``<pre>``: whitespace kept, line endings unified."""
        last = i
        for m in _PRE_SPECIAL_RE.finditer(s, i, j):
            a, e = m.span()
            if a > last:
                self._copy(s[last:a], p + last)
            ch = s[a]
            if ch == "\r":
                self._edit("\n", p + a, p + e)
            elif ch == "\n":
                self._edit("\n\n", p + a, p + e)
            else:
                self._edit("", p + a, p + e)
            last = e
        if j > last:
            self._copy(s[last:j], p + last)
        self.last_space = False

    # ------------------------------------------------------------ the map
    def _copy(self, text: str, start: int) -> None:
        """``text``, found at source ``start``, is copied (normalized if a form is set)."""
        end = start + len(text)
        builder = self.builder
        if builder is not None:
            builder.copy(self.source, start, end)
            self.pos_n = builder.normalized_length
        else:
            # MapBuilder.copy's own test for "copied as it is".
            form = self.form
            if not (form is None or text.isascii() or is_normalized(form, text)):
                raise _NeedsBuilder
            self.parts.append(text)
            self.pos_n += len(text)
        self.pos_s = self.out_s = end

    def _edit(self, replacement: str, start: int, end: int) -> None:
        """Source ``[start, end)`` becomes ``replacement`` (one edit run; never empty)."""
        n = len(replacement)
        if self.builder is not None:
            self.builder.edit(replacement, start, end)
        else:
            self.edits += (self.pos_n, n, start, end - start)
            if n:
                self.parts.append(replacement)
        if n:
            self.pos_n += n
            self.out_s = end
        self.pos_s = end

    # ---------------------------------------------------------------- blocks
    def _open_block(self) -> None:
        # A block opens just before its first visible character is emitted,
        # so the source consumed so far is where that character's run starts.
        self.block_start = self.pos_n
        self.block_source = self.pos_s
        self.block_kind = self.kinds[-1]

    def _close_block(self) -> None:
        # Trimmed whitespace after the last visible character is still pending
        # or deleted with no output, so ``out_s`` is the end of the block's source.
        kind, level = self.block_kind
        self.blocks.append(
            (kind, level, self.block_start, self.pos_n, self.block_source, self.out_s)
        )

    def finish(self) -> tuple[str, str, OffsetMap, list[_RawBlock]]:
        """``(source text, normalized text, map, blocks)``."""
        self._drop_pending()
        if self.any:
            self._close_block()
        source = "".join(self.pieces)
        if self.builder is not None:
            text, omap = self.builder.build()
        else:
            text = "".join(self.parts)
            edits = np.array(self.edits, dtype=np.int64).reshape(-1, 4)
            omap = OffsetMap(edits, self.pos_n, self.pos_s)
        if self.pos_s != len(source) or self.pos_n != len(text):
            raise AssertionError(f"normalizer consumed {self.pos_s} of {len(source)} characters")
        return source, text, omap, self.blocks


_WALK_EVENTS = ("start", "end", "comment", "pi")


def _walk(
    body: Any, norm: _Normalizer, ids: dict[str, int], cols: CfiColumns, where: str, path: str
) -> bool:
    """Feed every text node under ``body`` to ``norm`` in document order.

    The same walk completes ``cols`` (the CFI rows of the body's ancestors)
    with the rows of the body subtree, exactly as :meth:`CfiDocument.from_tree`
    would make them: one walk over the tree instead of two. Returns False when
    the rows do not describe the source text: libxml2 gives an entity
    reference node text, which the source keeps and CFI does not.
    """
    roles = _ROLES
    text = norm.text
    elements: list[Any] = []  # new CFI element rows, flat: parent row, even step, id, ...
    pieces: list[int] = []  # CFI piece rows, flat: length, element row, odd step, ...
    next_row = len(cols["parent"])
    # Per open node: its CFI element row, element children seen so far, role.
    stack: list[list[Any]] = []
    usable = True
    for event, el in etree.iterwalk(body, events=_WALK_EVENTS):
        if event == "start":
            if len(stack) >= MAX_NESTING:
                raise LimitError(
                    f"{where}: elements nested deeper than {MAX_NESTING} levels; refused",
                    path=path,
                )
            tag = el.tag
            eid = el.get("id")
            if eid is not None and eid not in ids:
                ids[eid] = norm.pos
            role = roles.get(tag)
            if role is not None:
                norm.open(role)
            t = el.text
            if t:
                text(t)
            if not stack:  # <body>: its element row is already in cols
                row = cols["body"]
            elif isinstance(tag, str):
                top = stack[-1]
                top[1] += 1
                row = next_row
                next_row += 1
                elements += (top[0], 2 * top[1], eid)
            else:  # an entity reference node: no element, its text is not CFI text
                usable = False
                stack.append([-1, 0, None])
                continue
            pieces += (len(t) if t else 0, row, 1)
            stack.append([row, 0, role])
        elif event == "end":
            role = stack.pop()[2]
            if role is not None:
                norm.close(role)
            if stack:  # body's own tail is outside the body
                t = el.tail
                if t:
                    text(t)
                top = stack[-1]
                pieces += (len(t) if t else 0, top[0], 2 * top[1] + 1)
        else:  # comment / processing instruction: its text is not DOM text, its tail is
            t = el.tail
            if t:
                text(t)
            top = stack[-1]
            pieces += (len(t) if t else 0, top[0], 2 * top[1] + 1)
    # As tuples: the CFI table keeps them without another copy.
    cols["parent"] = tuple(cols["parent"] + elements[0::3])
    cols["step"] = tuple(cols["step"] + elements[1::3])
    cols["id"] = tuple(cols["id"] + elements[2::3])
    cols["len"] = tuple(cols["len"] + pieces[0::3])
    cols["node"] = tuple(cols["node"] + pieces[1::3])
    cols["tstep"] = tuple(cols["tstep"] + pieces[2::3])
    return usable


def extract_text(
    body: Any,
    unicode_form: UnicodeForm | None,
    where: str = "",
    path: str = "",
    *,
    root: Any = None,
) -> SectionText:
    """Source text, normalized text, offset map and blocks of one ``<body>``.

    With ``root`` (the document element holding ``body``), the result also
    carries the document's CFI rows (:attr:`SectionText.cfi_columns`).
    """
    if body is None:
        empty = MapBuilder(unicode_form)
        text, omap = empty.build()
        return SectionText("", text, omap, (), {})
    cfi_root = root if root is not None else body
    ids: dict[str, int] = {}
    cols = cfi_start_columns(cfi_root, body)
    norm = _Normalizer(unicode_form)
    try:
        usable = _walk(body, norm, ids, cols, where, path)
    except _NeedsBuilder:  # see _Normalizer: again, through MapBuilder
        ids.clear()
        cols = cfi_start_columns(cfi_root, body)
        norm = _Normalizer(unicode_form, "".join(body.itertext()))
        usable = _walk(body, norm, ids, cols, where, path)
    source, normalized, omap, raw_blocks = norm.finish()
    blocks = _make_blocks(raw_blocks)
    columns = cols if usable and root is not None else None
    return SectionText(source, normalized, omap, blocks, ids, columns)


def _make_blocks(raw: list[_RawBlock]) -> tuple[Block, ...]:
    return tuple(
        Block(
            index=k,
            kind=kind,
            start=start,
            end=end,
            source_start=source_start,
            source_end=source_end,
            level=level,
        )
        for k, (kind, level, start, end, source_start, source_end) in enumerate(raw)
    )
