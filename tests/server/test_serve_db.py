"""`mindory --db X serve` serves X even when MINDORY_DB names another library (serve's
own --db used to read MINDORY_DB and override the root option)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mindory.cli import main as cli_main
from mindory.library import Library


def _served(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> Path | None:
    import uvicorn

    seen: dict[str, Any] = {}

    def fake_run(app: Any, **_kw: Any) -> None:
        seen["path"] = app.state.library.path
        app.state.library.close()

    monkeypatch.setattr(uvicorn, "run", fake_run)
    result = CliRunner().invoke(cli_main, args)
    assert result.exit_code == 0, result.output
    return seen["path"]


def test_the_root_db_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y = tmp_path / "x.sqlite", tmp_path / "y.sqlite"
    for p in (x, y):
        Library.open(p).close()
    monkeypatch.setenv("MINDORY_DB", str(y))
    assert _served(monkeypatch, ["--db", str(x), "serve"]) == x
    assert _served(monkeypatch, ["serve"]) == y
    assert _served(monkeypatch, ["serve", "--db", str(x)]) == x
