"""The window chunker: exact spans, coverage, overlap bound, graphemes, determinism."""

from __future__ import annotations

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.text.chunking import chunk_section, window_spans
from mindory.text.normalize import normalize
from mindory.text.offsets import Utf16Index
from mindory.text.records import ChunkSettings, NormalizeProfile, Section
from tests.strategies import messy_long_text, messy_text

WS = " \t\n\r\f\v\u3000\u00a0"


def _section(
    src: str, *, unwrap: bool = False, form: str | None = "NFC", start: int = 0
) -> Section:
    nt = normalize(src, NormalizeProfile(unicode_form=form), unwrap=unwrap)
    return Section(
        ordinal=0,
        title="",
        source_text=src,
        normalized_text=nt.text,
        offset_map=nt.offset_map,
        blocks=nt.blocks,
        source_start=start,
    )


def _boundaries(text: str) -> set[int]:
    out = {0}
    for m in regex.finditer(r"\X", text):
        out.add(m.end())
    return out


def check_chunks(src: str, section: Section, chunks: list, cs: ChunkSettings) -> None:  # type: ignore[type-arg]
    text = section.normalized_text
    omap = section.offset_map
    base = section.source_start
    bounds = _boundaries(text)
    covered = [False] * len(text)
    for k, c in enumerate(chunks):
        assert c.index == k
        assert c.text == text[c.start : c.end]
        assert c.text and c.text.rstrip(WS) == c.text
        # A chunk starts with whitespace only when it begins a grapheme cluster
        # with an extending mark (" \u0301"): never cut inside a cluster.
        leading_ws = c.text[0] in WS
        if leading_ws:
            assert len(c.text) > 1 and c.text[1] not in WS and c.start + 1 not in bounds
        # Source span: from the source of the first character to the end of the
        # source of the last, and never starting or ending on trimmed whitespace.
        assert (c.source_start - base, c.source_end - base) == omap.source_span(c.start, c.end)
        if not leading_ws:
            assert src[c.source_start - base] not in WS
        assert src[c.source_end - base - 1] not in WS
        u16 = Utf16Index(src)
        assert c.utf16_start == u16.to_utf16(c.source_start - base) + base
        assert c.start in bounds and c.end in bounds, "chunk cut inside a grapheme cluster"
        assert c.end - c.start <= cs.size + cs.min_size
        for i in range(c.start, c.end):
            covered[i] = True
        if k:
            prev = chunks[k - 1]
            assert c.start > prev.start
            assert prev.end - c.start <= cs.overlap, "overlap bound"
    for i, ch in enumerate(text):
        if ch not in WS:
            assert covered[i], f"character {i} {ch!r} lies in no chunk"


@given(messy_long_text, st.sampled_from([(60, 10, 5), (100, 0, 20), (200, 50, 50), (800, 100, 50)]))
@settings(max_examples=300, deadline=None)
def test_window_chunks_invariants(src: str, sizes: tuple[int, int, int]) -> None:
    size, overlap, min_size = sizes
    cs = ChunkSettings(size=size, overlap=overlap, min_size=min_size)
    section = _section(src, unwrap=True)
    chunks = chunk_section(section, cs, book_sha256="0" * 64, fingerprint="f")
    check_chunks(src, section, chunks, cs)


@given(messy_text, st.integers(min_value=0, max_value=10_000))
@settings(max_examples=200, deadline=None)
def test_file_global_positions(src: str, start: int) -> None:
    # Plain-text sections report file-global positions: shifting the section shifts spans.
    cs = ChunkSettings(size=40, overlap=10, min_size=5)
    prefix = "x" * start
    full = prefix + src
    section = _section(src, start=start)
    chunks = chunk_section(
        section, cs, book_sha256="0" * 64, fingerprint="f", utf16=Utf16Index(full)
    )
    local = chunk_section(_section(src), cs, book_sha256="0" * 64, fingerprint="f")
    assert [(c.source_start - start, c.source_end - start) for c in chunks] == [
        (c.source_start, c.source_end) for c in local
    ]
    for c in chunks:
        assert full[c.source_end - 1] not in WS


def test_snaps_to_paragraph_then_sentence_then_space() -> None:
    para = "First paragraph is here. " * 10
    text = para.strip() + "\n\n" + "Second one. " * 40
    spans = window_spans(text, size=300, overlap=0, min_size=10)
    assert text[spans[0][0] : spans[0][1]] == para.strip()  # cut at the paragraph break
    s, e = spans[1]
    assert text[s:e].endswith(".")  # sentence end
    words = "word " * 200
    s, e = window_spans(words, size=103, overlap=0, min_size=1)[0]
    assert words[s:e].endswith("word") and e <= 103


def test_chinese_sentence_enders_and_closing_quotes() -> None:
    text = "他说：「好。」" * 40
    for s, e in window_spans(text, size=50, overlap=0, min_size=5)[:-1]:
        assert text[s:e].endswith("。」")


def test_tail_joins_previous_chunk() -> None:
    text = "a" * 790 + " " + "b" * 20
    spans = window_spans(text, size=800, overlap=0, min_size=50)
    assert spans == [(0, len(text))]


def test_no_text_dropped_on_hard_cuts() -> None:
    text = "中" * 2000 + "👨‍👩‍👧" * 300
    spans = window_spans(text, size=777, overlap=77, min_size=50)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    bounds = _boundaries(text)
    assert all(s in bounds and e in bounds for s, e in spans)


def test_repeated_text_gets_the_right_copy() -> None:
    # Identical paragraphs: spans come from positions, not from searching text.
    src = "\r\n\r\n".join(["The same paragraph, word for word."] * 50)
    section = _section(src)
    chunks = chunk_section(
        section,
        ChunkSettings(size=100, overlap=20, min_size=10),
        book_sha256="0" * 64,
        fingerprint="f",
    )
    starts = [c.source_start for c in chunks]
    assert starts == sorted(set(starts))
    check_chunks(src, section, chunks, ChunkSettings(size=100, overlap=20, min_size=10))


def test_chunk_ids_are_stable_and_depend_on_settings() -> None:
    section = _section("Some text. " * 300)
    a = chunk_section(section, ChunkSettings(), book_sha256="a" * 64, fingerprint="f1")
    b = chunk_section(section, ChunkSettings(), book_sha256="a" * 64, fingerprint="f1")
    c = chunk_section(section, ChunkSettings(), book_sha256="a" * 64, fingerprint="f2")
    assert [x.id for x in a] == [x.id for x in b]
    assert not {x.id for x in a} & {x.id for x in c}
