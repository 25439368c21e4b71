"""What the built-in ONNX models share: a model made once from a wheel's file and kept in
the user cache folder, and a CPU session on at most two threads."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "cached_model", "cpu_session"]


def cache_dir() -> Path:
    """``MINDORY_CACHE``, else the user cache folder."""
    import platformdirs

    return Path(os.environ.get("MINDORY_CACHE") or platformdirs.user_cache_dir("mindory"))


def cached_model(name: str, make: Callable[[], bytes]) -> bytes:
    """The bytes of cache file ``name``, made by ``make`` (and kept) when not there."""
    cached = cache_dir() / name
    try:
        return cached.read_bytes()
    except OSError:
        pass
    made = make()
    try:  # write beside, then rename: a reader never sees half a file
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cached.parent, suffix=".part")
        with os.fdopen(fd, "wb") as fh:
            fh.write(made)
        os.replace(tmp, cached)
    except OSError:
        pass  # a read-only cache: make it again next time
    return made


def cpu_session(model: bytes, threads: int | None = None) -> Any:
    """An ONNX Runtime session on the CPU, ``threads`` (default: up to two) for one run."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
