"""OPDS 2.0 (JSON) feeds and publications, shaped to validate against the official
schemas (``feed.schema.json``, ``publication.schema.json``).

Facts of those schemas this module keeps: a feed has ``metadata.title`` and a ``self``
link, and at least one item in ``publications``, ``navigation`` or ``groups`` — so a
list with no books (an empty library, a search that finds nothing) is a feed whose
``navigation`` holds one link back to the catalogue, and ``numberOfItems: 0`` says it;
a publication has an acquisition link (``http://opds-spec.org/acquisition/open-access``,
the short ``download`` fails the schema); ``images`` must hold a JPEG/PNG/GIF/WebP/AVIF
one when present; ``metadata.language`` must be a BCP 47 tag (others are left out) and
``published`` a date or a date-time (a year alone is left out; the Atom feed keeps it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mindory.library.opds import (
    CatalogueEntry,
    CataloguePage,
    CatalogueSummary,
    NameCount,
    NamePage,
    PassageResult,
)
from mindory.server.opds.atom import (
    feed_query,
    file_type,
    language_label,
    page_title,
    passage_title,
)
from mindory.server.opds.urls import (
    HTML,
    LOCATOR,
    OPDS2,
    OPDS2_AUTH,
    OPDS2_PUBLICATION,
    REL_ACQUISITION,
    REL_AUTH_DOCUMENT,
    REL_IMAGE,
    REL_NEW,
    REL_THUMBNAIL,
    FeedQuery,
    Urls,
)

__all__ = [
    "acquisition_feed",
    "authors_feed",
    "languages_feed",
    "passages_feed",
    "publication",
    "root_feed",
]

# A BCP 47 tag, loosely (the schema's own pattern is stricter and tried by the tests).
_LANGUAGE_RE = re.compile(r"^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATE_TIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$", re.IGNORECASE
)
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp", "image/avif"})


def _link(
    href: str, type_: str, rel: str | None = None, title: str | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"href": href, "type": type_}
    if rel is not None:
        out["rel"] = rel
    if title is not None:
        out["title"] = title
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def _common_links(urls: Urls, self_href: str) -> list[dict[str, Any]]:
    return [
        _link(self_href, OPDS2, "self"),
        _link(urls.root, OPDS2, "start", "mindory"),
        _link(
            urls.feed("/search") + "{?query}",
            OPDS2,
            "search",
            "Search titles and authors",
            templated=True,
        ),
        _link(
            urls.feed("/passages") + "{?query}",
            OPDS2,
            "search",
            "Search passages",
            templated=True,
        ),
    ]


def _feed(urls: Urls, title: str, self_href: str, **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"title": title, **{k: v for k, v in metadata.items() if v is not None}},
        "links": _common_links(urls, self_href),
    }


def _nothing(urls: Urls, what: str) -> list[dict[str, Any]]:
    """The one navigation link of a list with no books (a feed needs an item)."""
    return [_link(urls.root, OPDS2, "start", f"{what} — back to the catalogue")]


# --------------------------------------------------------------------------- navigation


def root_feed(urls: Urls, summary: CatalogueSummary) -> dict[str, Any]:
    feed = _feed(urls, "mindory", urls.root, modified=summary.updated)
    feed["links"].append(_link(urls.auth_document, OPDS2_AUTH, REL_AUTH_DOCUMENT))
    count = {"properties": {"numberOfItems": summary.books}}
    feed["navigation"] = [
        _link(urls.books(FeedQuery(sort="new")), OPDS2, REL_NEW, "Recently added", **count),
        _link(urls.books(FeedQuery()), OPDS2, "subsection", "All books by title", **count),
        _link(
            urls.authors(),
            OPDS2,
            "subsection",
            "By author",
            properties={"numberOfItems": summary.authors},
        ),
        _link(
            urls.languages,
            OPDS2,
            "subsection",
            "By language",
            properties={"numberOfItems": summary.languages},
        ),
    ]
    return feed


def _paging(links: list[dict[str, Any]], page: int, last: int, href: Any) -> None:
    links.append(_link(href(1), OPDS2, "first"))
    if page > 1:
        links.append(_link(href(page - 1), OPDS2, "previous"))
    if page < last:
        links.append(_link(href(page + 1), OPDS2, "next"))
    links.append(_link(href(last), OPDS2, "last"))


def authors_feed(urls: Urls, names: NamePage) -> dict[str, Any]:
    feed = _feed(
        urls,
        "Authors",
        urls.authors(names.page),
        numberOfItems=names.total,
        itemsPerPage=names.per_page,
        currentPage=names.page,
    )
    feed["links"].append(_link(urls.root, OPDS2, "up", "mindory"))
    _paging(feed["links"], names.page, names.last_page, urls.authors)
    feed["navigation"] = [
        _name_link(urls.books(FeedQuery(author=n.name)), n.name, n) for n in names.names
    ] or _nothing(urls, "No authors yet")
    return feed


def languages_feed(urls: Urls, languages: Sequence[NameCount]) -> dict[str, Any]:
    feed = _feed(urls, "Languages", urls.languages, numberOfItems=len(languages))
    feed["links"].append(_link(urls.root, OPDS2, "up", "mindory"))
    feed["navigation"] = [
        _name_link(urls.books(FeedQuery(language=n.name)), language_label(n.name), n)
        for n in languages
    ] or _nothing(urls, "No books yet")
    return feed


def _name_link(href: str, title: str, name: NameCount) -> dict[str, Any]:
    return _link(href, OPDS2, "subsection", title, properties={"numberOfItems": name.count})


# --------------------------------------------------------------------------- acquisition


def acquisition_feed(urls: Urls, page: CataloguePage, default_per_page: int) -> dict[str, Any]:
    q = feed_query(page, default_per_page)
    feed = _feed(
        urls,
        page_title(page),
        urls.books(q),
        numberOfItems=page.total,
        itemsPerPage=page.per_page,
        currentPage=page.page,
    )
    feed["links"].append(_link(urls.root, OPDS2, "up", "mindory"))
    _paging(feed["links"], page.page, page.last_page, lambda n: urls.books(q.at(n)))
    facets = _facets(urls, page, q)
    if facets:
        feed["facets"] = facets
    if page.entries:
        feed["publications"] = [publication(urls, e) for e in page.entries]
    else:
        what = f"No book matches {page.query!r}" if page.query else "No books yet"
        feed["navigation"] = _nothing(urls, what)
    return feed


def _facets(urls: Urls, page: CataloguePage, q: FeedQuery) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for group, label in (("language", "Language"), ("format", "Format")):
        values = [f for f in page.facets if f.group == group]
        if not values:
            continue
        active = getattr(page.filters, group)
        links = [
            _link(
                urls.books(q.facet(group, None)),
                OPDS2,
                "self" if active is None else None,
                "All",
                properties={"numberOfItems": sum(v.count for v in values)},
            )
        ]
        for facet in values:
            title = language_label(facet.value) if group == "language" else facet.value.upper()
            links.append(
                _link(
                    urls.books(q.facet(group, facet.value)),
                    OPDS2,
                    "self" if facet.active else None,
                    title,
                    properties={"numberOfItems": facet.count},
                )
            )
        out.append({"metadata": {"title": label}, "links": links})
    return out


def _language(tag: str | None) -> str | None:
    if not tag:
        return None
    tag = tag.strip().replace("_", "-")
    return tag if _LANGUAGE_RE.match(tag) else None


def _published(value: str | None) -> str | None:
    if value and (_DATE_RE.match(value) or _DATE_TIME_RE.match(value)):
        return value
    return None


def publication(urls: Urls, book: CatalogueEntry) -> dict[str, Any]:
    """One book as an OPDS 2 publication."""
    metadata: dict[str, Any] = {
        "@type": "http://schema.org/Book",
        "title": book.title,
        "identifier": f"urn:sha256:{book.id}",
        "modified": book.updated,
    }
    if book.identifiers:
        metadata["altIdentifier"] = [{"value": i} for i in book.identifiers]
    if book.authors:
        metadata["author"] = [
            {"name": name, "links": [_link(urls.books(FeedQuery(author=name)), OPDS2)]}
            for name in book.authors
        ]
    language = _language(book.language)
    if language:
        metadata["language"] = language
    if book.publisher:
        metadata["publisher"] = book.publisher
    published = _published(book.published)
    if published:
        metadata["published"] = published
    if book.description:
        metadata["description"] = book.description
    if book.subjects:
        metadata["subject"] = list(book.subjects)
    pub: dict[str, Any] = {
        "metadata": metadata,
        "links": [
            _link(urls.entry(book.id), OPDS2_PUBLICATION, "self"),
            _link(urls.file(book.id), file_type(urls, book), REL_ACQUISITION, book.file_name),
        ],
    }
    images = []
    if book.has_thumbnail:
        images.append(_link(urls.thumbnail(book.id), "image/jpeg", REL_THUMBNAIL))
    if book.cover_href and book.cover_type:
        images.append(_link(urls.cover(book.id, book.cover_href), book.cover_type, REL_IMAGE))
    if any(i["type"] in IMAGE_TYPES for i in images):
        pub["images"] = images
    return pub


# --------------------------------------------------------------------------- passages


def passages_feed(urls: Urls, result: PassageResult) -> dict[str, Any]:
    """The books whose passages match; each publication links to its passages (the web
    reader's deep link, ``text/html``, and the hit's Locator)."""
    feed = _feed(
        urls,
        f"Passages: {result.query}",
        urls.passages(result.query),
        numberOfItems=len(result.books),
    )
    feed["links"].append(_link(urls.root, OPDS2, "up", "mindory"))
    if not result.books:
        feed["navigation"] = _nothing(urls, f"No passage matches {result.query!r}")
        return feed
    pubs = []
    for book in result.books:
        pub = publication(urls, book.entry)
        for p in book.passages:
            title = passage_title(p.section_title, p.section, p.text)
            pub["links"].append(
                _link(
                    urls.reader(book.entry.id, p.section, p.source_start, p.source_end),
                    HTML,
                    "alternate",
                    title,
                )
            )
            pub["links"].append(
                _link(urls.locator(book.entry.id, p.chunk), LOCATOR, "related", title)
            )
        pubs.append(pub)
    feed["publications"] = pubs
    return feed
