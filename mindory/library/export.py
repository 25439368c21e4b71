"""Export: a book as JSON lines, byte-identical across runs, processes and libraries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from sqlalchemy import select

from mindory.library.state import State
from mindory.store.models import BlockRow, SectionRow, SectionTextRow, TocEntryRow
from mindory.store.queries import chunk_infos, get_derivation, resolve_book
from mindory.text.offsets import OffsetMap


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def export(
    st: State,
    ref: str,
    *,
    fingerprint: str | None = None,
    annotations: bool = False,
    reader: str | None = None,
) -> Iterator[str]:
    """The book as JSON lines (no trailing newlines): book, TOC, then per section
    the section (texts and offset map), its blocks and its chunks; with
    ``annotations``, then one ``{"type": "annotation", ...}`` line per highlight of
    ``reader`` (a W3C Web Annotation, as ``mindory annotations export`` writes it).

    Byte-identical across runs, processes and libraries for the same file
    and settings: no row ids, no timestamps, fixed key order (annotations, which are
    a reader's and carry their ids and times, come last).
    """
    yield from _book_lines(st, ref, fingerprint)
    if annotations:
        from mindory.library.highlights import highlights
        from mindory.reading.highlights import ANNOTATION_CONTEXT
        from mindory.store.models import LOCAL_READER

        for h in highlights(st, ref, reader=reader or LOCAL_READER):
            item = h.to_json()
            item["@context"] = ANNOTATION_CONTEXT
            yield dumps({"type": "annotation", "annotation": item})


def _book_lines(st: State, ref: str, fingerprint: str | None) -> Iterator[str]:
    with st.read() as s:
        row = resolve_book(s, ref)
        derivation = get_derivation(s, row, fingerprint)
        yield dumps(
            {
                "type": "book",
                "id": row.sha256,
                "title": row.title,
                "format": row.format,
                "file_name": row.file_name,
                "file_size": row.file_size,
                "encoding": row.encoding,
                "lossy": row.lossy,
                "bad_bytes": row.bad_bytes,
                "first_bad_byte": row.first_bad_byte,
                "creators": list(row.creators),
                "language": row.language,
                "identifiers": list(row.identifiers),
                "warnings": list(row.warnings),
                "section_count": row.section_count,
                "fingerprint": derivation.fingerprint,
                "settings": derivation.settings,
                "chunk_count": derivation.chunk_count,
            }
        )
        toc = s.execute(
            select(TocEntryRow).where(TocEntryRow.book_id == row.id).order_by(TocEntryRow.position)
        ).scalars()
        position_of: dict[int, int] = {}
        for e in toc:
            position_of[e.id] = e.position
            yield dumps(
                {
                    "type": "toc",
                    "position": e.position,
                    "depth": e.depth,
                    "parent": position_of.get(e.parent_id) if e.parent_id else None,
                    "title": e.title,
                    "href": e.href,
                    "section": e.section_ordinal,
                    "source_offset": e.source_offset,
                }
            )
        section_ids = s.execute(
            select(SectionRow.id, SectionRow.ordinal)
            .where(SectionRow.book_id == row.id)
            .order_by(SectionRow.ordinal)
        ).all()
        for section_id, ordinal in section_ids:
            sec = s.get_one(SectionRow, section_id)
            text = s.execute(
                select(SectionTextRow).where(
                    SectionTextRow.section_id == section_id,
                    SectionTextRow.normalization_id == derivation.normalization_id,
                )
            ).scalar_one()
            omap = OffsetMap.from_bytes(text.offset_map)
            yield dumps(
                {
                    "type": "section",
                    "ordinal": ordinal,
                    "title": sec.title,
                    "href": sec.href,
                    "media_type": sec.media_type,
                    "parser": sec.parser,
                    "linear": sec.linear,
                    "source_start": sec.source_start,
                    "source_end": sec.source_start + sec.source_length,
                    "utf16_start": sec.utf16_start,
                    "source_text": sec.source_text,
                    "normalized_text": text.normalized_text,
                    "offset_map": json.loads(omap.to_json()),
                }
            )
            s.expunge(sec)
            for b in s.execute(
                select(BlockRow).where(BlockRow.section_text_id == text.id).order_by(BlockRow.index)
            ).scalars():
                yield dumps(
                    {
                        "type": "block",
                        "section": ordinal,
                        "index": b.index,
                        "kind": b.kind,
                        "level": b.level,
                        "start": b.start,
                        "end": b.end,
                        "source_start": b.source_start,
                        "source_end": b.source_end,
                    }
                )
            s.expunge_all()
            for c in chunk_infos(s, derivation.id, ordinal, 0, None, True):
                yield dumps({"type": "chunk", **c.to_json()})
