"""paragraph, structured, parent-child and dialogue: the DESIGN §1 invariants, every rule.

Generated text goes through ``check_chunks`` (tests/test_chunking.py) with the size bound
raised to the longest chunk a strategy may legitimately make (an atomic block, a
heading kept with its text) and the overlap bound at zero; the corpus books go through
``check_fast``, the same invariants computed with numpy so whole books stay cheap.
"""

from __future__ import annotations

import json
import time
from bisect import bisect_right

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.importers import load_book
from mindory.text.chunking import chunk_book, chunk_section
from mindory.text.normalize import BlockTable, normalize
from mindory.text.offsets import Utf16Index
from mindory.text.records import (
    HEADING,
    PARAGRAPH,
    PREFORMATTED,
    TABLE_ROW,
    Book,
    Chunk,
    ChunkSettings,
    NormalizeProfile,
    Section,
    Settings,
)
from mindory.text.strategies import (
    ATOMIC_REASONS,
    R_CLUSTER,
    R_HEADING,
    Plan,
    _section_units,  # the vectorized and the general unit paths
    _tiles,
    _units,
    atomic_regions,
    chunk_context_header,
    chunk_stats,
    context_header,
    context_source_span,
    dialogue_spans,
    find_turns,
    paragraph_spans,
    parent_child_spans,
    plan_section,
    span_stats,
    structured_spans,
    toc_path,
)
from tests.conftest import corpus_file
from tests.strategies import PIECES, messy_long_text

from .test_chunking import WS, check_chunks

STRATEGIES = ("paragraph", "structured", "parent-child", "dialogue")
UNBOUNDED = (*ATOMIC_REASONS, R_HEADING, R_CLUSTER)

# Pieces that make headings, speakers, chat turns, fences and separators.
EXTRA = [
    "\n\n",
    "\n\nCHAPTER II\n\n",
    "\n\nROMEO\n\n",
    "\n\nJULIET.\n\n",
    "\n\nNurse\n\n",
    "\n\nFRIAR LAURENCE. ",
    "\n\n> ",
    "\n> ",
    "\n\n---\n\n",
    "\n```\n",
    "```",
    "Ay, me! ",
    "She speaks. ",
    "“好。”",
]
dialogue_text = st.lists(st.sampled_from(PIECES + EXTRA), min_size=30, max_size=400).map("".join)
SIZES = st.sampled_from([(20, 0), (40, 5), (45, 44), (60, 10), (100, 0), (200, 50), (800, 50)])
KINDS = st.lists(
    st.sampled_from([PARAGRAPH, PARAGRAPH, HEADING, TABLE_ROW, PREFORMATTED, "quote"]),
    max_size=40,
)


def _section(src: str, *, unwrap: bool = False, kinds: list[str] | None = None) -> Section:
    nt = normalize(src, NormalizeProfile(), unwrap=unwrap)
    blocks = nt.blocks
    if kinds:
        # Reassign block kinds (tables, preformatted, headings) to exercise every rule.
        ks = [kinds[i % len(kinds)] for i in range(len(blocks))]
        blocks = BlockTable(
            ks,
            [1 if k == HEADING else None for k in ks],
            blocks.starts,
            blocks.ends,
            [b.source_start for b in blocks],
            [b.source_end for b in blocks],
        )
    return Section(0, "", src, nt.text, nt.offset_map, blocks)


def _settings(strategy: str, size: int, min_size: int) -> ChunkSettings:
    return ChunkSettings(
        strategy=strategy,
        size=size,
        overlap=0,
        min_size=min_size,
        parent_size=size * 4,
        max_turn=size * 2,
    )


def check_rules(section: Section, chunks: list[Chunk], plan: Plan, cs: ChunkSettings) -> None:
    """The strategy rules on top of DESIGN §1 (no overlap, bounds, atomics, headings)."""
    text = section.normalized_text
    assert [(c.start, c.end) for c in chunks] == plan.spans
    for k, c in enumerate(chunks):
        n = c.end - c.start
        why = plan.reasons.get(k)
        if n > cs.size:
            assert why is not None, f"chunk {k} is {n} > {cs.size} without a reason"
        if n > cs.size + cs.min_size:
            assert why in UNBOUNDED, f"chunk {k} is {n} long: {why}"
        if k:
            assert chunks[k - 1].end <= c.start, "strategies do not overlap"
    starts = [c.start for c in chunks]
    # Atomic blocks (tables, preformatted, code fences) are never split.
    atomic = atomic_regions(text, section.blocks)
    for s, e, why in atomic:
        k = bisect_right(starts, s) - 1
        assert k >= 0 and chunks[k].start <= s and e <= chunks[k].end, f"{why} [{s}, {e}) split"
    # A heading ends a chunk only when another heading (or nothing) follows it
    # (headings inside a table or code fence are part of it; a heading-kind
    # block that starts a dialogue turn is that turn).
    turn_starts = set()
    if plan.strategy == "dialogue":
        turn_starts = {a for a, _ in find_turns(text, section.blocks)[1]}
    heads = [
        b
        for b in section.blocks
        if b.kind == HEADING
        and 0 < b.end - b.start <= cs.size // 2
        and b.start not in turn_starts
        and not any(s <= b.end and b.start <= e for s, e, _ in atomic)
    ]
    head_ends = {b.end for b in heads}
    head_starts = {b.start for b in heads}
    for c in chunks:
        if c.end in head_ends:
            rest = text[c.end :]
            q = c.end + len(rest) - len(rest.lstrip(WS))
            assert q == len(text) or q in head_starts, f"heading alone at the end of {c.text!r}"
    # Parent-child: children inside their parents; parents tile the text in order.
    if plan.strategy == "parent-child":
        parents = []
        for c in chunks:
            assert c.context is not None
            ps, pe = c.context
            assert ps <= c.start and c.end <= pe, "child outside its parent"
            if not parents or parents[-1] != (ps, pe):
                parents.append((ps, pe))
        for (_, b), (c2, _) in zip(parents, parents[1:]):
            assert b <= c2
        for ps, pe in parents:
            assert pe - ps <= max(cs.parent_size, cs.size) + cs.min_size or any(
                plan.reasons.get(k) in UNBOUNDED
                for k, c in enumerate(chunks)
                if c.context == (ps, pe)
            )
    else:
        assert all(c.context is None for c in chunks)


def run(
    section: Section, cs: ChunkSettings, utf16: Utf16Index | None = None
) -> tuple[list[Chunk], Plan]:
    plan = plan_section(section.normalized_text, section.blocks, cs)
    chunks = chunk_section(section, cs, book_sha256="0" * 64, fingerprint="f", utf16=utf16)
    return chunks, plan


def book_utf16(book: Book) -> Utf16Index | None:
    """Plain-text positions are file-global: UTF-16 needs the whole file (as chunk_book does)."""
    return Utf16Index(book.source.text) if book.format == "txt" else None


def check_all(src: str, section: Section, cs: ChunkSettings) -> tuple[list[Chunk], Plan]:
    chunks, plan = run(section, cs)
    bound = max([cs.size, *(c.end - c.start for c in chunks)])
    # check_chunks: spans, source spans, UTF-16, graphemes, coverage; overlap bound 0.
    check_chunks(src, section, chunks, ChunkSettings(size=max(bound, 20), overlap=0, min_size=0))
    check_rules(section, chunks, plan, cs)
    again, plan2 = run(section, cs)
    assert again == chunks and plan2 == plan, "not deterministic"
    return chunks, plan


# --------------------------------------------------------------------------- generated text


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(src=messy_long_text, sizes=SIZES, unwrap=st.booleans())
@settings(max_examples=120, deadline=None)
def test_invariants_on_generated_text(
    strategy: str, src: str, sizes: tuple[int, int], unwrap: bool
) -> None:
    cs = _settings(strategy, *sizes)
    check_all(src, _section(src, unwrap=unwrap), cs)


@pytest.mark.parametrize("strategy", STRATEGIES)
@given(src=dialogue_text, sizes=SIZES, kinds=KINDS)
@settings(max_examples=120, deadline=None)
def test_invariants_with_tables_fences_speakers(
    strategy: str, src: str, sizes: tuple[int, int], kinds: list[str]
) -> None:
    cs = _settings(strategy, *sizes)
    check_all(src, _section(src, kinds=kinds), cs)


@given(src=dialogue_text, sizes=SIZES)
@settings(max_examples=150, deadline=None)
def test_dialogue_turns_stay_whole(src: str, sizes: tuple[int, int]) -> None:
    cs = _settings("dialogue", *sizes)
    section = _section(src)
    chunks, plan = check_all(src, section, cs)
    kind, turns = find_turns(section.normalized_text, section.blocks)
    if len(turns) < 3:
        assert plan.strategy == "paragraph"
        return
    text = section.normalized_text
    starts = [c.start for c in chunks]
    for a, b in turns:
        body = text[a:b].strip(WS)
        if not body or len(body) > max(cs.max_turn, cs.size):
            continue
        k = bisect_right(starts, a + (len(text[a:b]) - len(text[a:b].lstrip(WS))))
        c = chunks[k - 1]
        assert c.start <= a + len(text[a:b]) - len(text[a:b].lstrip(WS))
        assert c.end >= a + len(text[a:b].rstrip(WS)), f"turn split: {body!r}"


@given(src=dialogue_text, kinds=KINDS, unwrap=st.booleans())
@settings(max_examples=200, deadline=None)
def test_vectorized_units_equal_the_general_path(src: str, kinds: list[str], unwrap: bool) -> None:
    section = _section(src, kinds=kinds, unwrap=unwrap)
    text = section.normalized_text
    starts, ks = _tiles(text, section.blocks)
    assert _section_units(text, section.blocks) == _units(text, starts, ks)
    assert _section_units(text, list(section.blocks)) == _units(text, starts, ks)


# --------------------------------------------------------------------------- rules


def test_structured_packs_blocks_and_keeps_headings_with_their_text() -> None:
    paras = [f"Paragraph {i} has a few words in it." for i in range(12)]
    text = "\n\n".join(paras[:5] + ["CHAPTER II"] + paras[5:])
    spans = structured_spans(text, None, size=200, min_size=10)
    chunks = [text[s:e] for s, e in spans]
    assert all(len(c) <= 200 for c in chunks)
    assert sum(c.count("Paragraph") for c in chunks) == 12
    assert not any(c.endswith("CHAPTER II") for c in chunks)
    assert any(c.startswith("CHAPTER II\n\nParagraph 5") for c in chunks)


def test_structured_cuts_long_blocks_by_sentences_then_clauses_then_hard() -> None:
    sentence = "This sentence has exactly some words in it. "
    text = (sentence * 40).strip()
    for s, e in structured_spans(text, None, size=300, min_size=10)[:-1]:
        assert text[s:e].endswith("in it.")
    zh = "他说，好的，我们走吧。" * 60
    for s, e in structured_spans(zh, None, size=100, min_size=5)[:-1]:
        assert zh[s:e].endswith("。")
    clauses = "one, two, three, four, five, six, seven, eight, nine, ten, " * 20
    for s, e in structured_spans(clauses.strip(), None, size=100, min_size=5)[:-1]:
        assert clauses[s:e].endswith(",")
    hard = "中" * 1000
    spans = structured_spans(hard, None, size=300, min_size=10)
    assert [e - s for s, e in spans] == [300, 300, 300, 100]


def test_structured_never_splits_a_code_fence() -> None:
    code = "\n\n".join(f"line_{i} = compute({i}, other)  # comment {i}" for i in range(80))
    src = f"Intro text here.\n\n```python\n\n{code}\n\n```\n\nAfter the fence. " * 2
    section = _section(src)
    cs = _settings("structured", 300, 20)
    chunks, plan = check_all(src, section, cs)
    fences = [c for c in chunks if "```python" in c.text]
    assert len(fences) == 2
    for k, c in enumerate(chunks):
        if "```python" in c.text:
            assert c.text.count("```") == 2 and "line_79" in c.text
            assert plan.reasons[k] == "code fence"
    # An unclosed fence is ordinary text.
    spans = structured_spans("```\n\n" + "word " * 200, None, size=100, min_size=10)
    assert len(spans) > 5


def test_tables_and_preformatted_blocks_are_never_split() -> None:
    rows = [f"Governor {i}: 17{i:02d}-17{i + 1:02d}" for i in range(60)]
    src = "\n\n".join(["A title line", "Some prose before the table."] + rows + ["After."])
    kinds = [HEADING, PARAGRAPH] + [TABLE_ROW] * 60 + [PREFORMATTED]
    section = _section(src, kinds=kinds)
    for strategy in STRATEGIES:
        cs = _settings(strategy, 200, 20)
        chunks, plan = check_all(src, section, cs)
        table = [c for c in chunks if "Governor 0:" in c.text]
        assert len(table) == 1 and "Governor 59" in table[0].text


def test_paragraph_one_block_per_chunk_short_ones_join_the_next() -> None:
    blocks = ["CHAPTER I", "Short.", "A paragraph that is long enough to stand alone here."]
    blocks += ["Another paragraph that is long enough to stand alone here."]
    blocks += ["Tiny."]
    text = "\n\n".join(blocks)
    out = [text[s:e] for s, e in paragraph_spans(text, None, size=200, min_size=20)]
    assert out == [
        "CHAPTER I\n\nShort.\n\nA paragraph that is long enough to stand alone here.",
        "Another paragraph that is long enough to stand alone here.\n\nTiny.",
    ]
    long_block = "A sentence of text. " * 30
    spans = paragraph_spans(long_block.strip(), None, size=100, min_size=20)
    assert all(long_block[s:e].endswith(".") for s, e in spans)
    assert all(e - s <= 120 for s, e in spans)


def test_chat_log_turns() -> None:
    turns = []
    for i in range(6):
        reply = f"Answer {i}, line one.\nAnswer {i}, line two."
        turns.append(f"> Question number {i}?\n{reply}\n---")
    src = "Preamble of the log.\n\n" + "\n\n".join(turns)
    section = _section(src)
    kind, found = find_turns(section.normalized_text, section.blocks)
    assert kind == "chat" and len(found) == 6
    cs = _settings("dialogue", 60, 5)
    chunks, plan = check_all(src, section, cs)
    for i in range(6):
        holder = [c for c in chunks if f"Question number {i}?" in c.text]
        assert len(holder) == 1 and f"Answer {i}, line two." in holder[0].text
    # A long reply is cut at max(max_turn, size); the question stays with its start.
    long_src = (
        "> Tell me a story?\n"
        + "It went on and on. " * 200
        + "\n---\n> Again?\nNo.\n> Why?\nBecause."
    )
    section = _section(long_src)
    chunks, plan = check_all(long_src, section, _settings("dialogue", 200, 20))
    assert chunks[0].text.startswith("> Tell me a story?\n\nIt went on")
    assert all(c.end - c.start <= 220 for c in chunks)


def test_dialogue_falls_back_to_paragraph_below_three_turns() -> None:
    text = "ROMEO\n\nBut soft, what light.\n\nJULIET\n\nAy me.\n\nSome narration here, long enough."
    assert find_turns(text)[1] == [] or len(find_turns(text)[1]) < 3
    assert dialogue_spans(text, None, 100, 10) == paragraph_spans(text, None, 100, 10)


def test_inline_speaker_labels_and_structural_words() -> None:
    text = "\n\n".join(
        ["ACT I", "SCENE II. A street."]
        + [
            f"{n}. Line {i} of the speech, spoken aloud."
            for i, n in enumerate(["ROMEO", "JULIET"] * 3)
        ]
    )
    kind, turns = find_turns(text)
    assert kind == "play" and len(turns) == 6
    assert all(text[a:b].startswith(("ROMEO.", "JULIET.")) for a, b in turns)


def test_parent_child_children_inside_parents() -> None:
    text = "\n\n".join(
        f"Paragraph {i}. " + "Words in a sentence. " * (i % 7 + 1) for i in range(60)
    )
    pairs = parent_child_spans(text, None, size=100, parent_size=400, min_size=10)
    parents = sorted({p for _, p in pairs})
    assert len(parents) > 5
    for (cs_, ce), (ps, pe) in pairs:
        assert ps <= cs_ < ce <= pe
        assert pe - ps <= 410
    # Children tile their parent (only whitespace between them).
    for ps, pe in parents:
        kids = [c for c, p in pairs if p == (ps, pe)]
        assert kids[0][0] == ps and kids[-1][1] == pe
        for (_, b), (c, _) in zip(kids, kids[1:]):
            assert not text[b:c].strip(WS)


def test_parent_child_chunks_carry_context_and_its_source_span() -> None:
    src = "\r\n\r\n".join(f"Paragraph {i}. " + "Some   words here. " * 8 for i in range(30))
    section = _section(src)
    cs = ChunkSettings(strategy="parent-child", size=120, parent_size=500, min_size=10)
    chunks, plan = check_all(src, section, cs)
    for c in chunks:
        assert c.context is not None
        ss, se = context_source_span(section, c)  # type: ignore[misc]
        assert ss <= c.source_start and c.source_end <= se
        assert (ss, se) == section.offset_map.source_span(*c.context)
    window = chunk_section(section, ChunkSettings(), book_sha256="0" * 64, fingerprint="f")
    assert context_source_span(section, window[0]) is None


# --------------------------------------------------------------------------- settings


def test_fingerprints_keep_only_the_fields_a_strategy_reads() -> None:
    base = Settings()
    assert base.to_dict()["chunking"] == {
        "strategy": "window",
        "size": 800,
        "overlap": 100,
        "min_size": 50,
    }
    # New fields never touch window fingerprints (golden files keep theirs).
    w = Settings(chunking=ChunkSettings(parent_size=999, max_turn=777))
    assert w.fingerprint == base.fingerprint
    s1 = Settings(chunking=ChunkSettings(strategy="structured", overlap=0))
    s2 = Settings(chunking=ChunkSettings(strategy="structured", overlap=100, parent_size=5000))
    assert s1.fingerprint == s2.fingerprint != base.fingerprint
    p1 = Settings(chunking=ChunkSettings(strategy="parent-child", size=400))
    p2 = Settings(chunking=ChunkSettings(strategy="parent-child", size=400, parent_size=2000))
    assert p1.fingerprint != p2.fingerprint
    d1 = Settings(chunking=ChunkSettings(strategy="dialogue", max_turn=1000))
    assert d1.fingerprint != Settings(chunking=ChunkSettings(strategy="dialogue")).fingerprint
    for s in (base, s2, p2, d1):
        assert Settings.from_dict(json.loads(s.canonical_json())).fingerprint == s.fingerprint
    with pytest.raises(ValueError, match="unknown chunking strategy"):
        ChunkSettings(strategy="semantic")


# --------------------------------------------------------------------------- helpers


def test_context_header_and_toc_path() -> None:
    assert context_header("Moby-Dick", ["Part I", "Chapter 1"]) == "Moby-Dick › Part I › Chapter 1"
    assert context_header("T", ["T", "", " A  b "], sep=" / ") == "T / A b"
    book = load_book(corpus_file("epub2_en_romeo-and-juliet-feedbooks.epub"))
    s = book.sections[4]
    assert toc_path(book.toc, s.ordinal)[-1] == s.title
    chunks = chunk_section(
        s, ChunkSettings(strategy="structured"), book_sha256=book.sha256, fingerprint="f"
    )
    header = chunk_context_header(book, chunks[0])
    assert header.startswith("Romeo and Juliet › ") and header.endswith(s.title)
    assert all(header not in c.text for c in chunks)  # never part of the spans


def test_chunk_stats() -> None:
    book = load_book(corpus_file("txt_en_news-from-nowhere_ascii_crlf.txt"))
    stats = chunk_stats(book.sections, ChunkSettings())
    assert set(stats) == {"window", *STRATEGIES}
    for st_ in stats.values():
        assert st_["chunks"] > 100
        assert st_["min"] <= st_["median"] <= st_["p95"] <= st_["max"]
        assert 0 <= st_["boundary_share"] <= 1
        assert st_["cut_inside_sentence"] == st_["chunks"] - (
            st_["ends"].get("end", 0)
            + st_["ends"].get("paragraph", 0)
            + st_["ends"].get("sentence", 0)
        )
        assert st_["over_max"] == sum(st_["over_max_reasons"].values())
    assert stats["structured"]["boundary_share"] > stats["window"]["boundary_share"] - 0.05
    text = "One. Two three\n\nFour five"
    got = span_stats([(text, None, [(0, 4), (5, 14), (16, 25)], {})], size=5)
    assert got["ends"] == {"end": 1, "paragraph": 1, "sentence": 1}
    assert got["over_max_reasons"] == {"unknown": 2}


# --------------------------------------------------------------------------- corpus

CORPUS_BOOKS = [
    "epub2_en_leaves-of-grass-gutenberg-calibre.epub",
    "epub2_en_romeo-and-juliet-feedbooks.epub",
    "epub2_zh-TW_shuihu-zhuan-haodoo.epub",
    "epub3_en_childrens-literature-nested-toc.epub",
    "epub3_en_georgia-cfi.epub",
    "epub3_en_moby-dick.epub",
    "epub3_en_pepys-diary-large-endnotes.epub",
    "epub3_en_wasteland-noterefs.epub",
    "epub3_ja_kusamakura-vertical-ruby.epub",
    "txt_en_news-from-nowhere_ascii_crlf.txt",
    "txt_zh-Hans_sanguo-yanyi_utf8_crlf.txt",
    "txt_zh-Hant_honglou-meng_big5-cp950_crlf.txt",
    "txt_zh-Hant_honglou-meng_gbk_crlf.txt",
    "txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt",
]
_WS_CODES = np.array([ord(c) for c in WS], dtype=np.uint32)
_SAMPLE_CHARS = 1_500_000  # per book: sections beyond this are sampled


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _is_boundary(text: str, p: int) -> bool:
    """Grapheme boundary, by segmenting from the last line feed before ``p`` (GB4/GB5)."""
    if p <= 0 or p >= len(text):
        return True
    lo = text.rfind("\n", max(0, p - 200), p)
    lo = max(0, p - 200) if lo < 0 else lo + 1
    if lo == p:
        return True
    pos = lo
    for m in regex.finditer(r"\X", text[lo : p + 16]):
        pos = lo + m.end()
        if pos >= p:
            return pos == p
    return False


def check_fast(book: Book, section: Section, chunks: list[Chunk]) -> None:
    """DESIGN §1 for whole books: the checks of check_chunks, vectorized."""
    text = section.normalized_text
    base = section.source_start
    if not chunks:
        assert not text.strip(WS)
        return
    starts = np.array([c.start for c in chunks])
    ends = np.array([c.end for c in chunks])
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(c.text == text[c.start : c.end] for c in chunks)
    assert bool((starts[1:] >= ends[:-1]).all()) and bool((ends > starts).all())
    src_s, src_e = section.offset_map.source_spans(starts, ends)
    assert np.array_equal(src_s + base, [c.source_start for c in chunks])
    assert np.array_equal(src_e + base, [c.source_end for c in chunks])
    src = section.source_text
    full = book.source.text if book.format == "txt" else src
    astral = np.concatenate(([0], np.cumsum(_codes(full) > 0xFFFF)))
    for c in chunks:
        assert c.text[-1] not in WS and src[c.source_end - base - 1] not in WS
        if c.text[0] in WS:
            assert not _is_boundary(text, c.start + 1)
        else:
            assert src[c.source_start - base] not in WS
        assert c.utf16_start == c.source_start + astral[c.source_start]
        assert c.utf16_end == c.source_end + astral[c.source_end]
        if not text.isascii():
            assert _is_boundary(text, c.start) and _is_boundary(text, c.end)
    # Coverage: every non-whitespace character lies in a chunk.
    codes = _codes(text)
    mark = np.zeros(len(text) + 1, dtype=np.int64)
    np.add.at(mark, starts, 1)
    np.add.at(mark, ends, -1)
    covered = np.cumsum(mark)[:-1] > 0
    visible = ~np.isin(codes, _WS_CODES)
    missing = np.flatnonzero(visible & ~covered)
    assert len(missing) == 0, f"character {missing[:1]} lies in no chunk"


def _sample(book: Book) -> list[Section]:
    total = sum(len(s.normalized_text) for s in book.sections)
    if total <= _SAMPLE_CHARS:
        return list(book.sections)
    step = -(-total // _SAMPLE_CHARS)
    return list(book.sections[::step])


@pytest.mark.parametrize("name", CORPUS_BOOKS)
def test_corpus_books(name: str) -> None:
    t0 = time.perf_counter()
    book = load_book(corpus_file(name))
    sections = _sample(book)
    u16 = book_utf16(book)
    for strategy in STRATEGIES:
        size = 400 if strategy == "parent-child" else 800
        cs = ChunkSettings(strategy=strategy, size=size)
        for section in sections:
            chunks, plan = run(section, cs, u16)
            check_fast(book, section, chunks)
            check_rules(section, chunks, plan, cs)
    # Determinism through the public door: the whole book twice, ids included.
    settings_ = Settings(chunking=ChunkSettings(strategy="structured"))
    small = book if len(sections) == len(book.sections) else None
    if small is not None:
        assert chunk_book(small, settings_) == chunk_book(small, settings_)
    assert time.perf_counter() - t0 < 30


def test_romeo_and_juliet_speeches_stay_with_their_speakers() -> None:
    book = load_book(corpus_file("epub2_en_romeo-and-juliet-feedbooks.epub"))
    cs = ChunkSettings(strategy="dialogue")
    speeches = 0
    for section in book.sections:
        text = section.normalized_text
        kind, turns = find_turns(text, section.blocks)
        chunks, plan = run(section, cs)
        check_fast(book, section, chunks)
        check_rules(section, chunks, plan, cs)
        blocks = list(section.blocks)
        starts = [c.start for c in chunks]
        for b, nxt in zip(blocks, blocks[1:]):
            # Feedbooks marks a speaker as a short paragraph before a quote block.
            label = text[b.start : b.end]
            if b.kind != PARAGRAPH or len(label) > 40 or nxt.kind != "quote":
                continue
            k = bisect_right(starts, b.start) - 1
            c = chunks[k]
            # The speaker and (the start of) the speech are in one chunk…
            assert c.start <= b.start and nxt.start < c.end, f"{label!r} lost its speech"
            if nxt.end - b.start <= cs.max_turn:
                assert nxt.end <= c.end, f"{label!r}: speech split"
            speeches += 1
        # …and every turn up to max_turn is whole.
        for a, e in turns:
            s, t = a, len(text[:e].rstrip(WS))
            if t - s <= cs.max_turn:
                k = bisect_right(starts, s) - 1
                assert chunks[k].start <= s and t <= chunks[k].end
    assert speeches >= 800, speeches


def test_georgia_table_is_one_chunk() -> None:
    book = load_book(corpus_file("epub3_en_georgia-cfi.epub"))
    for strategy in STRATEGIES:
        cs = ChunkSettings(strategy=strategy, size=400 if strategy == "parent-child" else 800)
        found = 0
        for section in book.sections:
            chunks, plan = run(section, cs)
            for s, e, why in atomic_regions(section.normalized_text, section.blocks):
                if why == "table":
                    found += 1
                    holder = [c for c in chunks if c.start <= s and e <= c.end]
                    assert len(holder) == 1
        assert found >= 1


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(
        st.sampled_from(list("ab .!?,;:\"')]\n\t\r\x0b") + ["  ", "Mr. ", '." ']), max_size=40
    ).map("".join),
    st.integers(min_value=0, max_value=200),
    st.integers(min_value=0, max_value=200),
)
def test_ascii_cut_search_equals_the_reverse_regex(text: str, a: int, b: int) -> None:
    """ASCII text skips the regex engine (rfind + checks): same match ends."""
    from mindory.text import strategies as strat

    start, stop = sorted((min(a, len(text)), min(b, len(text))))
    for rx in (strat._SENT_R, strat._CLAUSE_R):
        m = rx.search(text, start, stop)
        want = -1 if m is None else m.end()
        assert strat._last_ascii_match_end(rx is strat._SENT_R, text, start, stop) == want
