"""`loopctl inbox --json` with 10 000 open items against an empty inbox.

Run: python bench/inbox_scale.py [--items N] [--runs N]
Builds two throwaway repositories (one with no log, one whose log holds N failed-task items
with realistic evidence), then prints the median wall time of `loopctl inbox --json` in each,
the first (cold) call that builds the projection cache, one after a non-inbox event (the cache
is carried forward), and the ratio (goal: <= 2x).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loopctl.journal.events import EventLog

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


sys.path.insert(0, str(Path(__file__).parent))
from results import Row, print_rows  # noqa: E402


def make_repo(folder: Path) -> Path:
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def append_failed_item(log: EventLog, n: int, tail: str) -> None:
    """Item `n`: a failed task with the evidence a real one carries (both inbox benches use it)."""
    log.append(
        "inbox_opened",
        run=f"20261130T080000-{n % 97:04x}",
        loop=f"loop-{n % 7}",
        task=f"pr-{n}",
        data={
            "id": f"{n:06x}",
            "kind": "failed",
            "summary": f"pr-{n}: not met after 5 attempts: tests still fail",
            "evidence": {
                "reason": "not met after 5 attempts: tests still fail",
                "branch": f"loop/loop-{n % 7}/pr-{n}",
                "worktree": f"/home/dev/.cache/loopctl/worktrees/r/loop-{n % 7}/pr-{n}",
                "fingerprint": f"{n * 2654435761 % 2**48:012x}",
                "attempts": 5,
                "check_tail": tail[-1500:],
            },
        },
    )


def write_log(repo: Path, count: int) -> int:
    """`count` failed-task items with realistic evidence, appended through loopctl's own log.

    The log is built on tmpfs when there is one (its fsyncs cost nothing), then copied in.
    """
    tail = "".join(f"E   AssertionError: case {n} expected 5, got -1\n" for n in range(30))
    scratch_root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    target = repo / ".loop" / "log" / "events.jsonl"
    target.parent.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-log-", dir=scratch_root) as scratch:
        log = EventLog(Path(scratch) / "events.jsonl")
        for n in range(count):
            append_failed_item(log, n, tail)
        shutil.copyfile(log.path, target)
    return target.stat().st_size


def timed(repo: Path, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "loopctl", "inbox", "--json"],
            cwd=repo,
            check=True,
            stdout=subprocess.DEVNULL,
            env=ENV,
        )
        samples.append(time.perf_counter() - start)
    return samples


def measure(items: int = 10_000, runs: int = 15) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        empty = make_repo(Path(tmp) / "empty")
        full = make_repo(Path(tmp) / "full")
        size = write_log(full, items)
        timed(empty, 3)  # warm the bytecode caches
        cold = timed(full, 1)[0]
        baseline = statistics.median(timed(empty, runs))
        warm = statistics.median(timed(full, runs))
        # A tick appends events that are not inbox events: the cache is carried forward.
        EventLog(full / ".loop" / "log" / "events.jsonl").append("note", data={"what": "bench"})
        carried = timed(full, 1)[0]
    log = f"{size / 1e6:.1f} MB log"
    return [
        Row(f"inbox --json, {items} items vs empty", warm * 1000, "ms", baseline * 1000,
            "<= 2x", warm / baseline <= 2, log),
        Row("  first call after an inbox event (rebuild)", cold * 1000, "ms", baseline * 1000,
            note="rebuilds the cache from the log once"),
        Row("  after a non-inbox event", carried * 1000, "ms", baseline * 1000,
            note="cache carried forward"),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print_rows(measure(args.items, args.runs))


if __name__ == "__main__":
    main()
