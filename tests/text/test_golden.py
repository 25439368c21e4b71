"""Golden files for whole sample books: every chunk's spans and its edges.

Rewrite on purpose with ``make golden`` (MINDORY_UPDATE_GOLDEN=1) and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mindory.importers import load_book
from mindory.text import kernels
from mindory.text.chunking import chunk_book
from mindory.text.records import Settings
from tests.conftest import ROOT, SAMPLES

GOLDEN = ROOT / "tests" / "golden"


def _golden_lines(path: Path) -> list[str]:
    settings = Settings()
    book = load_book(path, settings.profile)
    chunks = chunk_book(book, settings)
    head = {
        "book": book.title,
        "sha256": book.sha256,
        "encoding": book.encoding,
        "fingerprint": settings.fingerprint,
        "sections": [
            [s.ordinal, s.title, s.source_start, s.source_end, len(s.normalized_text)]
            for s in book.sections
        ],
    }
    lines = [json.dumps(head, ensure_ascii=False)]
    for c in chunks:
        lines.append(
            json.dumps(
                [
                    c.section,
                    c.index,
                    c.start,
                    c.end,
                    c.source_start,
                    c.source_end,
                    c.utf16_start,
                    c.utf16_end,
                    c.id,
                    c.text[:20],
                    c.text[-20:],
                ],
                ensure_ascii=False,
            )
        )
    return lines


@pytest.mark.parametrize("name", ["news-from-nowhere.txt", "qiaoshi-yanyi.txt"])
def test_golden(name: str) -> None:
    golden = GOLDEN / (Path(name).stem + ".jsonl")
    lines = _golden_lines(SAMPLES / name)
    if os.environ.get("MINDORY_UPDATE_GOLDEN") == "1":
        golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = golden.read_text(encoding="utf-8").splitlines()
    assert lines[0] == expected[0], "book header drifted"
    for got, want in zip(lines[1:], expected[1:]):
        assert got == want, "chunk drifted (run `make golden` only if the change is intended)"
    assert len(lines) == len(expected)


@pytest.mark.skipif(not kernels.AVAILABLE, reason="numba is not installed")
@pytest.mark.parametrize("name", ["news-from-nowhere.txt", "qiaoshi-yanyi.txt"])
def test_golden_with_the_compiled_loops(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bytes when the process has loaded the compiled loops (a long-running one)."""
    monkeypatch.setattr(kernels, "LOAD_AFTER", 0)
    kernels.jit()
    lines = _golden_lines(SAMPLES / name)
    expected = (GOLDEN / (Path(name).stem + ".jsonl")).read_text(encoding="utf-8").splitlines()
    assert lines == expected
