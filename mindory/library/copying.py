"""``Library.copy_to``: the whole library into another database (a SQLite library into
PostgreSQL, typically), then the copy checked with ``verify``.

The target is opened (created and migrated to the newest revision) and must hold no
book; the rows go in one transaction (:func:`mindory.store.copying.copy_rows`), so a
copy that fails half-way leaves the target as it was. The copy's word, trigram and
vector indexes are built by the target itself (docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from mindory.library.state import State

__all__ = ["CopyReport", "copy_to"]


@dataclass(frozen=True)
class CopyReport:
    """What was copied where, and whether ``verify`` passed on the copy."""

    target: str
    rows: dict[str, int]
    verified: bool
    problems: tuple[str, ...]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "rows": dict(self.rows),
            "verified": self.verified,
            "problems": list(self.problems),
            "seconds": round(self.seconds, 3),
        }


def copy_to(
    state: State,
    url: str,
    *,
    verify: bool = True,
    progress: Callable[[str, int], None] | None = None,
) -> CopyReport:
    from sqlalchemy.engine import make_url

    from mindory.errors import MindoryError
    from mindory.library import verify as verifying
    from mindory.store.copying import copy_rows
    from mindory.store.engine import open_engine

    t0 = perf_counter()
    engine, target_url, path = open_engine(url, state.busy_timeout_ms)
    target = State(engine, target_url, path, state.busy_timeout_ms)
    try:
        if target_url == state.url:
            raise MindoryError("cannot copy a library into itself")
        with state.engine.connect() as source, target.writer.begin() as conn:
            rows = copy_rows(source, conn, progress)
        problems: tuple[str, ...] = ()
        if verify:
            problems = tuple(verifying.verify(target, None).problems)
    finally:
        target.close()
    shown = make_url(target_url).render_as_string() if "://" in target_url else target_url
    return CopyReport(shown, rows, verify and not problems, problems, perf_counter() - t0)
