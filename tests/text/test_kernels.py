"""The compiled loops equal their pure-Python/numpy references, on generated text.

``kernels`` runs wherever numba is installed (the ``fast`` extra; the dev extra the
suite runs with has it); the references run without it. Both must give the same clusters, normalized text,
offset maps, blocks and window spans, so a book imported on either machine
gets the same ids.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.text import chunking, kernels, normalize
from mindory.text.chunking import ChunkTable, make_chunks, window_span_array
from mindory.text.encoding import decode_bytes
from mindory.text.offsets import OffsetMap, OffsetMapError
from mindory.text.records import Section, chunk_id
from tests.conftest import corpus_file
from tests.strategies import PIECES, messy_text

if not kernels.AVAILABLE and os.environ.get("CI") == "true":  # pragma: no cover
    pytest.fail("numba is in the dev extra: the compiled loops must run in CI")
pytestmark = pytest.mark.skipif(not kernels.AVAILABLE, reason="numba is not installed")


@pytest.fixture(autouse=True, scope="module")
def _compiled_loaded() -> None:
    """Loaded: every caller takes the compiled path (the references run when patched off)."""
    kernels.jit()


# ASCII text with every whitespace/control shape, long enough to cross the
# 8-byte words the ASCII scan reads.
ascii_text = st.lists(
    st.sampled_from(list("ab .!?\"')") + ["  ", "\t", "\r", "\n", "\r\n", "\x0b", "\x0c", "\x01"]),
    max_size=300,
).map("".join)
# The shared pieces plus CJK, a curly quote and an astral character (UTF-32 codes).
unicode_pieces = st.lists(
    st.sampled_from([*PIECES, "天", "下", "’", "\U00020000"]), max_size=120
).map("".join)
any_text = st.one_of(ascii_text, unicode_pieces, messy_text)


def _reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "AVAILABLE", False)


@settings(max_examples=400, deadline=None)
@given(any_text)
def test_clusters_equal_numpy_reference(text: str) -> None:
    codes = normalize.text_codes(text)
    got = kernels.jit().clusters(codes)
    ref = normalize._clusters_numpy(codes)
    want = (ref.start, ref.end, ref.breaks, ref.has_ascii_space, ref.first_visible)
    for g, w in zip(got, want, strict=True):
        assert np.array_equal(g, w)


def test_clusters_across_the_scan_blocks() -> None:
    """Positions are found in blocks of 2**20 characters: a cluster may straddle two."""
    block = 1 << 20
    text = "x" * (block - 3) + " \r\n\r\n  y" + "z " * 50 + "  \t"
    codes = normalize.text_codes(text)
    got = kernels.jit().clusters(codes)
    ref = normalize._clusters_numpy(codes)
    assert np.array_equal(got[0], ref.start) and np.array_equal(got[1], ref.end)
    assert np.array_equal(got[2], ref.breaks)


@settings(max_examples=300, deadline=None)
@given(any_text, st.sampled_from([None, True, False]))
def test_normalize_equals_reference(text: str, unwrap: bool | None) -> None:
    fast = normalize.normalize(text, unwrap=unwrap)
    with pytest.MonkeyPatch.context() as mp:
        _reference(mp)
        slow = normalize.normalize(text, unwrap=unwrap)
    assert fast.text == slow.text
    assert np.array_equal(fast.offset_map.edit_array(), slow.offset_map.edit_array())
    assert list(fast.blocks) == list(slow.blocks)
    # Block source spans come from the clusters on the fast path: same as the map's.
    if len(fast.blocks):
        s, e = fast.offset_map.source_spans(fast.blocks.starts, fast.blocks.ends)
        assert [(b.source_start, b.source_end) for b in fast.blocks] == list(
            zip(s.tolist(), e.tolist())
        )


@settings(max_examples=300, deadline=None)
@given(
    any_text,
    st.integers(min_value=2, max_value=60),
    st.integers(min_value=0, max_value=30),
    st.integers(min_value=0, max_value=20),
)
def test_window_spans_equal_reference(text: str, size: int, overlap: int, min_size: int) -> None:
    overlap = min(overlap, size - 1)
    got = window_span_array(text, size, overlap, min_size)
    want = chunking._window_spans_py(text, size, overlap, min_size)
    assert [tuple(r) for r in got.tolist()] == want


def test_window_spans_equal_reference_on_a_corpus_book() -> None:
    raw = corpus_file("txt_zh-Hant_qiaoshi-yanyi_big5hkscs-astral_crlf.txt").read_bytes()
    text = normalize.normalize(decode_bytes(raw).text).text
    for size, overlap in ((800, 100), (120, 40), (37, 5)):
        got = window_span_array(text, size, overlap, 10)
        assert [tuple(r) for r in got.tolist()] == chunking._window_spans_py(
            text, size, overlap, 10
        )


@settings(max_examples=200, deadline=None)
@given(any_text)
def test_source_positions_equal_reference(text: str) -> None:
    nt = normalize.normalize(text)
    omap = nt.offset_map
    length = omap.normalized_length
    if length == 0:
        return
    starts = np.arange(0, length, dtype=np.int64)
    ends = np.arange(1, length + 1, dtype=np.int64)
    fast = omap.source_starts(starts), omap.source_ends(ends)
    with pytest.MonkeyPatch.context() as mp:
        _reference(mp)
        slow = omap.source_starts(starts), omap.source_ends(ends)
    assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1])


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ([(0, -1, 0, 1)], "negative"),
        ([(0, 0, 0, 0)], "empty edit"),
        ([(5, 1, 5, 1), (2, 1, 2, 1)], "backwards"),
        ([(2, 1, 3, 1)], "copy gap"),
    ],
)
def test_corrupt_maps_are_refused_with_the_kernel(edits: list, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(OffsetMapError, match=message):
        OffsetMap(edits, 10, 10)


def test_percentile_shortcut_matches_numpy() -> None:
    rng = np.random.default_rng(7)
    for _ in range(5000):
        values = rng.integers(0, 200, size=int(rng.integers(1, 50)))
        limit = int(rng.integers(40, 160))
        assert normalize._percentile_90_at_most(values, limit) == (
            float(np.percentile(values, 90)) <= limit
        )


_SIMPLE_RANGES = [
    (0x0, 0x2FF),
    (0x370, 0x482),
    (0x1E00, 0x1EFF),
    (0x2010, 0x2027),
    (0x2030, 0x205E),
    (0x3001, 0x3029),
    (0x3041, 0x3096),
    (0x30A1, 0x30FA),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xFF01, 0xFF5E),
]
simple_char = st.sampled_from(_SIMPLE_RANGES).flatmap(
    lambda r: st.integers(min_value=r[0], max_value=r[1]).map(chr)
)


@settings(max_examples=2000, deadline=None)
@given(simple_char, simple_char)
def test_simple_characters_never_join_a_cluster(a: str, b: str) -> None:
    """The fast grapheme test's ranges: two of them side by side are two clusters (CR LF aside)."""
    assert chunking._simple(a) and chunking._simple(b)
    clusters = regex.findall(r"\X", a + b)
    assert len(clusters) == (1 if (a, b) == ("\r", "\n") else 2)


def test_chunk_table_records_and_columns() -> None:
    text = "First paragraph here.\n\nSecond one, a little longer than the first."
    section = Section(0, "", text, text, OffsetMap([], len(text), len(text)), ())
    table = make_chunks(section, [(0, 21), (23, len(text))], book_sha256="a" * 64, fingerprint="f")
    assert isinstance(table, ChunkTable) and len(table) == 2
    first, second = table
    assert first.text == "First paragraph here." and second.index == 1
    assert first.id == chunk_id("a" * 64, 0, "f", 0, 21)
    assert table.ids == [first.id, second.id]
    assert table[-1] == second and table[0:1] == [first]
    assert list(table) == [table[0], table[1]] and table == [first, second]
    with pytest.raises(IndexError):
        table[2]
    empty = make_chunks(section, [], book_sha256="a" * 64, fingerprint="f")
    assert len(empty) == 0 and list(empty) == [] and empty.ids == []


@pytest.mark.parametrize(
    ("text", "dtype"),
    [
        ("plain ASCII", np.uint8),
        ("curly ’quotes’ and 天下", np.uint16),
        ("astral \U00020000", np.uint32),
    ],
)
def test_text_codes_use_the_narrowest_array(text: str, dtype: type) -> None:
    codes = normalize.text_codes(text)
    assert codes.dtype == dtype
    assert codes.tolist() == [ord(c) for c in text]
    assert normalize.codes_text(codes) == text


def test_path_choice_rents_before_it_buys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The references run until the process has normalized LOAD_AFTER code points."""
    monkeypatch.setattr(kernels, "LOAD_AFTER", 1000)
    monkeypatch.setattr(kernels, "_normalized", 0)
    monkeypatch.setattr(kernels, "_module", None)
    assert not kernels.use(600) and not kernels.loaded()
    assert kernels.use(600)  # 1,200 so far: from now on, compiled
    kernels.jit()
    assert kernels.loaded() and kernels.use(10)
    monkeypatch.setattr(kernels, "AVAILABLE", False)
    assert not kernels.use(10**9) and not kernels.loaded()
