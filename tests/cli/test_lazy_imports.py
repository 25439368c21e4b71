"""A command loads only what it uses (issue 25): each case runs the real ``mindory``
command in a fresh process and lists the modules it had imported when it exited.

An English search never loads the Chinese and Japanese analysers (SudachiPy, rjieba,
OpenCC), nor ONNX Runtime where no vector is asked for; a words or lexical search loads
neither FAISS nor the ORM (nor Alembic); ``mindory books`` on a SQLite library at the
newest schema loads no SQLAlchemy at all (nor numpy, FAISS, ONNX Runtime), and lists
the same books as the SQLAlchemy reading. The search's timings name each part, in
milliseconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SAMPLES

ENGLISH = "What material was the captain's artificial leg made of"
CJK_ANALYSERS = {"sudachipy", "rjieba", "opencc_pyo3"}
VECTOR_MODULES = {"numpy", "faiss", "onnxruntime"}
ORM_MODULES = {"sqlalchemy.orm", "mindory.store.models", "alembic"}

# Runs the command as `mindory` does, then writes the names of the loaded modules.
_RUNNER = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from mindory.cli import main
sys.argv[0] = "mindory"
main()
"""


def run_listing(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    listing = tmp / "modules.json"
    listing.unlink(missing_ok=True)
    env = {**os.environ, "MINDORY_EMBEDDER": "hashed", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(listing), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done, set(json.loads(listing.read_text()))


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The samples (two English books, one Chinese), imported with hashed vectors."""
    db = tmp_path_factory.mktemp("lazy") / "lib.sqlite"
    env = {**os.environ, "MINDORY_EMBEDDER": "hashed"}
    for command in (["import", str(SAMPLES)], ["embed"]):
        subprocess.run(
            [sys.executable, "-m", "mindory", "--db", str(db), *command, "--json"],
            env=env,
            capture_output=True,
            check=True,
            timeout=300,
        )
    yield db


def test_books_loads_no_vector_code(small: Path, tmp_path: Path) -> None:
    done, modules = run_listing(tmp_path, "--db", str(small), "books")
    assert "News from Nowhere" in done.stdout
    assert not modules & VECTOR_MODULES, modules & VECTOR_MODULES
    assert not {m for m in modules if m.split(".")[0] == "sqlalchemy"}  # sqlite3 reads it


def test_books_without_sqlalchemy_lists_the_same_books(small: Path, tmp_path: Path) -> None:
    from mindory.library import Library
    from mindory.library.shelf import books_of_file

    with Library.open(small) as lib:
        expected = lib.books()
    assert expected and books_of_file(small) == expected
    done, _ = run_listing(tmp_path, "--db", str(small), "books", "--json")
    assert json.loads(done.stdout) == [b.to_json() for b in expected]


def test_books_opens_a_new_library_as_usual(tmp_path: Path) -> None:
    from mindory.library.shelf import books_of_file

    db = tmp_path / "new.sqlite"
    assert books_of_file(db) is None  # no file: the library is created the usual way
    done, modules = run_listing(tmp_path, "--db", str(db), "books")
    assert "no books yet" in done.stdout and "sqlalchemy" in modules
    assert books_of_file(db) == []  # now at the newest schema
    assert books_of_file("sqlite:///" + str(db)) is None  # URLs go through SQLAlchemy


@pytest.mark.parametrize("mode", ["words", "lexical"])
def test_a_text_search_loads_no_faiss_and_no_orm(small: Path, tmp_path: Path, mode: str) -> None:
    done, modules = run_listing(
        tmp_path, "--db", str(small), "search", ENGLISH, "--mode", mode, "--json"
    )
    assert json.loads(done.stdout)["hits"]
    assert "faiss" not in modules
    assert not modules & ORM_MODULES, modules & ORM_MODULES


def test_an_english_words_search_loads_no_cjk_analyser(small: Path, tmp_path: Path) -> None:
    done, modules = run_listing(
        tmp_path, "--db", str(small), "search", ENGLISH, "--mode", "words", "--json"
    )
    assert json.loads(done.stdout)["hits"]
    assert not modules & CJK_ANALYSERS, modules & CJK_ANALYSERS
    assert "onnxruntime" not in modules and "rich" not in modules


def test_an_english_hybrid_search_loads_no_cjk_analyser(small: Path, tmp_path: Path) -> None:
    done, modules = run_listing(tmp_path, "--db", str(small), "search", ENGLISH, "--json")
    doc = json.loads(done.stdout)
    assert doc["hits"] and doc["embedding"] is not None  # the vectors took part
    assert not modules & CJK_ANALYSERS, modules & CJK_ANALYSERS
    assert "onnxruntime" not in modules  # hashed vectors need no model


def test_the_timings_name_each_part(small: Path, tmp_path: Path) -> None:
    done, _ = run_listing(tmp_path, "--db", str(small), "search", ENGLISH, "--json")
    timings = json.loads(done.stdout)["timings"]
    assert {
        "start",
        "open",
        "imports",
        "analysis",
        "words",
        "embed",
        "locate",
        "total",
        "command",
    } <= set(timings)
    assert all(v >= 0 for v in timings.values())
    assert timings["start"] + timings["open"] + timings["total"] <= timings["command"] + 1
    verbose, _ = run_listing(tmp_path, "--db", str(small), "search", ENGLISH, "--verbose")
    line = verbose.stderr.strip().splitlines()[-1]
    assert line.startswith("timings (ms): start") and "whole command" in line
