"""A vector is a function of the embedder and the text it reads: the same text is embedded
once (issue 24, item 4: 紅樓夢 in GBK and in Big5 has identical chunk texts)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from mindory.library import Library
from mindory.search.embedders import HashedNgramEmbedder
from mindory.store.models import BookRow, ChunkRow, ChunkVectorRow, DerivationRow, SectionRow

SENTENCES = (
    "話說天下大勢，分久必合，合久必分。",
    "周末七國分爭，並入於秦。",
    "及秦滅之後，楚、漢分爭，又並入於漢。",
    "漢朝自高祖斬白蛇而起義，一統天下。",
    "後來光武中興，傳至獻帝，遂分為三國。",
    "推其致亂之由，殆始於桓、靈二帝。",
    "桓帝禁錮善類，崇信宦官。",
    "及桓帝崩，靈帝即位，大將軍竇武、太傅陳蕃共相輔佐。",
)


def _novel() -> str:
    """About 200 distinct paragraphs of traditional Chinese that GBK and Big5 both encode."""
    paragraphs = []
    for i in range(200):
        body = "".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(1 + i % 5))
        paragraphs.append(f"第{i + 1}段　{body}")
    return "\r\n\r\n".join(paragraphs) + "\r\n"


class CountingEmbedder:
    """The hashed embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashedNgramEmbedder()
        self.texts: list[str] = []

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def lib(db_url: str) -> Iterator[Library]:
    with Library.open(db_url) as library:
        yield library


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    text = _novel()
    gbk, big5 = tmp_path / "novel_gbk.txt", tmp_path / "novel_big5.txt"
    gbk.write_bytes(text.encode("gbk"))
    big5.write_bytes(text.encode("cp950"))
    return gbk, big5


def _vectors(lib: Library, sha256: str) -> list[tuple[str, bytes]]:
    """(chunk text, stored vector bytes) of a book's chunks, in order."""
    with lib.engine.connect() as conn:
        rows = conn.execute(
            select(ChunkRow.text, ChunkVectorRow.vector)
            .join(ChunkVectorRow, ChunkVectorRow.chunk_id == ChunkRow.id)
            .join(DerivationRow, DerivationRow.id == ChunkRow.derivation_id)
            .join(BookRow, BookRow.id == DerivationRow.book_id)
            .where(BookRow.sha256 == sha256, DerivationRow.is_current.is_(True))
            .order_by(ChunkRow.section_id, ChunkRow.index)
        ).all()
    return [(str(t), bytes(v)) for t, v in rows]


def test_the_same_text_in_another_encoding_is_not_embedded_again(
    lib: Library, pair: tuple[Path, Path]
) -> None:
    counter = CountingEmbedder()
    lib.embed(counter)  # the current embedding: imports embed with it
    first = lib.import_book(pair[0])
    sent_for_first = len(counter.texts)
    one = _vectors(lib, first.book)
    assert sent_for_first == len({t for t, _ in one}) > 5
    second = lib.import_book(pair[1])
    two = _vectors(lib, second.book)
    with lib.engine.connect() as conn:
        encodings = conn.execute(select(BookRow.encoding).order_by(BookRow.id)).scalars().all()
    assert encodings == ["gbk", "cp950"]
    assert [t for t, _ in two] == [t for t, _ in one]  # the same text, chunk for chunk
    assert len(counter.texts) == sent_for_first  # nothing of the second book was sent
    assert second.embedded == len(two)  # yet every chunk has its vector
    assert [v for _, v in two] == [v for _, v in one]  # byte for byte
    # ... and it is what embedding every chunk would have stored.
    fresh = HashedNgramEmbedder().embed([t for t, _ in two]).astype("<f4")
    assert [v for _, v in two] == [row.tobytes() for row in fresh]


def test_one_embed_call_sends_each_text_once(lib: Library, pair: tuple[Path, Path]) -> None:
    for path in pair:
        lib.import_book(path, embed=False)
    counter = CountingEmbedder()
    result = lib.embed(counter, batch_size=7)  # pages split the books at odd places
    with lib.engine.connect() as conn:
        texts = conn.execute(select(ChunkRow.text).order_by(ChunkRow.id)).scalars().all()
        stored = dict(conn.execute(select(ChunkVectorRow.chunk_id, ChunkVectorRow.vector)).all())
    assert result.embedded == len(texts) == len(stored)
    assert sorted(counter.texts) == sorted(set(texts))  # each distinct text once
    fresh = HashedNgramEmbedder().embed(list(texts)).astype("<f4")
    with lib.engine.connect() as conn:
        ids = conn.execute(select(ChunkRow.id).order_by(ChunkRow.id)).scalars().all()
    assert [bytes(stored[i]) for i in ids] == [row.tobytes() for row in fresh]


def test_the_key_is_the_text_the_embedder_reads(lib: Library, pair: tuple[Path, Path]) -> None:
    # With the context header the embedder reads "Book › Section\n\n" + chunk: the two
    # books' titles differ, so their chunks are different texts to it.
    counter = CountingEmbedder()
    lib.embed(counter, context_header=True)
    first = lib.import_book(pair[0])
    sent = len(counter.texts)
    second = lib.import_book(pair[1])
    with lib.engine.connect() as conn:
        titles = conn.execute(select(BookRow.title).order_by(BookRow.id)).scalars().all()
        sections = conn.execute(select(SectionRow.title).distinct()).scalars().all()
    assert len(set(titles)) == 2, titles
    assert len(counter.texts) == 2 * sent  # everything embedded again
    assert set(counter.texts[:sent]).isdisjoint(counter.texts[sent:])
    one, two = _vectors(lib, first.book), _vectors(lib, second.book)
    assert [t for t, _ in two] == [t for t, _ in one]
    assert all(a != b for (_, a), (_, b) in zip(one, two)), sections
