"""Start-up time of `loopctl --version` and `loopctl validate`, against `import typer`.

Run: python bench/startup.py [--runs N]
Prints the median wall time of each command and its ratio to `python -c "import typer"`
measured in the same run (goal: <= 1.2x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows

ROOT = Path(__file__).resolve().parents[1]
# An installed package has bytecode compiled at install time; measure that, not compilation.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], cwd: Path, runs: int, *, cold: bool = False) -> float:
    samples = []
    for _ in range(runs):
        if cold:  # as after an edit: no remembered validation to replay
            for cached in (cwd / ".loop" / "cache").glob("validate-*.json"):
                cached.unlink()
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, env=ENV)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure(runs: int = 21) -> list[Row]:
    py = sys.executable
    timed([py, "-m", "loopctl", "--version"], ROOT, 3)  # warm the bytecode caches
    baseline = timed([py, "-c", "import typer"], ROOT, runs)
    cases = {
        "start-up: loopctl --version": [py, "-m", "loopctl", "--version"],
        "start-up: loopctl validate (this repository)": [py, "-m", "loopctl", "validate"],
        "start-up: loopctl inbox --json": [py, "-m", "loopctl", "inbox", "--json"],
        "start-up: loopctl --help": [py, "-m", "loopctl", "--help"],
    }
    rows = []
    for label, argv in cases.items():
        took = timed(argv, ROOT, runs)
        goal = "<= 1.2x" if "--help" not in label else ""
        met = took / baseline <= 1.2 if goal else None
        rows.append(Row(label, took * 1000, "ms", baseline * 1000, goal, met, "vs import typer"))
    cold = timed([py, "-m", "loopctl", "validate"], ROOT, runs, cold=True)
    note = "first run after an edit: parses every definition"
    rows.insert(2, Row("start-up: loopctl validate, nothing cached", cold * 1000, "ms",
                       baseline * 1000, "", None, note))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    print_rows(measure(parser.parse_args().runs))


if __name__ == "__main__":
    main()
