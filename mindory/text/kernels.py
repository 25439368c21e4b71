"""Compiled inner loops (numba) for the per-character passes over plain text.

One room: loops over code-point arrays that numpy cannot express without many
full-length passes. Each kernel has a pure-Python/numpy reference beside its
caller (``normalize._clusters_numpy``, ``windows._window_step``, …); the tests
check kernel == reference on generated text, so the output — and every id — is
the same on either path.

Which path runs is a speed choice only. Loading numba and its cached machine
code costs about half a second per process; it saves a few milliseconds per
million characters. So a process rents before it buys (the ski-rental rule):
plain-text normalization runs the references until the process has normalized
``LOAD_AFTER`` code points in all — a library import of many books, the API
server — and then loads the compiled loops. Everything else (the window
chunker, map lookups and checks) uses them once they are loaded. A one-off job
(``mindory chunk`` on a book, an EPUB import) never loads numba. Without numba,
or with ``MINDORY_NO_JIT=1``, the references always run; ``jit()`` loads them
at once (benchmarks of a long-running process do). The numba code lives in
``_kernels_jit``.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType
from typing import Any

__all__ = ["AVAILABLE", "LOAD_AFTER", "jit", "loaded", "use"]

AVAILABLE = not os.environ.get("MINDORY_NO_JIT") and importlib.util.find_spec("numba") is not None
# Code points normalized by this process before the compiled loops are loaded.
LOAD_AFTER = 64 * 1024 * 1024

_module: ModuleType | None = None
_normalized = 0  # code points normalized so far by this process


def use(length: int) -> bool:
    """Take the compiled path to normalize a text of ``length`` code points?

    Counts the text towards ``LOAD_AFTER``; loads the compiled loops when the
    count reaches it.
    """
    global _normalized
    if not AVAILABLE:
        return False
    if _module is None:
        _normalized += length
        if _normalized < LOAD_AFTER:
            return False
    return True


def loaded() -> bool:
    """Are the compiled loops already in this process (so using them costs nothing extra)?"""
    return AVAILABLE and _module is not None


def jit() -> Any:
    """The compiled loops (``_kernels_jit``), imported on first use."""
    global _module
    if _module is None:
        from mindory.text import _kernels_jit

        _module = _kernels_jit
    return _module
