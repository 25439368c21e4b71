"""The library: the one entry point over the pipeline and the database.

``Library.open(path_or_url)`` opens (and upgrades to the newest schema) a SQLite file or
any SQLAlchemy URL. Each method is a short delegation to the module of its concern —
:mod:`~mindory.library.importing`, :mod:`~mindory.library.catalogue`,
:mod:`~mindory.library.export`, :mod:`~mindory.library.verify`,
:mod:`~mindory.library.vectors`, :mod:`mindory.search.pipeline`,
:mod:`~mindory.library.locating`, :mod:`~mindory.library.annotations` — imported when
first used, so a command pays only for what it runs. The CLI and the HTTP API call
these methods and nothing else; every return type is a frozen record with a
``to_json()`` that gives the shape both doors print.

Reproducibility (DESIGN §3): a book is its file's SHA-256; re-importing the same bytes
with the same settings finds the derivation and returns ``unchanged`` without parsing or
writing. Chunk ids depend only on (book hash, section, settings fingerprint, span).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mindory.library.reading_state import ReadingStateMethods
from mindory.library.records import EMBED_BATCH
from mindory.library.state import State
from mindory.reading.positions import LOCAL_READER
from mindory.reading.units import DEFAULT_PAGE_SIZE
from mindory.store.engine import DEFAULT_BUSY_TIMEOUT_MS, open_engine

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from mindory.library import opds
    from mindory.library.copying import CopyReport
    from mindory.library.manifest import ReadiumManifest, ReadiumPositions
    from mindory.library.records import (
        EmbedResult,
        ImportFailure,
        ImportResult,
        IndexReport,
        LocateResult,
        ProgressFn,
        VerifyReport,
    )
    from mindory.library.resources import Resource
    from mindory.reading.locate import Locator, SectionPlace
    from mindory.search.embedders import Embedder
    from mindory.search.hits import SearchResult
    from mindory.search.vectors import IndexInfo
    from mindory.store.records import (
        BlockPage,
        BookInfo,
        ChunkInfo,
        EmbeddingInfo,
        SectionDetail,
        SectionInfo,
        TocNode,
    )
    from mindory.text.records import Settings

__all__ = ["Library"]


class Library(ReadingStateMethods):
    """A library of books in one database. Open with :meth:`open`; close when done."""

    def __init__(self, state: State) -> None:
        self.state = state

    @classmethod
    def open(
        cls,
        path_or_url: str | os.PathLike[str] | None = None,
        *,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    ) -> Library:
        """Open a library (a SQLite path or a SQLAlchemy URL; see
        :func:`mindory.store.engine.resolve_url`), creating it if needed and upgrading its
        schema to the newest revision."""
        engine, url, path = open_engine(path_or_url, busy_timeout_ms)
        return cls(State(engine, url, path, busy_timeout_ms))

    def close(self) -> None:
        self.state.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def engine(self) -> Engine:
        return self.state.engine

    @property
    def url(self) -> str:
        return self.state.url

    @property
    def path(self) -> Path | None:
        """The SQLite file (None for other databases)."""
        return self.state.path

    @property
    def index_path(self) -> Path | None:
        """The FAISS file beside the database (None: the index lives in memory only)."""
        return self.state.index_path

    @property
    def write_batch(self) -> int:
        """Chunk rows per INSERT batch during an import (one progress report each)."""
        return self.state.write_batch

    @write_batch.setter
    def write_batch(self, value: int) -> None:
        self.state.write_batch = value

    def has_fts(self) -> bool:
        """True when the database has the FTS5 index (SQLite)."""
        return self.state.has_fts()

    def resource(self, ref: str, href: str) -> Resource:
        """A member of an EPUB book by its ZIP path, with its media type and an ETag."""
        from mindory.library import catalogue

        return catalogue.resource(self.state, ref, href)

    # ------------------------------------------------------------------ search

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        mode: str = "hybrid",
        book: str | None = None,
        section: int | None = None,
        weights: Mapping[str, float] | None = None,
        rrf_k: int | None = None,
        candidates: int | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        rerank: bool = False,
    ) -> SearchResult:
        """The ``k`` best chunks for ``query``, each with its Locator and word matches
        (:func:`mindory.search.pipeline.search`); ``rerank`` re-reads the first hits
        sentence by sentence (a named mode, :mod:`mindory.search.rerank`). Its ``timings``
        start with ``imports``: loading the search code, on the first search of a process
        only."""
        from dataclasses import replace
        from time import perf_counter

        t = perf_counter()
        from mindory.search import pipeline
        from mindory.search.fusion import CANDIDATES

        imports = 1000 * (perf_counter() - t)
        result = pipeline.search(
            self.state.services(),
            query,
            k=k,
            mode=mode,
            book=book,
            section=section,
            weights=weights,
            rrf_k=rrf_k,
            candidates=CANDIDATES if candidates is None else candidates,
            page_size=page_size,
            rerank=rerank,
        )
        return replace(result, timings={"imports": imports, **result.timings})

    # ------------------------------------------------------------------ concerns

    def import_book(
        self,
        path: str | os.PathLike[str],
        settings: Settings | None = None,
        *,
        copy: bool = True,
        progress: ProgressFn | None = None,
        replaces: str | None = None,
        embed: bool = True,
    ) -> ImportResult:
        """Import one file; see the module doc for what ``unchanged`` costs. ``embed``:
        embed the new chunks with the library's current embedding, if it has one."""
        from mindory.library import importing

        return importing.import_book(
            self.state,
            path,
            settings,
            copy=copy,
            progress=progress,
            replaces=replaces,
            embed=embed,
        )

    def import_many(
        self,
        paths: Iterable[str | os.PathLike[str]],
        settings: Settings | None = None,
        *,
        copy: bool = True,
        progress: Callable[[Path], ProgressFn | None] | None = None,
        replaces: str | None = None,
        embed: bool = True,
    ) -> Iterator[ImportResult | ImportFailure]:
        """Import files and folders (see :func:`book_files_in`), one transaction per
        book; a bad file yields an :class:`ImportFailure` and the batch goes on.
        ``replaces`` and ``embed`` are passed to every :meth:`import_book` (``replaces``
        is meant for one file)."""
        from mindory.library import importing

        return importing.import_many(
            self.state,
            paths,
            settings,
            copy=copy,
            progress=progress,
            replaces=replaces,
            embed=embed,
        )

    def books(self) -> list[BookInfo]:
        """Every book, by title (then id)."""
        from mindory.library import shelf

        return shelf.books(self.state)

    def book(self, ref: str) -> BookInfo:
        """A book by id (its SHA-256 or a prefix of it) or a unique prefix of its title."""
        from mindory.library import catalogue

        return catalogue.book(self.state, ref)

    def book_file(self, ref: str) -> bytes:
        """The original file's bytes (read from its path when it was not copied)."""
        from mindory.library import catalogue

        return catalogue.book_file(self.state, ref)

    def toc(self, ref: str) -> tuple[TocNode, ...]:
        from mindory.library import catalogue

        return catalogue.toc(self.state, ref)

    def sections(self, ref: str, *, fingerprint: str | None = None) -> list[SectionInfo]:
        from mindory.library import catalogue

        return catalogue.sections(self.state, ref, fingerprint=fingerprint)

    def section(self, ref: str, ordinal: int, *, fingerprint: str | None = None) -> SectionDetail:
        """One section with its source text, normalized text and offset map."""
        from mindory.library import catalogue

        return catalogue.section(self.state, ref, ordinal, fingerprint=fingerprint)

    def chunks(
        self,
        ref: str,
        *,
        section: int | None = None,
        fingerprint: str | None = None,
        offset: int = 0,
        limit: int | None = None,
        with_cfi: bool = False,
    ) -> list[ChunkInfo]:
        """Chunks of the current (or the given) derivation, in reading order."""
        from mindory.library import catalogue

        return catalogue.chunks(
            self.state,
            ref,
            section=section,
            fingerprint=fingerprint,
            offset=offset,
            limit=limit,
            with_cfi=with_cfi,
        )

    def blocks(
        self,
        ref: str,
        section: int,
        page: int = 1,
        page_size: int = 50,
        *,
        fingerprint: str | None = None,
    ) -> BlockPage:
        """One page (counted from 1) of a section's render blocks, with their text."""
        from mindory.library import catalogue

        return catalogue.blocks(self.state, ref, section, page, page_size, fingerprint=fingerprint)

    def delete_book(self, ref: str) -> BookInfo:
        """Delete a book and everything derived from it; returns what was deleted."""
        from mindory.library import catalogue

        return catalogue.delete_book(self.state, ref)

    def export(
        self,
        ref: str,
        *,
        fingerprint: str | None = None,
        annotations: bool = True,
        reader: str | None = None,
    ) -> Iterator[str]:
        """The book as JSON lines (no trailing newlines): book, TOC, then per section the
        section (texts and offset map), its blocks and its chunks; then the reader's
        annotations (W3C Web Annotations), unless ``annotations`` is False."""
        from mindory.library import export

        return export.export(
            self.state,
            ref,
            fingerprint=fingerprint,
            annotations=annotations,
            reader=reader or LOCAL_READER,
        )

    def copy_to(
        self,
        url: str | os.PathLike[str],
        *,
        verify: bool = True,
        progress: Callable[[str, int], None] | None = None,
    ) -> CopyReport:
        """Copy the whole library (books, derivations, chunks, terms, vectors, readers,
        annotations, positions) into the empty library at ``url`` (a SQLAlchemy URL, e.g.
        ``postgresql+psycopg://…``, or a SQLite path), then ``verify`` the copy."""
        from mindory.library import copying

        return copying.copy_to(self.state, os.fspath(url), verify=verify, progress=progress)

    def verify(self, ref: str | None = None) -> VerifyReport:
        """Check every stored invariant (DESIGN §1) against the stored texts and maps."""
        from mindory.library import verify

        return verify.verify(self.state, ref)

    def embeddings(self) -> list[EmbeddingInfo]:
        """Every embedding space with its vector count; the current one is marked."""
        from mindory.library import vectors

        return vectors.embeddings(self.state)

    def current_embedding(self) -> EmbeddingInfo | None:
        """The embedding searches use (the one last used by :meth:`embed`), or None."""
        from mindory.library import vectors

        return vectors.current_embedding(self.state)

    def embedder(self, spec: str | Embedder | None = None) -> Embedder:
        """An embedder from a spec (``hashed``, ``model2vec:/path``, …), cached per library."""
        from mindory.library import vectors

        return vectors.embedder(self.state, spec)

    def embed(
        self,
        embedder: str | Embedder | None = None,
        *,
        context_header: bool | None = None,
        batch_size: int = EMBED_BATCH,
        progress: ProgressFn | None = None,
        update_index: bool = True,
        windows: bool | None = None,
        cross_language: bool | None = None,
    ) -> EmbedResult:
        """Embed the chunks of every book's current derivation that have no vector yet in this
        embedding (embedder + context-header flag), in batches, one transaction each; the
        embedding becomes the current one. Then the vector index is brought up to date
        (``update_index``). ``windows`` True also embeds each chunk's sentence windows once,
        so ``search(rerank=True)`` reads them back instead of embedding them per question;
        None keeps them up to date where the library keeps them. ``cross_language`` True
        has e5 read every Latin-script chunk too, so a question in Chinese or Japanese
        about such a book has a vector part (:mod:`mindory.search.across`); None alike."""
        from mindory.library import vectors

        return vectors.embed(
            self.state,
            embedder,
            context_header=context_header,
            batch_size=batch_size,
            progress=progress,
            update_index=update_index,
            windows=windows,
            cross_language=cross_language,
        )

    def index(self, *, rebuild: bool = False) -> IndexInfo:
        """Bring the vector index of the current embedding up to date (or rebuild it)."""
        from mindory.library import vectors

        return vectors.index(self.state, rebuild=rebuild)

    def reindex(self, *, rebuild: bool = False) -> IndexReport:
        """Bring the word index and the vector index up to date (or rebuild both)."""
        from mindory.library import vectors, wordindex
        from mindory.library.records import IndexReport
        from mindory.store.vectors import current_embedding_state

        words = wordindex.update_word_index(self.state, rebuild=rebuild)
        with self.state.engine.connect() as conn:
            has_vectors = current_embedding_state(conn) is not None
            if conn.dialect.name == "sqlite" and self.state.has_word_index(conn):
                # The postings of a large library, made now rather than by its next
                # search (mindory.search.word_store; nothing below its threshold).
                self.state.words.ensure(conn)
        index = vectors.index(self.state, rebuild=rebuild) if has_vectors else None
        return IndexReport(words, index)

    def place(self, ref: str, section: int) -> SectionPlace:
        """What locating needs about one section (current derivation's normalization)."""
        from mindory.library import locating

        return locating.place(self.state, ref, section)

    def locate(
        self,
        ref: str,
        *,
        cfi: str | None = None,
        section: int | None = None,
        offset: int | None = None,
        section_offset: int | None = None,
        utf16: bool = False,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> LocateResult:
        """A place in a book → section, block, page, and the chunks containing it.

        ``offset`` is in book source coordinates (plain text: from the file's start, as
        a chunk's ``source_start`` and a hit's ``char=N``; EPUB: from the section's start),
        ``section_offset`` from the start of ``section``; ``utf16``: both in UTF-16 units."""
        from mindory.library import locating

        return locating.locate(
            self.state,
            ref,
            cfi=cfi,
            section=section,
            offset=offset,
            section_offset=section_offset,
            utf16=utf16,
            page_size=page_size,
        )

    def locate_chunk(self, ref: str, chunk: str, *, page_size: int = DEFAULT_PAGE_SIZE) -> Locator:
        """The Locator of a chunk of the book (its id, or a unique prefix of it)."""
        from mindory.library import locating

        return locating.locate_chunk(self.state, ref, chunk, page_size=page_size)

    # --- OPDS catalogue (mindory.library.opds; docs/opds.md)

    def catalogue_page(
        self,
        *,
        sort: str = "title",
        author: str | None = None,
        language: str | None = None,
        book_format: str | None = None,
        query: str | None = None,
        page: int = 1,
        per_page: int = 50,
    ) -> opds.CataloguePage:
        """One page of books (by ``title`` or ``new``est first), narrowed by author,
        language (``und``: none), format and words of a title or author, with facet
        counts; details are read from the stored files on first need. A page past the
        end is a NotFoundError."""
        from mindory.library import opds as catalogue_opds

        return catalogue_opds.page(
            self.state,
            sort=sort,
            author=author,
            language=language,
            book_format=book_format,
            query=query,
            page_no=page,
            per_page=per_page,
        )

    def catalogue_entry(self, book_id: str) -> opds.CatalogueEntry:
        """One book of the catalogue by its full id (SHA-256), with its details."""
        from mindory.library import opds as catalogue_opds

        return catalogue_opds.entry(self.state, book_id)

    def catalogue_authors(self, *, page: int = 1, per_page: int = 50) -> opds.NamePage:
        """One page of authors by name, with how many books each has."""
        from mindory.library import opds as catalogue_opds

        return catalogue_opds.authors(self.state, page_no=page, per_page=per_page)

    def catalogue_languages(self) -> tuple[opds.NameCount, ...]:
        """Every language with how many books it has (``und``: books without one)."""
        from mindory.library import opds as catalogue_opds

        return catalogue_opds.languages(self.state)

    def catalogue_summary(self) -> opds.CatalogueSummary:
        """How many books, authors and languages the catalogue has."""
        from mindory.library import opds as catalogue_opds

        return catalogue_opds.summary(self.state)

    def catalogue_thumbnail(self, book_id: str) -> opds.Image:
        """The book's cover as a JPEG thumbnail (made once, then kept)."""
        from mindory.library import opds as catalogue_opds

        return catalogue_opds.thumbnail(self.state, book_id)

    def catalogue_passages(self, query: str, *, k: int = 50) -> opds.PassageResult:
        """The books whose passages match ``query`` (:meth:`search`), best first, each
        with its best passages (section, source span, chunk, Locator)."""
        from mindory.library import opds as catalogue_opds

        return catalogue_opds.passages(self.state, self.search, query, k=k)

    def catalogue_refresh_details(self) -> int:
        """Read the catalogue details of every book that has none yet (they are read on
        first need otherwise); returns how many books were read."""
        from mindory.library import opds as catalogue_opds

        return catalogue_opds.refresh_details(self.state)

    # --- Readium (mindory.library.manifest; docs/readium.md)

    def readium_manifest(
        self, ref: str, *, self_url: str, text_type: str | None = None
    ) -> ReadiumManifest:
        """The book as a Readium Web Publication Manifest (``self_url``: its absolute URL;
        ``text_type``: the media type a plain-text book's file is served with)."""
        from mindory.library import manifest

        return manifest.manifest(self.state, ref, self_url=self_url, text_type=text_type)

    def readium_positions(self, ref: str, *, text_type: str | None = None) -> ReadiumPositions:
        """The book's Readium positions list: one Locator per position, as Readium's
        toolkits count them, each with mindory's exact place (section, source offsets, CFI)."""
        from mindory.library import manifest

        return manifest.positions(self.state, ref, text_type=text_type)
