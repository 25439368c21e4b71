"""CfiDocument: generate CFIs for source positions and resolve CFIs back to them.

One spine document's CFI table (the XML tree, and the HTML tree epub.js sees
when it differs), serializable to JSON; generation is a bisect per position,
resolution walks the parsed steps (ID assertions win over indices) and checks
text assertions against the source text.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mindory.importers.cfi.parse import (
    EPUBJS,
    SPEC,
    CfiError,
    CfiPath,
    CfiStep,
    ParsedCfi,
    _epubjs_safe,
    escape_cfi,
    parse_cfi,
)
from mindory.importers.cfi.tree import (
    CfiColumns,
    _as_root,
    _build,
    _clip,
    _find_body,
    _LazyUtf16,
    _Tree,
    _tree,
)

_FLAVORS = {
    "spec": SPEC,
    "cfi": SPEC,
    "foliate": SPEC,
    "epubjs": EPUBJS,
    "epub.js": EPUBJS,
    "cfi_epubjs": EPUBJS,
}
SERIAL_VERSION = 1


_WS_RE = re.compile(r"\s+")


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
