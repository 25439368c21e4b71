"""Background import jobs for the HTTP API.

An upload (or a file of the configured library folder) becomes a :class:`Job`: the
request returns at once with the job's id, and a background worker thread runs
:meth:`mindory.library.Library.import_book` on it with **its own** Library (its own
engine and connections, so a long import never holds a connection the request
handlers need). Imports run one at a time (``workers=1``): SQLite has one writer
anyway, and a queue keeps memory bounded.

Where the import's work happens (``isolation``):

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

A job moves ``queued → running → succeeded | failed``. While it runs, the library's
progress callback updates ``phase``/``done``/``total``/``progress``; every change bumps
``version`` and wakes whoever follows the job (:meth:`JobManager.follow`, the
server-sent events of ``GET /jobs/{id}/events``).

Bad input (DESIGN §5): a file the library refuses ends the job ``failed`` with one
message naming the uploaded file and the problem (the temporary path the upload was
saved under never shows), and the library wrote nothing (its import is one
transaction). An upload's temporary folder is deleted when its job ends.

Jobs live in memory only: a restarted server forgets them (the imported books stay in
the library). At most ``keep`` finished jobs are remembered.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import queue
import secrets
import shutil
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.exc import SQLAlchemyError

from mindory.errors import MindoryError, NotFoundError
from mindory.library import Library
from mindory.text.records import Settings

__all__ = ["FINISHED", "Isolation", "Job", "JobKind", "JobManager", "JobState", "ShuttingDown"]

JobState = Literal["queued", "running", "succeeded", "failed"]
JobKind = Literal["upload", "folder"]
Isolation = Literal["process", "thread"]
FINISHED: frozenset[str] = frozenset({"succeeded", "failed"})

# Share of the progress bar per import phase (the CLI's split). ``embed``: the job embeds
# the book's new chunks with the library's current embedding (Library.import_book).
_PHASE_SPAN = {
    "read": (0.0, 0.05),
    "parse": (0.05, 0.5),
    "chunk": (0.5, 0.6),
    "write": (0.6, 0.8),
    "embed": (0.8, 1.0),
}


class ShuttingDown(MindoryError):
    """A job submitted while the manager is closing (the server is stopping)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class Job:
    """One import. Mutated only by its :class:`JobManager`, under its lock."""

    id: str
    kind: JobKind
    file_name: str  # what the client sent (upload) or the path under the library folder
    path: Path  # the file the worker imports
    settings: Settings
    copy: bool
    cleanup: Path | None  # a temporary folder to delete when the job ends
    replaces: str | None = None  # a book (SHA-256) whose highlights move to this edition
    embed: bool = True  # embed the new chunks with the library's current embedding
    state: JobState = "queued"
    phase: str | None = None
    done: int = 0
    total: int = 0
    progress: float = 0.0
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    created_at: str = field(default_factory=_now)
    started_at: str | None = None
    finished_at: str | None = None
    version: int = 0
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "file_name": self.file_name,
            "phase": self.phase,
            "done": self.done,
            "total": self.total,
            "progress": round(self.progress, 4),
            "fingerprint": self.settings.fingerprint,
            "replaces": self.replaces,
            "embed": self.embed,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "result": self.result,
            "error": self.error,
        }


# ----------------------------------------------------------------------------- the child

# What the child process holds: its Library and the queue its progress goes to.
_CHILD: dict[str, Any] = {}


def _child_init(url: str, progress: Any) -> None:
    _CHILD["library"] = Library.open(url)
    _CHILD["progress"] = progress


def _child_import(
    job_id: str,
    path: str,
    settings: Settings,
    copy: bool,
    replaces: str | None = None,
    embed: bool = True,
) -> tuple[Any, ...]:
    """Import in the child; returns ("ok", result JSON) or ("error", kind, message, path)."""
    lib: Library = _CHILD["library"]
    channel = _CHILD["progress"]

    def progress(phase: str, done: int, total: int) -> None:
        channel.put((job_id, phase, done, total))

    try:
        result = lib.import_book(
            path, settings, copy=copy, progress=progress, replaces=replaces, embed=embed
        )
    except MindoryError as exc:
        return ("error", type(exc).__name__, exc.message, exc.path)
    except SQLAlchemyError as exc:
        return ("error", "DatabaseError", f"the library could not store it: {exc}", None)
    except Exception as exc:  # noqa: BLE001 - reported as the job's error, by name
        return ("error", type(exc).__name__, f"{type(exc).__name__}: {exc}", None)
    return ("ok", result.to_json())


# ----------------------------------------------------------------------------- the manager


class JobManager:
    """Runs import jobs on background worker threads (see the module doc)."""

    def __init__(
        self,
        library_url: str,
        *,
        workers: int = 1,
        keep: int = 1000,
        isolation: Isolation = "process",
        open_library: Callable[[str], Library] = Library.open,
    ) -> None:
        if isolation not in ("process", "thread"):
            raise ValueError(f"isolation must be 'process' or 'thread', not {isolation!r}")
        self._url = library_url
        self._open_library = open_library
        self.isolation: Isolation = isolation
        self._keep = keep
        self._workers = max(1, workers)
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._futures: dict[str, Future[None]] = {}
        self._local = threading.local()
        self._libraries: list[Library] = []
        self._closing = False
        self._executor: ThreadPoolExecutor | None = None
        # process isolation: the child pool, its progress queue and the queue's reader
        self._pool: ProcessPoolExecutor | None = None
        self._progress: Any = None
        self._listener: threading.Thread | None = None

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
        job = Job(
            id=secrets.token_hex(8),
            kind=kind,
            file_name=file_name,
            path=path,
            settings=settings or Settings(),
            copy=copy,
            cleanup=cleanup,
            replaces=replaces,
            embed=embed,
        )
        with self._lock:
            if self._closing:
                raise ShuttingDown("the server is shutting down; no new imports")
            if self._executor is None:  # the first job, or the first after close()
                self._executor = ThreadPoolExecutor(
                    max_workers=self._workers, thread_name_prefix="mindory-import"
                )
            self._jobs[job.id] = job
            self._forget_old()
            snapshot = job.to_json()
            self._futures[job.id] = self._executor.submit(self._run, job)
        return snapshot

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.state in FINISHED]
        for old in finished[: max(0, len(finished) - self._keep)]:
            del self._jobs[old.id]

    # ------------------------------------------------------------------ reading

    def get(self, job_id: str) -> dict[str, Any]:
        with self._lock:
            return self._job(job_id).to_json()

    def exists(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._jobs

    def all_jobs(self) -> list[dict[str, Any]]:
        """Every remembered job, newest first."""
        with self._lock:
            return [j.to_json() for j in reversed(self._jobs.values())]

    def active(self) -> int:
        with self._lock:
            return sum(1 for j in self._jobs.values() if j.state not in FINISHED)

    def _job(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no import job {job_id!r} (jobs are kept in memory only)")
        return job

    def wait(self, job_id: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the job has finished (tests, scripts); returns its JSON."""
        with self._lock:
            future = self._futures.get(job_id)
            self._job(job_id)
        if future is not None:
            with contextlib.suppress(Exception):
                future.result(timeout)
        return self.get(job_id)

    async def follow(self, job_id: str) -> AsyncIterator[dict[str, Any]]:
        """The job's JSON now and after every change, ending with the finished job.

        Raises NotFoundError at once for an unknown id.
        """
        loop = asyncio.get_running_loop()
        last = -1
        while True:
            event = asyncio.Event()
            with self._lock:
                job = self._job(job_id)
                changed = job.version != last
                if changed:
                    last = job.version
                    snapshot = job.to_json()
                else:
                    waiter = (loop, event)
                    job.waiters.append(waiter)
            if changed:
                yield snapshot
                if snapshot["state"] in FINISHED:
                    return
                continue
            try:
                await event.wait()
            finally:
                with self._lock, contextlib.suppress(ValueError):
                    job.waiters.remove(waiter)

    # ------------------------------------------------------------------ updates

    def _update(self, job: Job, **changes: Any) -> None:
        with self._lock:
            for key, value in changes.items():
                setattr(job, key, value)
            job.version += 1
            waiters = list(job.waiters)
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
                loop.call_soon_threadsafe(event.set)

    def _progress_of(self, job: Job, phase: str, done: int, total: int) -> None:
        with self._lock:
            running = job.state == "running"
        if not running:  # a late message from the child: the job has already ended
            return
        lo, hi = _PHASE_SPAN.get(phase, (0.0, 1.0))
        share = done / total if total else 1.0
        self._update(job, phase=phase, done=done, total=total, progress=lo + (hi - lo) * share)

    # ------------------------------------------------------------------ the worker thread

    def _run(self, job: Job) -> None:
        try:
            self._update(job, state="running", started_at=_now(), phase="read")
            if self.isolation == "process":
                outcome = self._import_in_child(job)
            else:
                outcome = self._import_here(job)
            if outcome[0] == "ok":
                out = dict(outcome[1])
                out["path"] = job.file_name  # the temporary path means nothing to a client
                self._update(
                    job,
                    state="succeeded",
                    result=out,
                    phase="done",
                    progress=1.0,
                    finished_at=_now(),
                )
            else:
                _, kind, message, path = outcome
                self._fail(job, self._message(job, message, path), kind)
        except Exception as exc:  # noqa: BLE001 - never leave a job running
            self._fail(job, f"{job.file_name}: {type(exc).__name__}: {exc}", type(exc).__name__)
        finally:
            if job.cleanup is not None:
                shutil.rmtree(job.cleanup, ignore_errors=True)

    def _import_here(self, job: Job) -> tuple[Any, ...]:
        lib: Library | None = getattr(self._local, "library", None)
        if lib is None:
            lib = self._open_library(self._url)
            self._local.library = lib
            with self._lock:
                self._libraries.append(lib)
        try:
            result = lib.import_book(
                job.path,
                job.settings,
                copy=job.copy,
                progress=lambda p, d, t: self._progress_of(job, p, d, t),
                replaces=job.replaces,
                embed=job.embed,
            )
        except MindoryError as exc:
            return ("error", type(exc).__name__, exc.message, exc.path)
        except SQLAlchemyError as exc:
            return ("error", "DatabaseError", f"the library could not store it: {exc}", None)
        except Exception as exc:  # noqa: BLE001 - a bad file must end its job, not the worker
            return ("error", type(exc).__name__, f"{type(exc).__name__}: {exc}", None)
        return ("ok", result.to_json())

    def _import_in_child(self, job: Job) -> tuple[Any, ...]:
        pool = self._child_pool()
        try:
            future = pool.submit(
                _child_import,
                job.id,
                str(job.path),
                job.settings,
                job.copy,
                job.replaces,
                job.embed,
            )
            return future.result()
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
                    max_workers=self._workers,
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
        """Relay the children's progress messages to their jobs."""
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
                job = self._jobs.get(job_id)
            if job is not None:
                self._progress_of(job, phase, done, total)

    def _message(self, job: Job, message: str, _path: str | None) -> str:
        # Errors name the file by the path the worker opened; say what the client sent.
        return f"{job.file_name}: {message.replace(str(job.path), job.file_name)}"

    def _fail(self, job: Job, message: str, kind: str) -> None:
        self._update(
            job,
            state="failed",
            error={"error": message, "detail": {"kind": kind, "file": job.file_name}},
            finished_at=_now(),
        )

    # ------------------------------------------------------------------ shutdown

    def close(self, *, wait: bool = True) -> None:
        """Drop the queued jobs, let the running one finish (``wait``), stop the child
        process and close the workers' libraries. The manager stays usable: a later
        :meth:`submit` starts new workers (an ASGI app may run its lifespan twice)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            executor, self._executor = self._executor, None
            futures, self._futures = dict(self._futures), {}
        try:
            for job_id, future in futures.items():
                if future.cancel():  # still queued: it never runs, so clean up here
                    job = self._jobs.get(job_id)
                    if job is not None:
                        self._fail(
                            job, f"{job.file_name}: the server stopped before it ran", "Cancelled"
                        )
                        if job.cleanup is not None:
                            shutil.rmtree(job.cleanup, ignore_errors=True)
            if executor is not None:
                executor.shutdown(wait=wait, cancel_futures=True)
            with self._lock:
                pool, self._pool = self._pool, None
                channel, self._progress = self._progress, None
                listener, self._listener = self._listener, None
                libraries, self._libraries = self._libraries, []
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
