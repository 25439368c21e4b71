"""Run the mindory API on a real socket (127.0.0.1, a free port) in a thread, for tests."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI


class ServerThread:
    """``with ServerThread(app) as server: httpx.get(server.url + "/health")``."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1") -> None:
        self.app = app
        self.host = host
        config = uvicorn.Config(app, host=host, port=0, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="mindory-api", daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API server did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def upload_and_wait(
    client: httpx.Client, path: Any, *, name: str | None = None, timeout: float = 60
) -> dict[str, Any]:
    """Upload a file through POST /books and poll its job until it has finished."""
    from pathlib import Path

    p = Path(path)
    with p.open("rb") as fh:
        r = client.post("/books", files={"file": (name or p.name, fh)})
    assert r.status_code == 202, r.text
    job: dict[str, Any] = r.json()
    deadline = time.monotonic() + timeout
    while job["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, f"job did not finish: {job}"
        time.sleep(0.05)
        job = client.get(f"/jobs/{job['id']}").json()
    return job
