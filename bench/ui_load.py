"""`loopctl ui` first page load (inbox and loops) with 10 000 inbox items and 1 000 runs.

Run: python bench/ui_load.py [--items N] [--runs N] [--loads N]
Builds two throwaway repositories, one with an empty log and one whose log holds N open inbox
items and M finished runs (each a tick with one task, one attempt, an agent call and a check),
with 7 loop definitions. For each it starts a real `loopctl ui --no-open`, signs in with the
printed token, and times the first GET of /inbox and of /loops (the server's first page load:
nothing cached), then the median of further loads. Goal: a first load <= 300 ms here; the ratio
is against the same page on the empty log, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from loopctl.journal.events import EventLog

sys.path.insert(0, str(Path(__file__).parent))
from inbox_scale import append_failed_item
from results import Row, print_rows

GOAL_MS = 300.0
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def make_repo(folder: Path, loops: int) -> Path:
    folder.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    for n in range(loops):
        path = folder / ".loop" / "loops" / f"loop-{n}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f'goal = "tests green"\nprompt = "fix it"\n\n[trigger]\nevery = "{n + 1}h"\n'
        )
    return folder


def write_log(repo: Path, items: int, runs: int) -> int:
    """`items` open failed-task items and `runs` finished runs, through loopctl's own log."""
    tail = "".join(f"E   AssertionError: case {n} expected 5, got -1\n" for n in range(30))
    scratch_root = "/dev/shm" if os.path.isdir("/dev/shm") else None
    target = repo / ".loop" / "log" / "events.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-log-", dir=scratch_root) as scratch:
        log = EventLog(Path(scratch) / "events.jsonl")
        for n in range(runs):
            run, loop, task = (
                f"20261130T{n // 60 % 24:02d}{n % 60:02d}00-{n:04x}",
                f"loop-{n % 7}",
                "main",
            )
            log.append("tick_started", run=run, loop=loop, data={"kind": "tick", "maker": "m"})
            log.append("task_found", run=run, loop=loop, task=task, data={"prompt": "fix it"})
            log.append("attempt_started", run=run, loop=loop, task=task, data={"attempt": 1})
            log.append(
                "agent_finished",
                run=run,
                loop=loop,
                task=task,
                data={"attempt": 1, "role": "maker", "agent": "m", "status": "ok",
                      "backend": "claude", "input_tokens": 1000, "output_tokens": 200,
                      "cost_usd": 0.01, "exit_code": 0, "duration_s": 3.0},
            )  # fmt: skip
            log.append(
                "check_finished",
                run=run,
                loop=loop,
                task=task,
                data={"attempt": 1, "passed": n % 3 != 0, "reason": "tests", "output_tail": tail},
            )
            verdict = "passed" if n % 3 else "failed"
            log.append(
                "attempt_finished",
                run=run,
                loop=loop,
                task=task,
                data={"attempt": 1, "verdict": verdict},
            )
            status = "done" if n % 3 else "failed"
            log.append(
                "task_finished",
                run=run,
                loop=loop,
                task=task,
                data={"status": status, "reason": "x"},
            )
            log.append("tick_finished", run=run, loop=loop, data={"status": status})
        for n in range(items):
            append_failed_item(log, n, tail)
        shutil.copyfile(log.path, target)
    return target.stat().st_size


def loads(repo: Path, paths: tuple[str, ...], again: int) -> dict[str, tuple[float, float]]:
    """Per path: (first load, median of `again` more loads) in seconds, on a fresh server."""
    server = subprocess.Popen(
        [sys.executable, "-m", "loopctl", "ui", "--no-open"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=ENV,
    )
    try:
        assert server.stdout is not None
        url = next(line.split()[1] for line in server.stdout if line.strip().startswith("open "))
        parts = urlsplit(url)
        base = f"{parts.scheme}://{parts.netloc}"
        found = {}
        with httpx.Client(timeout=60) as client:
            # The one-time link traded for the session cookie: a redirect, no page rendered.
            signed = client.get(url)
            assert signed.status_code == 303, signed.text
            for path in paths:
                samples = []
                for _ in range(again + 1):
                    start = time.perf_counter()
                    answer = client.get(base + path)
                    samples.append(time.perf_counter() - start)
                    answer.raise_for_status()
                found[path] = (samples[0], statistics.median(samples[1:]))
        return found
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def measure(items: int = 10_000, runs: int = 1_000, again: int = 5) -> list[Row]:
    paths = ("/inbox", "/loops")
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-ui-") as tmp:
        empty = make_repo(Path(tmp) / "empty", 7)
        full = make_repo(Path(tmp) / "full", 7)
        size = write_log(full, items, runs)
        loads(empty, paths, 1)  # warm the bytecode caches
        base = loads(empty, paths, again)
        big = loads(full, paths, again)
    rows = []
    for path in paths:
        first, warm = big[path]
        rows.append(
            Row(
                f"ui first load {path}, {items} items + {runs} runs vs empty log",
                first * 1000,
                "ms",
                base[path][0] * 1000,
                f"<= {GOAL_MS:.0f} ms",
                first * 1000 <= GOAL_MS,
                f"{size / 1e6:.1f} MB log",
            )
        )
        rows.append(
            Row(f"  {path} again (median)", warm * 1000, "ms", base[path][1] * 1000,
                note="each load reads the log anew")
        )  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()
    print_rows(measure(args.items, args.runs, args.loads))


if __name__ == "__main__":
    main()
