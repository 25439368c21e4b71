"""One search, top to bottom: analyze → lexical ∥ vector → fuse → hits.

The only place a query is run. :class:`SearchServices` is what it needs from an open
library (engines, a worker pool, embedders, the vector index, the place cache); the
store answers every question about rows, :mod:`mindory.reading.locate` places each hit.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from mindory.errors import MindoryError
from mindory.reading.locate import DEFAULT_PAGE_SIZE
from mindory.search.across import across_list, across_reader
from mindory.search.analysis import QueryTerms, analyze
from mindory.search.embedders import Embedder, embed_queries
from mindory.search.fusion import CANDIDATES, Fused, floored_lists, fuse, rrf, weights_for
from mindory.search.hits import AlsoIn, SearchResult, build_hits
from mindory.search.lexical import lexical_search, quote_holders, scan
from mindory.search.minilm import CJK_LIMIT, cjk_share
from mindory.search.phrases import is_keyword_list, with_phrase_bonus, words_of
from mindory.search.rerank import (
    RERANK_DEPTH,
    WindowReader,
    best_cosines,
    rerank_order,
    window_readers,
    window_vectors,
)
from mindory.search.routed import SPEC as ROUTED_SPEC
from mindory.search.routed import query_block
from mindory.search.structure import Candidate, arrange
from mindory.search.words import both_scripts, has_kana, query_terms, to_simplified
from mindory.store import text_index
from mindory.store.fts import Filters
from mindory.store.places import PlaceCache
from mindory.store.reads import candidate_rows
from mindory.store.vectors import (
    EmbeddingState,
    chunk_ids_in,
    current_chunk_count,
    current_embedding_state,
    database_indexes_vectors,
)
from mindory.store.windows import single_windows_in_scope, stored_windows

# What only some searches need is imported where they need it: the vector index (FAISS,
# 50–90 ms) by the vector half, the ORM (~0.2 s) by a search restricted to a book.
if TYPE_CHECKING:
    from mindory.search.vectors import VectorStore

__all__ = ["LISTS_OF", "SEARCH_MODES", "SearchServices", "search", "trigram_list"]

# The ranked lists each mode fuses: words = the word index (BM25 over analysed terms),
# lexical = the trigram index (quotes, substrings), vector = the embeddings.
LISTS_OF: dict[str, tuple[str, ...]] = {
    "hybrid": ("words", "lexical", "vector"),
    "lexical": ("words", "lexical"),
    "vector": ("vector",),
    "words": ("words",),
    "trigram": ("lexical",),
}
SEARCH_MODES = tuple(LISTS_OF)


@dataclass(frozen=True)
class SearchServices:
    """What a search needs from an open library (:meth:`mindory.library.state.State.services`)."""

    engine: Engine
    aux_engine: Callable[[], Engine]  # a second pool for the vector half (see State)
    pool: Callable[[], concurrent.futures.ThreadPoolExecutor]
    embedder: Callable[[str], Embedder]
    vectors: VectorStore
    places: PlaceCache
    read_book: Callable[[str], bytes]  # a book file's bytes by SHA-256 (byte offsets)
    has_fts: Callable[[Connection], bool]
    words_missing: Callable[[Connection], int]  # current chunks without word index terms
    book_languages: Callable[[Connection], Mapping[int, str]]  # analysis language by book
    # The word list from the postings in memory (mindory.search.word_store), or None
    # where the database's word index answers.
    word_postings: Callable[
        [Connection, list[str], int, Filters], list[tuple[int, float]] | None
    ] = lambda conn, terms, limit, filters: None
    has_word_index: Callable[[Connection], bool] | None = None  # (cached by the library)
    # Stored one-window rows in a scope (store.windows.single_windows_in_scope), cached
    # by the library: (conn, windows key, book id, section id) → (row ids, matrix).
    single_windows: (
        Callable[[Connection, str, int | None, int | None], tuple[np.ndarray, np.ndarray]] | None
    ) = None


def search(
    sv: SearchServices,
    query: str,
    *,
    k: int = 10,
    mode: str = "hybrid",
    book: str | None = None,
    section: int | None = None,
    weights: Mapping[str, float] | None = None,
    rrf_k: int | None = None,
    candidates: int = CANDIDATES,
    page_size: int = DEFAULT_PAGE_SIZE,
    rerank: bool = False,
) -> SearchResult:
    """The ``k`` best chunks for ``query``, each with its Locator and word matches.

    ``mode``: ``hybrid`` (default: the word index, the trigram index and the vectors,
    fused), ``lexical`` (the two indexes fused), ``vector``; ``words`` and ``trigram``
    run one index alone. ``book`` (id, id prefix or title) and ``section`` (its
    ordinal; needs ``book``) restrict the search. Hybrid search without vectors is
    lexical search with a warning. Apparatus (contents pages, licences) ranks after the
    body; one text found in several books comes back once (:mod:`mindory.search.structure`).
    ``rerank``: the first hits are re-read sentence by sentence
    (:mod:`mindory.search.rerank`; a named mode: milliseconds with the windows stored).
    A Chinese or Japanese question over Latin-script books only meets e5's stored
    reading of their chunks (:mod:`mindory.search.across`).
    """
    if mode not in SEARCH_MODES:
        raise MindoryError(f"unknown search mode {mode!r}: use hybrid, vector or lexical")
    if k < 1:
        raise MindoryError(f"k must be 1 or more, not {k}")
    if section is not None and book is None:
        raise MindoryError("a section filter needs a book (--book)")
    t_start = perf_counter()
    timings: dict[str, float] = {}
    warnings: list[str] = []
    terms = analyze(query)
    timings["analysis"] = 1000 * (perf_counter() - t_start)  # (+ the word list's terms)
    n = max(k, candidates)
    lists: dict[str, list[tuple[int, float]]] = {}
    book_sha: str | None = None
    embedding: EmbeddingState | None = None
    uses = LISTS_OF[mode]
    languages: list[str] = ["en"]
    query_language = "latin"
    with sv.engine.connect() as conn:
        filters = Filters()
        if book is not None:
            from sqlalchemy.orm import Session

            from mindory.store.queries import search_filters

            with Session(bind=conn) as s:
                book_sha, filters = search_filters(s, book, section)
        by_book = sv.book_languages(conn)
        in_scope = (
            by_book.values()
            if filters.book_id is None
            else [by_book[filters.book_id]]
            if filters.book_id in by_book
            else []
        )
        languages = sorted(set(in_scope)) or ["en"]
        query_language = _query_language(query, languages)
        # A question in a Latin script over Chinese or Japanese books only (a reader of
        # a translation asking in their own language): the multilingual half reads it,
        # and it is fused as a question in the books' language (issue 26).
        read_as: str | None = None
        if query_language == "latin" and set(languages) <= {"zh", "ja"}:
            read_as = "cjk"
            query_language = "ja" if set(languages) == {"ja"} else "zh"
        elif query_language in ("zh", "ja") and in_scope and not set(languages) & {"zh", "ja"}:
            # The other way: a Chinese or Japanese question over Latin-script books only
            # meets e5's reading of their chunks, stored by embed --cross-language.
            read_as = "across"
        elif query_language == "ja":
            read_as = "ja"  # as written: a kanji-only question is not folded to Chinese
        vector_part: Future[list[tuple[int, float]]] | None = None
        if "vector" in uses:
            embedding = current_embedding_state(conn)
            if embedding is None:
                if mode == "vector":
                    raise MindoryError("no vectors yet: run mindory embed first")
                warnings.append("no vectors yet (run mindory embed): lexical results only")
            elif mode != "vector" and not terms.empty:
                # FAISS and SQLite both release the GIL: the vector search runs on a
                # worker thread (its own connection) while this one searches text.
                vector_part = sv.pool().submit(
                    _vector_search_own_connection,
                    sv,
                    embedding,
                    terms.query,
                    n,
                    filters,
                    timings,
                    read_as,
                )
            else:
                lists["vector"] = vector_search(
                    sv, conn, embedding, terms.query, n, filters, timings, read_as
                )
        if len(uses) > 1 and weights is None:
            weights = weights_for(
                embedding.embedder_id if embedding is not None else None,
                query_language,
                sum(len(run) for run in terms.cjk_runs),
                keyword_list=is_keyword_list(query),
            )
        words_complete = False
        try:
            if "words" in uses and not terms.empty:
                t = perf_counter()
                found = _word_list(sv, conn, query, languages, n, filters, warnings, timings)
                if found is not None:
                    lists["words"], words_complete = found
                timings["words"] = 1000 * (perf_counter() - t) - timings.get("terms", 0.0)
                timings["analysis"] += timings.pop("terms", 0.0)
            if "lexical" in uses and not terms.empty:
                t = perf_counter()
                if text_index.has_phrase_index(conn, sv.has_fts(conn)):
                    # A trigram list fusion gives no weight is not asked for (English
                    # and Japanese: ~20 ms at 100k chunks), unless the word index
                    # cannot stand in for it.
                    if (
                        not words_complete
                        or not lists.get("words")  # stop words only: the trigrams find them
                        or weights is None
                        or weights.get("lexical", 0) > 0
                    ):
                        # FTS5's trigram table, or pg_trgm asked the same (issue 24)
                        lists["lexical"] = trigram_list(
                            conn, terms, n, filters, chinese=query_language == "zh"
                        )
                else:
                    lists["lexical"] = scan(conn, terms, limit=n, filters=filters)
                timings["lexical"] = 1000 * (perf_counter() - t)
        except BaseException:
            if vector_part is not None:
                vector_part.cancel()
                concurrent.futures.wait([vector_part])
            raise
        if vector_part is not None:
            t = perf_counter()
            lists["vector"] = vector_part.result()
            timings["wait"] = 1000 * (perf_counter() - t)  # what the vector thread adds
        across_missing = timings.pop("across_missing", 0.0)
        if across_missing:
            warnings.append(
                "a Chinese or Japanese question about books in a Latin script is found by "
                "its words only until mindory embed --cross-language has e5 read those books"
                if across_missing == 1.0
                else "the library's embedder reads no language across scripts: this question "
                "is found by its words only (the default minilm+e5 can)"
            )
        if timings.pop("earlier_rule", 0.0):
            warnings.append(
                "the vectors were made before Chinese was read in Simplified: run mindory "
                "embed (it embeds again only the chunks the new rule reads differently)"
            )
        without = int(timings.pop("chunks_without_vectors", 0))
        if without:
            warnings.append(
                f"{without} chunk(s) have no vectors yet (mindory embed): they are found by "
                "the word and trigram indexes only"
            )
        t = perf_counter()
        if len(uses) > 1:
            if rrf_k is None:
                floored = floored_lists(
                    embedding.embedder_id if embedding is not None else None, query_language
                )
                fused = fuse(lists, weights, floored)
            else:
                fused = rrf(lists, weights, rrf_k)
        else:
            fused = [
                Fused(i, raw, {mode: (r, raw)})
                for r, (i, raw) in enumerate(lists.get(uses[0], []), start=1)
            ]
        timings["fuse"] = 1000 * (perf_counter() - t)
        t = perf_counter()
        # The phrase bonus offsets the vectors' pull towards paraphrase (phrases.py):
        # only where vectors take part.
        vector_weight = float((weights or {}).get("vector", 0.0)) if len(uses) > 1 else 0.0
        phrase_words = (
            words_of(query)
            if lists.get("vector") and vector_weight > 0 and query_language == "latin"
            else []
        )
        reader = (
            _rerank_reader(sv, mode, embedding, query_language, read_as, warnings)
            if rerank
            else None
        )
        rerun = reader is not None
        top, also, apparatus, quoted = _arrange(
            conn,
            fused,
            max(k, RERANK_DEPTH) if rerun else k,
            terms if "lexical" in uses else None,
            phrase_words,
            chinese=query_language == "zh",
        )
        timings["arrange"] = 1000 * (perf_counter() - t)
        if reader is not None:
            t = perf_counter()
            top = _reranked(conn, reader, query, read_as, top, quoted, apparatus, warnings)[:k]
            timings["rerank"] = 1000 * (perf_counter() - t)
        t = perf_counter()
        hits = build_hits(
            sv.places,
            sv.read_book,
            conn,
            top,
            terms,
            page_size,
            also=also,
            apparatus=apparatus,
        )
        timings["locate"] = 1000 * (perf_counter() - t)
    timings["total"] = 1000 * (perf_counter() - t_start)
    return SearchResult(
        query=query,
        mode=mode,
        k=k,
        hits=tuple(hits),
        terms=terms,
        book=book_sha,
        section=section,
        embedding=embedding.fingerprint if embedding is not None else None,
        embedder_id=embedding.embedder_id if embedding is not None else None,
        warnings=tuple(warnings),
        timings=timings,
    )


def _word_list(
    sv: SearchServices,
    conn: Connection,
    query: str,
    languages: Sequence[str],
    n: int,
    filters: Filters,
    warnings: list[str],
    timings: dict[str, float],
) -> tuple[list[tuple[int, float]], bool] | None:
    """The word index's ranking of the query, and whether every current chunk is in the
    index (None: this database has no word index). ``timings["terms"]``: the query's
    analysis into index terms (stemming, segmentation)."""
    has = sv.has_word_index
    if not (has(conn) if has else text_index.has_word_index(conn, sv.has_fts(conn))):
        return None
    missing = sv.words_missing(conn)
    if missing:
        warnings.append(
            f"{missing} chunk(s) have no word index yet (run mindory index): "
            "they are found by the trigram index and vectors only"
        )
    t = perf_counter()
    terms = query_terms(query, languages)
    timings["terms"] = 1000 * (perf_counter() - t)
    from_postings = sv.word_postings(conn, terms, n, filters)
    if from_postings is not None:
        return from_postings, not missing
    return text_index.words_search(conn, terms, limit=n, filters=filters), not missing


def _query_language(query: str, languages: Sequence[str]) -> str:
    """``ja`` (kana, or Han searched in Japanese books only), ``zh`` (mostly Han), or
    ``latin``: which fusion weights a query gets."""
    if cjk_share(query) <= CJK_LIMIT:
        return "latin"
    if has_kana(query) or set(languages) == {"ja"}:
        return "ja"
    return "zh"


def _rerank_reader(
    sv: SearchServices,
    mode: str,
    embedding: EmbeddingState | None,
    query_language: str,
    read_as: str | None,
    warnings: list[str],
) -> WindowReader | None:
    """What re-reads this question's hits in the second stage: the Latin-script reader for
    a Latin-script question read as one, else the Chinese and Japanese one; None (and a
    warning that says why) when the stage cannot run."""
    if mode == "vector" or embedding is None or read_as in ("across", "cjk"):
        why = (
            "it needs vectors"
            if embedding is None
            else "vector mode is the model's own list"
            if mode == "vector"
            else "a question across languages is not re-read (docs/search.md)"
        )
        warnings.append(f"rerank not applied: {why}")
        return None
    readers = window_readers(sv.embedder(embedding.spec))
    script = "latin" if query_language == "latin" and read_as is None else "cjk"
    if script not in readers:
        warnings.append(
            "rerank not applied: the library's embedder has no Chinese and Japanese model "
            "(the default minilm+e5 has)"
        )
        return None
    return readers[script]


def _reranked(
    conn: Connection,
    reader: WindowReader,
    query: str,
    read_as: str | None,
    top: list[Fused],
    quoted: frozenset[int],
    apparatus: Mapping[int, str | None],
    warnings: list[str],
) -> list[Fused]:
    """``top`` with its first :data:`RERANK_DEPTH` hits re-read (quotes found word for word
    and apparatus keep their places)."""
    head = top[:RERANK_DEPTH]
    ids = [f.id for f in head]
    stored = stored_windows(conn, reader.key, ids)
    todo = [i for i in ids if i not in stored]
    if todo:
        # Not stored (``mindory embed --windows`` was not run): read them now, alike to the bit.
        rows = candidate_rows(conn, todo)
        texts = [str(rows[i][2]) if i in rows else "" for i in todo]
        stored.update(zip(todo, window_vectors(texts, reader.embed, cjk=reader.cjk), strict=True))
        warnings.append(
            f"rerank embedded the sentence windows of {len(todo)} hits now; "
            "mindory embed --windows stores them once (the stage then takes milliseconds)"
        )
    scores = best_cosines(reader.question(query, read_as), [stored[i] for i in ids])
    movable = [f.id not in quoted and not apparatus.get(f.id) for f in head]
    order = rerank_order(list(range(len(head))), movable, scores)
    return [head[i] for i in order] + top[RERANK_DEPTH:]


def _across_vectors(
    sv: SearchServices,
    conn: Connection,
    embedding: EmbeddingState,
    query: str,
    n: int,
    filters: Filters,
    timings: dict[str, float],
) -> list[tuple[int, float]]:
    """The vector list of a Chinese or Japanese question over Latin-script books: e5's
    reading of the question against its stored reading of the chunks in scope
    (:mod:`mindory.search.across`). Without them it is empty, and
    ``timings["across_missing"]`` says why (1: not stored; 2: no model to read them) for
    the caller's warning."""
    t = perf_counter()
    reader = across_reader(sv.embedder(embedding.spec))
    if reader is None:
        timings["across_missing"] = 2.0
        return []
    if sv.single_windows is not None:
        ids, rows = sv.single_windows(conn, reader.key, filters.book_id, filters.section_id)
    else:
        ids, rows = single_windows_in_scope(
            conn, reader.key, book_id=filters.book_id, section_id=filters.section_id
        )
    timings["index"] = 1000 * (perf_counter() - t)
    if len(ids) == 0:
        timings["across_missing"] = 1.0
        return []
    t = perf_counter()
    question = reader.question(query, "ja" if has_kana(query) else None)
    timings["embed"] = 1000 * (perf_counter() - t)
    t = perf_counter()
    found = across_list(question, ids, rows, n)
    timings["vector"] = 1000 * (perf_counter() - t)
    return found


def trigram_list(
    conn: Connection, terms: QueryTerms, n: int, filters: Filters, *, chinese: bool
) -> list[tuple[int, float]]:
    """The trigram index's list for ``terms`` (:func:`~mindory.search.lexical.
    lexical_search`). A Chinese question is asked in Simplified and in Traditional
    (:func:`~mindory.search.words.both_scripts`), each chunk at its better score: the
    index holds each book's own script, and the list must not depend on the script the
    question was typed in (issue 26)."""
    if not chinese:
        return lexical_search(conn, terms, limit=n, filters=filters)
    best: dict[int, float] = {}
    for variant in both_scripts(terms.query):
        for i, score in lexical_search(conn, analyze(variant), limit=n, filters=filters):
            if i not in best or score > best[i]:
                best[i] = score
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:n]


def _arrange(
    conn: Connection,
    fused: list[Fused],
    k: int,
    quote_of: QueryTerms | None = None,
    phrase_words: Sequence[str] = (),
    *,
    chinese: bool = False,
) -> tuple[list[Fused], dict[int, list[AlsoIn]], dict[int, str | None], frozenset[int]]:
    """The first ``k`` of the fused list (its first ``max(3k, CANDIDATES)``, where verbatim
    quotes of ``quote_of`` are looked for) with those quotes first,
    apparatus after the body and duplicates folded (:func:`mindory.search.structure.
    arrange`); with ``phrase_words``, a phrase of the query held word for word counts
    first (:mod:`mindory.search.phrases`)."""
    pool = fused[: max(3 * k, CANDIDATES)]
    by_id = {f.id: f for f in pool}
    rows = candidate_rows(conn, list(by_id))
    # Quotes are looked for among these (lexical.quote_holders).
    # A Chinese quote is compared in Simplified on both sides (t2s keeps the length),
    # so it is found whichever script it was typed in.
    fold = to_simplified if chinese else str
    quotes = (
        quote_holders(
            analyze(fold(quote_of.query)) if chinese else quote_of,
            {i: fold(str(r[2])) for i, r in rows.items()},
        )
        if quote_of is not None
        else []
    )
    if phrase_words:
        texts = [str(rows[f.id][2]) if f.id in rows else None for f in pool]
        pool = [pool[n] for n in with_phrase_bonus([f.score for f in pool], texts, phrase_words)]
    candidates = {i: Candidate.of(i, r[5], r[2], r[4] or "") for i, r in rows.items()}
    order, folded = arrange([f.id for f in pool], candidates, quotes)
    top = [by_id[i] for i in order[:k]]
    also = {
        i: [AlsoIn(rows[j][5], rows[j][6], int(rows[j][3]), str(rows[j][1])) for j in folded[i]]
        for i in folded
        if i in by_id
    }
    apparatus = {i: c.apparatus for i, c in candidates.items()}
    return top, also, apparatus, frozenset(quotes)


def _vector_search_own_connection(
    sv: SearchServices,
    embedding: EmbeddingState,
    query: str,
    n: int,
    filters: Filters,
    timings: dict[str, float],
    read_as: str | None = None,
) -> list[tuple[int, float]]:
    # The caller holds a connection of the main pool: take this one from the other.
    with sv.aux_engine().connect() as conn:
        return vector_search(sv, conn, embedding, query, n, filters, timings, read_as)


def vector_search(
    sv: SearchServices,
    conn: Connection,
    embedding: EmbeddingState,
    query: str,
    n: int,
    filters: Filters,
    timings: dict[str, float],
    read_as: str | None = None,
) -> list[tuple[int, float]]:
    """``(chunk row id, cosine)`` of the ``n`` nearest chunks to the query's vector.
    ``read_as="cjk"``: a routed embedder reads the question with its Chinese and
    Japanese model whatever its script (:meth:`~mindory.search.routed.
    ScriptRoutedEmbedder.embed_query_as`); other embedders ignore it. ``read_as="across"``:
    a Chinese or Japanese question over Latin-script books (:func:`_across_vectors`)."""
    if read_as == "across":
        return _across_vectors(sv, conn, embedding, query, n, filters, timings)
    t = perf_counter()
    emb = sv.embedder(embedding.spec)
    if emb.id != embedding.embedder_id:
        if embedding.embedder_id not in tuple(getattr(emb, "earlier_ids", ())):
            raise MindoryError(
                f"the embedder {embedding.spec!r} is now {emb.id}, but the vectors were made "
                f"by {embedding.embedder_id}: run mindory embed --embedder {embedding.spec}"
            )
        # The same models under an earlier text rule (before Chinese was read in
        # Simplified): the question is read as that rule read it, until re-embedding.
        read_as = "cjk-written" if read_as == "cjk" else "written"
        timings["earlier_rule"] = 1.0
    if read_as == "cjk-written":
        read_as = "ja"  # e5, as written
    as_half = getattr(emb, "embed_query_as", None) if read_as is not None else None
    qv = (
        np.asarray(as_half([query], read_as))
        if as_half is not None
        else embed_queries(emb, [query])
    )
    timings["embed"] = 1000 * (perf_counter() - t)
    if database_indexes_vectors(conn):  # pgvector's HNSW index, no FAISS file
        return _database_vector_search(conn, embedding, qv, n, filters, timings)
    t = perf_counter()
    loaded = sv.vectors.ensure(conn, embedding)
    timings["index"] = 1000 * (perf_counter() - t)
    without = current_chunk_count(conn) - len(loaded.index)
    if without > 0:
        # Search does not wait for embedding: what has no vector yet is found by words.
        timings["chunks_without_vectors"] = float(without)
    if not np.any(qv):
        return []  # no features: every similarity would be 0
    t = perf_counter()
    allowed = chunk_ids_in(conn, filters) if filters.book_id is not None else None
    found = sv.vectors.search(loaded, qv, n, allowed)
    timings["vector"] = 1000 * (perf_counter() - t)
    return found


def _database_vector_search(
    conn: Connection,
    embedding: EmbeddingState,
    qv: np.ndarray,
    n: int,
    filters: Filters,
    timings: dict[str, float],
) -> list[tuple[int, float]]:
    """:func:`vector_search` on PostgreSQL (:mod:`mindory.store.pg_vectors`)."""
    from mindory.store.pg_vectors import indexed_count
    from mindory.store.pg_vectors import vector_search as pg_vector_search

    without = current_chunk_count(conn) - indexed_count(conn, embedding)
    if without > 0:
        timings["chunks_without_vectors"] = float(without)
    if not np.any(qv):
        return []
    t = perf_counter()
    query = qv[0] if qv.ndim == 2 else qv
    # The default embedder's two halves: one HNSW graph over both falls apart in two (no
    # link crosses between orthogonal halves), so each half has its own (revision 0008).
    block = query_block(query) if embedding.embedder_id.startswith(ROUTED_SPEC + "-") else None
    found = pg_vector_search(conn, embedding, query, n, filters, block=block)
    timings["vector"] = 1000 * (perf_counter() - t)
    return found
