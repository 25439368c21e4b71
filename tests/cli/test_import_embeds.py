"""`mindory import` embeds the new chunks with the library's current embedding (issue 13):
after `delete` and a re-import, hybrid search covers the book again; `--no-embed` leaves it
lexical, and search says so in `warnings`; an unchanged re-import loads no embedder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from mindory.cli import main
from mindory.library import Library
from tests.conftest import ROOT, SAMPLES

TXT = SAMPLES / "qiaoshi-yanyi.txt"
NEWS = SAMPLES / "news-from-nowhere.txt"


def run(db: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["--db", str(db), *args])


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _search(db: Path, query: str, book: str) -> Any:
    return _json(run(db, "search", query, "--book", book, "--mode", "hybrid", "--json"))


def test_reimport_after_delete_is_embedded(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    _json(run(db, "import", str(TXT), str(NEWS), "--json"))
    _json(run(db, "embed", "--json"))
    assert _search(db, "魏忠賢", "qiaoshi")["warnings"] == []
    deleted = _json(run(db, "delete", "qiaoshi", "--yes", "--json"))
    again = _json(run(db, "import", str(TXT), "--json"))["results"][0]
    assert again["status"] == "created" and again["book"] == deleted["id"]
    assert again["embedded"] == again["chunks"] > 0
    with Library.open(db) as lib:
        current = lib.current_embedding()
        assert current is not None and again["embedding"] == current.fingerprint
        assert current.vectors == sum(b.current.chunk_count for b in lib.books() if b.current)
    found = _search(db, "魏忠賢", "qiaoshi")
    assert found["warnings"] == [], found["warnings"]
    assert any(h["scores"].get("vector") for h in found["hits"])
    # the readable table says how many were embedded
    _json(run(db, "delete", "qiaoshi", "--yes", "--json"))
    table = run(db, "import", str(TXT))
    assert table.exit_code == 0 and "embedded" in table.stdout
    assert str(again["chunks"]) in table.stdout


def test_no_embed_leaves_the_book_lexical_and_search_warns(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    _json(run(db, "import", str(NEWS), "--json"))
    _json(run(db, "embed", "--json"))
    out = _json(run(db, "import", str(TXT), "--no-embed", "--json"))["results"][0]
    assert out["status"] == "created" and out["embedded"] == 0 and out["embedding"] is None
    found = _search(db, "魏忠賢", "qiaoshi")
    assert found["hits"]  # found by the word and trigram indexes
    assert any("have no vectors" in w for w in found["warnings"]), found["warnings"]
    readable = run(db, "search", "魏忠賢", "--book", "qiaoshi")
    assert "have no vectors" in readable.stderr
    # `mindory embed` completes it; the warning goes away
    _json(run(db, "embed", "--json"))
    assert _search(db, "魏忠賢", "qiaoshi")["warnings"] == []


def test_rederive_is_embedded_and_made_current_derivation_too(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    _json(run(db, "import", str(TXT), "--json"))
    _json(run(db, "embed", "--json"))
    other = _json(run(db, "import", str(TXT), "--size", "400", "--overlap", "50", "--json"))
    item = other["results"][0]
    assert item["status"] == "rederived" and item["embedded"] == item["chunks"]
    back = _json(run(db, "import", str(TXT), "--json"))["results"][0]
    # the first derivation is current again; its vectors are still there: nothing to do
    assert back["status"] == "unchanged" and back["made_current"] and back["embedded"] == 0
    assert _search(db, "魏忠賢", "qiaoshi")["warnings"] == []


def test_unchanged_reimport_loads_no_embedder(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    _json(run(db, "import", str(TXT), "--json"))
    _json(run(db, "embed", "--json"))
    probe = (
        "import sys\n"
        "from mindory.library import Library\n"
        f"lib = Library.open({str(db)!r})\n"
        f"r = lib.import_book({str(TXT)!r})\n"
        "assert r.status == 'unchanged' and not r.made_current, r\n"
        "loaded = [m for m in ('mindory.library.vectors', 'mindory.search.embedders',"
        " 'mindory.library.ingest', 'numpy') if m in sys.modules]\n"
        "print(loaded, r.embedded)\n"
    )
    env = {**os.environ, "MINDORY_EMBEDDER": "hashed"}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] 0", out.stdout
