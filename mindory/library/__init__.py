"""The library room: :class:`Library`, the one entry point, and a module per concern.

Owns: the orchestration of every operation (import, catalogue, export, verify, vectors,
search, locate, annotations) over the pure rooms (text, importers, reading), the
search room and the store. May import every room below the doors; never the server or
the CLI. Names are loaded on first use, so ``import mindory.library`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mindory.library.importing import BOOK_SUFFIXES, book_files_in
    from mindory.library.library import Library
    from mindory.library.records import (
        EmbedResult,
        ImportFailure,
        ImportResult,
        LocateResult,
        ProgressFn,
        VerifyReport,
    )
    from mindory.store.engine import MIGRATIONS, downgrade, resolve_url, upgrade
    from mindory.store.records import (
        BlockInfo,
        BlockPage,
        BookInfo,
        ChunkInfo,
        DerivationInfo,
        EmbeddingInfo,
        SectionDetail,
        SectionInfo,
        TocNode,
    )

_WHERE = {
    "Library": "mindory.library.library",
    "BOOK_SUFFIXES": "mindory.library.importing",
    "book_files_in": "mindory.library.importing",
    "EmbedResult": "mindory.library.records",
    "ImportFailure": "mindory.library.records",
    "ImportResult": "mindory.library.records",
    "LocateResult": "mindory.library.records",
    "ProgressFn": "mindory.library.records",
    "VerifyReport": "mindory.library.records",
    "MIGRATIONS": "mindory.store.engine",
    "downgrade": "mindory.store.engine",
    "resolve_url": "mindory.store.engine",
    "upgrade": "mindory.store.engine",
    "BlockInfo": "mindory.store.records",
    "BlockPage": "mindory.store.records",
    "BookInfo": "mindory.store.records",
    "ChunkInfo": "mindory.store.records",
    "DerivationInfo": "mindory.store.records",
    "EmbeddingInfo": "mindory.store.records",
    "SectionDetail": "mindory.store.records",
    "SectionInfo": "mindory.store.records",
    "TocNode": "mindory.store.records",
}
__all__ = [
    "BOOK_SUFFIXES",
    "BlockInfo",
    "BlockPage",
    "BookInfo",
    "ChunkInfo",
    "DerivationInfo",
    "EmbedResult",
    "EmbeddingInfo",
    "ImportFailure",
    "ImportResult",
    "Library",
    "LocateResult",
    "MIGRATIONS",
    "ProgressFn",
    "SectionDetail",
    "SectionInfo",
    "TocNode",
    "VerifyReport",
    "book_files_in",
    "downgrade",
    "resolve_url",
    "upgrade",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mindory.library' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
