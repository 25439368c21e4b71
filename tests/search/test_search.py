"""Search: the FTS index follows the chunks, short CJK terms, the three modes, filters,
word matches that land on the source text exactly, Locators for every hit, a vector
index that is repaired or rebuilt whenever it differs from the database, embedding only
what is missing, and a real (tiny) model2vec model end to end."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, func, select, text

from mindory.errors import MindoryError, NotFoundError
from mindory.importers import load_book
from mindory.importers.cfi import CfiDocument
from mindory.library import Library, downgrade, upgrade
from mindory.search.analysis import analyze, light_stem
from mindory.search.fusion import rrf
from mindory.search.lexical import fts_expression, fts_quote
from mindory.search.vector_index import manifest_path
from mindory.store.models import ChunkRow, ChunkVectorRow, DerivationRow, EmbeddingRow
from mindory.text.records import ChunkSettings, NormalizeProfile, Settings
from tests.conftest import SAMPLES

NEWS = SAMPLES / "news-from-nowhere.txt"
QIAOSHI = SAMPLES / "qiaoshi-yanyi.txt"
WASTELAND = SAMPLES / "wasteland.epub"


@pytest.fixture(scope="module")
def lib(module_db_url: str) -> Iterator[Library]:
    """The three samples, imported and embedded once (hashed embedder), on each backend."""
    with Library.open(module_db_url) as library:
        for r in library.import_many([SAMPLES]):
            assert r.status == "created", r
        library.embed()
        yield library


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Library]:
    with Library.open(tmp_path / "lib.sqlite") as library:
        yield library


def _source_texts() -> dict[str, tuple[str, str]]:
    """Book sha → (format, decoded file text) for the plain-text samples."""
    out = {}
    for path in (NEWS, QIAOSHI):
        book = load_book(path, NormalizeProfile())
        out[book.sha256] = (book.format, book.source.text)
    return out


SOURCES = _source_texts()


def _fold(s: str) -> str:
    return " ".join(unicodedata.normalize("NFC", s).split()).casefold()


def _u16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


# --------------------------------------------------------------------------- terms


def test_query_terms_and_fts_expression() -> None:
    t = analyze('Who is "Hammond"? 寶玉說了 曹操 the of swimming')
    assert t.words == ("who", "is", "hammond", "the", "of", "swimming")
    assert t.cjk_runs == ("寶玉說了", "曹操")
    terms = t.fts_terms()
    # Words longer than six characters by their (stemmed) first six: fewer trigrams.
    assert {"hammon", "swim", "寶玉說", "玉說了", "寶玉說了"} <= set(terms)
    assert "the" not in terms and "of" not in terms  # stop words
    assert t.short_terms() == ["曹操"]  # two characters: expanded via the vocabulary
    assert fts_quote('say "hi"') == '"say ""hi"""'
    assert fts_expression([]) is None
    assert fts_expression(["ab", "abc"]) == '"abc" OR "ab"'
    only_stop = analyze("the of and")
    assert only_stop.content_words == ("the", "of", "and")  # nothing else: keep them
    assert [light_stem(w) for w in ("swimming", "lives", "stories", "fall", "rowed")] == [
        "swim",
        "liv",
        "story",
        "fall",
        "row",
    ]


def test_rrf_is_deterministic_and_weighted() -> None:
    fused = rrf(
        {"lexical": [(1, 9.0), (2, 8.0), (3, 7.0)], "vector": [(3, 0.9), (4, 0.8)]},
        {"lexical": 1.0, "vector": 1.0},
        k=10,
    )
    assert [f.id for f in fused][:2] == [3, 1]  # in both lists beats first in one
    assert fused[0].ranks == {"lexical": (3, 7.0), "vector": (1, 0.9)}
    heavy_lexical = rrf({"lexical": [(1, 1.0)], "vector": [(2, 1.0)]}, {"vector": 0.2}, k=10)
    assert [f.id for f in heavy_lexical] == [2, 1]  # missing weight = 0
    tie = rrf({"lexical": [(5, 1.0)], "vector": [(4, 1.0)]}, {"lexical": 1, "vector": 1}, k=10)
    assert [f.id for f in tie] == [4, 5]  # equal scores: smaller id first


# --------------------------------------------------------------------------- FTS sync


def _fts_ids(lib: Library, term: str) -> set[int]:
    with lib.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH :q"), {"q": fts_quote(term)}
        )
        return {int(r[0]) for r in rows}


def _ids_containing(lib: Library, term: str) -> set[int]:
    with lib.engine.connect() as conn:
        rows = conn.execute(select(ChunkRow.id, ChunkRow.text)).all()
    return {int(i) for i, t in rows if term.lower() in t.lower()}


def test_fts_follows_import_rederive_and_delete(fresh: Library) -> None:
    assert fresh.has_fts()
    fresh.import_book(NEWS)
    fresh.import_book(WASTELAND)
    for term in ("dick", "thames", "hammond", "april"):
        assert _fts_ids(fresh, term) == _ids_containing(fresh, term) != set()
    # A second derivation adds its chunks; search sees only the current one.
    fresh.import_book(NEWS, Settings(chunking=ChunkSettings(size=400, overlap=50)))
    assert _fts_ids(fresh, "thames") == _ids_containing(fresh, "thames")
    current = {c.row_id for c in fresh.chunks("news")}
    hits = fresh.search("Thames", k=50, mode="lexical", book="news").hits
    assert hits and all(h.row_id in current for h in hits)
    fresh.delete_book("news")
    assert _fts_ids(fresh, "hammond") == _ids_containing(fresh, "hammond") == set()
    assert _fts_ids(fresh, "thames") == _ids_containing(fresh, "thames") != set()  # Eliot's
    assert _fts_ids(fresh, "april") == _ids_containing(fresh, "april") != set()
    fresh.delete_book("waste")
    assert _fts_ids(fresh, "april") == _fts_ids(fresh, "thames") == set()


def test_query_languages_follow_the_books_in_the_library(fresh: Library) -> None:
    """Each search reads the books' analysis languages from a cache that is read again
    whenever the set of current derivations changes (an import, a delete)."""

    def languages() -> dict[int, str]:
        with fresh.engine.connect() as conn:
            return fresh.state.book_languages(conn)

    assert languages() == {}
    fresh.import_book(NEWS)
    first = languages()
    assert sorted(first.values()) == ["en"] and languages() is first  # cached
    fresh.import_book(QIAOSHI)
    assert sorted(languages().values()) == ["en", "zh"]
    assert fresh.search("周延儒", k=3, mode="lexical").hits  # analysed as Chinese
    fresh.delete_book("news")
    assert sorted(languages().values()) == ["zh"]


def test_migration_backfills_the_fts_index(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    with Library.open(db) as lib:
        lib.import_book(WASTELAND)
        downgrade(lib.engine, "0001")  # chunks stay, the FTS index goes
        with lib.engine.connect() as conn:
            assert not conn.exec_driver_sql(
                "SELECT 1 FROM sqlite_master WHERE name = 'chunks_fts'"
            ).first()
        upgrade(lib.engine)
    with Library.open(db) as lib:
        assert _fts_ids(lib, "cruellest") == _ids_containing(lib, "cruellest") != set()


# --------------------------------------------------------------------------- lexical


def test_two_character_chinese_query_finds_its_passages(lib: Library) -> None:
    result = lib.search("客氏", k=20, mode="lexical")
    assert len(result.hits) == 20
    for hit in result.hits:
        assert "客氏" in hit.locator.highlight
        assert [m.text for m in hit.matches] and all(m.text == "客氏" for m in hit.matches)
    # Every chunk that holds it is found by the trigram index (not only the first page).
    everything = lib.search("客氏", k=1000, mode="trigram")
    assert {h.row_id for h in everything.hits} == _ids_containing(lib, "客氏")
    traditional = lib.search("寶玉", mode="lexical").hits  # the name of the issue
    assert traditional
    # Simplified finds the Traditional text through the word index (OpenCC folding), and
    # through the trigram index, which a Chinese question asks in both scripts (issue 26):
    # the lists do not depend on the script typed.
    for mode in ("words", "trigram", "lexical"):
        simplified = lib.search("宝玉", mode=mode).hits
        assert simplified, mode
        assert [h.chunk for h in simplified] == [
            h.chunk for h in lib.search("寶玉", mode=mode).hits
        ]


def test_two_character_term_at_the_very_end_of_a_chunk(fresh: Library, tmp_path: Path) -> None:
    # The only occurrence ends the text: indexed as text + "\n", it still starts a trigram.
    path = tmp_path / "end.txt"
    path.write_text(
        "黛玉獨自坐在窗下，看那落花流水，心中好不淒涼。忽聽門外有人說話，原來是寶玉", "utf-8"
    )
    fresh.import_book(path)
    hits = fresh.search("寶玉", mode="lexical").hits
    assert len(hits) == 1 and hits[0].locator.highlight.endswith("寶玉")
    assert [m.text for m in hits[0].matches] == ["寶玉"]


def test_one_character_and_stop_word_queries_fall_back_to_a_scan(lib: Library) -> None:
    hits = lib.search("龍", k=5, mode="lexical").hits
    assert hits and all("龍" in h.locator.highlight for h in hits)
    hits = lib.search("of", k=5, mode="lexical").hits
    assert hits and all(re.search(r"\bof\b", h.locator.highlight, re.I) for h in hits)
    assert lib.search("!?", mode="lexical").hits == ()


# --------------------------------------------------------------------------- modes


def test_modes_and_scores(lib: Library) -> None:
    q = "April is the cruellest month"
    hybrid = lib.search(q, k=5)
    lexical = lib.search(q, k=5, mode="lexical")
    vector = lib.search(q, k=5, mode="vector")
    assert hybrid.mode == "hybrid" and hybrid.embedding is not None
    for result in (hybrid, lexical, vector):
        assert result.hits[0].book_title == "The Waste Land"
        assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
        scores = [h.score for h in result.hits]
        assert scores == sorted(scores, reverse=True)
    assert all(h.scores["vector"] is None for h in lexical.hits)
    assert all(h.scores["lexical"] is None for h in vector.hits)
    assert all(-1.0 <= h.score <= 1.0 for h in vector.hits)  # cosine similarity
    top = hybrid.hits[0]
    # English: the word index and the vectors rank it; the trigram list, which fusion
    # gives no weight in English, is not asked for (lexical mode neither).
    assert top.scores["words"] is not None and top.scores["vector"] is not None
    assert top.scores["words"].rank == 1
    assert all(h.scores["lexical"] is None for h in hybrid.hits)
    with pytest.raises(MindoryError, match="unknown search mode"):
        lib.search(q, mode="semantic")
    with pytest.raises(MindoryError, match="k must be"):
        lib.search(q, k=0)


def test_hybrid_without_vectors_is_lexical_with_a_warning(fresh: Library) -> None:
    fresh.import_book(WASTELAND)
    result = fresh.search("cruellest month")
    assert result.hits and result.warnings and "embed" in result.warnings[0]
    with pytest.raises(MindoryError, match="mindory embed"):
        fresh.search("cruellest month", mode="vector")


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
def test_a_pasted_quote_comes_back_first(lib: Library, mode: str) -> None:
    """A passage copied from the book (its line breaks and case changed) finds the chunk
    that holds it verbatim first, ahead of chunks that merely share its words."""
    chunk = next(c for c in lib.chunks("news") if "Hammersmith" in c.text and len(c.text) > 300)
    start = chunk.text.index("Hammersmith")
    quote = chunk.text[max(0, start - 40) : start + 30]
    pasted = "  " + quote.upper().replace(" ", "\n", 2) + " "
    hits = lib.search(pasted, k=5, mode=mode).hits
    texts = {c.id: c.text for c in lib.chunks("news")}
    first = " ".join(texts[hits[0].chunk].split()).lower()
    assert " ".join(quote.split()).lower() in first
    # A short query is never taken for a quote.
    assert lib.search("Hammersmith", k=3, mode=mode).hits


def test_book_and_section_filters(lib: Library) -> None:
    for mode in ("hybrid", "lexical", "vector"):
        only_news = lib.search("the river and the boat", k=10, mode=mode, book="news")
        assert only_news.hits and {h.book_title for h in only_news.hits} == {"News from Nowhere"}
        in_section = lib.search("the river and the boat", k=10, mode=mode, book="news", section=24)
        assert in_section.hits and {h.section for h in in_section.hits} == {24}
        assert in_section.section == 24 and in_section.book == only_news.book
    with pytest.raises(MindoryError, match="needs a book"):
        lib.search("river", section=3)
    with pytest.raises(NotFoundError, match="no section 99"):
        lib.search("river", book="news", section=99)


# --------------------------------------------------------------------------- places


QUERIES = [
    "what are the Houses of Parliament used for now",
    "Dung Market",
    "魏忠賢請客氏到私宅吃酒",
    "李自成夢見崇禎皇帝帶人來拿他",
    "April is the cruellest month, breeding lilacs",
    "hyacinth girl",
]


@pytest.mark.parametrize("query", QUERIES)
def test_every_hit_is_an_exact_place_and_its_matches_are_its_words(
    lib: Library, query: str
) -> None:
    terms = analyze(query)
    result = lib.search(query, k=10)
    assert result.hits
    for hit in result.hits:
        loc = hit.locator
        data = loc.to_json()
        assert data["chunk"] == hit.chunk and data["section"] == hit.section
        section = lib.section(hit.book, hit.section).info
        if hit.book in SOURCES:  # plain text: file-global source positions
            source = SOURCES[hit.book][1]
            assert data["locations"]["fragments"] == [f"char={loc.source_start},{loc.source_end}"]
            assert loc.byte_start is not None  # ASCII and Big5-HKSCS: checked in test_locate
        else:  # EPUB: section-local positions, CFIs
            source = lib.section(hit.book, hit.section).source_text
            assert loc.cfi and loc.cfi_epubjs and loc.partial_cfi
        assert loc.highlight == source[loc.source_start : loc.source_end]
        assert loc.utf16_start == _u16(source[: loc.source_start])
        assert loc.utf16_end == _u16(source[: loc.source_end])
        before = max(section.source_start, loc.source_start - 64)  # clipped at the section
        assert loc.text_before == source[before : loc.source_start]
        for m in hit.matches:
            word = source[m.source_start : m.source_end]
            assert word == m.text
            assert loc.source_start <= m.source_start < m.source_end <= loc.source_end
            assert (m.utf16_start, m.utf16_end) == (
                _u16(source[: m.source_start]),
                _u16(source[: m.source_end]),
            )
            # The word, modulo normalization (case, whitespace, NFC), is a query term.
            folded = _fold(word)
            assert any(folded.startswith(w) for w in terms.words) or any(
                folded in run for run in terms.cjk_runs
            ), (word, terms)
        if hit.matches:
            assert any(m.text for m in hit.matches)


def test_hit_matches_cover_every_occurrence_in_the_chunk(lib: Library) -> None:
    hit = lib.search("Parliament House", k=1, mode="lexical").hits[0]
    chunk = hit.locator.highlight
    found = [(m.source_start - hit.locator.source_start, m.text) for m in hit.matches]
    expected = [
        (m.start(), m.group())
        for m in re.finditer(r"(?<!\w)(?:parliament|house)\w*", chunk, re.IGNORECASE)
    ]
    assert found == expected


def test_epub_hit_cfi_resolves_back_to_the_hit(lib: Library) -> None:
    hit = lib.search("hyacinth girl", k=1, book="waste").hits[0]
    located = lib.locate(hit.book, cfi=hit.locator.cfi)
    assert located.position["section"] == hit.section
    assert located.position["source"]["position"] == hit.locator.source_start
    assert located.range_end == hit.locator.source_end
    assert hit.chunk in {c.id for c in located.chunks}
    section = lib.section(hit.book, hit.section)
    doc = CfiDocument.from_json(str(section.cfi_table), section.source_text)
    assert doc.resolve(hit.locator.cfi) == (hit.locator.source_start, hit.locator.source_end)


def test_locate_section_offsets_and_chunks(lib: Library) -> None:
    book = lib.book("qiaoshi")
    section = lib.section(book.id, 5)
    full = SOURCES[book.id][1]
    local = 1234
    got = lib.locate("qiaoshi", section=5, section_offset=local)
    pos = section.info.source_start + local
    # ``offset`` is book source coordinates (file-global for plain text, as ``char=N``),
    # with or without the section; ``section_offset`` counts from the section's start.
    assert lib.locate("qiaoshi", section=5, offset=pos).to_json() == got.to_json()
    assert lib.locate("qiaoshi", offset=pos).to_json() == got.to_json()
    assert got.position["source"]["position"] == pos
    assert got.position["source"]["utf16Position"] == _u16(full[:pos])
    assert got.position["locations"]["fragments"] == [f"char={pos}"]
    assert got.chunks and all(c.source_start <= pos < c.source_end for c in got.chunks)
    # The same place in UTF-16 units of the section (the sample has astral characters).
    u16 = _u16(section.source_text[:local])
    again = lib.locate("qiaoshi", section=5, section_offset=u16, utf16=True)
    assert again.position["source"]["position"] == pos
    book_u16 = _u16(full[:pos])
    assert lib.locate("qiaoshi", offset=book_u16, utf16=True).to_json() == again.to_json()
    with pytest.raises(MindoryError, match="outside section"):
        lib.locate("qiaoshi", section=5, offset=10**7)
    with pytest.raises(MindoryError, match="either a CFI"):
        lib.locate("qiaoshi")
    with pytest.raises(MindoryError, match="plain text"):
        lib.locate("qiaoshi", cfi="epubcfi(/6/2!/4/2/1:0)")
    chunk = lib.chunks("qiaoshi", section=5)[2]
    loc = lib.locate_chunk("qiaoshi", chunk.id[:10])
    assert (loc.source_start, loc.source_end, loc.chunk) == (
        chunk.source_start,
        chunk.source_end,
        chunk.id,
    )
    assert (loc.byte_start, loc.byte_end) == (chunk.byte_start, chunk.byte_end)
    with pytest.raises(NotFoundError):
        lib.locate_chunk("qiaoshi", "ffffffffffff")


# --------------------------------------------------------------------------- vectors


def _vector_count(lib: Library) -> int:
    with lib.engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(ChunkVectorRow)) or 0)


def _current_chunks(lib: Library) -> int:
    with lib.engine.connect() as conn:
        return int(
            conn.scalar(
                select(func.count())
                .select_from(ChunkRow)
                .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                .where(DerivationRow.is_current.is_(True))
            )
            or 0
        )


def test_embed_only_what_is_missing(fresh: Library) -> None:
    fresh.import_book(WASTELAND)
    first = fresh.embed()
    assert first.embedded == first.total == _current_chunks(fresh) == _vector_count(fresh)
    assert first.embedding.embedder_id == "hashed-ngram-v1-384" and first.embedding.current
    assert fresh.embed().embedded == 0
    # (an import embeds its new chunks itself; embed=False leaves them to embed())
    news = fresh.import_book(NEWS, embed=False)
    assert news.embedded == 0 and news.embedding is None
    assert fresh.embed().embedded == news.chunks
    seen: list[tuple[str, int, int]] = []
    redo = fresh.import_book(
        NEWS, Settings(chunking=ChunkSettings(size=500, overlap=50)), embed=False
    )
    again = fresh.embed(batch_size=100, progress=lambda *a: seen.append(a))
    assert again.embedded == redo.chunks
    assert seen[0] == ("embed", 0, redo.chunks) and seen[-1] == ("embed", redo.chunks, redo.chunks)
    assert len(seen) >= redo.chunks // 100
    # Making the old derivation current again needs no new vectors.
    back = fresh.import_book(NEWS)
    assert back.made_current and back.embedded == 0
    assert fresh.embed().embedded == 0
    # A new derivation imported by default is embedded as part of the import.
    third = fresh.import_book(NEWS, Settings(chunking=ChunkSettings(size=300, overlap=50)))
    assert third.embedded == third.chunks and third.embedding == first.embedding.fingerprint
    assert fresh.embed().embedded == 0
    info = fresh.index()
    assert info.count == _current_chunks(fresh) and info.status in ("current", "loaded")


def test_context_header_is_its_own_embedding_and_keeps_chunk_ids(fresh: Library) -> None:
    fresh.import_book(WASTELAND)
    ids = [c.id for c in fresh.chunks("waste")]
    plain = fresh.embed()
    headed = fresh.embed(context_header=True)
    assert headed.embedded == plain.embedded
    assert headed.embedding.fingerprint != plain.embedding.fingerprint
    assert headed.embedding.embedder_id == plain.embedding.embedder_id
    assert [c.id for c in fresh.chunks("waste")] == ids  # the embedder is not in chunk ids
    assert headed.index is not None and headed.index.embedder.endswith("+context-header")
    assert fresh.current_embedding() == next(e for e in fresh.embeddings() if e.context_header)
    assert fresh.embed().embedded == 0  # keeps the current (headed) embedding
    with fresh.engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(EmbeddingRow)) == 2


def test_index_file_is_rebuilt_when_corrupt(fresh: Library) -> None:
    fresh.import_book(WASTELAND)
    built = fresh.embed().index
    assert built is not None and built.status == "built"
    path = fresh.index_path
    assert path is not None and path.exists() and manifest_path(path).exists()
    want = fresh.search("cruellest month", k=3, mode="vector").to_json()
    path.write_bytes(b"not a faiss index at all")
    with Library.open(fresh.path) as other:
        assert other.index().status == "rebuilt"
        assert other.search("cruellest month", k=3, mode="vector").to_json()["hits"] == want["hits"]
    manifest_path(path).write_text("{broken", encoding="utf-8")
    with Library.open(fresh.path) as other:
        assert other.index().status == "rebuilt"
    with Library.open(fresh.path) as other:
        assert other.index().status == "loaded"  # and now it matches again
        assert other.index(rebuild=True).status in ("rebuilt", "built")


def test_a_book_deleted_behind_the_index_is_never_served(fresh: Library) -> None:
    fresh.import_book(WASTELAND)
    fresh.import_book(NEWS)
    fresh.embed()
    assert {h.book_title for h in fresh.search("the", k=200, mode="vector").hits} == {
        "The Waste Land",
        "News from Nowhere",
    }
    news_rows = {c.row_id for c in fresh.chunks("news")}
    # Another writer deletes the book with plain SQL (no mindory involved).
    engine = create_engine(f"sqlite:///{fresh.path}")
    with engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA foreign_keys = ON")
        conn.execute(text("DELETE FROM books WHERE title = 'News from Nowhere'"))
    engine.dispose()
    result = fresh.search("the", k=200, mode="vector")
    assert result.hits and {h.book_title for h in result.hits} == {"The Waste Land"}
    info = fresh.index()
    assert info.count == _vector_count(fresh) == _current_chunks(fresh)
    on_disk = json.loads(manifest_path(fresh.index_path or Path()).read_text())
    assert on_disk["count"] == info.count and on_disk["ids_sha256"] == info.ids_sha256
    assert not news_rows & {h.row_id for h in result.hits}


def test_delete_book_removes_its_vectors_from_db_and_index(fresh: Library) -> None:
    fresh.import_book(WASTELAND)
    fresh.import_book(NEWS)
    total = fresh.embed().total
    waste = len(fresh.chunks("waste"))
    fresh.delete_book("waste")
    assert _vector_count(fresh) == total - waste
    doc = json.loads(manifest_path(fresh.index_path or Path()).read_text())
    assert doc["count"] == total - waste  # written by delete_book itself
    with Library.open(fresh.path) as other:
        assert other.index().status == "loaded"


def test_another_process_embedding_is_noticed(fresh: Library) -> None:
    fresh.import_book(WASTELAND)
    fresh.embed()
    assert fresh.search("Thames", mode="vector").hits[0].book_title == "The Waste Land"
    with Library.open(fresh.path) as other:
        other.import_book(NEWS)
        other.embed()
    # The first library's in-memory index is stale now: it must notice and repair.
    titles = {h.book_title for h in fresh.search("Thames", k=50, mode="vector").hits}
    assert "News from Nowhere" in titles
    assert fresh.index().status == "current"


def test_model2vec_model_end_to_end(
    fresh: Library, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .test_embedders import make_model2vec

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "tiny-m2v"
    make_model2vec(folder, dim=16)
    path = tmp_path / "small.txt"
    path.write_text(
        "The whale swam under the ship.\n\nTea by the sea with a friend.\n\n"
        + "\n\n".join(f"Paragraph {i}: hello world, hello sea." for i in range(40)),
        "utf-8",
    )
    fresh.import_book(path, Settings(chunking=ChunkSettings(size=60, overlap=10, min_size=10)))
    result = fresh.embed(f"model2vec:{folder}")
    assert result.embedding.embedder_id.startswith("model2vec-tiny-m2v-")
    assert result.embedding.dim == 16 and result.embedded == result.total
    assert result.index is not None and result.index.dim == 16
    hits = fresh.search("whale ship", k=3, mode="vector").hits
    assert hits and "whale" in hits[0].locator.highlight
    assert fresh.search("whale ship", k=3).embedding == result.embedding.fingerprint
    # In a new process the spec recreates the same model from the folder.
    with Library.open(fresh.path) as other:
        again = other.search("whale ship", k=3, mode="vector").hits
        assert [h.chunk for h in again] == [h.chunk for h in hits]
    # Switching embedders switches the index (the manifest names the embedder).
    back = fresh.embed("hashed")
    assert back.index is not None and back.index.dim == 384 and back.index.status == "rebuilt"
    assert fresh.current_embedding() is not None
    assert fresh.current_embedding().spec == "hashed"  # type: ignore[union-attr]


def test_stored_vectors_are_float32_little_endian(lib: Library) -> None:
    with lib.engine.connect() as conn:
        chunk_id, blob = conn.execute(
            select(ChunkVectorRow.chunk_id, ChunkVectorRow.vector)
        ).first()  # type: ignore[misc]
        text_ = conn.scalar(select(ChunkRow.text).where(ChunkRow.id == chunk_id))
    stored = np.frombuffer(blob, dtype="<f4")
    assert stored.shape == (384,)
    again = lib.embedder("hashed").embed([str(text_)])[0]
    assert np.array_equal(stored, again.astype("<f4"))


def test_verify_checks_vector_lengths(fresh: Library) -> None:
    fresh.import_book(WASTELAND)
    fresh.embed()
    assert fresh.verify().ok
    with fresh.engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE chunk_vectors SET vector = :v WHERE chunk_id = (SELECT min(chunk_id) FROM chunk_vectors)"
            ),
            {"v": b"\x00" * 12},
        )
    report = fresh.verify()
    assert not report.ok and "not 384 float32 values" in report.problems[0]


def test_places_larger_than_the_cache_still_serve_their_search(lib: Library) -> None:
    cache = lib.state.places
    before = (cache.max_entries, cache.max_chars)
    cache.clear()
    cache.max_chars = 10  # every section is evicted as soon as it is stored
    try:
        result = lib.search("what are the Houses of Parliament used for now", k=5)
        assert len(result.hits) == 5 and all(h.locator.highlight for h in result.hits)
    finally:
        cache.max_entries, cache.max_chars = before
        cache.clear()


def test_embed_with_an_embedder_object_records_a_spec_that_recreates_it(fresh: Library) -> None:
    from mindory.search.embedders import HashedNgramEmbedder

    fresh.import_book(WASTELAND)
    result = fresh.embed(HashedNgramEmbedder(128))
    assert result.embedding.spec == "hashed:128" and result.embedding.dim == 128
    with Library.open(fresh.path) as other:  # another process: recreated from the spec
        assert other.search("cruellest", k=1, mode="vector").hits


def test_without_fts_lexical_search_scans_with_like(lib: Library) -> None:
    """What other databases (no FTS5) do: LIKE per term, ranked by matched terms."""
    before = lib.state._has_fts
    lib.state._has_fts = False
    try:
        result = lib.search("Parliament House Dung Market", k=5, mode="lexical")
    finally:
        lib.state._has_fts = before
    assert result.hits
    top = result.hits[0].locator.highlight.lower()
    assert all(w in top for w in ("parliament", "house", "dung", "market"))
    assert [m.text for m in result.hits[0].matches]


def test_a_hybrid_search_times_each_of_its_stages(lib: Library) -> None:
    """What bench_search.py reports per stage: the words list, the query's embedding and
    vector search (on the worker thread), the wait for them, fusion, arranging, locating."""
    timings = lib.search("the river and the houses of parliament", k=5).timings
    assert {"words", "embed", "vector", "wait", "fuse", "arrange", "locate", "total"} <= set(
        timings
    )
    assert all(v >= 0 for v in timings.values())
    assert timings["total"] >= timings["arrange"] + timings["locate"]
