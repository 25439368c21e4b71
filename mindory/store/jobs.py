"""Import jobs as rows (revision 0006): insert, read, claim, renew, report, finish.

A job moves ``queued → running → succeeded | failed``. A worker **claims** the oldest
claimable job — ``queued``, or ``running`` with an expired lease (its worker died) —
in one short write transaction: on PostgreSQL ``SELECT … FOR UPDATE SKIP LOCKED`` then
``UPDATE``, so concurrent workers skip each other's rows; on SQLite (no row locks) one
atomic ``UPDATE … WHERE id = (SELECT …)`` under ``BEGIN IMMEDIATE`` (the engine's
``mindory_write`` option), so two claims queue on the write lock. The claim sets the
lease (``lease_owner``, ``lease_expires_at``) and counts the attempt; a job whose lease
expired after ``max_attempts`` attempts fails instead of being claimed again.

Every later write of the worker names its **ticket** (owner + attempt): a worker that
lost its lease (it stalled, another worker took the job over) writes nothing more.
Every change bumps ``version`` (what the server-sent events follow).

Times are the workers' clocks (UTC); machines sharing a database keep them in sync.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from mindory.store.models import JobRow

__all__ = [
    "FINISHED",
    "Ticket",
    "active_jobs",
    "cancel_job",
    "claim_job",
    "finish_job",
    "get_job",
    "get_job_versioned",
    "insert_job",
    "job_json",
    "job_version",
    "list_jobs",
    "new_job_id",
    "report_job",
]

FINISHED: frozenset[str] = frozenset({"succeeded", "failed"})


@dataclass(frozen=True, slots=True)
class Ticket:
    """Who holds a job's lease: the worker and the attempt it claimed."""

    job_id: str
    owner: str
    attempt: int


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:  # SQLite hands back naive datetimes; they were UTC
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat(timespec="milliseconds")


def new_job_id() -> str:
    """20 hex digits: the time in milliseconds, then 32 random bits (ids sort by age)."""
    return f"{int(time.time() * 1000):012x}{secrets.token_hex(4)}"


def _writer(engine: Engine) -> Engine:
    return engine.execution_options(mindory_write=True)


def job_json(row: Any) -> dict[str, Any]:
    """The API's JSON of a job row (a JobRow or a result row with its columns)."""
    request = row.request or {}
    return {
        "id": row.id,
        "kind": row.kind,
        "state": row.state,
        "file_name": row.file_name,
        "phase": row.phase,
        "done": int(row.done),
        "total": int(row.total),
        "progress": round(float(row.progress), 4),
        "fingerprint": request.get("fingerprint", ""),
        "replaces": request.get("replaces"),
        "embed": bool(request.get("embed", True)),
        "attempts": int(row.attempts),
        "created_at": _iso(row.created_at),
        "started_at": _iso(row.started_at),
        "finished_at": _iso(row.finished_at),
        "result": row.result,
        "error": row.error,
    }


def insert_job(
    engine: Engine,
    *,
    kind: str,
    file_name: str,
    request: dict[str, Any],
    max_attempts: int = 3,
    job_id: str | None = None,
) -> dict[str, Any]:
    """Queue a job; returns its JSON."""
    now = _now()
    values: dict[str, Any] = {
        "id": job_id or new_job_id(),
        "kind": kind,
        "state": "queued",
        "file_name": file_name,
        "request": request,
        "phase": None,
        "done": 0,
        "total": 0,
        "progress": 0.0,
        "result": None,
        "error": None,
        "attempts": 0,
        "max_attempts": max(1, max_attempts),
        "lease_owner": None,
        "lease_expires_at": None,
        "version": 0,
        "created_at": now,
        "updated_at": now,
        "started_at": None,
        "finished_at": None,
    }
    with _writer(engine).begin() as conn:
        conn.execute(insert(JobRow), values)
    return job_json(_Values(values))


class _Values:
    """Attribute access over a dict (job_json of a row not read back)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def _select(conn: Connection, job_id: str) -> Any:
    return conn.execute(select(JobRow.__table__).where(JobRow.id == job_id)).first()


def get_job(engine: Engine, job_id: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = _select(conn, job_id)
    return None if row is None else job_json(row)


def get_job_versioned(engine: Engine, job_id: str) -> tuple[int, dict[str, Any]] | None:
    """(version, JSON) of a job, read together, or None."""
    with engine.connect() as conn:
        row = _select(conn, job_id)
    return None if row is None else (int(row.version), job_json(row))


def job_request(engine: Engine, job_id: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = _select(conn, job_id)
    return None if row is None else dict(row.request)


def job_version(engine: Engine, job_id: str) -> tuple[int, str] | None:
    """(version, state) of a job, or None when there is no such job."""
    with engine.connect() as conn:
        row = conn.execute(select(JobRow.version, JobRow.state).where(JobRow.id == job_id)).first()
    return None if row is None else (int(row[0]), str(row[1]))


def list_jobs(engine: Engine, limit: int = 1000) -> list[dict[str, Any]]:
    """The newest ``limit`` jobs, newest first."""
    table = JobRow.__table__
    query = select(table).order_by(JobRow.created_at.desc(), JobRow.id.desc()).limit(limit)
    with engine.connect() as conn:
        return [job_json(row) for row in conn.execute(query)]


def active_jobs(engine: Engine) -> int:
    """Jobs queued or running."""
    query = select(func.count()).select_from(JobRow).where(JobRow.state.in_(("queued", "running")))
    with engine.connect() as conn:
        return int(conn.execute(query).scalar() or 0)


def _expire_exhausted(conn: Connection, now: datetime) -> list[dict[str, Any]]:
    """Fail the running jobs whose lease expired after their last allowed attempt; their
    requests."""
    failed = conn.execute(
        update(JobRow)
        .where(
            JobRow.state == "running",
            JobRow.lease_expires_at < now,
            JobRow.attempts >= JobRow.max_attempts,
        )
        .values(
            state="failed",
            error={
                "error": "the worker running it stopped (its lease expired) on every attempt",
                "detail": {"kind": "LeaseExpired"},
            },
            lease_owner=None,
            lease_expires_at=None,
            finished_at=now,
            updated_at=now,
            version=JobRow.version + 1,
        )
        .returning(JobRow.request)
    )
    return [dict(row[0]) for row in failed]


def claim_job(
    engine: Engine,
    owner: str,
    lease_seconds: float,
    expired: list[dict[str, Any]] | None = None,
) -> tuple[Ticket, dict[str, Any]] | None:
    """Claim the oldest claimable job for ``owner``: its ticket and its request, or None.
    The requests of jobs failed on the way (out of attempts) are added to ``expired``."""
    now = _now()
    claimable = or_(
        JobRow.state == "queued",
        and_(
            JobRow.state == "running",
            JobRow.lease_expires_at < now,
            JobRow.attempts < JobRow.max_attempts,
        ),
    )
    oldest = select(JobRow.id).where(claimable).order_by(JobRow.created_at, JobRow.id).limit(1)
    changes = {
        "state": "running",
        "lease_owner": owner,
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
        "attempts": JobRow.attempts + 1,
        "phase": "read",
        "done": 0,
        "total": 0,
        "progress": 0.0,
        "started_at": func.coalesce(JobRow.started_at, now),
        "updated_at": now,
        "version": JobRow.version + 1,
    }
    # Look first without the write lock: an idle worker polls, and most polls find nothing.
    probe = select(JobRow.id).where(
        or_(
            JobRow.state == "queued",
            and_(JobRow.state == "running", JobRow.lease_expires_at < now),
        )
    )
    with engine.connect() as conn:
        if conn.execute(probe.limit(1)).first() is None:
            return None
    with _writer(engine).begin() as conn:
        gone = _expire_exhausted(conn, now)
        if expired is not None:
            expired.extend(gone)
        if conn.dialect.name == "postgresql":
            job_id = conn.execute(oldest.with_for_update(skip_locked=True)).scalar()
            if job_id is None:
                return None
            target: Any = JobRow.id == job_id
        else:  # SQLite: one atomic statement under BEGIN IMMEDIATE
            target = JobRow.id == oldest.scalar_subquery()
        row = conn.execute(
            update(JobRow)
            .where(target, claimable)
            .values(**changes)
            .returning(JobRow.id, JobRow.attempts, JobRow.request)
        ).first()
    if row is None:
        return None
    return Ticket(str(row[0]), owner, int(row[1])), dict(row[2])


def _held(ticket: Ticket) -> Any:
    return and_(
        JobRow.id == ticket.job_id,
        JobRow.state == "running",
        JobRow.lease_owner == ticket.owner,
        JobRow.attempts == ticket.attempt,
    )


def report_job(
    engine: Engine,
    ticket: Ticket,
    lease_seconds: float,
    progress: dict[str, Any] | None = None,
) -> bool:
    """Renew the lease (and write ``progress``: phase, done, total, progress); False
    when the ticket no longer holds the job (the lease was lost)."""
    now = _now()
    values: dict[str, Any] = {
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
        "updated_at": now,
    }
    if progress:
        values.update(progress)
        values["version"] = JobRow.version + 1
    with _writer(engine).begin() as conn:
        result = conn.execute(update(JobRow).where(_held(ticket)).values(**values))
    return bool(getattr(result, "rowcount", 0))


def finish_job(
    engine: Engine,
    ticket: Ticket,
    *,
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> bool:
    """End a job ``succeeded`` (``result``) or ``failed`` (``error``); False when the
    ticket no longer holds it."""
    now = _now()
    values: dict[str, Any] = {
        "state": "failed" if error is not None else "succeeded",
        "result": result,
        "error": error,
        "lease_owner": None,
        "lease_expires_at": None,
        "finished_at": now,
        "updated_at": now,
        "version": JobRow.version + 1,
    }
    if error is None:
        values.update(phase="done", progress=1.0)
    with _writer(engine).begin() as conn:
        done = conn.execute(update(JobRow).where(_held(ticket)).values(**values))
    return bool(getattr(done, "rowcount", 0))


def cancel_job(engine: Engine, job_id: str, error: dict[str, Any]) -> bool:
    """Fail a job that is still queued (nobody claimed it); False otherwise."""
    now = _now()
    with _writer(engine).begin() as conn:
        done = conn.execute(
            update(JobRow)
            .where(JobRow.id == job_id, JobRow.state == "queued")
            .values(
                state="failed",
                error=error,
                finished_at=now,
                updated_at=now,
                version=JobRow.version + 1,
            )
        )
    return bool(getattr(done, "rowcount", 0))
