"""The catalogue's reads and its two caches, in SQLAlchemy Core (docs/opds.md).

A reading app's catalogue (OPDS) pages through the books by title or by import time,
narrowed by author, language, format or words of a title/author, and counts the books
per facet. Every page is one ``LIMIT``/``OFFSET`` statement over ``books`` joined to
``book_details`` (revision 0009), so a page never opens a book file once its details
are there. The authors are the elements of the ``creators`` JSON arrays, read with the
dialect's table-valued JSON function (SQLite ``json_each``, PostgreSQL
``json_array_elements_text``): the only dialect piece here.

The caches: ``book_details`` (a row per book, written once, NULL fields when the file
has none) and ``book_images`` (the thumbnail, made once). Both are written with "insert,
and if another writer was first, keep theirs" so two requests filling the same book do
not fail.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Select,
    Text,
    and_,
    cast,
    func,
    insert,
    or_,
    select,
    true,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.functions import Function

from mindory.store.tables import book_details_table, book_image_table, book_table

__all__ = [
    "BookFilters",
    "DetailsRow",
    "Sort",
    "author_counts",
    "book_rows",
    "books_by_sha",
    "count_authors",
    "count_books",
    "facet_counts",
    "facet_grid",
    "image_row",
    "latest_import",
    "save_details",
    "save_image",
]

Sort = Literal["title", "new"]
FacetGroup = Literal["language", "format"]
NO_LANGUAGE = "und"  # BCP 47 "undetermined": the facet value of books without a language


@dataclass(frozen=True, slots=True)
class BookFilters:
    """What narrows a list of books; every given field must hold (AND).

    ``words``: each word must occur (case-insensitively; SQLite folds ASCII only) in the
    title or in one author's name."""

    author: str | None = None
    language: str | None = None  # NO_LANGUAGE: books without one
    format: str | None = None
    words: tuple[str, ...] = ()

    def without(self, group: FacetGroup) -> BookFilters:
        if group == "language":
            return BookFilters(self.author, None, self.format, self.words)
        return BookFilters(self.author, self.language, None, self.words)


b = book_table.c
d = book_details_table.c

# What a catalogue entry needs: the book row's fields and its details (NULL: not read yet).
_ENTRY_COLUMNS = (
    b.id,
    b.sha256,
    b.title,
    b.format,
    b.file_name,
    b.file_size,
    b.encoding,
    b.creators,
    b.language,
    b.identifiers,
    b.imported_at,
    d.book_id.is_not(None).label("has_details"),
    d.description,
    d.publisher,
    d.published,
    d.subjects,
    d.cover_href,
    d.cover_type,
)


def _creators(dialect: str) -> Any:
    """The elements of ``books.creators`` as a one-column table (``value``)."""
    fn: Function[Any]
    if dialect == "postgresql":
        fn = func.json_array_elements_text(b.creators)
    else:
        fn = func.json_each(b.creators)
    return fn.table_valued("value").alias("creator")


def _dialect(conn: Connection) -> str:
    return str(conn.dialect.name)


def _like(column: Any, word: str) -> ColumnElement[bool]:
    return func.lower(column).contains(word.lower(), autoescape=True)


def _json_forms(value: str) -> list[str]:
    """``value`` as a JSON string token, as the JSON text of a column may spell it: with
    non-ASCII escaped (what SQLAlchemy's ``json.dumps`` writes) and, if different, as is
    (what PostgreSQL's ``jsonb`` would give back)."""
    forms = [json.dumps(value), json.dumps(value, ensure_ascii=False)]
    return list(dict.fromkeys(forms))


def _creators_text() -> Any:
    return cast(b.creators, Text)


def _where(filters: BookFilters, dialect: str) -> ColumnElement[bool]:
    """The filters as SQL. Authors are matched in the JSON text of ``creators`` (a name's
    JSON string token, quotes included, is a whole element: quotes inside are escaped),
    which costs a LIKE per row instead of a JSON table per row."""
    del dialect
    conditions: list[ColumnElement[bool]] = []
    if filters.author is not None:
        conditions.append(
            or_(
                *(
                    _creators_text().contains(form, autoescape=True)
                    for form in _json_forms(filters.author)
                )
            )
        )
    if filters.language is not None:
        if filters.language == NO_LANGUAGE:
            conditions.append(or_(b.language.is_(None), b.language == NO_LANGUAGE))
        else:
            conditions.append(b.language == filters.language)
    if filters.format is not None:
        conditions.append(b.format == filters.format)
    for word in filters.words:
        low = word.lower()
        forms = [json.dumps(low)[1:-1], low]  # inside a JSON string: escaped, or as is
        conditions.append(
            or_(
                _like(b.title, word),
                *(_like(_creators_text(), form) for form in dict.fromkeys(forms)),
            )
        )
    return and_(true(), *conditions)


def _ordered(stmt: Select[Any], sort: Sort) -> Select[Any]:
    if sort == "new":
        return stmt.order_by(b.imported_at.desc(), b.id.desc())
    return stmt.order_by(b.title, b.sha256)


def book_rows(
    conn: Connection, filters: BookFilters, *, sort: Sort, limit: int, offset: int
) -> list[Any]:
    """One page of books (with their details, NULL when not read yet). The page's ids are
    found first (sorting narrow rows), then only those rows are read whole: sorting
    10,000 whole rows to keep 50 costs ~0.3 s on SQLite."""
    ids = (
        _ordered(select(b.id).select_from(book_table).where(_where(filters, _dialect(conn))), sort)
        .limit(limit)
        .offset(offset)
    )
    stmt = (
        select(*_ENTRY_COLUMNS)
        .select_from(book_table.outerjoin(book_details_table, d.book_id == b.id))
        .where(b.id.in_(ids.scalar_subquery()))
    )
    return list(conn.execute(_ordered(stmt, sort)).all())


def books_by_sha(conn: Connection, shas: Sequence[str]) -> dict[str, Any]:
    """Entry rows of the books with these SHA-256s (absent ones are left out)."""
    if not shas:
        return {}
    stmt = (
        select(*_ENTRY_COLUMNS)
        .select_from(book_table.outerjoin(book_details_table, d.book_id == b.id))
        .where(b.sha256.in_(list(shas)))
    )
    return {r.sha256: r for r in conn.execute(stmt)}


def count_books(conn: Connection, filters: BookFilters) -> int:
    stmt = select(func.count()).select_from(book_table).where(_where(filters, _dialect(conn)))
    return int(conn.execute(stmt).scalar_one())


def facet_counts(
    conn: Connection, group: FacetGroup, filters: BookFilters
) -> list[tuple[str, int]]:
    """(value, books) of one facet group under the other groups' filters, by value."""
    column = (func.coalesce(b.language, NO_LANGUAGE) if group == "language" else b.format).label(
        "value"
    )
    stmt = (
        select(column, func.count())
        .select_from(book_table)
        .where(_where(filters.without(group), _dialect(conn)))
        .group_by(column)
        .order_by(column)
    )
    return [(str(v), int(n)) for v, n in conn.execute(stmt)]


def facet_grid(conn: Connection, filters: BookFilters) -> list[tuple[str, str, int]]:
    """(language, format, books) under the filters other than language and format, in
    one scan: both facet groups and the total are sums over it (a search scanned the
    books three times for them)."""
    lang = func.coalesce(b.language, NO_LANGUAGE).label("language")
    loose = filters.without("language").without("format")
    stmt = (
        select(lang, b.format, func.count())
        .select_from(book_table)
        .where(_where(loose, _dialect(conn)))
        .group_by(lang, b.format)
    )
    return [(str(v), str(f), int(n)) for v, f, n in conn.execute(stmt)]


def author_counts(conn: Connection, *, limit: int, offset: int) -> list[tuple[str, int]]:
    """(author, books) by name, one page."""
    creator = _creators(_dialect(conn))
    stmt = (
        select(creator.c.value, func.count(func.distinct(b.id)))
        .select_from(book_table.join(creator, true()))
        .group_by(creator.c.value)
        .order_by(creator.c.value)
        .limit(limit)
        .offset(offset)
    )
    return [(str(v), int(n)) for v, n in conn.execute(stmt)]


def latest_import(conn: Connection) -> Any | None:
    """When the newest book was imported (None: no books)."""
    return conn.execute(select(func.max(b.imported_at))).scalar_one()


def count_authors(conn: Connection) -> int:
    creator = _creators(_dialect(conn))
    inner = select(creator.c.value).select_from(book_table.join(creator, true())).distinct()
    return int(conn.execute(select(func.count()).select_from(inner.subquery())).scalar_one())


# --------------------------------------------------------------------------- caches


@dataclass(frozen=True, slots=True)
class DetailsRow:
    """What ``book_details`` keeps of one book (None: the file has no such field)."""

    book_id: int
    description: str | None
    publisher: str | None
    published: str | None
    subjects: tuple[str, ...]
    cover_href: str | None
    cover_type: str | None


def save_details(engine: Engine, rows: Sequence[DetailsRow]) -> None:
    """Keep books' details, in one transaction; a row another writer kept first stays
    (then each row is tried on its own)."""
    values = [
        {
            "book_id": r.book_id,
            "description": r.description,
            "publisher": r.publisher,
            "published": r.published,
            "subjects": list(r.subjects),
            "cover_href": r.cover_href,
            "cover_type": r.cover_type,
        }
        for r in rows
    ]
    if values:
        _insert_once(engine, insert(book_details_table), values)


def image_row(conn: Connection, book_id: int, kind: str) -> Any | None:
    """The stored image (``media_type, width, height, data``) of a book, or None."""
    i = book_image_table.c
    stmt = select(i.media_type, i.width, i.height, i.data).where(
        i.book_id == book_id, i.kind == kind
    )
    return conn.execute(stmt).first()


def save_image(
    engine: Engine, book_id: int, kind: str, media_type: str, width: int, height: int, data: bytes
) -> None:
    """Keep an image (a row another writer kept first stays)."""
    row = {
        "book_id": book_id,
        "kind": kind,
        "media_type": media_type,
        "width": width,
        "height": height,
        "data": data,
    }
    _insert_once(engine, insert(book_image_table), [row])


def _insert_once(engine: Engine, stmt: Any, values: list[dict[str, Any]]) -> None:
    try:
        with engine.begin() as conn:
            conn.execute(stmt, values)
        return
    except IntegrityError:
        if len(values) == 1:
            return  # another request (or a deleted book) got there first: nothing to keep
    for one in values:
        _insert_once(engine, stmt, [one])
