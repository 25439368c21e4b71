"""Compiled inner loops (numba) for the per-character passes over plain text.

One room: loops over code-point arrays that numpy cannot express without many
full-length passes. Each kernel has a pure-Python/numpy reference beside its
caller (``normalize._clusters_numpy``, ``chunking._window_step``, …); the tests
check kernel == reference on generated text, so the output — and every id — is
the same on either path.

Which path runs is a speed choice only. Loading numba and its cached machine
code costs about half a second per process, which pays off only over many
megabytes of text (a library import, the API server, a benchmark). So only
plain-text normalization of a text of at least ``MIN_CHARS`` code points loads
it; everything else (the window chunker, map lookups and checks) uses the
compiled loops only once they are loaded, and a process that never meets a
long plain text — an EPUB import, a short book — never loads numba. Without
numba, or with ``MINDORY_NO_JIT=1``, the references always run. The numba code
lives in ``_kernels_jit`` and is imported on first use.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType
from typing import Any

__all__ = ["AVAILABLE", "MIN_CHARS", "jit", "loaded", "use"]

AVAILABLE = not os.environ.get("MINDORY_NO_JIT") and importlib.util.find_spec("numba") is not None
# Texts at least this long (code points) take the compiled path.
MIN_CHARS = 256 * 1024

_module: ModuleType | None = None


def use(length: int) -> bool:
    """Take the compiled path for a text of ``length`` code points?"""
    return AVAILABLE and (length >= MIN_CHARS or _module is not None)


def loaded() -> bool:
    """Are the compiled loops already in this process (so using them costs nothing extra)?"""
    return AVAILABLE and _module is not None


def jit() -> Any:
    """The compiled loops (``_kernels_jit``), imported on first use."""
    global _module
    if _module is None:
        from . import _kernels_jit

        _module = _kernels_jit
    return _module
