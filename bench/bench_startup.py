"""Start-up benchmark: how long a command takes before (and while) it does its work,
beside two peers measured in the same run.

Times (median of ``--runs``, after one warm-up run so bytecode is cached):

* ``mindory --help`` beside ``sqlite-utils --help`` and ``llm --help`` (bench extras);
* ``mindory books`` on an empty library;
* ``mindory search`` on a library of the three samples (imported and embedded first);
* ``mindory import`` of the corpus into a new library, then the same command again
  (every book ``unchanged``): the whole command, start-up included.

With ``--db LIB`` (a library with vectors, e.g. the corpus embedded with the default
``minilm+e5``) it measures instead, each a cold process, on that library: ``mindory
books``; ``mindory search`` of an English question in hybrid mode (vectors), ``--mode
words`` and ``--mode lexical``; a Chinese question in hybrid mode. Each row: median wall
time, median CPU time (user + system: less disturbed by a busy machine) and the median
of the process's maximum RSS.

Targets (issue 11): ``mindory --help`` no slower than ``sqlite-utils --help``;
``mindory books`` under 2x it; the unchanged re-import under 5 % of the first.
Targets (issue 25): English hybrid search ≤ 1.0 s and ≤ 300 MB; ``--mode words`` ≤ 0.5 s;
``mindory books`` ≤ 0.3 s with ~20 books.

    .venv/bin/python bench/bench_startup.py [--runs 7] [--corpus DIR] [--json OUT]
    .venv/bin/python bench/bench_startup.py --db LIB [--runs 7] [--json OUT]
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


def _run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s, max RSS MB) of one run of ``cmd``: wait4 gives that child's own
    usage (resource's RUSAGE_CHILDREN would keep the largest child's RSS so far)."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: a full pipe would block
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise subprocess.CalledProcessError(proc.returncode, cmd, stderr=err.read())
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # KB on Linux


def _time(cmd: list[str], env: dict[str, str], runs: int) -> dict[str, Any]:
    _run_once(cmd, env)  # warm-up: bytecode, caches
    walls, cpus, rss = zip(*(_run_once(cmd, env) for _ in range(runs)), strict=True)
    return {
        "median_s": round(statistics.median(walls), 3),
        "min_s": round(min(walls), 3),
        "cpu_s": round(statistics.median(cpus), 3),
        "max_rss_mb": round(statistics.median(rss), 1),
    }


ENGLISH = "What material was the captain's artificial leg made of"
CHINESE = "諸葛亮借東風是在哪一回"


def _library_rows(db: Path, env: dict[str, str], runs: int) -> dict[str, dict[str, Any]]:
    """The issue-25 commands, each a cold process on the library ``db``."""
    mindory = str(BIN / "mindory")
    lib = ["--db", str(db)]
    commands = {
        "books": [mindory, *lib, "books"],
        "search en (hybrid, vectors)": [mindory, *lib, "search", ENGLISH],
        "search en --mode words": [mindory, *lib, "search", ENGLISH, "--mode", "words"],
        "search en --mode lexical": [mindory, *lib, "search", ENGLISH, "--mode", "lexical"],
        "search zh (hybrid, vectors)": [mindory, *lib, "search", CHINESE],
    }
    return {name: _time(cmd, env, runs) for name, cmd in commands.items()}


def _print_rows(rows: dict[str, dict[str, Any]]) -> None:
    for name, row in rows.items():
        print(
            f"{name:34} {1000 * row['median_s']:7.0f} ms wall (min {1000 * row['min_s']:.0f})"
            f"  {1000 * row['cpu_s']:6.0f} ms CPU  {row['max_rss_mb']:6.0f} MB max RSS"
        )


def _tool(name: str) -> str | None:
    found = BIN / name
    return str(found) if found.exists() else shutil.which(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--json", type=Path, help="Write the figures here too.")
    ap.add_argument(
        "--db", type=Path, help="Measure the search and books commands on this library instead."
    )
    args = ap.parse_args()
    env = dict(os.environ)
    # Bytecode cached, as the targets say: the warm-up run writes it (some machines
    # set PYTHONDONTWRITEBYTECODE, which would make every run compile mindory again).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.db is not None:
        lib_rows = _library_rows(args.db, env, args.runs)
        _print_rows(lib_rows)
        if args.json:
            doc = {"runs": args.runs, "cpus": os.cpu_count(), "db": str(args.db)}
            args.json.write_text(json.dumps({**doc, "commands": lib_rows}, indent=2))
        return
    work = Path(tempfile.mkdtemp(prefix="mindory-startup-"))
    env["MINDORY_DB"] = str(work / "empty.sqlite")
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
        _print_rows(rows)
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
