"""What the reader page tells a reader of a library with readers (issue 24): their own
token (``mindory users add NAME`` prints it once; ask whoever runs the server), or for
catalogue apps their user name and password (``mindory users passwd NAME``) — not
"enter MINDORY_TOKEN", a token such a server does not have."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from mindory.library import Library
from mindory.server.app import create_app
from tests.api_server import ServerThread
from tests.browser_harness import BROWSER_DIR, chromium_path, require_browser
from tests.conftest import SAMPLES

LOCAL = "http://127.0.0.1"


def _library_with_a_reader(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "library.sqlite"
    with Library.open(db) as lib:
        token = lib.add_reader("alice").token
    return db, token


def test_the_served_page_names_the_readers_own_token(tmp_path: Path) -> None:
    db, _ = _library_with_a_reader(tmp_path)
    with TestClient(create_app(db, import_isolation="thread"), base_url=LOCAL) as client:
        assert client.get("/books").status_code == 401  # the page will ask for a token
        page = client.get("/")
        script = client.get("/static/reader.js")
    assert page.status_code == 200 and script.status_code == 200
    for text in (page.text, script.text):
        assert "enter MINDORY_TOKEN" not in text
        assert 'placeholder="MINDORY_TOKEN"' not in text
    assert 'placeholder="your reader token"' in page.text
    assert "mindory users add NAME" in page.text  # the token field's title
    for needed in (
        "your own reader token",
        "`mindory users add NAME` prints it once",
        "ask whoever runs this server",
        "user name and password",
        "`mindory users passwd NAME`",
    ):
        assert needed in script.text, needed


@pytest.mark.browser
def test_the_page_asks_for_the_readers_token_and_takes_it(tmp_path: Path) -> None:
    """In Chromium: the message before any token and after a wrong one, then the reader's
    own token typed into the form opens the library."""
    require_browser()
    db, token = _library_with_a_reader(tmp_path)
    with Library.open(db) as lib:
        lib.import_book(SAMPLES / "wasteland.epub", embed=False)
    app = create_app(db, import_isolation="thread")
    node = shutil.which("node")
    assert node is not None
    with ServerThread(app) as server:
        proc = subprocess.run(
            [node, str(BROWSER_DIR / "sign_in.mjs")],
            input=json.dumps({"origin": server.url, "token": token, "wrong": "x" * 30}),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=180,
            env={"CHROMIUM_PATH": chromium_path(), "PATH": str(Path(node).parent)},
        )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    first, wrong, signed_in = out["first"], out["wrong"], out["signed_in"]
    assert first["started"] is False and first["form_hidden"] is False
    assert first["placeholder"] == "your reader token"
    assert first["status"].startswith("this server needs your token: enter your own reader token")
    assert "mindory users add NAME" in first["status"]
    assert "mindory users passwd NAME" in first["status"]
    assert "enter MINDORY_TOKEN" not in first["status"]
    assert wrong["status"].startswith("this token is not accepted: ")
    assert signed_in["books"] == 1
    assert "token" not in signed_in["status"]
    assert out["page_errors"] == [], out["page_errors"]
