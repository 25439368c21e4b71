"""OPDS 1.2 (Atom) feeds and the OpenSearch descriptions, drawn with lxml (every text
and attribute escaped by the serializer; characters XML 1.0 cannot carry are dropped).

Navigation feeds (root, authors, languages) hold one entry per subsection; acquisition
feeds one entry per book with its open-access acquisition link, cover and thumbnail,
paging links (``first``/``previous``/``next``/``last``, OpenSearch counts) and facets
(``opds:facetGroup``, ``opds:activeFacet``, ``thr:count``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from lxml import etree

from mindory.library.opds import (
    NO_LANGUAGE,
    CatalogueEntry,
    CataloguePage,
    CatalogueSummary,
    NameCount,
    NamePage,
    PassageBook,
    PassageResult,
)
from mindory.server.opds.urls import (
    ACQUISITION,
    ATOM_ENTRY,
    HTML,
    LOCATOR,
    NAVIGATION,
    OPENSEARCH,
    REL_ACQUISITION,
    REL_FACET,
    REL_IMAGE,
    REL_NEW,
    REL_THUMBNAIL,
    FeedQuery,
    Urls,
)

__all__ = [
    "acquisition_feed",
    "authors_feed",
    "entry_document",
    "languages_feed",
    "opensearch_description",
    "passages_feed",
    "root_feed",
]

ATOM = "http://www.w3.org/2005/Atom"
OPDS = "http://opds-spec.org/2010/catalog"
THR = "http://purl.org/syndication/thread/1.0"
DC = "http://purl.org/dc/terms/"
OS = "http://a9.com/-/spec/opensearch/1.1/"
NSMAP = {None: ATOM, "opds": OPDS, "thr": THR, "dc": DC, "opensearch": OS}
# Characters XML 1.0 cannot carry (a book's metadata can hold anything).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
SUMMARY_CHARS = 2000  # KOReader and others show the summary in a list
PASSAGE_CHARS = 1000  # a passage quoted in a search result


def _text(value: object) -> str:
    return _NOT_XML.sub("", str(value))


def _el(parent: Any, tag: str, text: object | None = None, ns: str = ATOM, **attrs: Any) -> Any:
    el = etree.SubElement(parent, f"{{{ns}}}{tag}")
    for key, value in attrs.items():
        if value is not None:
            el.set(key, _text(value))
    if text is not None:
        el.text = _text(text)
    return el


def _link(
    parent: Any, rel: str, href: str, type_: str, title: str | None = None, **extra: Any
) -> Any:
    link = _el(parent, "link", rel=rel, href=href, type=type_, title=title)
    for key, value in extra.items():
        if value is not None:
            link.set(key, _text(value))
    return link


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _feed(feed_id: str, title: str, self_href: str, kind: str, urls: Urls, updated: str) -> Any:
    root = etree.Element(f"{{{ATOM}}}feed", nsmap=NSMAP)  # type: ignore[arg-type]
    _el(root, "id", feed_id)
    _el(root, "title", title)
    _el(root, "updated", updated)
    author = _el(root, "author")
    _el(author, "name", "mindory")
    _link(root, "self", self_href, kind)
    _link(root, "start", urls.root, NAVIGATION, "mindory")
    _link(root, "search", urls.opensearch, OPENSEARCH, "Search titles and authors")
    _link(root, "search", urls.opensearch_passages, OPENSEARCH, "Search passages")
    return root


def _serialize(root: Any) -> bytes:
    return bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))


def _nav_entry(
    feed: Any,
    entry_id: str,
    title: str,
    href: str,
    kind: str,
    rel: str,
    count: int | None,
    content: str,
    updated: str,
) -> None:
    entry = _el(feed, "entry")
    _el(entry, "title", title)
    _el(entry, "id", entry_id)
    _el(entry, "updated", updated)
    _el(entry, "content", content, type="text")
    link = _link(entry, rel, href, kind, title)
    if count is not None:
        link.set(f"{{{THR}}}count", str(count))


# --------------------------------------------------------------------------- navigation


def root_feed(urls: Urls, summary: CatalogueSummary) -> bytes:
    updated = summary.updated or _now()
    feed = _feed("urn:mindory:opds:root", "mindory", urls.root, NAVIGATION, urls, updated)
    _link(feed, REL_NEW, urls.books(FeedQuery(sort="new")), ACQUISITION, "Recently added")
    books = f"{summary.books} book" + ("" if summary.books == 1 else "s")
    rows = (
        (
            "new",
            "Recently added",
            urls.books(FeedQuery(sort="new")),
            ACQUISITION,
            REL_NEW,
            summary.books,
            f"{books}, newest first",
        ),
        (
            "title",
            "All books by title",
            urls.books(FeedQuery()),
            ACQUISITION,
            "subsection",
            summary.books,
            f"{books} by title",
        ),
        (
            "authors",
            "By author",
            urls.authors(),
            NAVIGATION,
            "subsection",
            summary.authors,
            f"{summary.authors} authors",
        ),
        (
            "languages",
            "By language",
            urls.languages,
            NAVIGATION,
            "subsection",
            summary.languages,
            f"{summary.languages} languages",
        ),
    )
    for key, title, href, kind, rel, count, content in rows:
        _nav_entry(feed, f"urn:mindory:opds:{key}", title, href, kind, rel, count, content, updated)
    return _serialize(feed)


def authors_feed(urls: Urls, names: NamePage) -> bytes:
    updated = _now()
    feed = _feed(
        "urn:mindory:opds:authors", "Authors", urls.authors(names.page), NAVIGATION, urls, updated
    )
    _link(feed, "up", urls.root, NAVIGATION, "mindory")
    _paging(feed, names.page, names.last_page, urls.authors, NAVIGATION)
    _counts(feed, names.total, names.per_page, names.page)
    for name in names.names:
        _name_entry(feed, "author", name, urls.books(FeedQuery(author=name.name)), updated)
    return _serialize(feed)


def languages_feed(urls: Urls, languages: Sequence[NameCount]) -> bytes:
    updated = _now()
    feed = _feed(
        "urn:mindory:opds:languages", "Languages", urls.languages, NAVIGATION, urls, updated
    )
    _link(feed, "up", urls.root, NAVIGATION, "mindory")
    for lang in languages:
        _name_entry(feed, "language", lang, urls.books(FeedQuery(language=lang.name)), updated)
    return _serialize(feed)


def language_label(tag: str) -> str:
    return "No language given" if tag == NO_LANGUAGE else tag


def _name_entry(feed: Any, kind: str, name: NameCount, href: str, updated: str) -> None:
    from urllib.parse import quote

    title = language_label(name.name) if kind == "language" else name.name
    books = f"{name.count} book" + ("" if name.count == 1 else "s")
    _nav_entry(
        feed,
        f"urn:mindory:opds:{kind}:{quote(name.name, safe='')}",
        title,
        href,
        ACQUISITION,
        "subsection",
        name.count,
        books,
        updated,
    )


def _paging(feed: Any, page: int, last: int, href: Any, kind: str) -> None:
    _link(feed, "first", href(1), kind)
    if page > 1:
        _link(feed, "previous", href(page - 1), kind)
    if page < last:
        _link(feed, "next", href(page + 1), kind)
    _link(feed, "last", href(last), kind)


def _counts(feed: Any, total: int, per_page: int, page: int) -> None:
    _el(feed, "totalResults", total, ns=OS)
    _el(feed, "itemsPerPage", per_page, ns=OS)
    _el(feed, "startIndex", (page - 1) * per_page + 1, ns=OS)


# --------------------------------------------------------------------------- acquisition


def page_title(page: CataloguePage) -> str:
    f = page.filters
    if page.query is not None:
        title = f"Search: {page.query}"
    elif f.author is not None:
        title = f"Books by {f.author}"
    elif page.sort == "new":
        title = "Recently added"
    else:
        title = "All books by title"
    narrowed = [language_label(f.language)] if f.language is not None else []
    narrowed += [f.format.upper()] if f.format is not None else []
    return f"{title} ({', '.join(narrowed)})" if narrowed else title


def feed_query(page: CataloguePage, default_per_page: int) -> FeedQuery:
    f = page.filters
    return FeedQuery(
        sort=page.sort,
        author=f.author,
        language=f.language,
        format=f.format,
        q=page.query,
        page=page.page,
        per_page=page.per_page,
        default_per_page=default_per_page,
    )


def acquisition_feed(urls: Urls, page: CataloguePage, default_per_page: int) -> bytes:
    q = feed_query(page, default_per_page)
    updated = max((e.updated for e in page.entries), default="") or _now()
    feed = _feed(
        urls.books(q),
        page_title(page),
        urls.books(q),
        ACQUISITION,
        urls,
        updated,
    )
    _link(feed, "up", urls.root, NAVIGATION, "mindory")
    _paging(feed, page.page, page.last_page, lambda n: urls.books(q.at(n)), ACQUISITION)
    _counts(feed, page.total, page.per_page, page.page)
    _facets(feed, urls, page, q)
    for entry in page.entries:
        _book_entry(feed, urls, entry)
    return _serialize(feed)


def _facets(feed: Any, urls: Urls, page: CataloguePage, q: FeedQuery) -> None:
    groups = (("language", "Language"), ("format", "Format"))
    for group, label in groups:
        values = [f for f in page.facets if f.group == group]
        if not values:
            continue
        active = getattr(page.filters, group)
        everything = q.facet(group, None)
        _link(
            feed,
            REL_FACET,
            urls.books(everything),
            ACQUISITION,
            "All",
            **{
                f"{{{OPDS}}}facetGroup": label,
                f"{{{OPDS}}}activeFacet": "true" if active is None else None,
                f"{{{THR}}}count": sum(v.count for v in values),
            },
        )
        for facet in values:
            title = language_label(facet.value) if group == "language" else facet.value.upper()
            _link(
                feed,
                REL_FACET,
                urls.books(q.facet(group, facet.value)),
                ACQUISITION,
                title,
                **{
                    f"{{{OPDS}}}facetGroup": label,
                    f"{{{OPDS}}}activeFacet": "true" if facet.active else None,
                    f"{{{THR}}}count": facet.count,
                },
            )


def _book_entry(feed: Any, urls: Urls, book: CatalogueEntry, root: bool = False) -> Any:
    entry = (
        etree.Element(f"{{{ATOM}}}entry", nsmap=NSMAP)  # type: ignore[arg-type]
        if root
        else _el(feed, "entry")
    )
    _el(entry, "title", book.title)
    _el(entry, "id", f"urn:sha256:{book.id}")
    _el(entry, "updated", book.updated)
    for name in book.authors:
        author = _el(entry, "author")
        _el(author, "name", name)
        _el(author, "uri", urls.books(FeedQuery(author=name)))
    if book.language:
        _el(entry, "language", book.language, ns=DC)
    for identifier in book.identifiers:
        _el(entry, "identifier", identifier, ns=DC)
    if book.publisher:
        _el(entry, "publisher", book.publisher, ns=DC)
    if book.published:
        _el(entry, "issued", book.published, ns=DC)
    for subject in book.subjects:
        _el(entry, "category", term=subject, label=subject)
    if book.description:
        _el(entry, "summary", book.description[:SUMMARY_CHARS], type="text")
    if book.cover_href and book.cover_type:
        _link(entry, REL_IMAGE, urls.cover(book.id, book.cover_href), book.cover_type)
    if book.has_thumbnail:
        _link(entry, REL_THUMBNAIL, urls.thumbnail(book.id), "image/jpeg")
    _link(
        entry,
        REL_ACQUISITION,
        urls.file(book.id),
        file_type(urls, book),
        book.file_name,
        length=book.file_size,
    )
    _link(entry, "alternate", urls.entry(book.id), ATOM_ENTRY, "Full entry")
    return entry


def file_type(urls: Urls, book: CatalogueEntry) -> str:
    return urls.file_type(book.format, book.encoding)


def entry_document(urls: Urls, book: CatalogueEntry) -> bytes:
    """One book as a complete Atom entry document."""
    return _serialize(_book_entry(None, urls, book, root=True))


# --------------------------------------------------------------------------- passages


def passages_feed(urls: Urls, result: PassageResult) -> bytes:
    """The books whose passages match, each with links to the passages."""
    href = urls.passages(result.query)
    feed = _feed(href, f"Passages: {result.query}", href, ACQUISITION, urls, _now())
    _link(feed, "up", urls.root, NAVIGATION, "mindory")
    _el(feed, "totalResults", len(result.books), ns=OS)
    for book in result.books:
        entry = _book_entry(feed, urls, book.entry)
        _passage_links(entry, urls, book)
    return _serialize(feed)


def passage_title(section_title: str, section: int, text: str) -> str:
    where = section_title or f"Section {section}"
    quote = " ".join(text.split())
    return f"{where}: {quote[:120]}{'…' if len(quote) > 120 else ''}"


def _passage_links(entry: Any, urls: Urls, book: PassageBook) -> None:
    """A deep link and a Locator link per passage; the passages' text as the content."""
    lines = []
    for p in book.passages:
        title = passage_title(p.section_title, p.section, p.text)
        text = " ".join(p.text.split())
        where = p.section_title or f"Section {p.section}"
        lines.append(f"{where}: {text[:PASSAGE_CHARS]}{'…' if len(text) > PASSAGE_CHARS else ''}")
        reader = urls.reader(book.entry.id, p.section, p.source_start, p.source_end)
        _link(entry, "alternate", reader, HTML, title)
        _link(entry, "related", urls.locator(book.entry.id, p.chunk), LOCATOR, title)
    _el(entry, "content", "\n\n".join(lines), type="text")


# --------------------------------------------------------------------------- OpenSearch


def opensearch_description(
    template: str, short_name: str, description: str, self_href: str
) -> bytes:
    """An OpenSearch 1.1 description whose one results template answers with an OPDS
    acquisition feed (``{searchTerms}`` is the client's words)."""
    root = etree.Element(f"{{{OS}}}OpenSearchDescription", nsmap={None: OS})  # type: ignore[dict-item]
    _el(root, "ShortName", short_name[:16], ns=OS)
    _el(root, "Description", description[:1024], ns=OS)
    _el(root, "InputEncoding", "UTF-8", ns=OS)
    _el(root, "OutputEncoding", "UTF-8", ns=OS)
    _el(root, "Url", ns=OS, type=ACQUISITION, template=template)
    _el(root, "Url", ns=OS, type=OPENSEARCH, rel="self", template=self_href)
    return _serialize(root)
