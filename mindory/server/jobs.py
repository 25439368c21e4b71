"""Background import jobs for the HTTP API: rows of the library's database.

An upload (or a file of the configured library folder) becomes a **job row**
(:mod:`mindory.library.jobs`): the request returns at once with the job's id. The job is
run by whichever worker claims it first — one of this server's worker threads, a worker
thread of another server process on the same database (``mindory serve --workers N`` on
PostgreSQL), or a ``mindory worker`` process on any machine. Every route reads the row:
``GET /jobs/{id}`` and its server-sent events report a job wherever it runs.

This server's worker threads (``workers``, default 1) claim jobs as they are submitted
and look for jobs queued elsewhere every ``poll_seconds``; with ``workers=0`` the server
runs no imports itself (``mindory serve --import-workers 0``: ``mindory worker``
processes do). Where a claimed import's work
happens (``isolation``):

* ``"process"`` (the default for a file database): the worker thread hands the file to
  a long-lived child process (``spawn``, started at the first job) that opened its own
  Library, and relays its progress. Parsing a big book is CPU-bound Python; in the
  server's process it would hold the GIL and multiply the latency of every read
  (measured in docs/api.md), and a book that exhausts memory or crashes the parser
  takes down only the child (the job fails, the next job gets a new child).
* ``"thread"``: the worker thread imports in the server's process (tests, debugging;
  ``mindory serve --import-isolation thread``).

The import is the whole job: after the book is stored, its new chunks are embedded with
the library's current embedding (phase ``embed``; nothing when the library was never
embedded), so the book is in hybrid search when the job succeeds.

A job moves ``queued → running → succeeded | failed``; while it runs its worker writes
``phase``/``done``/``total``/``progress`` into the row and renews its lease. A server
that stops lets its running jobs finish (``close(wait=True)``) and leaves queued jobs
queued: the next worker to start runs them. A server killed mid-import leaves no half
book (the import is one transaction); another worker claims the job again once its lease
has expired.

Bad input (DESIGN §5): a file the library refuses ends the job ``failed`` with one
message naming the uploaded file and the problem (the temporary path the upload was
saved under never shows), and the library wrote nothing. An upload's temporary folder
is deleted when its job ends — it must be reachable by every worker that may run the job
(a shared folder, for workers on other machines).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import multiprocessing
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mindory.errors import MindoryError, NotFoundError
from mindory.library import Library
from mindory.library.jobs import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_MAX_ATTEMPTS,
    FINISHED,
    Claim,
    JobQueue,
    Outcome,
    Reporter,
    import_claimed,
    run_claimed,
    worker_name,
)
from mindory.text.records import Settings

__all__ = ["FINISHED", "Isolation", "JobKind", "JobManager", "JobState", "ShuttingDown"]

JobState = Literal["queued", "running", "succeeded", "failed"]
JobKind = Literal["upload", "folder"]
Isolation = Literal["process", "thread"]

FOLLOW_POLL_SECONDS = 0.1  # how often the server-sent events look at the row
KEEP_HISTORIES = 64  # jobs run here whose every version the events can replay
KEEP_SNAPSHOTS = 256  # versions kept per job


@dataclass
class _History:
    """The versions of a job this process runs, as its worker wrote them."""

    snapshots: deque[tuple[int, dict[str, Any]]] = field(
        default_factory=lambda: deque(maxlen=KEEP_SNAPSHOTS)
    )
    open: bool = True  # still running here (else: follow the row)
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)


class ShuttingDown(MindoryError):
    """A job submitted while the manager is closing (the server is stopping)."""


# ----------------------------------------------------------------------------- the child

# What the child process holds: its Library and the queue its progress goes to.
_CHILD: dict[str, Any] = {}


def _child_init(url: str, progress: Any) -> None:
    _CHILD["library"] = Library.open(url)
    _CHILD["progress"] = progress


def _child_import(job_id: str, claim: Claim) -> Outcome:
    """Import in the child; returns ("ok", result JSON) or ("error", kind, message, path)."""
    channel = _CHILD["progress"]

    def progress(phase: str, done: int, total: int) -> None:
        channel.put((job_id, phase, done, total))

    return import_claimed(_CHILD["library"], claim, progress)


# ----------------------------------------------------------------------------- the manager


class JobManager:
    """Queues import jobs in the database and runs them on worker threads (module doc)."""

    def __init__(
        self,
        library_url: str,
        *,
        workers: int = 1,
        keep: int = 1000,
        isolation: Isolation = "process",
        open_library: Callable[[str], Library] = Library.open,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        poll_seconds: float = 1.0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        if isolation not in ("process", "thread"):
            raise ValueError(f"isolation must be 'process' or 'thread', not {isolation!r}")
        self._url = library_url
        self._open_library = open_library
        self.isolation: Isolation = isolation
        self._keep = keep
        self._workers = max(0, workers)  # 0: this server runs no imports itself
        self.lease_seconds = lease_seconds
        self._poll = poll_seconds
        self._max_attempts = max_attempts
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: JobQueue | None = None
        self._queue_lib: Library | None = None
        self._local = threading.local()
        self._libraries: list[Library] = []
        self._closing = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._reporters: dict[str, Reporter] = {}
        self._history: OrderedDict[str, _History] = OrderedDict()
        # process isolation: the child pool, its progress queue and the queue's reader
        self._pool: ProcessPoolExecutor | None = None
        self._progress: Any = None
        self._listener: threading.Thread | None = None

    # ------------------------------------------------------------------ the queue

    @property
    def queue(self) -> JobQueue:
        with self._lock:
            if self._queue is None:
                self._queue_lib = self._open_library(self._url)
                self._queue = JobQueue.of(self._queue_lib, max_attempts=self._max_attempts)
            return self._queue

    def start(self) -> None:
        """Start the worker threads (they claim jobs queued by anyone)."""
        with self._lock:
            if self._closing or self._threads:
                return
            self._stop.clear()
            for n in range(self._workers):
                thread = threading.Thread(
                    target=self._work,
                    args=(worker_name(f"t{n}"),),
                    name=f"mindory-import-{n}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()

    # ------------------------------------------------------------------ submitting

    def submit(
        self,
        path: Path,
        *,
        file_name: str,
        kind: JobKind,
        settings: Settings | None = None,
        copy: bool = True,
        cleanup: Path | None = None,
        replaces: str | None = None,
        embed: bool = True,
    ) -> dict[str, Any]:
        """Queue an import of ``path``; returns the new job's JSON. ``replaces``: the
        book (SHA-256) this file is a new edition of (its highlights are re-anchored).
        ``embed``: the job embeds the new chunks with the library's current embedding."""
        with self._lock:
            if self._closing:
                raise ShuttingDown("the server is shutting down; no new imports")
        job = self.queue.submit(
            path,
            file_name=file_name,
            kind=kind,
            settings=settings,
            copy=copy,
            cleanup=cleanup,
            replaces=replaces,
            embed=embed,
        )
        self.start()
        self._wake.set()
        return job

    # ------------------------------------------------------------------ reading

    def get(self, job_id: str) -> dict[str, Any]:
        return self.queue.get(job_id)

    def exists(self, job_id: str) -> bool:
        return self.queue.exists(job_id)

    def all_jobs(self) -> list[dict[str, Any]]:
        """The newest jobs (at most ``keep``), newest first."""
        return self.queue.all(self._keep)

    def active(self) -> int:
        return self.queue.active()

    def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the job has finished or ``timeout`` passed (tests, scripts);
        returns its JSON."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            found = self.queue.version(job_id)
            if found is None:
                raise NotFoundError(f"no import job {job_id!r}")
            if found[1] in FINISHED:
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            with self._changed:
                self._changed.wait(min(0.05, left) if left is not None else 0.05)
        return self.get(job_id)

    async def follow(self, job_id: str) -> AsyncIterator[dict[str, Any]]:
        """The job's JSON now and after every change, ending with the finished job.
        A job this process runs is followed version by version (every write its
        worker made, recorded here); any other job by reading its row every
        ``FOLLOW_POLL_SECONDS`` (it may run in any worker). Raises NotFoundError at once
        for an unknown id."""
        loop = asyncio.get_running_loop()
        last = -1
        with self._lock:  # a job that already ended (or left) here: only its row
            here = self._history.get(job_id)
            replay = here is None or here.open
        while True:
            event = asyncio.Event()
            waiter = (loop, event)
            with self._lock:
                here = self._history.get(job_id) if replay else None
                new = [(v, snap) for v, snap in here.snapshots if v > last] if here else []
                if last == -1:
                    new = new[-1:]  # from now on: the newest first
                running_here = here is not None and here.open
                if not new and running_here and here is not None:
                    here.waiters.append(waiter)
            if new:
                for version, snapshot in new:
                    last = version
                    yield snapshot
                    if snapshot["state"] in FINISHED:
                        return
                continue
            if running_here and here is not None:
                try:
                    await asyncio.wait_for(event.wait(), FOLLOW_POLL_SECONDS)
                except TimeoutError:
                    pass
                finally:
                    with self._lock, contextlib.suppress(ValueError):
                        here.waiters.remove(waiter)
                continue
            found = await asyncio.to_thread(self.queue.versioned, job_id)
            if found is None:
                raise NotFoundError(f"no import job {job_id!r}")
            if found[0] > last:
                last, snapshot = found
                yield snapshot
                if snapshot["state"] in FINISHED:
                    return
                continue
            await asyncio.sleep(FOLLOW_POLL_SECONDS)

    def _record(self, job_id: str, *, close: bool = False) -> None:
        """Note the current row of a job this process runs (after each of its writes)
        and wake whoever follows it."""
        try:
            found = self.queue.versioned(job_id)
        except Exception:  # noqa: BLE001 - followers fall back to reading the row
            found = None
        with self._lock:
            here = self._history.get(job_id)
            if here is None:
                here = self._history[job_id] = _History()
                while len(self._history) > KEEP_HISTORIES:
                    self._history.popitem(last=False)
            if found is not None and (not here.snapshots or found[0] > here.snapshots[-1][0]):
                here.snapshots.append(found)
            if close:
                here.open = False
            waiters = list(here.waiters)
            self._changed.notify_all()
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(event.set)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------ the worker threads

    def _work(self, owner: str) -> None:
        while not self._stop.is_set():
            try:
                claim = self.queue.claim(owner, self.lease_seconds)
            except Exception:  # noqa: BLE001 - the database is away: look again later
                claim = None
            if claim is None:
                self._wake.wait(self._poll)
                self._wake.clear()
                continue
            job_id = claim.job_id
            self._record(job_id)
            try:
                run_claimed(
                    self.queue,
                    claim,
                    self._execute,
                    lease_seconds=self.lease_seconds,
                    on_change=functools.partial(self._record, job_id),
                )
            except Exception:  # noqa: BLE001 - the outcome could not be written: the
                self._stop.wait(self._poll)  # lease expires and another worker retries
            finally:
                self._record(job_id, close=True)

    def _execute(self, claim: Claim, reporter: Reporter) -> Outcome:
        if self.isolation == "process":
            with self._lock:
                self._reporters[claim.job_id] = reporter
            try:
                return self._import_in_child(claim)
            finally:
                with self._lock:
                    self._reporters.pop(claim.job_id, None)
        lib: Library | None = getattr(self._local, "library", None)
        if lib is None:
            lib = self._open_library(self._url)
            self._local.library = lib
            with self._lock:
                self._libraries.append(lib)
        return import_claimed(lib, claim, reporter.progress)

    def _import_in_child(self, claim: Claim) -> Outcome:
        pool = self._child_pool()
        try:
            return pool.submit(_child_import, claim.job_id, claim).result()
        except BrokenProcessPool:
            self._drop_pool(pool)
            return (
                "error",
                "ImportCrashed",
                "the import process died (out of memory, or killed) while importing it; "
                "nothing was written",
                None,
            )

    def _child_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                ctx = multiprocessing.get_context("spawn")
                self._progress = ctx.Queue()
                self._pool = ProcessPoolExecutor(
                    max_workers=max(1, self._workers),
                    mp_context=ctx,
                    initializer=_child_init,
                    initargs=(self._url, self._progress),
                )
                self._listener = threading.Thread(
                    target=self._listen,
                    args=(self._progress,),
                    name="mindory-import-progress",
                    daemon=True,
                )
                self._listener.start()
            return self._pool

    def _drop_pool(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is not pool:
                return
            self._pool = None
            channel, self._progress = self._progress, None
            listener, self._listener = self._listener, None
        pool.shutdown(wait=False, cancel_futures=True)
        self._stop_listener(channel, listener)

    @staticmethod
    def _stop_listener(channel: Any, listener: threading.Thread | None) -> None:
        if channel is None:
            return
        with contextlib.suppress(Exception):
            channel.put(None)
        if listener is not None:
            listener.join(5)
        with contextlib.suppress(Exception):
            channel.close()
            channel.join_thread()

    def _listen(self, channel: Any) -> None:
        """Relay the children's progress messages to their jobs' reporters."""
        while True:
            try:
                message = channel.get(timeout=1.0)
            except queue.Empty:
                continue
            except (EOFError, OSError, ValueError):
                return
            if message is None:
                return
            job_id, phase, done, total = message
            with self._lock:
                reporter = self._reporters.get(job_id)
            if reporter is not None:  # else: a late message, the job has already ended
                reporter.progress(phase, done, total)

    # ------------------------------------------------------------------ shutdown

    def close(self, *, wait: bool = True) -> None:
        """Stop the worker threads (a running import finishes first with ``wait``; the
        queued jobs stay queued for the next worker), stop the child process and close
        the libraries. The manager stays usable: a later :meth:`submit` starts new
        workers (an ASGI app may run its lifespan twice)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            threads, self._threads = self._threads, []
        try:
            self._stop.set()
            self._wake.set()
            if wait:
                for thread in threads:
                    thread.join()
            with self._lock:
                pool, self._pool = self._pool, None
                channel, self._progress = self._progress, None
                listener, self._listener = self._listener, None
                libraries, self._libraries = self._libraries, []
                if wait and self._queue_lib is not None:  # no worker thread uses it now
                    libraries.append(self._queue_lib)
                    self._queue_lib, self._queue = None, None
            if pool is not None:
                pool.shutdown(wait=wait, cancel_futures=True)
            self._stop_listener(channel, listener)
            for lib in libraries:
                lib.close()
        finally:
            with self._lock:
                self._closing = False

    def child_pids(self) -> list[int]:
        """Process ids of the import children (tests, diagnostics)."""
        with self._lock:
            pool = self._pool
        processes = getattr(pool, "_processes", None) or {}
        return sorted(int(pid) for pid in processes)
