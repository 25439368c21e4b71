"""OffsetMap, MapBuilder and Utf16Index: lookups, serialization, invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindory.text.offsets import MapBuilder, OffsetMap, OffsetMapError, Utf16Index
from tests.strategies import messy_text


def _example() -> tuple[str, str, OffsetMap]:
    src = "ab  c\r\nde\u0301f"
    b = MapBuilder("NFC")
    b.copy(src, 0, 3)
    b.delete(3, 4)
    b.copy(src, 4, 5)
    b.edit("\n\n", 5, 7)
    b.copy(src, 7, 11)
    text, omap = b.build()
    return src, text, omap


def test_builder_runs_and_lookups() -> None:
    src, text, omap = _example()
    assert text == "ab c\n\ndéf"
    omap.check(src, text)
    # Each normalized character maps to the smallest source range that produced it.
    spans = [omap.source_span(i, i + 1) for i in range(len(text))]
    assert spans == [(0, 1), (1, 2), (2, 3), (4, 5), (5, 7), (5, 7), (7, 8), (8, 10), (10, 11)]
    assert omap.source_span(0, len(text)) == (0, len(src))
    assert omap.source_span(3, 4) == (4, 5)  # "c": the deleted space is not inside
    assert omap.to_normalized(3) == 3  # deleted space maps to where it was removed
    assert omap.to_normalized(9) == 7  # combining mark folded into "é"
    assert omap.normalized_span(8, 10) == (7, 8)
    assert omap.source_span(2, 2) == (2, 2)


def test_serialization_round_trip_and_size() -> None:
    src, text, omap = _example()
    assert OffsetMap.from_bytes(omap.to_bytes()) == omap
    assert OffsetMap.from_json(omap.to_json()) == omap
    assert omap.to_bytes() == OffsetMap.from_bytes(omap.to_bytes()).to_bytes()
    # Size grows with edits, not with text length: a long copy-only map is tiny.
    long_map = OffsetMap([], 10_000_000, 10_000_000)
    assert len(long_map.to_bytes()) < 64


@pytest.mark.parametrize(
    "edits, n, s",
    [
        ([(0, 1, 0, 2)], 1, 1),  # runs past the source end
        ([(2, 1, 0, 1)], 3, 1),  # gap mismatch
        ([(0, 0, 0, 0)], 0, 0),  # empty edit
        ([(1, 1, 1, 1), (0, 1, 0, 1)], 2, 2),  # backwards
    ],
)
def test_bad_maps_are_refused(edits: list[tuple[int, int, int, int]], n: int, s: int) -> None:
    with pytest.raises(OffsetMapError):
        OffsetMap(edits, n, s)


def test_corrupt_bytes_are_refused() -> None:
    with pytest.raises(OffsetMapError):
        OffsetMap.from_bytes(b"\x01garbage")
    with pytest.raises(OffsetMapError):
        OffsetMap.from_json('{"v": 1, "n": 1}')


def test_lookups_out_of_range() -> None:
    _, text, omap = _example()
    with pytest.raises(IndexError):
        omap.to_source(len(text) + 1)
    with pytest.raises(IndexError):
        omap.source_span(3, 2)


@given(messy_text)
@settings(max_examples=200, deadline=None)
def test_utf16_index_matches_javascript_counting(text: str) -> None:
    index = Utf16Index(text)
    assert index.utf16_length == len(text.encode("utf-16-le")) // 2
    for i in range(len(text) + 1):
        u = index.to_utf16(i)
        assert u == len(text[:i].encode("utf-16-le")) // 2
        assert index.from_utf16(u) == i


def test_utf16_refuses_half_a_surrogate_pair() -> None:
    index = Utf16Index("a𡩋b")
    assert index.to_utf16(2) == 3
    with pytest.raises(IndexError):
        index.from_utf16(2)


@given(messy_text, st.sampled_from(["NFC", "NFKC", None]))
@settings(max_examples=200, deadline=None)
def test_builder_copy_normalizes_exactly(text: str, form: str | None) -> None:
    import unicodedata

    b = MapBuilder(form)
    b.copy(text, 0, len(text))
    out, omap = b.build()
    omap.check(text, out)
    if form:
        assert out == unicodedata.normalize(form, text)
    # Monotone: later normalized positions never map to earlier source.
    starts = [omap.to_source(i) for i in range(len(out) + 1)]
    assert starts == sorted(starts)
    assert OffsetMap.from_bytes(omap.to_bytes()) == omap
