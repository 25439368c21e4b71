"""Start-up benchmark: how long a command takes before (and while) it does its work,
beside two peers measured in the same run.

Times (median of ``--runs``, after one warm-up run so bytecode is cached):

* ``mindory --help`` beside ``sqlite-utils --help`` and ``llm --help`` (bench extras);
* ``mindory books`` on an empty library;
* ``mindory search`` on a library of the three samples (imported and embedded first);
* ``mindory import`` of the corpus into a new library, then the same command again
  (every book ``unchanged``): the whole command, start-up included.

Targets (issue 11): ``mindory --help`` no slower than ``sqlite-utils --help``;
``mindory books`` under 2x it; the unchanged re-import under 5 % of the first.

    .venv/bin/python bench/bench_startup.py [--runs 7] [--corpus DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SAMPLES = ROOT / "samples"
CORPUS = ROOT.parent / "shared" / "corpus"


def _time(cmd: list[str], env: dict[str, str], runs: int) -> dict[str, Any]:
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm-up: bytecode, caches
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - t)
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3)}


def _tool(name: str) -> str | None:
    found = BIN / name
    return str(found) if found.exists() else shutil.which(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--json", type=Path, help="Write the figures here too.")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mindory-startup-"))
    env = {**os.environ, "MINDORY_DB": str(work / "empty.sqlite")}
    # Bytecode cached, as the targets say: the warm-up run writes it (some machines
    # set PYTHONDONTWRITEBYTECODE, which would make every run compile mindory again).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    mindory = str(BIN / "mindory")
    out: dict[str, Any] = {"runs": args.runs, "cpus": os.cpu_count()}
    try:
        rows: dict[str, dict[str, Any]] = {}
        rows["mindory --help"] = _time([mindory, "--help"], env, args.runs)
        for peer in ("sqlite-utils", "llm"):
            exe = _tool(peer)
            if exe is None:
                print(f"{peer} is not installed (pip install -e '.[bench]'): skipped")
                continue
            rows[f"{peer} --help"] = _time([exe, "--help"], env, args.runs)
        subprocess.run([mindory, "books"], env=env, capture_output=True, check=True)
        rows["mindory books (empty library)"] = _time([mindory, "books"], env, args.runs)
        samples = {**env, "MINDORY_DB": str(work / "samples.sqlite")}
        subprocess.run(
            [mindory, "import", str(SAMPLES)], env=samples, capture_output=True, check=True
        )
        subprocess.run([mindory, "embed"], env=samples, capture_output=True, check=True)
        rows["mindory search (samples)"] = _time(
            [mindory, "search", "why did the narrator go swimming in the river"], samples, args.runs
        )
        out["commands"] = rows
        peer = rows.get("sqlite-utils --help")
        if peer:
            out["help_vs_sqlite_utils"] = round(
                rows["mindory --help"]["median_s"] / peer["median_s"], 2
            )
            out["books_vs_sqlite_utils"] = round(
                rows["mindory books (empty library)"]["median_s"] / peer["median_s"], 2
            )
        if args.corpus.is_dir():
            corpus = {**env, "MINDORY_DB": str(work / "corpus.sqlite")}
            t = time.perf_counter()
            subprocess.run([mindory, "import", str(args.corpus)], env=corpus, capture_output=True)
            first = time.perf_counter() - t
            again = _time([mindory, "import", str(args.corpus)], corpus, max(1, args.runs // 2))
            out["corpus_import_s"] = round(first, 2)
            out["corpus_reimport_s"] = again["median_s"]
            out["reimport_share"] = round(again["median_s"] / first, 4)
        for name, row in rows.items():
            print(f"{name:34} {row['median_s']:7.3f} s (min {row['min_s']:.3f})")
        for key in ("help_vs_sqlite_utils", "books_vs_sqlite_utils"):
            if key in out:
                print(f"{key:34} {out[key]:7.2f}x")
        if "reimport_share" in out:
            print(
                f"corpus import {out['corpus_import_s']} s, unchanged re-import "
                f"{out['corpus_reimport_s']} s = {100 * out['reimport_share']:.1f} % of it"
            )
        if args.json:
            args.json.write_text(json.dumps(out, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
