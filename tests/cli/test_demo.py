"""``make demo`` keeps its library: a file of its own in the user data directory, re-used by
the next run (nothing imported or embedded twice), beside the reader's own library, which
it never touches; it ends with what to try next."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindory.cli import demo
from mindory.library import Library


@pytest.mark.slow
def test_the_demo_keeps_its_library_and_reuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("MINDORY_EMBEDDER", "hashed")
    monkeypatch.delenv("MINDORY_DB", raising=False)
    monkeypatch.delenv("MINDORY_DATABASE_URL", raising=False)
    folder = tmp_path / "data" / "mindory"
    folder.mkdir(parents=True)
    own = folder / "library.sqlite"  # the default library (`mindory where`): the reader's
    own.write_bytes(b"the reader's own library")

    first = demo.main([])
    assert first.db == folder / "demo.sqlite" == demo.demo_db_path()
    assert not first.reused
    assert first.statuses == ("created", "created", "created")
    assert first.embedded > 0 and first.ok
    out = capsys.readouterr().out
    assert f"a new demo library in {first.db}" in out
    assert "what to try next" in out
    assert f"export MINDORY_DB={first.db}" in out
    for command in ("mindory where", "mindory search ", "mindory serve", "mindory show "):
        assert command in out, command
    assert f"back to your own library: {own}" in out

    assert first.db.is_file()
    with Library.open(first.db) as lib:
        assert len(lib.books()) == 3
        current = lib.current_embedding()
        assert current is not None and current.embedder_id.startswith("hashed")

    second = demo.main([])
    assert second.db == first.db and second.reused
    assert second.statuses == ("unchanged", "unchanged", "unchanged")
    assert second.embedded == 0 and second.ok
    out = capsys.readouterr().out
    assert "kept from the last run" in out
    assert "embedded 0 chunks" in out

    assert own.read_bytes() == b"the reader's own library"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("demo.sqlite")) == [
        "library.sqlite"
    ]
