"""Import jobs kept in the library's database (revision 0006, :mod:`mindory.store.jobs`).

A job is a row: anyone with the database queues one (:meth:`JobQueue.submit`), and any
**worker** — a server's own worker thread, or ``mindory worker`` on any machine that
reaches the same database and the job's file — claims it, runs the import, and writes
its progress, result or error into the row. Whoever reads the row (``GET /jobs/{id}``
and its server-sent events, on any server) sees the same job.

While a job runs, a :class:`Reporter` thread writes its progress (coalesced: the newest
only, at most every ``REPORT_EVERY`` seconds) and renews the worker's lease every third
of it. The import itself is one transaction (:mod:`mindory.library.ingest`): a worker
killed mid-import leaves no half book, its lease expires, and another worker claims the
job again (``attempts`` counts the claims; after ``max_attempts`` the job fails). A
worker that lost its lease writes nothing more into the row; re-running an import is
harmless (the same bytes are the same book: the second run finds it ``unchanged``).

On SQLite the progress writes wait for the write lock like every writer, so they go
through the reporter thread: the import never waits for its own progress.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from mindory.errors import MindoryError, NotFoundError
from mindory.store import jobs as rows
from mindory.store.jobs import FINISHED, Ticket
from mindory.text.records import Settings

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from mindory.library.library import Library

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_MAX_ATTEMPTS",
    "FINISHED",
    "Claim",
    "JobQueue",
    "Outcome",
    "Reporter",
    "import_claimed",
    "run_claimed",
    "work",
    "worker_name",
]

DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_MAX_ATTEMPTS = 3
REPORT_EVERY = 0.05  # seconds between two progress writes of one job

# Share of the progress bar per import phase (the CLI's split). ``embed``: the job embeds
# the book's new chunks with the library's current embedding (Library.import_book).
PHASE_SPAN = {
    "read": (0.0, 0.05),
    "parse": (0.05, 0.5),
    "chunk": (0.5, 0.6),
    "write": (0.6, 0.8),
    "embed": (0.8, 1.0),
}

# ("ok", result JSON) or ("error", kind, message, path)
Outcome = tuple[Any, ...]


def worker_name(suffix: str = "") -> str:
    """A worker's name in the lease: host, process id, and ``suffix`` (a thread)."""
    name = f"{socket.gethostname()}:{os.getpid()}"
    return f"{name}:{suffix}" if suffix else name


@dataclass(frozen=True)
class Claim:
    """A claimed job: its ticket (who holds the lease) and what to import."""

    ticket: Ticket
    file_name: str
    path: Path
    settings: Settings
    copy: bool
    replaces: str | None
    embed: bool
    cleanup: Path | None

    @property
    def job_id(self) -> str:
        return self.ticket.job_id


class JobQueue:
    """The jobs table of one library's database."""

    def __init__(self, engine: Engine, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> None:
        self.engine = engine
        self.max_attempts = max_attempts

    @classmethod
    def of(cls, lib: Library, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> JobQueue:
        return cls(lib.engine, max_attempts=max_attempts)

    def submit(
        self,
        path: Path,
        *,
        file_name: str,
        kind: str,
        settings: Settings | None = None,
        copy: bool = True,
        cleanup: Path | None = None,
        replaces: str | None = None,
        embed: bool = True,
    ) -> dict[str, Any]:
        """Queue an import of ``path``; returns the job's JSON. ``cleanup``: a folder to
        delete when the job has ended (an upload's temporary folder)."""
        settings = settings or Settings()
        request = {
            "path": str(path),
            "settings": settings.to_dict(),
            "fingerprint": settings.fingerprint,
            "copy": copy,
            "cleanup": str(cleanup) if cleanup is not None else None,
            "replaces": replaces,
            "embed": embed,
        }
        return rows.insert_job(
            self.engine,
            kind=kind,
            file_name=file_name,
            request=request,
            max_attempts=self.max_attempts,
        )

    def get(self, job_id: str) -> dict[str, Any]:
        job = rows.get_job(self.engine, job_id)
        if job is None:
            raise NotFoundError(f"no import job {job_id!r}")
        return job

    def exists(self, job_id: str) -> bool:
        return rows.job_version(self.engine, job_id) is not None

    def version(self, job_id: str) -> tuple[int, str] | None:
        return rows.job_version(self.engine, job_id)

    def versioned(self, job_id: str) -> tuple[int, dict[str, Any]] | None:
        """(version, JSON) of a job, or None: what the server-sent events follow."""
        return rows.get_job_versioned(self.engine, job_id)

    def all(self, limit: int = 1000) -> list[dict[str, Any]]:
        return rows.list_jobs(self.engine, limit)

    def active(self) -> int:
        return rows.active_jobs(self.engine)

    def claim(self, owner: str, lease_seconds: float) -> Claim | None:
        expired: list[dict[str, Any]] = []
        claimed = rows.claim_job(self.engine, owner, lease_seconds, expired)
        for request in expired:  # failed for good: nobody needs its upload any more
            if request.get("cleanup"):
                shutil.rmtree(request["cleanup"], ignore_errors=True)
        if claimed is None:
            return None
        ticket, request = claimed
        job = rows.get_job(self.engine, ticket.job_id) or {}
        cleanup = request.get("cleanup")
        return Claim(
            ticket=ticket,
            file_name=str(job.get("file_name", "")),
            path=Path(request["path"]),
            settings=Settings.from_dict(request["settings"]),
            copy=bool(request.get("copy", True)),
            replaces=request.get("replaces"),
            embed=bool(request.get("embed", True)),
            cleanup=Path(cleanup) if cleanup else None,
        )

    def report(
        self, ticket: Ticket, lease_seconds: float, progress: dict[str, Any] | None = None
    ) -> bool:
        return rows.report_job(self.engine, ticket, lease_seconds, progress)

    def finish(self, claim: Claim, outcome: Outcome) -> bool:
        """Write the outcome of a claimed job; False when its lease was lost."""
        if outcome[0] == "ok":
            out = dict(outcome[1])
            out["path"] = claim.file_name  # the temporary path means nothing to a client
            return rows.finish_job(self.engine, claim.ticket, result=out)
        _, kind, message, _path = outcome
        # Errors name the file by the path the worker opened; say what the client sent.
        text = f"{claim.file_name}: {str(message).replace(str(claim.path), claim.file_name)}"
        error = {"error": text, "detail": {"kind": kind, "file": claim.file_name}}
        return rows.finish_job(self.engine, claim.ticket, error=error)

    def cancel(self, job_id: str, message: str, kind: str = "Cancelled") -> bool:
        """Fail a job nobody has claimed yet."""
        job = rows.get_job(self.engine, job_id)
        if job is None:
            return False
        error = {"error": f"{job['file_name']}: {message}", "detail": {"kind": kind}}
        return rows.cancel_job(self.engine, job_id, error)


class Reporter:
    """Writes a running job's progress and renews its lease, from its own thread."""

    def __init__(
        self,
        queue: JobQueue,
        ticket: Ticket,
        lease_seconds: float,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self._queue = queue
        self._ticket = ticket
        self._lease = lease_seconds
        self._on_change = on_change
        self._cond = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._last_progress = 0.0
        self._stopped = False
        self.lost = False  # the lease went to another worker
        self._thread = threading.Thread(
            target=self._loop, name=f"mindory-job-{ticket.job_id}", daemon=True
        )

    def __enter__(self) -> Reporter:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join()

    def progress(self, phase: str, done: int, total: int) -> None:
        """The import's progress callback: never blocks on the database. The newest
        progress of each phase is written (a short phase is never coalesced away)."""
        lo, hi = PHASE_SPAN.get(phase, (0.0, 1.0))
        share = done / total if total else 1.0
        value = max(self._last_progress, lo + (hi - lo) * share)  # monotone
        self._last_progress = value
        entry = {"phase": phase, "done": done, "total": total, "progress": value}
        with self._cond:
            if self._pending and self._pending[-1]["phase"] == phase:
                self._pending[-1] = entry
            else:
                self._pending.append(entry)
            self._cond.notify_all()

    def _write(self, progress: dict[str, Any] | None) -> bool:
        try:
            held = self._queue.report(self._ticket, self._lease, progress)
        except SQLAlchemyError:
            return False  # the database is busy or away: try again next time
        if not held:
            self.lost = True
        if progress is not None and self._on_change is not None:
            self._on_change()
        return True

    def _loop(self) -> None:
        renew_every = max(0.01, self._lease / 3)
        last_renew = time.monotonic()
        while True:
            with self._cond:
                if not self._pending and not self._stopped:
                    self._cond.wait(renew_every)
                pending, self._pending = self._pending, []
                stopped = self._stopped
            for entry in pending:
                if self._write(entry):
                    last_renew = time.monotonic()
            due = not pending and time.monotonic() - last_renew >= renew_every
            if due and self._write(None):
                last_renew = time.monotonic()
            if stopped:
                return
            if pending:
                time.sleep(REPORT_EVERY)


def import_claimed(
    lib: Library, claim: Claim, progress: Callable[[str, int, int], None]
) -> Outcome:
    """Run a claimed job's import in this process; errors become the outcome."""
    try:
        result = lib.import_book(
            claim.path,
            claim.settings,
            copy=claim.copy,
            progress=progress,
            replaces=claim.replaces,
            embed=claim.embed,
        )
    except MindoryError as exc:
        return ("error", type(exc).__name__, exc.message, exc.path)
    except SQLAlchemyError as exc:
        return ("error", "DatabaseError", f"the library could not store it: {exc}", None)
    except Exception as exc:  # noqa: BLE001 - a bad file must end its job, not the worker
        return ("error", type(exc).__name__, f"{type(exc).__name__}: {exc}", None)
    return ("ok", result.to_json())


def run_claimed(
    queue: JobQueue,
    claim: Claim,
    execute: Callable[[Claim, Reporter], Outcome],
    *,
    lease_seconds: float,
    on_change: Callable[[], None] | None = None,
) -> dict[str, Any] | None:
    """Run a claimed job to its end: report while ``execute`` runs, write the outcome,
    delete its temporary folder. Returns the finished job's JSON (None: lease lost)."""
    with Reporter(queue, claim.ticket, lease_seconds, on_change) as reporter:
        try:
            outcome = execute(claim, reporter)
        except Exception as exc:  # noqa: BLE001 - never leave a job running
            outcome = ("error", type(exc).__name__, f"{type(exc).__name__}: {exc}", None)
    finished = queue.finish(claim, outcome)
    if on_change is not None:
        on_change()
    if not finished:  # another worker holds the job now; its file stays for it
        return None
    if claim.cleanup is not None:
        shutil.rmtree(claim.cleanup, ignore_errors=True)
    return queue.get(claim.job_id)


def work(
    lib: Library,
    *,
    owner: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    poll_seconds: float = 1.0,
    max_jobs: int | None = None,
    idle_exit: bool = False,
    stop: threading.Event | None = None,
    on_job: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """Claim and run jobs in this process until ``stop`` is set, ``max_jobs`` have run,
    or (``idle_exit``) the queue is empty. Returns the number of jobs run."""
    queue = JobQueue.of(lib)
    owner = owner or worker_name()
    stop = stop or threading.Event()
    ran = 0
    while not stop.is_set() and (max_jobs is None or ran < max_jobs):
        claim = queue.claim(owner, lease_seconds)
        if claim is None:
            if idle_exit:
                break
            stop.wait(poll_seconds)
            continue
        job = run_claimed(
            queue,
            claim,
            lambda c, r: import_claimed(lib, c, r.progress),
            lease_seconds=lease_seconds,
        )
        ran += 1
        if on_job is not None:
            with contextlib.suppress(Exception):
                on_job(job if job is not None else {"id": claim.job_id, "state": "lost"})
    return ran
