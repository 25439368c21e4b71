"""The schema revisions the Alembic scripts define, read from the scripts themselves
(no Alembic, no SQLAlchemy): opening an up-to-date library compares its
``alembic_version`` with these heads, and ``mindory books`` reads a SQLite library
with nothing more (:mod:`mindory.store.sqlite_shelf`)."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

from mindory.errors import MindoryError

__all__ = ["MIGRATIONS"]


def _migrations_dir() -> Path:
    """The Alembic scripts. A checkout keeps them in the top-level ``migrations/`` folder;
    pyproject maps that folder into the package as ``mindory.migrations``, so a wheel
    carries them too (an editable install finds the checkout's folder the same way)."""
    spec = importlib.util.find_spec("mindory.migrations")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "migrations"  # a bare checkout on sys.path


MIGRATIONS = _migrations_dir()
_REVISION_RE = re.compile(r"""^(down_revision|revision)\s*(?::[^=]*)?=\s*(.+)$""", re.M)


@functools.cache
def _revisions() -> tuple[frozenset[str], tuple[str, ...]]:
    """(every revision id, the heads) read from the scripts' ``revision`` and
    ``down_revision`` lines: opening an up-to-date library then needs no Alembic import
    (it costs a quarter of a second). A test checks this agrees with Alembic."""
    if not (MIGRATIONS / "env.py").is_file():
        raise MindoryError(f"the schema migrations are missing: {MIGRATIONS}")
    known: set[str] = set()
    parents: set[str] = set()
    for script in sorted((MIGRATIONS / "versions").glob("*.py")):
        for key, value in _REVISION_RE.findall(script.read_text(encoding="utf-8")):
            ids = set(re.findall(r"[\"']([^\"']+)[\"']", value))
            (known if key == "revision" else parents).update(ids)
    return frozenset(known), tuple(sorted(known - parents))


def _script_heads() -> tuple[str, ...]:
    return _revisions()[1]


def _known_revisions() -> frozenset[str]:
    return _revisions()[0]
