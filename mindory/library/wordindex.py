"""Keeping the word index whole: terms for every chunk of a current derivation, all made
by the analysis this mindory ships (:func:`mindory.search.words.fingerprint`).

Imports write the terms of their chunks in the same transaction. This fills in what is
missing — chunks stored before the word index existed (revision 0004), or by a mindory
whose analysis differs — in batches, one transaction each, so it can stop and resume.
"""

from __future__ import annotations

from time import perf_counter

from sqlalchemy import delete, insert, select, text

from mindory.library.records import ProgressFn, WordIndexInfo, no_progress
from mindory.library.state import State
from mindory.store.models import (
    BookRow,
    ChunkRow,
    ChunkTermsRow,
    DerivationRow,
    LibraryFactRow,
    SectionRow,
)
from mindory.store.writes import WORD_ANALYSIS, set_fact

__all__ = ["WordIndexInfo", "update_word_index"]

BATCH = 1000  # chunks analysed and written per transaction


_MISSING = text(
    "SELECT c.id FROM chunks AS c JOIN derivations AS d ON d.id = c.derivation_id "
    "LEFT JOIN chunk_terms AS t ON t.chunk_id = c.id "
    "WHERE d.is_current AND t.chunk_id IS NULL ORDER BY c.id LIMIT :n"
)


def update_word_index(
    st: State, *, rebuild: bool = False, progress: ProgressFn | None = None
) -> WordIndexInfo:
    """Give every current chunk its terms; ``rebuild`` (or another analysis on record)
    analyses every chunk again."""
    from mindory.search import words

    report = progress or no_progress
    t0 = perf_counter()
    analysis = words.fingerprint()
    with st.read() as s:
        fact = s.get(LibraryFactRow, WORD_ANALYSIS)
        total = int(
            s.scalar(
                select(text("count(*)"))
                .select_from(ChunkRow)
                .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                .where(DerivationRow.is_current.is_(True))
            )
            or 0
        )
        languages = {
            int(book_id): words.language_of(tag, str(start or ""))
            for book_id, tag, start in s.execute(
                select(BookRow.id, BookRow.language, SectionRow.source_text).join(
                    SectionRow, (SectionRow.book_id == BookRow.id) & (SectionRow.ordinal == 0)
                )
            )
        }
    redo = rebuild or (fact is not None and fact.value != analysis)
    if redo:
        with st.write() as w:
            w.execute(delete(ChunkTermsRow))
    added = 0
    report("words", 0, total)
    while True:
        with st.read() as s:
            ids = [int(i) for i in s.execute(_MISSING, {"n": BATCH}).scalars()]
            if not ids:
                break
            rows = s.execute(
                select(ChunkRow.id, ChunkRow.text, DerivationRow.book_id)
                .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
                .where(ChunkRow.id.in_(ids))
            ).all()
        values = [
            {
                "chunk_id": int(i),
                "terms": " ".join(words.text_terms(t, languages.get(int(b), "en"))),
            }
            for i, t, b in rows
        ]
        with st.write() as w:
            w.connection().execute(insert(ChunkTermsRow), values)
        added += len(values)
        report("words", min(added, total), total)
    with st.write() as w:
        set_fact(w, WORD_ANALYSIS, analysis)
    st.forget_words_count()
    return WordIndexInfo(analysis, total, added, redo, perf_counter() - t0)
