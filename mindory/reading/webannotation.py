"""W3C Web Annotation collections: highlights out to JSON-LD, and back in (pure).

An export is one ``AnnotationCollection`` (https://www.w3.org/TR/annotation-model/,
JSON-LD with the context ``http://www.w3.org/ns/anno.jsonld``) whose first and only
``AnnotationPage`` embeds every annotation. Each annotation is
:meth:`mindory.reading.highlights.Highlight.to_json`: ``target.source`` the content
document (EPUB) or file name (plain text), ``target.selector`` the three selectors —
``TextQuoteSelector`` (exact, prefix, suffix), ``TextPositionSelector`` (code points of
the book's source text: section-local for EPUB, file-global for plain text) and a
``FragmentSelector`` (EPUB: the range CFI, conformsTo
``http://www.idpf.org/epub/linking/cfi/epub-cfi.html``; plain text: RFC 5147
``char=start,end``) — plus mindory's ``book`` (SHA-256) and ``section``. An orphaned
highlight is exported with its quote only.

:func:`parse_collection` reads such a file back into :class:`AnnotationIn` records,
checking that it *is* a JSON-LD ``AnnotationCollection`` (context and type) and that
every annotation has a ``TextQuoteSelector``; anything else is a
:class:`AnnotationFileError` naming what is wrong, before anything is written. Where
an annotation lands is not decided here: the library re-verifies every quote against
the book.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mindory.errors import MindoryError
from mindory.reading.highlights import ANNOTATION_CONTEXT, Highlight, check_color, check_note
from mindory.reading.units import CFI_CONFORMS_TO

__all__ = [
    "COLLECTION_TYPE",
    "AnnotationFileError",
    "AnnotationIn",
    "collection",
    "parse_collection",
]

COLLECTION_TYPE = "AnnotationCollection"
PAGE_TYPE = "AnnotationPage"
MAX_ANNOTATIONS = 100_000


class AnnotationFileError(MindoryError):
    """A file that is not a W3C Web Annotation collection mindory can read."""


@dataclass(frozen=True, slots=True)
class AnnotationIn:
    """One annotation read from a collection: what it marks and what it says.

    ``exact`` / ``prefix`` / ``suffix`` are its TextQuoteSelector; ``start`` /
    ``end`` its TextPositionSelector (None when absent); ``fragment`` the
    FragmentSelector's value and ``conforms_to`` its specification; ``book`` and
    ``section`` mindory's own keys (None when the file has none). ``index`` is
    its place in the file (from 0).
    """

    index: int
    id: str | None
    book: str | None
    section: int | None
    source: str | None
    exact: str
    prefix: str
    suffix: str
    start: int | None
    end: int | None
    fragment: str | None
    conforms_to: str | None
    note: str | None
    color: str | None

    @property
    def cfi(self) -> str | None:
        return self.fragment if self.conforms_to == CFI_CONFORMS_TO else None


def collection(
    highlights: Iterable[Highlight], *, label: str, id: str | None = None
) -> dict[str, Any]:
    """The highlights as one JSON-LD ``AnnotationCollection`` (one embedded page)."""
    items = [h.to_json() for h in highlights]
    for item in items:
        item.pop("@context", None)  # the collection's context covers its items
    out: dict[str, Any] = {"@context": ANNOTATION_CONTEXT}
    if id is not None:
        out["id"] = id
    out.update(
        {
            "type": COLLECTION_TYPE,
            "label": label,
            "total": len(items),
            "first": {"type": PAGE_TYPE, "startIndex": 0, "items": items},
        }
    )
    return out


def _types(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, str)}
    return set()


def _has_context(value: Any) -> bool:
    if isinstance(value, str):
        return value == ANNOTATION_CONTEXT
    if isinstance(value, list):
        return any(_has_context(v) for v in value)
    return False


def _pages(doc: Mapping[str, Any]) -> list[Any]:
    """The collection's items, from its embedded pages (``first``, then each ``next``)."""
    first = doc.get("first")
    if first is None:
        if doc.get("total") == 0:
            return []
        raise AnnotationFileError(
            "the AnnotationCollection embeds no AnnotationPage ('first'); "
            "a collection whose pages are only linked cannot be read from a file"
        )
    items: list[Any] = []
    page: Any = first
    seen = 0
    while page is not None:
        if not isinstance(page, Mapping) or PAGE_TYPE not in _types(page.get("type")):
            raise AnnotationFileError(
                "an AnnotationCollection page must be an embedded object of type AnnotationPage"
            )
        got = page.get("items")
        if not isinstance(got, list):
            raise AnnotationFileError("an AnnotationPage without an 'items' list")
        items.extend(got)
        if len(items) > MAX_ANNOTATIONS:
            raise AnnotationFileError(f"more than {MAX_ANNOTATIONS:,} annotations; refused")
        seen += 1
        page = page.get("next")
        if isinstance(page, str):
            raise AnnotationFileError(
                "an AnnotationPage links its next page instead of embedding it"
            )
        if seen > MAX_ANNOTATIONS:
            raise AnnotationFileError("too many AnnotationPages")
    return items


def _text(value: Any, what: str, where: str) -> str:
    if not isinstance(value, str):
        raise AnnotationFileError(f"{where}: {what} must be a string")
    return value


def _int(value: Any, what: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AnnotationFileError(f"{where}: {what} must be a whole number ≥ 0")
    return value


def _annotation(k: int, item: Any) -> AnnotationIn:
    where = f"annotation #{k}"
    if not isinstance(item, Mapping):
        raise AnnotationFileError(f"{where} is not an object")
    if "Annotation" not in _types(item.get("type")):
        raise AnnotationFileError(f"{where} is not of type Annotation")
    ident = item.get("id")
    if ident is not None:
        where = f"annotation #{k} ({_text(ident, 'id', where)})"
    target = item.get("target")
    if isinstance(target, list) and len(target) == 1:
        target = target[0]
    if not isinstance(target, Mapping):
        raise AnnotationFileError(f"{where}: its target must be one object with selectors")
    selectors = target.get("selector")
    if isinstance(selectors, Mapping):
        selectors = [selectors]
    if not isinstance(selectors, list):
        raise AnnotationFileError(f"{where}: its target has no selector")
    quote: Mapping[str, Any] | None = None
    position: Mapping[str, Any] | None = None
    fragment: Mapping[str, Any] | None = None
    for sel in selectors:
        if not isinstance(sel, Mapping):
            raise AnnotationFileError(f"{where}: a selector is not an object")
        kinds = _types(sel.get("type"))
        if "TextQuoteSelector" in kinds and quote is None:
            quote = sel
        elif "TextPositionSelector" in kinds and position is None:
            position = sel
        elif "FragmentSelector" in kinds and fragment is None:
            fragment = sel
    if quote is None:
        raise AnnotationFileError(
            f"{where}: no TextQuoteSelector — mindory re-verifies every annotation by its quote"
        )
    exact = _text(quote.get("exact"), "TextQuoteSelector.exact", where)
    if not exact.strip():
        raise AnnotationFileError(f"{where}: an empty TextQuoteSelector.exact")
    start = end = None
    if position is not None:
        start = _int(position.get("start"), "TextPositionSelector.start", where)
        end = _int(position.get("end"), "TextPositionSelector.end", where)
        if end < start:
            raise AnnotationFileError(f"{where}: TextPositionSelector ends before it starts")
    note: str | None = None
    color: str | None = None
    body = item.get("body", [])
    if isinstance(body, Mapping):
        body = [body]
    if not isinstance(body, list):
        raise AnnotationFileError(f"{where}: its body must be an object or a list")
    for b in body:
        if isinstance(b, str):  # a body given as a bare string is a comment
            note = b if note is None else note
            continue
        if not isinstance(b, Mapping):
            raise AnnotationFileError(f"{where}: a body is not an object")
        value = b.get("value")
        purposes = _types(b.get("purpose"))
        if "highlighting" in purposes and isinstance(value, str) and color is None:
            color = value
        elif isinstance(value, str) and note is None and ("commenting" in purposes or not purposes):
            note = value
    try:
        color = None if color is None else check_color(color)
        note = check_note(note)
    except MindoryError as exc:
        raise AnnotationFileError(f"{where}: {exc}") from exc
    book = item.get("book")
    section = item.get("section")
    source = target.get("source")
    return AnnotationIn(
        index=k,
        id=ident if isinstance(ident, str) else None,
        book=book if isinstance(book, str) else None,
        section=section if isinstance(section, int) and not isinstance(section, bool) else None,
        source=source if isinstance(source, str) else None,
        exact=exact,
        prefix=_text(quote.get("prefix", ""), "TextQuoteSelector.prefix", where),
        suffix=_text(quote.get("suffix", ""), "TextQuoteSelector.suffix", where),
        start=start,
        end=end,
        fragment=(
            _text(fragment.get("value"), "FragmentSelector.value", where)
            if fragment is not None
            else None
        ),
        conforms_to=(
            str(fragment.get("conformsTo"))
            if fragment is not None and fragment.get("conformsTo") is not None
            else None
        ),
        note=note,
        color=color,
    )


def parse_collection(doc: Any) -> list[AnnotationIn]:
    """The annotations of a parsed JSON document that must be a JSON-LD
    ``AnnotationCollection`` (see the module doc); :class:`AnnotationFileError` if not."""
    if not isinstance(doc, Mapping):
        raise AnnotationFileError(
            "not a JSON-LD AnnotationCollection: the file is not a JSON object"
        )
    if not _has_context(doc.get("@context")):
        raise AnnotationFileError(
            f"not a JSON-LD Web Annotation document: its @context is not {ANNOTATION_CONTEXT}"
        )
    if COLLECTION_TYPE not in _types(doc.get("type")):
        found = doc.get("type")
        raise AnnotationFileError(
            f"not an AnnotationCollection (its type is {found!r}); export one with "
            "`mindory annotations export`"
        )
    return [_annotation(k, item) for k, item in enumerate(_pages(doc))]
