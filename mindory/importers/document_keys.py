"""KOReader's document keys: how its progress sync ("kosync") names a book.

KOReader sends one of two keys with every progress push and pull (the sync plugin's
"document matching" setting): ``binary``, its *partial MD5* of the file, or ``filename``,
the MD5 of the file's base name. Both are computed here from the bytes and the name
mindory stores, so a book imported into mindory is found by the key KOReader computes
from the same file on the device.

The partial MD5 (KOReader ``frontend/util.lua``, ``util.partialMD5``): one MD5 over up to
twelve samples of 1024 bytes, read at offsets ``1024 << 2i`` for ``i = -1 … 10``. LuaJIT's
``bit.lshift`` takes its shift count modulo 32 and works in 32 bits, so ``i = -1`` shifts
by 30 and overflows to offset 0; the rest are 1 KiB, 4 KiB, 16 KiB, … 1 GiB. The loop
stops at the first offset that reads nothing (at or past the end of the file); a sample
that meets the end is shorter. ``tests/importers/test_document_keys.py`` checks it against
KOReader's own test vector (its ``leaves.epub`` is the corpus's Leaves of Grass).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

__all__ = ["SAMPLE_OFFSETS", "document_keys", "filename_md5", "partial_md5", "partial_md5_of"]

SAMPLE_BYTES = 1024
# 1024 << (2*i) for i = -1..10 in 32-bit LuaJIT arithmetic: (1024 << 30) mod 2**32 == 0.
SAMPLE_OFFSETS: tuple[int, ...] = tuple(
    ((1024 << ((2 * i) % 32)) & 0xFFFFFFFF) for i in range(-1, 11)
)


def partial_md5_of(read_at: Callable[[int, int], bytes]) -> str:
    """KOReader's partial MD5 over a file read through ``read_at(offset, size)`` (which
    returns fewer bytes, or none, at the end): lowercase hex, as KOReader sends it."""
    digest = hashlib.md5(usedforsecurity=False)
    for offset in SAMPLE_OFFSETS:
        sample = read_at(offset, SAMPLE_BYTES)
        if not sample:
            break
        digest.update(sample)
    return digest.hexdigest()


def partial_md5(data: bytes) -> str:
    """KOReader's partial MD5 of a file's bytes (its ``binary`` document key)."""
    return partial_md5_of(lambda offset, size: data[offset : offset + size])


def filename_md5(file_name: str) -> str:
    """KOReader's ``filename`` document key: the MD5 of the file's base name (with its
    extension, without folders) in UTF-8."""
    base = file_name.replace("\\", "/").rsplit("/", 1)[-1]
    return hashlib.md5(base.encode("utf-8"), usedforsecurity=False).hexdigest()


def document_keys(data: bytes, file_name: str) -> tuple[tuple[str, str], ...]:
    """The (method, key) pairs KOReader may name this file by."""
    return (("binary", partial_md5(data)), ("filename", filename_md5(file_name)))
