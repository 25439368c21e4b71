"""What the built-in ONNX models share: a model made once from a wheel's file and kept in
the user cache folder, a CPU session, and runs side by side on the cores."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ParallelRuns", "cache_dir", "cached_model", "cores", "cpu_session"]

T = TypeVar("T")
R = TypeVar("R")


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


def cores() -> int:
    """How many runs the built-in models use at once: up to two cores."""
    return min(2, os.cpu_count() or 1)


def cpu_session(model: bytes, threads: int | None = None) -> Any:
    """An ONNX Runtime session on the CPU, ``threads`` (default: up to two) for one run.

    ``threads=1`` runs on the caller's thread, with no pool: several runs of one session
    can then go side by side (:class:`ParallelRuns`)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or cores()
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class ParallelRuns:
    """Independent jobs (each a whole single-threaded model run or several) on up to
    ``threads`` threads, results in input order.

    Why not one run on two intra-op threads: two one-thread runs side by side do the
    same work without spinning or waiting for each other, and a short window (most
    800-character Chinese chunks are 510 tokens + a remainder) still fills both cores:
    Chinese chunks took 241 ms of CPU each against 439, English 84 against 106 (2-core
    machine under load, ``bench/bench_embed.py``). A run gives the same bytes on one
    thread as on two (tested on corpus chunks), so the vectors do not change."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = max(1, threads or cores())
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0  # the process the pool's threads live in
        self._lock = threading.Lock()

    def map(self, job: Callable[[T], R], items: Iterable[T]) -> list[R]:
        todo = list(items)
        if self.threads == 1 or len(todo) < 2:
            return [job(item) for item in todo]
        with self._lock:
            if self._pool is None or self._pid != os.getpid():  # a fork has no threads
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="mindory-onnx")
                self._pid = os.getpid()
            pool = self._pool
        return list(pool.map(job, todo))
