"""Chunking strategies at the doors: mindory import / chunk --strategy, and a parent-child
hit carrying its parent span as the reading context."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mindory.cli import main
from tests.conftest import SAMPLES

NEWS = SAMPLES / "news-from-nowhere.txt"


def run(db: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_import_with_a_strategy_and_read_big(tmp_path: Path) -> None:
    db = tmp_path / "lib.sqlite"
    out = json.loads(
        run(db, "import", str(NEWS), "--strategy", "parent-child", "--size", "300",
            "--parent-size", "1200", "--json")
    )  # fmt: skip
    settings = out["results"][0]
    assert settings["status"] == "created"
    show = json.loads(run(db, "show", "News", "--json"))
    assert show["derivations"][0]["settings"]["chunking"]["strategy"] == "parent-child"
    hits = json.loads(run(db, "search", "soap works chimneys", "--mode", "lexical", "--json"))
    top = hits["hits"][0]["locator"]
    assert "context" in top  # search small, read big: the parent's span to read it in
    ctx = top["context"]["source"]
    assert ctx["start"] <= top["source"]["start"] < top["source"]["end"] <= ctx["end"]
    assert ctx["end"] - ctx["start"] > top["source"]["end"] - top["source"]["start"]


def test_chunk_command_takes_a_strategy(tmp_path: Path) -> None:
    doc = json.loads(run(tmp_path / "x.sqlite", "chunk", str(NEWS), "--strategy", "paragraph",
                         "--json"))  # fmt: skip
    assert doc["settings"]["chunking"]["strategy"] == "paragraph"
    bad = CliRunner().invoke(main, ["chunk", str(NEWS), "--strategy", "sentences"])
    assert bad.exit_code == 2 and "sentences" in bad.output
