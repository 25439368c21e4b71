"""KOReader's document keys: the partial MD5 against KOReader's own test vector, the
sampling offsets, short files, and the file-name key."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from mindory.importers.document_keys import (
    SAMPLE_OFFSETS,
    document_keys,
    filename_md5,
    partial_md5,
    partial_md5_of,
)
from tests.conftest import corpus_file

LEAVES = "epub2_en_leaves-of-grass-gutenberg-calibre.epub"


def test_koreader_test_vector() -> None:
    # koreader/koreader spec/unit/util_spec.lua: leaves.epub (the corpus's Leaves of Grass)
    data = corpus_file(LEAVES).read_bytes()
    assert partial_md5(data) == "59d481d168cca6267322f150c5f6a2a3"


def test_offsets_are_luajit_32_bit_shifts() -> None:
    # i = -1: 1024 << 30 overflows 32 bits to 0; then 1 KiB, 4 KiB, ... 1 GiB
    assert (0, *(1024 << (2 * i) for i in range(11))) == SAMPLE_OFFSETS


def _reference(data: bytes) -> str:
    """The algorithm written out plainly: the samples concatenated, one MD5."""
    out = b""
    for offset in (0, 1024, 4096, 16384, 65536, 262144, 1048576):
        sample = data[offset : offset + 1024]
        if not sample:
            break
        out += sample
    return hashlib.md5(out).hexdigest()


@given(st.binary(max_size=70_000))
def test_partial_md5_equals_the_plain_algorithm(data: bytes) -> None:
    assert partial_md5(data) == _reference(data)


def test_reading_stops_at_the_first_empty_sample() -> None:
    asked: list[int] = []
    data = b"x" * 5000

    def read_at(offset: int, size: int) -> bytes:
        asked.append(offset)
        return data[offset : offset + size]

    partial_md5_of(read_at)
    assert asked == [0, 1024, 4096, 16384]  # 16384 reads nothing: stop
    assert partial_md5(b"") == hashlib.md5(b"").hexdigest()


def test_filename_key_is_the_md5_of_the_base_name() -> None:
    want = hashlib.md5(b"Leaves of Grass.epub").hexdigest()
    assert filename_md5("Leaves of Grass.epub") == want
    assert filename_md5("/mnt/onboard/Books/Leaves of Grass.epub") == want
    assert filename_md5("草枕.epub") == hashlib.md5("草枕.epub".encode()).hexdigest()
    keys = dict(document_keys(b"abc", "a.txt"))
    assert keys == {"binary": partial_md5(b"abc"), "filename": filename_md5("a.txt")}
