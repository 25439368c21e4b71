"""Shared fixtures: where the corpus and samples are, and the CI skip policy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.pg import (  # noqa: F401  (fixtures: both backends, the PostgreSQL server)
    backend,
    db_url,
    module_backend,
    module_db_url,
    pg_server,
    pg_template,
)

# The suite embeds with the hashed embedder (no model to load); the built-in sentence
# model, the default for users, has tests of its own (tests/search/test_minilm.py).
os.environ.setdefault("MINDORY_EMBEDDER", "hashed")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
CORPUS = ROOT.parent / "shared" / "corpus"


def corpus_file(name: str) -> Path:
    """A file of ../shared/corpus; skip loudly if absent, but never on CI."""
    path = CORPUS / name
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"corpus file missing on CI: {path}")
        pytest.skip(f"SKIPPED LOUDLY: corpus file {path} is not here (tests read ../shared/corpus)")
    return path


CONFORMANCE = ROOT.parent / "shared" / "conformance"


def conformance_file(name: str) -> Path:
    """A file of ../shared/conformance (official schemas, KOReader's contract); skip
    loudly if absent, but never on CI."""
    path = CONFORMANCE / name
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"conformance file missing on CI: {path}")
        pytest.skip(
            f"SKIPPED LOUDLY: conformance file {path} is not here "
            "(tests read ../shared/conformance)"
        )
    return path
