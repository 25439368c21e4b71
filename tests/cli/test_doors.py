"""Door manners: --help without loading the rooms, the command table's short helps,
--version, and a closed pipe ending quietly with SIGPIPE's status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from mindory.cli import COMMANDS, main
from tests.conftest import ROOT, SAMPLES

MINDORY = [sys.executable, "-m", "mindory"]


def test_the_help_table_is_each_commands_own_short_help() -> None:
    ctx = click.Context(main)
    for name, (_module, _attribute, short) in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert command is not None and command.name == name
        assert command.get_short_help_str(limit=500) == short, name
    assert sorted(COMMANDS) == main.list_commands(ctx)


def test_help_loads_no_room() -> None:
    """mindory --help imports click and the command table: no library, store, numpy."""
    code = (
        "import sys; from mindory.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'numpy', 'rich', 'fastapi', 'lxml')"
        " or m.startswith(('mindory.library', 'mindory.store', 'mindory.search'))]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout, out.stdout


@pytest.mark.parametrize("books", [0, 1])
def test_books_loads_no_pipeline_and_no_orm(tmp_path: Path, books: int) -> None:
    """Listing books reads Core tables: no importer, no search, not even the ORM
    (importing it costs more than the rest of the command). The library exists: a new
    one is created by the migrations, which do load both."""
    from mindory.library import Library

    db = tmp_path / "l.sqlite"
    with Library.open(db) as lib:
        if books:
            lib.import_book(SAMPLES / "news-from-nowhere.txt")
    code = (
        "import sys; from mindory.cli import main\n"
        f"try:\n    main(['--db', {str(db)!r}, 'books'])\n"
        "except SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('numpy', 'lxml', 'faiss', 'fastapi')"
        " or m.startswith(('mindory.importers', 'mindory.search', 'mindory.text.chunking',"
        " 'sqlalchemy.orm', 'mindory.store.models', 'alembic'))]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stdout, out.stdout
    assert ("e5182ca7efdc" in out.stdout) if books else ("no books yet" in out.stdout)


def test_version() -> None:
    out = subprocess.run([*MINDORY, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("mindory ") and out.stdout.strip() != "mindory"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")
def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    env = {**os.environ, "MINDORY_DB": str(db)}
    subprocess.run(
        [*MINDORY, "import", str(SAMPLES / "news-from-nowhere.txt")],
        env=env,
        capture_output=True,
        check=True,
    )
    # `mindory export BOOK | head -n 1`: head exits after one line; export must not cry.
    export = subprocess.Popen(
        [*MINDORY, "export", "News"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert export.stdout is not None
    export.stdout.readline()
    export.stdout.close()  # the reader goes away
    _, err = export.communicate(timeout=120)
    assert export.returncode == 141, err
    assert b"error" not in err.lower() and b"Traceback" not in err
