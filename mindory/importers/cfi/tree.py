"""The CFI table of one content document: its elements and text pieces, and lookups.

:class:`_Tree` holds the columns (one row per element, one per text piece)
and derives, on first use, what generation and resolution bisect over.
:func:`cfi_start_columns` / :func:`_build` make the rows by a walk of the lxml
tree (the importer's text walk makes the same rows itself); the helpers find
``<body>`` and the spine step.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from mindory.importers.cfi.parse import EPUBJS, CfiError, _epubjs_safe, escape_cfi
from mindory.text.offsets import Utf16Index


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
                half = step[k] // 2
                if half > nchild[p]:
                    nchild[p] = half
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

    # -- choosing a piece for a position (bisect; see :mod:`mindory.importers.cfi` for the rule)

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
