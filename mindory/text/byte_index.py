"""Byte positions of a decoded plain-text file: the byte offset in the original file of
any code point position of its decoded text, and back (``DESIGN.md`` §1, "byte positions
(TXT)"). Kept apart from :mod:`mindory.text.encoding`, which decides how the bytes
decode; this module only translates positions once they have."""

from __future__ import annotations

import codecs
from bisect import bisect_right

from mindory.text.encoding import CHECKPOINT_EVERY, DecodedText

__all__ = ["ByteIndex"]


class ByteIndex:
    """Byte offset in the original file of any code point position of DecodedText.text.

    Checkpoints ``(code point, byte offset)`` every CHECKPOINT_EVERY code points
    (and around each U+FFFD) are computed up front; a lookup encodes or decodes
    at most one checkpoint's stretch. Encoding a slice is accepted only when it
    reproduces the file's bytes; otherwise (codecs that do not round-trip, e.g.
    Big5-HKSCS characters that decode to two code points) the bytes are walked
    with an incremental decoder, so offsets are exact either way. A byte offset
    inside a character, or a code point inside a multi-code-point character,
    floors to the start of that character.
    """

    def __init__(
        self, data: bytes, decoded: DecodedText, *, checkpoint_every: int = CHECKPOINT_EVERY
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be positive")
        self._every = checkpoint_every
        self._data = bytes(data)
        self._text = decoded.text
        self._codec = decoded.encoding
        self._bom_len = len(decoded.bom)
        self._cps: list[int] = []
        self._bytes: list[int] = []
        self._is_replacement: list[bool] = []
        cp, pos = 0, self._bom_len
        for rep_cp, rep_start, rep_end in decoded.replacements:
            self._add_segment(cp, pos, rep_cp)
            self._add(rep_cp, rep_start, replacement=True)
            cp, pos = rep_cp + 1, rep_end
        self._add_segment(cp, pos, len(self._text))
        if self._cps[-1] != len(self._text) or self._bytes[-1] != len(self._data):
            self._add(len(self._text), len(self._data), replacement=False)

    def byte_offset(self, cp: int) -> int:
        """Byte offset (BOM included) where code point ``cp`` of the text starts."""
        if not 0 <= cp <= len(self._text):
            raise IndexError(f"code point {cp} outside [0, {len(self._text)}]")
        k = bisect_right(self._cps, cp) - 1
        if self._is_replacement[k]:
            return self._bytes[k]
        return self._advance(self._cps[k], self._bytes[k], cp)[1]

    def code_point(self, byte_offset: int) -> int:
        """Code point position of ``byte_offset``; inside a character, that character's."""
        if not 0 <= byte_offset <= len(self._data):
            raise IndexError(f"byte offset {byte_offset} outside [0, {len(self._data)}]")
        if byte_offset <= self._bom_len:
            return 0
        k = bisect_right(self._bytes, byte_offset) - 1
        if self._is_replacement[k]:
            return self._cps[k]
        decoder = codecs.getincrementaldecoder(self._codec)()
        # final=False holds back an incomplete trailing character: that is the floor.
        chunk = decoder.decode(self._data[self._bytes[k] : byte_offset], final=False)
        return self._cps[k] + len(chunk)

    def _add(self, cp: int, pos: int, *, replacement: bool) -> None:
        self._cps.append(cp)
        self._bytes.append(pos)
        self._is_replacement.append(replacement)

    def _add_segment(self, cp: int, pos: int, end_cp: int) -> None:
        """Checkpoints for a stretch of text that decoded strictly."""
        if cp >= end_cp and self._cps:
            return
        self._add(cp, pos, replacement=False)
        while cp + self._every < end_cp:
            cp, pos = self._advance(cp, pos, cp + self._every, whole=True)
            self._add(cp, pos, replacement=False)

    def _advance(self, cp: int, pos: int, target: int, *, whole: bool = False) -> tuple[int, int]:
        """From a known boundary (cp, pos), the boundary at ``target`` or just before it.

        ``whole``: if a multi-code-point character straddles ``target`` right at
        ``cp``, return the boundary after it instead (checkpoints must progress).
        """
        if target == cp:
            return cp, pos
        try:
            encoded = self._text[cp:target].encode(self._codec)
        except UnicodeEncodeError:
            encoded = None
        if encoded is not None and self._data.startswith(encoded, pos):
            return target, pos + len(encoded)
        return self._walk(cp, pos, target, whole=whole)

    def _walk(self, cp: int, pos: int, target: int, *, whole: bool) -> tuple[int, int]:
        decoder = codecs.getincrementaldecoder(self._codec)()
        start, index = cp, pos
        while cp < target and index < len(self._data):
            produced = len(decoder.decode(self._data[index : index + 1]))
            index += 1
            if produced:
                if cp + produced > target and not (whole and cp == start):
                    break  # one byte sequence made several code points: floor
                cp, pos = cp + produced, index
        return cp, pos


# --- detection helpers --------------------------------------------------------------
