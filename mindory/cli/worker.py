"""``mindory worker``: run the library's queued import jobs in this process.

A thin door onto :func:`mindory.library.jobs.work`: claim the oldest queued job from the
library's database (``--db``, or ``MINDORY_DATABASE_URL``), import it, write its progress
and outcome into the job's row, and go on. Start as many as you like, on any machine
that reaches the database and the jobs' files; they never run the same job at once (the
claim is atomic) and a killed worker's job is retried by another once its lease
expires (docs/api.md, "Jobs"; docs/deploy.md, "Workers").

SIGTERM (and a first Ctrl-C) lets the running import finish, then the worker exits.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import click

from mindory.cli.common import err_console, library, print_json

__all__ = ["worker"]


@click.command("worker")
@click.option(
    "--lease",
    "lease_seconds",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0.05, 3600),
    help="Seconds a claim lasts without renewal (renewed every third of it while running).",
)
@click.option(
    "--poll",
    "poll_seconds",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.01, 600),
    help="Seconds between two looks at an empty queue.",
)
@click.option(
    "--max-jobs", type=click.IntRange(1), default=None, help="Exit after running this many jobs."
)
@click.option("--exit-when-idle", is_flag=True, help="Exit as soon as the queue is empty.")
@click.option("--name", default=None, help="The worker's name in the lease (default: host:pid).")
@click.option("--json", "as_json", is_flag=True, help="Print each finished job's JSON line.")
@click.pass_context
def worker(
    ctx: click.Context,
    lease_seconds: float,
    poll_seconds: float,
    max_jobs: int | None,
    exit_when_idle: bool,
    name: str | None,
    as_json: bool,
) -> None:
    """Run queued import jobs from the library's database until stopped."""
    from mindory.library.jobs import work, worker_name

    lib = library(ctx)
    owner = name or worker_name()
    stop = threading.Event()
    quiet = err_console()

    def on_signal(_signum: int, _frame: Any) -> None:
        if stop.is_set():  # the second time: stop now
            raise KeyboardInterrupt
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

    def on_job(job: dict[str, Any]) -> None:
        if as_json:
            print_json(job)
        else:
            quiet.print(
                f"mindory worker: job {job['id']} {job.get('file_name', '')}: {job['state']}"
            )

    where = str(lib.path) if lib.path is not None else "the database of MINDORY_DATABASE_URL/--db"
    quiet.print(f"mindory worker {owner}: running the import jobs of {where}", highlight=False)
    try:
        ran = work(
            lib,
            owner=owner,
            lease_seconds=lease_seconds,
            poll_seconds=poll_seconds,
            max_jobs=max_jobs,
            idle_exit=exit_when_idle,
            stop=stop,
            on_job=on_job,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    quiet.print(f"mindory worker {owner}: ran {ran} job{'s' if ran != 1 else ''}")
