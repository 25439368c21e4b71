"""What the library's operations return: frozen records with a ``to_json()`` giving the
shape both doors print (``mindory … --json`` and the HTTP API)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mindory.reading.highlights import ReanchorReport
    from mindory.search.vectors import IndexInfo
    from mindory.store.records import ChunkInfo, EmbeddingInfo

# MiniLM for Latin script, multilingual-e5 for Chinese and Japanese (search/routed.py),
# both carried by wheels installed with mindory.
DEFAULT_EMBEDDER = "minilm+e5"


def default_embedder() -> str:
    """The embedder of a first ``mindory embed``: ``MINDORY_EMBEDDER`` when set (the
    test suite sets ``hashed``, which needs no model), else :data:`DEFAULT_EMBEDDER`."""
    import os

    return os.environ.get("MINDORY_EMBEDDER", "").strip() or DEFAULT_EMBEDDER


EMBED_BATCH = 256  # chunks per embed call and per vector-writing transaction

ImportStatus = Literal["created", "unchanged", "rederived"]


# progress(phase, done, total): phases "read", "parse", "chunk", "write".
ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class ImportResult:
    path: str
    book: str  # sha256
    title: str
    format: str
    status: ImportStatus
    fingerprint: str
    sections: int
    chunks: int
    blocks: int
    toc_entries: int
    warnings: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds per phase
    made_current: bool = False  # an existing derivation became the current one
    # A new edition: the books whose highlights moved here, and what became of each.
    replaces: tuple[str, ...] = ()
    reanchored: tuple[ReanchorReport, ...] = ()
    # Vectors made for this book's new chunks in the library's current embedding (its
    # fingerprint; None: not embedded — the library has no embedding yet, or no_embed).
    embedded: int = 0
    embedding: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "book": self.book,
            "title": self.title,
            "format": self.format,
            "fingerprint": self.fingerprint,
            "sections": self.sections,
            "chunks": self.chunks,
            "blocks": self.blocks,
            "toc_entries": self.toc_entries,
            "made_current": self.made_current,
            "warnings": list(self.warnings),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "replaces": list(self.replaces),
            "reanchored": [r.to_json() for r in self.reanchored],
            "embedded": self.embedded,
            "embedding": self.embedding,
        }


@dataclass(frozen=True, slots=True)
class ImportFailure:
    """A file a batch import could not import; nothing of it was written."""

    path: str
    error: str
    kind: str  # the error's class name

    status: Literal["failed"] = "failed"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "error": self.error, "kind": self.kind}


def no_progress(_phase: str, _done: int, _total: int) -> None:
    return None


@dataclass(frozen=True, slots=True)
class WindowsResult:
    """Sentence windows stored for the second stage by one call (``embed --windows``)."""

    windows_keys: tuple[str, ...]  # one per script the model reads (rerank.window_readers)
    chunks: int  # chunks whose windows this call stored (under any key)
    windows: int  # window vectors it stored
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "windows_keys": list(self.windows_keys),
            "chunks": self.chunks,
            "windows": self.windows,
            "seconds": round(self.seconds, 4),
        }


@dataclass(frozen=True, slots=True)
class EmbedResult:
    embedding: EmbeddingInfo
    embedded: int  # vectors made by this call
    total: int  # chunks of current derivations
    seconds: float
    embed_seconds: float  # in the embedder alone
    index: IndexInfo | None = None
    windows: WindowsResult | None = None  # None: the library keeps no sentence windows

    def to_json(self) -> dict[str, Any]:
        rate = self.embedded / self.embed_seconds if self.embed_seconds > 0 else None
        return {
            "embedding": self.embedding.to_json(),
            "embedded": self.embedded,
            "total_chunks": self.total,
            "seconds": round(self.seconds, 4),
            "chunks_per_second": round(rate, 1) if rate is not None else None,
            "index": self.index.to_json() if self.index is not None else None,
            "windows": self.windows.to_json() if self.windows is not None else None,
        }


@dataclass(frozen=True, slots=True)
class LocateResult:
    """A position in a book: where it is (:func:`mindory.reading.locate.locate_position`) and
    the chunks of the current derivation that contain it."""

    book: str
    title: str
    position: Mapping[str, Any]
    chunks: tuple[ChunkInfo, ...]
    range_end: int | None = None  # a range CFI: where the range ends (source)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"book": self.book, "bookTitle": self.title, **self.position}
        if self.range_end is not None:
            out["rangeEnd"] = self.range_end
        out["chunks"] = [{k: v for k, v in c.to_json().items() if k != "text"} for c in self.chunks]
        return out


@dataclass(frozen=True, slots=True)
class VerifyReport:
    books: int
    sections: int
    section_texts: int
    blocks: int
    chunks: int
    problems: tuple[str, ...]
    truncated: bool = False  # more problems than were collected

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "books": self.books,
            "sections": self.sections,
            "section_texts": self.section_texts,
            "blocks": self.blocks,
            "chunks": self.chunks,
            "problems": list(self.problems),
            "truncated": self.truncated,
        }


@dataclass(frozen=True, slots=True)
class WordIndexInfo:
    """The word index after :func:`update_word_index`: its analysis and what was done."""

    analysis: str
    chunks: int  # chunks of current derivations, all with terms now
    added: int  # chunks given terms by this call
    rebuilt: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "analysis": self.analysis,
            "chunks": self.chunks,
            "added": self.added,
            "rebuilt": self.rebuilt,
            "seconds": round(self.seconds, 4),
        }


@dataclass(frozen=True, slots=True)
class IndexReport:
    """``mindory index``: the word index and the vector index, each brought up to date."""

    words: WordIndexInfo
    vectors: IndexInfo | None  # None: no vectors yet (mindory embed)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = self.vectors.to_json() if self.vectors is not None else {}
        out["vectors"] = self.vectors.to_json() if self.vectors is not None else None
        out["words"] = self.words.to_json()
        return out
