"""Import jobs as database rows (revision 0006): claims, leases, ``mindory worker``.

Real databases and real processes: the claim on both backends (PostgreSQL: ``FOR UPDATE
SKIP LOCKED``), two ``mindory worker`` processes sharing one queue, a worker killed
(SIGKILL) in the middle of an import's write, and the HTTP routes reporting a job that a
worker process runs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from mindory.cli import main as cli_main
from mindory.errors import MindoryError
from mindory.library import Library
from mindory.library.jobs import JobQueue
from mindory.server.app import create_app
from mindory.server.serve import check_workers
from mindory.store.models import BookRow, ChunkRow, JobRow, SectionRow
from tests.conftest import ROOT

MINDORY = [sys.executable, "-m", "mindory"]
LOCAL = "http://127.0.0.1"


def _book(folder: Path, n: int, paragraphs: int = 300) -> Path:
    """A plain-text book of its own (distinct bytes: a book of its own in the library)."""
    path = folder / f"book-{n:02d}.txt"
    para = f"Book {n}: it was the best of times, it was the worst of times. " * 10 + "\n\n"
    path.write_text(f"Book number {n}\n\n" + para * paragraphs, encoding="utf-8")
    return path


def _worker(db: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [*MINDORY, "--db", db, "worker", "--json", "--poll", "0.05", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _ran(proc: subprocess.Popen[str], timeout: float = 120) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _count(lib: Library, model: Any) -> int:
    with lib.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(model)).scalar() or 0)


# --------------------------------------------------------------------------- the claim


def test_concurrent_claims_never_share_a_job(db_url: str) -> None:
    """Four threads, each with its own engine, claim from one queue until it is empty:
    every job is claimed exactly once (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: one
    UPDATE under BEGIN IMMEDIATE)."""
    with Library.open(db_url) as lib:
        queue = JobQueue.of(lib)
        ids = {
            queue.submit(Path(f"/nowhere/{n}.txt"), file_name=f"{n}.txt", kind="folder")["id"]
            for n in range(40)
        }
        claimed: list[tuple[str, str]] = []
        lock = threading.Lock()
        errors: list[BaseException] = []

        def claim_all(name: str) -> None:
            try:
                with Library.open(db_url) as mine:
                    own = JobQueue.of(mine)
                    while (claim := own.claim(name, 60)) is not None:
                        with lock:
                            claimed.append((claim.job_id, name))
                        assert own.finish(claim, ("ok", {"status": "created"}))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
                errors.append(exc)

        threads = [threading.Thread(target=claim_all, args=(f"w{n}",)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert sorted(j for j, _ in claimed) == sorted(ids)  # each exactly once
        jobs = queue.all()
        assert {j["state"] for j in jobs} == {"succeeded"}
        assert {j["attempts"] for j in jobs} == {1}


def test_postgresql_claims_skip_locked_rows(db_url: str, backend: str) -> None:
    """A job row another transaction holds locked is skipped, not waited for."""
    if backend != "postgresql":
        pytest.skip("row locks: PostgreSQL only (SQLite claims under its write lock)")
    with Library.open(db_url) as lib:
        queue = JobQueue.of(lib)
        first = queue.submit(Path("/nowhere/1.txt"), file_name="1.txt", kind="folder")
        second = queue.submit(Path("/nowhere/2.txt"), file_name="2.txt", kind="folder")
        with lib.engine.connect() as holder, holder.begin():
            holder.execute(select(JobRow.id).where(JobRow.id == first["id"]).with_for_update())
            started = time.monotonic()
            claim = queue.claim("w", 60)
            assert claim is not None and claim.job_id == second["id"]
            assert time.monotonic() - started < 5  # it did not wait for the lock
        claim = queue.claim("w", 60)  # the lock is gone: the first job now
        assert claim is not None and claim.job_id == first["id"]


def test_a_lost_lease_is_claimed_again_until_the_attempts_run_out(tmp_path: Path) -> None:
    with Library.open(tmp_path / "lib.sqlite") as lib:
        queue = JobQueue(lib.engine, max_attempts=2)
        upload = tmp_path / "upload-1"
        upload.mkdir()
        job = queue.submit(upload / "a.txt", file_name="a.txt", kind="upload", cleanup=upload)
        first = queue.claim("a", 0.2)
        assert first is not None and first.ticket.attempt == 1
        assert queue.claim("b", 0.2) is None  # the lease holds
        time.sleep(0.3)
        second = queue.claim("b", 0.2)
        assert second is not None and second.ticket.attempt == 2
        # The first worker lost the job: it writes nothing more.
        assert not queue.report(first.ticket, 10, {"phase": "parse"})
        assert not queue.finish(first, ("ok", {"status": "created"}))
        assert queue.get(job["id"])["state"] == "running"
        time.sleep(0.3)
        assert queue.claim("c", 0.2) is None  # two attempts, both lost: it fails
        failed = queue.get(job["id"])
        assert failed["state"] == "failed" and failed["attempts"] == 2
        assert failed["error"]["detail"]["kind"] == "LeaseExpired"
        assert not upload.exists()  # failed for good: its upload folder is gone


# --------------------------------------------------------------------------- worker processes


def test_two_worker_processes_share_one_queue(db_url: str, tmp_path: Path) -> None:
    db = db_url
    books = [_book(tmp_path, n) for n in range(10)]
    Library.open(db).close()  # migrated before the workers start
    workers = [_worker(db, "--name", f"w{n}") for n in range(2)]
    try:
        for w in workers:  # both are up (and polling) before the first job is queued
            assert w.stderr is not None and "mindory worker" in w.stderr.readline()
        with Library.open(db) as lib:
            queue = JobQueue.of(lib)
            ids = [queue.submit(b, file_name=b.name, kind="folder")["id"] for b in books]
            deadline = time.monotonic() + 120
            while queue.active():
                assert time.monotonic() < deadline, queue.all()
                assert all(w.poll() is None for w in workers)
                time.sleep(0.1)
        for w in workers:
            w.send_signal(signal.SIGTERM)  # an idle worker stops at once
        ran = [_ran(w) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    every = [j["id"] for r in ran for j in r]
    assert sorted(every) == sorted(ids)  # each job ran once, in one worker
    assert all(ran), [len(r) for r in ran]  # both took part
    with Library.open(db) as lib:
        jobs = JobQueue.of(lib).all()
        assert {j["state"] for j in jobs} == {"succeeded"}
        assert {j["attempts"] for j in jobs} == {1}
        assert {j["result"]["status"] for j in jobs} == {"created"}
        assert sorted(b.file_name for b in lib.books()) == sorted(b.name for b in books)
        assert lib.verify().ok


def _write_lock_held(db: str) -> bool:
    conn = sqlite3.connect(db, timeout=0)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return True
    else:
        conn.rollback()
        return False
    finally:
        conn.close()


def _inserting_chunks(lib: Library) -> bool:
    """PostgreSQL: another session holds a row lock on ``chunks`` (it is inserting them,
    uncommitted: the import's write transaction)."""
    query = text(
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "WHERE c.relname = 'chunks' AND l.mode = 'RowExclusiveLock' "
        "AND l.pid <> pg_backend_pid()"
    )
    with lib.engine.connect() as conn:
        return bool(conn.execute(query).scalar())


def test_a_killed_worker_leaves_no_half_book_and_its_job_is_retried(
    db_url: str, backend: str, tmp_path: Path
) -> None:
    db = db_url
    big = _book(tmp_path, 1, paragraphs=8000)  # ~5 MB: seconds of importing
    with Library.open(db) as lib:
        job = JobQueue.of(lib).submit(big, file_name=big.name, kind="folder")
    first = _worker(db, "--lease", "1", "--name", "doomed")
    try:
        deadline = time.monotonic() + 120
        # Kill it inside the import's write transaction. SQLite: the job runs and the
        # write lock is held (twice in a row: not a short progress write); PostgreSQL:
        # its session is inserting chunks.
        with Library.open(db) as lib:
            queue = JobQueue.of(lib)
            while True:
                assert time.monotonic() < deadline, queue.get(job["id"])
                assert first.poll() is None, first.communicate()
                state = queue.get(job["id"])
                assert state["state"] != "succeeded", "the import ended before the kill"
                if state["state"] == "running":
                    if backend == "postgresql":
                        if _inserting_chunks(lib):
                            break
                    elif _write_lock_held(db):
                        time.sleep(0.02)
                        if _write_lock_held(db):
                            break
                time.sleep(0.01)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        killed_at = time.monotonic()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    with Library.open(db) as lib:
        # No half book: the import's transaction never committed.
        assert lib.books() == []
        assert [_count(lib, m) for m in (BookRow, SectionRow, ChunkRow)] == [0, 0, 0]
        running = JobQueue.of(lib).get(job["id"])
        assert running["state"] == "running" and running["attempts"] == 1
        with lib.engine.connect() as conn:
            owner = conn.execute(select(JobRow.lease_owner)).scalar()
        assert owner == "doomed"
    second = _worker(db, "--lease", "1", "--max-jobs", "1", "--name", "heir")
    (done,) = _ran(second)
    assert time.monotonic() - killed_at > 0.5  # it waited for the lease to expire
    assert done["id"] == job["id"] and done["state"] == "succeeded", done
    assert done["attempts"] == 2 and done["result"]["status"] == "created"
    with Library.open(db) as lib:
        assert [b.file_name for b in lib.books()] == [big.name]
        assert lib.verify().ok


# --------------------------------------------------------------------------- the HTTP door


def test_the_api_reports_a_job_a_worker_process_runs(tmp_path: Path) -> None:
    """A server that runs no imports itself (import_workers=0) queues the upload; a
    ``mindory worker`` process runs it; GET /jobs/{id} and its events follow the row."""
    db = tmp_path / "lib.sqlite"
    app = create_app(db, upload_dir=tmp_path / "uploads", import_workers=0)
    book = _book(tmp_path, 7, paragraphs=2000)
    with TestClient(app, base_url=LOCAL) as client:
        r = client.post("/books", files={"file": (book.name, book.read_bytes())})
        assert r.status_code == 202, r.text
        job_id = r.json()["id"]
        time.sleep(0.3)
        assert client.get(f"/jobs/{job_id}").json()["state"] == "queued"  # nobody runs it
        assert client.get("/health").json()["jobs_active"] == 1
        worker = _worker(str(db), "--max-jobs", "1", "--name", "elsewhere")
        try:
            events: list[tuple[str, dict[str, Any]]] = []
            with client.stream("GET", f"/jobs/{job_id}/events") as stream:
                name = None
                for line in stream.iter_lines():
                    if line.startswith("event: "):
                        name = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        assert name is not None
                        events.append((name, json.loads(line.removeprefix("data: "))))
            (ran,) = _ran(worker)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        assert ran["id"] == job_id
        names = [n for n, _ in events]
        assert names[-1] == "done" and set(names[:-1]) <= {"progress"}
        assert any(e["state"] == "running" for _, e in events), events
        progress = [e["progress"] for _, e in events]
        assert progress == sorted(progress)
        last = events[-1][1]
        assert last["state"] == "succeeded" and last["result"]["path"] == book.name
        job = client.get(f"/jobs/{job_id}").json()
        assert job == last and job["attempts"] == 1
        assert [b["file_name"] for b in client.get("/books").json()] == [book.name]
        assert [j["id"] for j in client.get("/jobs").json()] == [job_id]
    assert list((tmp_path / "uploads").iterdir()) == []  # the worker removed the upload


def test_serve_workers_need_postgresql(tmp_path: Path) -> None:
    check_workers(str(tmp_path / "lib.sqlite"), 1)
    check_workers("postgresql+psycopg://me@/db", 4)
    with pytest.raises(MindoryError, match="PostgreSQL"):
        check_workers(str(tmp_path / "lib.sqlite"), 2)
    result = CliRunner().invoke(
        cli_main, ["--db", str(tmp_path / "lib.sqlite"), "serve", "--workers", "2"]
    )
    assert result.exit_code == 1
    assert "--workers 2 needs a PostgreSQL library" in result.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_workers_on_postgresql(request: pytest.FixtureRequest) -> None:
    """``mindory serve --workers 2`` on PostgreSQL: two uvicorn processes, one queue; the
    job is queued by one process, run by whichever claims it, reported by either."""
    server = request.getfixturevalue("pg_server")
    template = request.getfixturevalue("pg_template")
    url = server.create_database("serve_workers", template=template)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [*MINDORY, "--db", url, "serve", "--workers", "2", "--port", str(port)]
        + ["--import-isolation", "thread", "--log-level", "warning"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            try:
                httpx.get(f"{base}/health", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        r = httpx.post(f"{base}/books", files={"file": ("a.txt", b"A tiny book.\n\nOn PG.\n")})
        assert r.status_code == 202, r.text
        job = r.json()
        while job["state"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, job
            time.sleep(0.05)
            job = httpx.get(f"{base}/jobs/{job['id']}").json()
        assert job["state"] == "succeeded" and job["attempts"] == 1, job
        for _ in range(6):  # whichever process answers, the same job
            assert httpx.get(f"{base}/jobs/{job['id']}").json() == job
        assert [b["file_name"] for b in httpx.get(f"{base}/books").json()] == ["a.txt"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
        server.drop_database("serve_workers")


def test_an_idle_worker_exits_when_asked(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli_main, ["--db", str(tmp_path / "lib.sqlite"), "worker", "--exit-when-idle"]
    )
    assert result.exit_code == 0, result.output
    assert "ran 0 jobs" in result.stderr
