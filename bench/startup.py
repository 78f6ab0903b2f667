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

ROOT = Path(__file__).resolve().parents[1]
# An installed package has bytecode compiled at install time; measure that, not compilation.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], cwd: Path, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, env=ENV)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    py = sys.executable
    timed([py, "-m", "loopctl", "--version"], ROOT, 3)  # warm the bytecode caches
    baseline = timed([py, "-c", "import typer"], ROOT, runs)
    cases = {
        "loopctl --version": [py, "-m", "loopctl", "--version"],
        "loopctl validate": [py, "-m", "loopctl", "validate"],
        "loopctl --help": [py, "-m", "loopctl", "--help"],
    }
    print(f"baseline  python -c 'import typer'   {baseline * 1000:7.1f} ms")
    for label, argv in cases.items():
        took = timed(argv, ROOT, runs)
        print(f"{label:<36}{took * 1000:7.1f} ms   {took / baseline:5.2f}x")


if __name__ == "__main__":
    main()
