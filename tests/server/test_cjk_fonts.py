"""Chinese and Japanese text in Chromium is drawn with real glyphs, not tofu boxes.

The reader page's screenshots (tests/server/test_reader_page.py) show Chinese books; without
a CJK font on the machine every Han character and kana is the same empty box. `.ci/run`
installs Debian's `fonts-noto-cjk`; this test renders single characters with
``tests/browser/cjk_glyphs.mjs`` (headless Chromium, system fonts only), screenshots each,
and compares the pictures: real glyphs differ from one another, from the missing-glyph box
(U+10FFFD, a code point no font draws) and carry ink in proportion to their strokes (鬱 has
many, 一 one). Tofu boxes are all alike, so any of these checks catches them.

Without CJK fonts or the browser it skips loudly — but under CI=true it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.browser_harness import BROWSER_DIR, chromium_path, in_ci, require_browser

pytestmark = pytest.mark.browser

DRIVER = BROWSER_DIR / "cjk_glyphs.mjs"
MISSING = "\U0010fffd"  # plane-16 private use: no font has it, so it is drawn as .notdef
CELLS = [
    ("yong", "永", "zh-Hans"),
    ("yu", "鬱", "zh-Hant"),
    ("yi", "一", "zh-Hans"),
    ("shu", "書", "zh-Hant"),
    ("a", "あ", "ja"),
    ("ka", "カ", "ja"),
    ("kan", "漢", "ja"),
    ("tofu", MISSING, "zh"),
]


def _require_cjk_fonts() -> None:
    """Skip loudly when fontconfig knows no Chinese or Japanese font; fail under CI=true."""
    missing = []
    for lang in ("zh", "ja"):
        try:
            listed = subprocess.run(
                ["fc-list", f":lang={lang}", "family"], capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            listed = ""
        if not listed:
            missing.append(lang)
    if not missing:
        return
    message = (
        f"no font for {', '.join(missing)} (fc-list :lang=…): install Debian's fonts-noto-cjk "
        "(`apt-get install fonts-noto-cjk`, as `bash .ci/run` does); CJK glyph check not run"
    )
    if in_ci():
        pytest.fail(f"FAILED (CI=true): {message}", pytrace=False)
    pytest.skip(f"SKIPPED LOUDLY: {message}")


def _render(tmp_path: Path) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None
    job = {
        "cells": [{"id": i, "text": t, "lang": lang} for i, t, lang in CELLS],
        "out_dir": str(tmp_path),
        "font_size": 64,
        "page_shot": str(tmp_path / "page.png"),
    }
    proc = subprocess.run(
        [node, str(DRIVER)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=180,
        cwd=BROWSER_DIR,
        env={**os.environ, "CHROMIUM_PATH": chromium_path()},
        check=False,
    )
    assert proc.returncode == 0, f"cjk_glyphs.mjs failed:\n{proc.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def _ink(png: str) -> np.ndarray:
    """The dark pixels of a screenshot (black text on white) as a boolean array."""
    with Image.open(png) as im:
        grey = np.asarray(im.convert("L"), dtype=np.uint8)
    ink: np.ndarray = grey < 128
    return ink


def _overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection over union of two ink masks (1.0: the same picture)."""
    union = int(np.count_nonzero(a | b))
    return int(np.count_nonzero(a & b)) / union if union else 1.0


def test_chinese_and_japanese_are_drawn_with_glyphs(tmp_path: Path) -> None:
    require_browser()
    _require_cjk_fonts()
    out = _render(tmp_path)
    cells = {c["id"]: c for c in out["cells"]}
    ink = {i: _ink(cells[i]["png"]) for i, _, _ in CELLS}
    assert len({m.shape for m in ink.values()}) == 1, {i: m.shape for i, m in ink.items()}
    fonts = {i: [f["familyName"] for f in c["fonts"]] for i, c in cells.items()}
    tofu = ink["tofu"]
    assert tofu.any(), "the missing-glyph reference drew nothing"
    glyphs = [i for i, _, _ in CELLS if i != "tofu"]
    for i in glyphs:
        assert ink[i].any(), f"{i}: nothing drawn (fonts {fonts[i]})"
        # a glyph is not the .notdef box every missing character gets
        assert _overlap(ink[i], tofu) < 0.5, (
            f"{cells[i]['text']!r} looks like the missing-glyph box (tofu): "
            f"overlap {_overlap(ink[i], tofu):.2f}, fonts {fonts[i]}, see {out['page_shot']}"
        )
    for n, i in enumerate(glyphs):
        for j in glyphs[n + 1 :]:
            assert _overlap(ink[i], ink[j]) < 0.6, (
                f"{cells[i]['text']!r} and {cells[j]['text']!r} look alike (tofu?): "
                f"fonts {fonts[i]} / {fonts[j]}, see {out['page_shot']}"
            )
    # ink follows the strokes: 鬱 (29 strokes) against 一 (one)
    many, one = int(np.count_nonzero(ink["yu"])), int(np.count_nonzero(ink["yi"]))
    assert many > 3 * one, (many, one, fonts["yu"], fonts["yi"])
    # and Chromium says it drew them with a real font, one glyph each
    for i in glyphs:
        assert any(f["glyphCount"] >= 1 for f in cells[i]["fonts"]), (i, cells[i]["fonts"])
