"""Resolve EPUB CFIs in headless Chromium with foliate-js and epub.js.

The work is done by ``tests/browser/resolve_cfis.mjs`` (Node + playwright-core + Debian's
Chromium); this module runs it as a subprocess with one JSON job on stdin.

Usage in a test::

    from tests.browser_harness import require_browser, resolve_in_browser

    @pytest.mark.browser
    def test_something() -> None:
        require_browser()
        results = resolve_in_browser(epub, [{"href": "OEBPS/c1.xhtml", "cfi": ..., "cfi_epubjs": ...}])
        assert results[0]["foliate"] == results[0]["epubjs"] == "expected text"

Each result holds ``foliate``/``epubjs`` (the range's text, or None), ``foliate_error``/
``epubjs_error`` (a message, or None), and ``foliate_href``/``epubjs_href`` (the ZIP path of
the content document the CFI's spine step points at, per engine), so a test can check the
spine step as well as the in-document path, and ``foliate_parsed_as`` (the DOM's content type:
``application/xhtml+xml``, or ``text/html`` when the XHTML was not well-formed and foliate's
loader fell back to HTML).

Pitfall: foliate-js resolves a step into a *virtual* (empty) text chunk silently — e.g. ``/1``
before a leading ``<b>`` — and returns ``""`` with no error. Compare the text, never only the
absence of an error.

Setup: ``apt-get install chromium`` and ``npm ci --prefix tests/browser`` (``bash .ci/run`` does
both). Without them :func:`require_browser` skips loudly, except under ``CI=true``, where it
fails: CI must never pass without having run the CFI proof.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

BROWSER_DIR = Path(__file__).resolve().parent / "browser"
SCRIPT = BROWSER_DIR / "resolve_cfis.mjs"
NODE_MODULES = BROWSER_DIR / "node_modules"
REQUIRED_MODULES = ("playwright-core", "epubjs", "foliate-js", "jszip")
DEFAULT_CHROMIUM = "/usr/bin/chromium"

SETUP_HINT = "run `bash .ci/run` or `apt-get install chromium && npm ci --prefix tests/browser`"


class BrowserHarnessError(RuntimeError):
    """The node script failed as a whole (not a per-item resolution error)."""


def chromium_path() -> str:
    return os.environ.get("CHROMIUM_PATH", DEFAULT_CHROMIUM)


def browser_available() -> tuple[bool, str]:
    """Whether Chromium, node and the npm modules are there; the reason when they are not."""
    missing: list[str] = []
    chromium = chromium_path()
    if not (Path(chromium).is_file() and os.access(chromium, os.X_OK)):
        missing.append(f"Chromium ({chromium})")
    if shutil.which("node") is None:
        missing.append("node")
    absent = [m for m in REQUIRED_MODULES if not (NODE_MODULES / m / "package.json").is_file()]
    if absent:
        missing.append(f"npm modules in {NODE_MODULES} ({', '.join(absent)})")
    if missing:
        return False, "missing: " + "; ".join(missing)
    return True, "ok"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def require_browser() -> None:
    """Skip (loudly) when the browser setup is missing; fail instead under CI=true."""
    ok, reason = browser_available()
    if ok:
        return
    message = f"Chromium/npm modules missing ({reason}) — {SETUP_HINT}; CFI proof not run"
    if in_ci():
        pytest.fail(f"FAILED (CI=true): {message}", pytrace=False)
    pytest.skip(f"SKIPPED: {message}")


def _timeout_for(n_items: int) -> float:
    return 180.0 + 0.5 * n_items


def run_job(epub_path: Path, items: list[dict[str, Any]]) -> dict[str, Any]:
    """Run one job; return the script's whole output (results, versions, timings_ms)."""
    node = shutil.which("node")
    if node is None:
        raise BrowserHarnessError("node is not on PATH")
    job = {
        "epub": str(Path(epub_path).resolve()),
        "items": [
            {
                "href": item.get("href"),
                "cfi": item.get("cfi"),
                "cfi_epubjs": item.get("cfi_epubjs"),
            }
            for item in items
        ],
    }
    try:
        proc = subprocess.run(
            [node, str(SCRIPT)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=_timeout_for(len(items)),
            cwd=BROWSER_DIR,
            env={**os.environ, "CHROMIUM_PATH": chromium_path()},
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BrowserHarnessError(f"resolve_cfis.mjs timed out after {exc.timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise BrowserHarnessError(
            f"resolve_cfis.mjs exited {proc.returncode}:\n{proc.stderr.strip()[-4000:]}"
        )
    try:
        out: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise BrowserHarnessError(
            f"resolve_cfis.mjs printed no JSON: {proc.stdout[:500]!r} {proc.stderr[-2000:]!r}"
        ) from exc
    if len(out.get("results", [])) != len(items):
        raise BrowserHarnessError(
            f"expected {len(items)} results, got {len(out.get('results', []))}"
        )
    return out


def resolve_in_browser(epub_path: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Resolve each item's ``cfi`` (foliate-js) and ``cfi_epubjs`` (epub.js) in Chromium.

    ``items``: dicts with ``href`` (content document's path in the ZIP, or None to follow the
    CFI's spine step), ``cfi`` and ``cfi_epubjs`` (either may be None). Returns one dict per
    item, in order: ``foliate``, ``epubjs``, ``foliate_error``, ``epubjs_error``,
    ``foliate_href``, ``epubjs_href``, ``foliate_parsed_as``. Raises
    :class:`BrowserHarnessError` if the job fails as a whole (browser won't start, bad EPUB
    path, timeout); per-item failures land in the ``*_error`` fields.
    """
    if not items:
        return []
    results: list[dict[str, Any]] = run_job(epub_path, items)["results"]
    return results
