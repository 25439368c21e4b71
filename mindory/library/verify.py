"""Verification: every stored invariant (DESIGN §1) checked against the stored texts and maps."""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mindory.library.records import VerifyReport
from mindory.library.state import State
from mindory.store.models import (
    BlockRow,
    BookFileRow,
    BookmarkRow,
    BookRow,
    ChunkRow,
    ChunkVectorRow,
    ChunkWindowsRow,
    DerivationRow,
    EmbeddingRow,
    HighlightRow,
    NormalizationRow,
    PositionRow,
    SectionRow,
    SectionTextRow,
    TocEntryRow,
)
from mindory.store.queries import resolve_book
from mindory.text.offsets import OffsetMap, OffsetMapError, Utf16Index
from mindory.text.records import NormalizeProfile, Settings, chunk_id, profile_fingerprint

MAX_PROBLEMS = 200  # verify stops collecting problems after this many


class _Verifier:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.truncated = False
        self.sections = self.section_texts = self.blocks = self.chunks = 0

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        else:
            self.truncated = True


_STATEFUL_CODECS = ("iso2022", "iso-2022", "hz", "utf-7", "utf_7")


def _verify_book(s: Session, book_id: int, v: _Verifier) -> None:
    book = s.get_one(BookRow, book_id)
    name = f"{book.title} ({book.sha256[:12]})"
    file_row = s.get(BookFileRow, book_id)
    data: bytes | None = None
    if file_row is None:
        v.problem(f"{name}: the book file row is missing")
    elif file_row.data is not None:
        data = file_row.data
        if hashlib.sha256(data).hexdigest() != book.sha256:
            v.problem(f"{name}: the stored file bytes do not hash to the book id")
        if len(data) != book.file_size:
            v.problem(f"{name}: the stored file has {len(data)} bytes, not {book.file_size}")
    elif file_row.path:
        p = Path(file_row.path)
        if not p.is_file():
            v.problem(f"{name}: the book file is gone: {p}")
        elif hashlib.sha256(p.read_bytes()).hexdigest() != book.sha256:
            v.problem(f"{name}: the book file changed since it was imported: {p}")

    sections = list(
        s.scalars(
            select(SectionRow).where(SectionRow.book_id == book_id).order_by(SectionRow.ordinal)
        )
    )
    v.sections += len(sections)
    if [sec.ordinal for sec in sections] != list(range(len(sections))):
        v.problem(f"{name}: section ordinals are not 0..{len(sections) - 1}")
    if len(sections) != book.section_count:
        v.problem(f"{name}: {len(sections)} sections stored, the book says {book.section_count}")
    by_id = {sec.id: sec for sec in sections}
    by_ordinal = {sec.ordinal: sec for sec in sections}
    for sec in sections:
        if len(sec.source_text) != sec.source_length:
            v.problem(f"{name} §{sec.ordinal}: source text length differs from source_length")
        if sec.cfi_table is not None:
            try:
                from mindory.importers.cfi import CfiDocument

                CfiDocument.from_json(sec.cfi_table, sec.source_text)
            except Exception as exc:  # noqa: BLE001 - report any failure as a problem
                v.problem(f"{name} §{sec.ordinal}: unreadable CFI table ({exc})")

    toc = list(s.scalars(select(TocEntryRow).where(TocEntryRow.book_id == book_id)))
    if len(toc) != book.toc_count:
        v.problem(f"{name}: {len(toc)} TOC entries stored, the book says {book.toc_count}")
    for e in toc:
        if e.section_ordinal is None:
            continue
        target = by_ordinal.get(e.section_ordinal)
        if target is None:
            v.problem(
                f"{name}: TOC entry {e.title!r} points at missing section {e.section_ordinal}"
            )
        elif e.source_offset is not None and not (
            target.source_start <= e.source_offset <= target.source_start + target.source_length
        ):
            v.problem(f"{name}: TOC entry {e.title!r} points outside section {e.section_ordinal}")

    derivations = list(s.scalars(select(DerivationRow).where(DerivationRow.book_id == book_id)))
    if sum(1 for d in derivations if d.is_current) != 1:
        v.problem(f"{name}: {sum(d.is_current for d in derivations)} current derivations, not 1")

    maps: dict[int, tuple[str, OffsetMap | None]] = {}  # section_text id -> (normalized, map)
    normalizations = list(
        s.scalars(select(NormalizationRow).where(NormalizationRow.book_id == book_id))
    )
    for norm in normalizations:
        try:
            expected = profile_fingerprint(NormalizeProfile(**norm.profile))
        except (TypeError, ValueError) as exc:
            v.problem(f"{name}: unreadable profile of normalization {norm.id}: {exc}")
            expected = None
        if expected is not None and expected != norm.profile_fingerprint:
            v.problem(f"{name}: profile fingerprint {norm.profile_fingerprint} is not {expected}")
        texts = list(
            s.scalars(select(SectionTextRow).where(SectionTextRow.normalization_id == norm.id))
        )
        if sorted(t.section_id for t in texts) != sorted(by_id):
            v.problem(f"{name}: normalization {norm.profile_fingerprint} lacks some sections")
        for t in texts:
            v.section_texts += 1
            owner = by_id.get(t.section_id)
            if owner is None:
                v.problem(f"{name}: section text {t.id} belongs to another book's section")
                continue
            where = f"{name} §{owner.ordinal} [{norm.profile_fingerprint}]"
            omap = _check_map(v, where, t, owner)
            maps[t.id] = (t.normalized_text, omap)
            _check_blocks(s, v, where, t, owner, omap)
        for d in derivations:
            if d.normalization_id != norm.id:
                continue
            _check_derivation(s, v, name, book, d, norm, by_id, texts, maps, data)
    _check_highlights(s, v, name, book, by_ordinal)
    _check_kept_places(s, v, name, book, by_ordinal)


def _check_highlights(
    s: Session, v: _Verifier, name: str, book: BookRow, by_ordinal: Mapping[int, SectionRow]
) -> None:
    """Every anchored highlight of the book holds its quote, context and UTF-16 span."""
    rows = s.scalars(
        select(HighlightRow).where(
            HighlightRow.book_sha256 == book.sha256, HighlightRow.status == "anchored"
        )
    )
    indexes: dict[int, Utf16Index] = {}
    for h in rows:
        where = f"{name}: highlight {h.uid}"
        sec = by_ordinal.get(h.section)
        if sec is None or h.edition_sha256 != book.sha256:
            v.problem(f"{where} names section {h.section} of another edition")
            continue
        a, b = h.source_start - sec.source_start, h.source_end - sec.source_start
        text = sec.source_text
        if not 0 <= a < b <= len(text) or text[a:b] != h.exact:
            v.problem(f"{where}: the text at [{h.source_start}, {h.source_end}) is not its quote")
            continue
        if h.prefix != text[max(0, a - 32) : a] or h.suffix != text[b : b + 32]:
            v.problem(f"{where}: its stored context differs from the text around it")
        u = indexes.get(h.section) or indexes.setdefault(h.section, Utf16Index(text))
        if (h.utf16_start - sec.utf16_start, h.utf16_end - sec.utf16_start) != (
            u.to_utf16(a),
            u.to_utf16(b),
        ):
            v.problem(f"{where}: its UTF-16 span does not match its code point span")


def _check_kept_places(
    s: Session, v: _Verifier, name: str, book: BookRow, by_ordinal: Mapping[int, SectionRow]
) -> None:
    """Every anchored reading position and bookmark holds its quote next to its point,
    and its Locator names that point (docs/reading-state.md)."""
    rows: list[PositionRow | BookmarkRow] = [
        *s.scalars(
            select(PositionRow).where(
                PositionRow.book_sha256 == book.sha256, PositionRow.status == "anchored"
            )
        ),
        *s.scalars(
            select(BookmarkRow).where(
                BookmarkRow.book_sha256 == book.sha256, BookmarkRow.status == "anchored"
            )
        ),
    ]
    for r in rows:
        kind = "position" if isinstance(r, PositionRow) else "bookmark"
        where = f"{name}: {kind} {r.uid}"
        sec = by_ordinal.get(r.section)
        if sec is None or r.edition_sha256 != book.sha256:
            v.problem(f"{where} names section {r.section} of another edition")
            continue
        a, b = r.source_start - sec.source_start, r.source_end - sec.source_start
        text = sec.source_text
        if not 0 <= a <= b <= len(text) or text[a:b] != r.exact:
            v.problem(f"{where}: the text at [{r.source_start}, {r.source_end}) is not its quote")
            continue
        if r.point not in (r.source_start, r.source_end):
            v.problem(f"{where}: its point {r.point} is not at its quote")
        locator = r.locator or {}
        source = locator.get("source") or {}
        named = (source.get("start"), source.get("end"), locator.get("section"))
        if named != (r.point, r.point, r.section):
            v.problem(f"{where}: its Locator does not name its point")


def _verify_vectors(s: Session, v: _Verifier) -> None:
    """Every stored vector holds ``dim`` float32 values of its embedding."""
    rows = s.execute(
        select(EmbeddingRow.fingerprint, EmbeddingRow.dim, func.count())
        .join(ChunkVectorRow, ChunkVectorRow.embedding_id == EmbeddingRow.id)
        .where(func.length(ChunkVectorRow.vector) != EmbeddingRow.dim * 4)
        .group_by(EmbeddingRow.fingerprint, EmbeddingRow.dim)
    ).all()
    for fingerprint, dim, count in rows:
        v.problem(f"embedding {fingerprint}: {count} vector(s) are not {dim} float32 values")
    windows = s.execute(
        select(ChunkWindowsRow.windows_key, func.count())
        .where(
            func.length(ChunkWindowsRow.vectors) != ChunkWindowsRow.count * ChunkWindowsRow.dim * 2
        )
        .group_by(ChunkWindowsRow.windows_key)
    ).all()
    for key, count in windows:
        v.problem(f"sentence windows {key}: {count} chunk(s) hold the wrong number of bytes")


def _check_map(v: _Verifier, where: str, t: SectionTextRow, sec: SectionRow) -> OffsetMap | None:
    try:
        omap = OffsetMap.from_bytes(t.offset_map)  # validates monotone runs
        omap.check(sec.source_text, t.normalized_text)  # lengths, copy runs equal
    except OffsetMapError as exc:
        v.problem(f"{where}: offset map: {exc}")
        return None
    if omap.edit_count != t.edit_count:
        v.problem(f"{where}: offset map holds {omap.edit_count} edits, row says {t.edit_count}")
    return omap


def _span_problems(
    omap: OffsetMap, starts: np.ndarray, ends: np.ndarray, src_s: np.ndarray, src_e: np.ndarray
) -> np.ndarray:
    """Indices whose stored source span differs from the map's (section-local arrays)."""
    bad = np.zeros(len(starts), dtype=bool)
    nonempty = ends > starts
    if nonempty.any():
        es, ee = omap.source_spans(starts[nonempty], ends[nonempty])
        bad[nonempty] = (es != src_s[nonempty]) | (ee != src_e[nonempty])
    for k in np.flatnonzero(~nonempty).tolist():
        exp = omap.source_span(int(starts[k]), int(ends[k]))
        bad[k] = exp != (int(src_s[k]), int(src_e[k]))
    return np.flatnonzero(bad)


def _check_blocks(
    s: Session,
    v: _Verifier,
    where: str,
    t: SectionTextRow,
    sec: SectionRow,
    omap: OffsetMap | None,
) -> None:
    rows = s.execute(
        select(
            BlockRow.index, BlockRow.start, BlockRow.end, BlockRow.source_start, BlockRow.source_end
        )
        .where(BlockRow.section_text_id == t.id)
        .order_by(BlockRow.index)
    ).all()
    v.blocks += len(rows)
    if len(rows) != t.block_count:
        v.problem(f"{where}: {len(rows)} blocks stored, the row says {t.block_count}")
    if not rows:
        return
    arr = np.asarray([r[:5] for r in rows], dtype=np.int64)
    if not np.array_equal(arr[:, 0], np.arange(len(arr))):
        v.problem(f"{where}: block indices are not 0..{len(arr) - 1}")
    n = len(t.normalized_text)
    outside = np.flatnonzero((arr[:, 1] < 0) | (arr[:, 1] > arr[:, 2]) | (arr[:, 2] > n))
    if len(outside):
        v.problem(f"{where}: block {int(arr[outside[0], 0])} lies outside the normalized text")
        return
    if np.any(arr[1:, 1] < arr[:-1, 2]):
        v.problem(f"{where}: blocks overlap or are out of order")
    if omap is None:
        return
    shift = sec.source_start
    bad = _span_problems(omap, arr[:, 1], arr[:, 2], arr[:, 3] - shift, arr[:, 4] - shift)
    if len(bad):
        k = int(bad[0])
        v.problem(
            f"{where}: block {int(arr[k, 0])} source span [{int(arr[k, 3])}, {int(arr[k, 4])}) "
            f"is not the map's ({len(bad)} block(s) differ)"
        )


def _check_derivation(
    s: Session,
    v: _Verifier,
    name: str,
    book: BookRow,
    d: DerivationRow,
    norm: NormalizationRow,
    by_id: Mapping[int, SectionRow],
    texts: Sequence[SectionTextRow],
    maps: Mapping[int, tuple[str, OffsetMap | None]],
    data: bytes | None,
) -> None:
    where_d = f"{name} [{d.fingerprint}]"
    try:
        settings = Settings.from_dict(d.settings)
    except (TypeError, ValueError) as exc:
        v.problem(f"{where_d}: unreadable settings: {exc}")
        return
    if settings.fingerprint != d.fingerprint:
        v.problem(f"{where_d}: the stored settings fingerprint to {settings.fingerprint}")
    if profile_fingerprint(settings.profile) != norm.profile_fingerprint:
        v.problem(f"{where_d}: settings profile differs from its normalization's")
    text_of = {t.section_id: t for t in texts}
    rows = s.execute(
        select(
            ChunkRow.section_id,
            ChunkRow.index,
            ChunkRow.start,
            ChunkRow.end,
            ChunkRow.source_start,
            ChunkRow.source_end,
            ChunkRow.utf16_start,
            ChunkRow.utf16_end,
            ChunkRow.chunk_id,
            ChunkRow.text,
            ChunkRow.byte_start,
            ChunkRow.byte_end,
            ChunkRow.context_start,
            ChunkRow.context_end,
        )
        .where(ChunkRow.derivation_id == d.id)
        .order_by(ChunkRow.section_id, ChunkRow.index)
    ).all()
    v.chunks += len(rows)
    if len(rows) != d.chunk_count:
        v.problem(f"{where_d}: {len(rows)} chunks stored, the derivation says {d.chunk_count}")
    codec: str | None = None
    if book.format == "txt" and data is not None and not book.lossy and book.encoding:
        try:
            codec = codecs.lookup(book.encoding).name
        except LookupError:
            codec = None
        if codec and codec.startswith(_STATEFUL_CODECS):
            codec = None
    by_section: dict[int, list[Any]] = {}
    for r in rows:
        by_section.setdefault(r[0], []).append(r)
    for section_id, chunks in by_section.items():
        sec = by_id.get(section_id)
        t = text_of.get(section_id)
        if sec is None or t is None:
            v.problem(f"{where_d}: chunks of section id {section_id}, not in this book/profile")
            continue
        where = f"{where_d} §{sec.ordinal}"
        normalized, omap = maps.get(t.id, (t.normalized_text, None))
        arr = np.asarray([c[1:8] for c in chunks], dtype=np.int64)
        if not np.array_equal(arr[:, 0], np.arange(len(arr))):
            v.problem(f"{where}: chunk indices are not 0..{len(arr) - 1}")
        starts, ends = arr[:, 1], arr[:, 2]
        bad_range = np.flatnonzero((starts < 0) | (starts >= ends) | (ends > len(normalized)))
        if len(bad_range):
            v.problem(f"{where}: chunk {int(arr[bad_range[0], 0])} has an empty or outside span")
            continue
        for c in chunks:
            idx, st, en = c[1], c[2], c[3]
            if c[9] != normalized[st:en]:
                v.problem(f"{where}: chunk {idx} text is not normalized[{st}:{en}]")
            cs, ce = c[12], c[13]
            if (cs is None) != (ce is None) or (
                cs is not None and ce is not None and not 0 <= cs <= ce <= len(normalized)
            ):
                v.problem(f"{where}: chunk {idx} context [{cs}, {ce}) is not a span of the text")
            expected_id = chunk_id(book.sha256, sec.ordinal, d.fingerprint, st, en)
            if c[8] != expected_id:
                v.problem(f"{where}: chunk {idx} id {c[8]} is not {expected_id}")
        shift = sec.source_start
        local_s, local_e = arr[:, 3] - shift, arr[:, 4] - shift
        if omap is not None:
            bad = _span_problems(omap, starts, ends, local_s, local_e)
            if len(bad):
                k = int(bad[0])
                v.problem(
                    f"{where}: chunk {int(arr[k, 0])} source span [{int(arr[k, 3])}, "
                    f"{int(arr[k, 4])}) is not the map's ({len(bad)} chunk(s) differ)"
                )
        src_len = len(sec.source_text)
        if np.any((local_s < 0) | (local_e > src_len) | (local_s > local_e)):
            v.problem(f"{where}: a chunk's source span lies outside the section")
            continue
        u16 = Utf16Index(sec.source_text)
        exp_us = u16.to_utf16_array(local_s) + sec.utf16_start
        exp_ue = u16.to_utf16_array(local_e) + sec.utf16_start
        bad_u = np.flatnonzero((exp_us != arr[:, 5]) | (exp_ue != arr[:, 6]))
        if len(bad_u):
            k = int(bad_u[0])
            v.problem(
                f"{where}: chunk {int(arr[k, 0])} UTF-16 span [{int(arr[k, 5])}, {int(arr[k, 6])}) "
                f"should be [{int(exp_us[k])}, {int(exp_ue[k])})"
            )
        if codec is not None and data is not None:
            for c in chunks:
                bs, be = c[10], c[11]
                if bs is None or be is None:
                    v.problem(f"{where}: chunk {c[1]} of a plain-text book has no byte span")
                    break
                try:
                    decoded = data[bs:be].decode(codec)
                except UnicodeDecodeError:
                    decoded = None
                if decoded != sec.source_text[c[4] - shift : c[5] - shift]:
                    v.problem(
                        f"{where}: chunk {c[1]} bytes [{bs}, {be}) do not decode to its source"
                    )
                    break


def verify(st: State, ref: str | None = None) -> VerifyReport:
    """Check every stored invariant (DESIGN §1) against the stored texts and maps.

    Per section text: the map parses, is monotone, matches both texts'
    lengths and every copy run is equal in both texts. Per block and chunk:
    spans inside the text, source span == the map's source span, chunk text
    == the normalized slice, UTF-16 spans recomputed from the source text,
    byte spans (plain text) decode to the source slice, chunk ids
    recomputed. Per book: the file hash, contiguous ordinals, one current
    derivation, fingerprints recomputed from the stored settings, TOC
    targets inside their sections.
    """
    v = _Verifier()
    with st.read() as s:
        if ref is None:
            ids = list(s.scalars(select(BookRow.id).order_by(BookRow.sha256)))
        else:
            ids = [resolve_book(s, ref).id]
        for book_id in ids:
            _verify_book(s, book_id, v)
            s.expunge_all()
        if ref is None:
            _verify_vectors(s, v)
    return VerifyReport(
        books=len(ids),
        sections=v.sections,
        section_texts=v.section_texts,
        blocks=v.blocks,
        chunks=v.chunks,
        problems=tuple(v.problems),
        truncated=v.truncated,
    )
