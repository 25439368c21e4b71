"""Plain-text books: decode, split into chapters conservatively, normalize.

Positions of plain-text books are file-global: a section's ``source_start`` is
where its text begins in the decoded file, and every chunk's source span is in
those coordinates (code points), with UTF-16 and byte positions computable from
the same decoded text (:class:`PlainSource`).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from mindory.errors import DecodeError
from mindory.text.byte_index import ByteIndex
from mindory.text.encoding import DecodedText, read_text_file
from mindory.text.normalize import HEADING_RE, detect_hard_wrap, normalize
from mindory.text.offsets import Utf16Index
from mindory.text.records import Book, NormalizeProfile, Section, TocEntry

__all__ = ["PlainSource", "read_text", "split_chapters"]

# A chapter must hold at least this much text, or its heading is treated as a
# line of a table of contents and folded into the section before it.
MIN_CHAPTER_CHARS = 500
# Fewer headings than this and the book stays one section.
MIN_CHAPTERS = 3

_HEADING_LINE_RE = re.compile(
    r"^[ \t\u3000]*(?P<title>(?:" + HEADING_RE.pattern + r")[^\r\n]*?)[ \t\u3000]*\r?$",
    re.MULTILINE,
)
_GUTENBERG_TITLE_RE = re.compile(r"^Title:[ \t]+(?P<title>[^\r\n]+)", re.MULTILINE)
# A Chinese/Japanese title opening the first line: 《三国演义》, 『草枕』.
_CJK_TITLE_RE = re.compile(r"\s*[《『](?P<title>[^》』\r\n]{1,40})[》』]")


@dataclass(frozen=True)
class PlainSource:
    """The decoded file: source text plus what turns positions into UTF-16 and bytes."""

    text: str
    decoded: DecodedText
    data: bytes

    @cached_property
    def utf16(self) -> Utf16Index:
        return Utf16Index(self.text)

    @cached_property
    def bytes_index(self) -> ByteIndex:
        return ByteIndex(self.data, self.decoded)


def split_chapters(text: str) -> list[tuple[int, str]]:
    """Section starts ``(source position, title)``; the first starts at 0.

    Conservative: a heading is a short line that reads like a chapter heading
    (第…回/章/節, CHAPTER XII, ...); chapters shorter than
    ``MIN_CHAPTER_CHARS`` (e.g. a table of contents) are folded into the
    section before them; fewer than ``MIN_CHAPTERS`` headings and the text stays
    one section.
    """
    heads: list[tuple[int, str]] = []
    for m in _HEADING_LINE_RE.finditer(text):
        title = m.group("title").strip()
        if len(title) > 80:
            continue
        heads.append((m.start(), title))
    if len(heads) < MIN_CHAPTERS:
        return [(0, "")]
    starts: list[tuple[int, str]] = [(0, "")]
    for k, (pos, title) in enumerate(heads):
        nxt = heads[k + 1][0] if k + 1 < len(heads) else len(text)
        body = len(text[pos:nxt].strip()) - len(title)
        if body < MIN_CHAPTER_CHARS:
            continue
        starts.append((pos, title))
    if len(starts) - 1 < MIN_CHAPTERS:
        return [(0, "")]
    # Drop an empty front section (the text begins with the first heading).
    if not text[: starts[1][0]].strip():
        starts.pop(0)
        starts[0] = (0, starts[0][1])
    return starts


def _title(text: str, path: Path) -> str:
    m = _GUTENBERG_TITLE_RE.search(text, 0, 5000)
    if m:
        return m.group("title").strip()
    m = _CJK_TITLE_RE.match(text)  # only on the first line
    if m:
        return m.group("title").strip()
    return path.stem


def read_text(path: str | os.PathLike[str], profile: NormalizeProfile | None = None) -> Book:
    """Import a plain-text file as a Book (see module doc for coordinates)."""
    profile = profile or NormalizeProfile()
    p = Path(path)
    data, decoded = read_text_file(p)
    text = decoded.text
    if not text.strip():
        raise DecodeError("holds no text (only whitespace)", path=str(p))
    unwrap = profile.unwrap == "always" or (profile.unwrap == "auto" and detect_hard_wrap(text))
    bounds = split_chapters(text)
    sections: list[Section] = []
    for k, (start, title) in enumerate(bounds):
        end = bounds[k + 1][0] if k + 1 < len(bounds) else len(text)
        src = text[start:end]
        nt = normalize(src, profile, unwrap=unwrap)
        if not nt.text:
            continue
        sections.append(
            Section(
                ordinal=len(sections),
                title=title or (_title(text, p) if not sections else ""),
                source_text=src,
                normalized_text=nt.text,
                offset_map=nt.offset_map,
                blocks=nt.blocks,
                source_start=start,
                href=None,
                media_type="text/plain",
                parser="text",
            )
        )
    warnings: list[str] = []
    if decoded.lossy:
        warnings.append(
            f"{p.name}: decoded as {decoded.encoding} with {decoded.bad_bytes} undecodable "
            f"byte(s) replaced by U+FFFD (first at byte {decoded.first_bad_byte})"
        )
    toc = tuple(
        TocEntry(title=s.title, href="", section=s.ordinal, source_offset=s.source_start)
        for s in sections
        if s.title
    )
    return Book(
        sha256=hashlib.sha256(data).hexdigest(),
        title=_title(text, p),
        format="txt",
        file_name=p.name,
        sections=tuple(sections),
        encoding=decoded.encoding,
        lossy=decoded.lossy,
        bad_bytes=decoded.bad_bytes,
        first_bad_byte=decoded.first_bad_byte,
        toc=toc,
        warnings=tuple(warnings),
        source=PlainSource(text, decoded, data),
    )
