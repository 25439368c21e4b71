"""Position → containing chunks, against a brute-force scan (any overlap pattern)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from mindory.reading.chunk_spans import ChunkSpans, chunks_containing


@dataclass(frozen=True)
class Span:
    source_start: int
    source_end: int


spans_strategy = st.lists(
    st.builds(lambda s, n: Span(s, s + n), st.integers(0, 200), st.integers(1, 60)),
    max_size=40,
)


@given(spans_strategy, st.integers(-1, 262))
def test_chunks_containing_matches_brute_force_for_any_overlap(
    spans: list[Span], source_pos: int
) -> None:
    index = ChunkSpans(spans)
    assert len(index) == len(spans)
    want = sorted(
        (x for x in spans if x.source_start <= source_pos < x.source_end),
        key=lambda x: (x.source_start, x.source_end),
    )
    assert index.containing(source_pos) == want
    assert chunks_containing(spans, source_pos) == want


def test_a_position_at_an_end_is_outside_and_at_a_start_inside() -> None:
    # Half-open spans: the end belongs to the next chunk, not this one.
    a, b = Span(0, 10), Span(10, 20)
    assert chunks_containing([a, b], 9) == [a]
    assert chunks_containing([a, b], 10) == [b]
    assert chunks_containing([a, b], 20) == []
