"""Scenario 1: SIGKILL a multi-task loop at many points; a resumed run must keep every promise.

Event-based points kill the runner right after it appends event N (every N of a clean run),
which lands between an event and its projection, inside agent runs, around commits; time-based
points kill it after a random delay. Criterion: after each kill one resumed run completes with
0 finished attempts lost or repeated, 0 finished tasks redone, one commit per task, whole
STATE.md and INBOX.md, and a log that reads.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import crashlab
import pytest

# After each of a clean run's events (46 today), plus random times up to this many in all.
POINTS = int(os.environ.get("CRASH_POINTS", "52"))
LONG_POINTS = 1000


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, float]:
    """The lab repository, how many events a clean run appends, and how long it takes."""
    root = tmp_path_factory.mktemp("lab")
    template = crashlab.make_template(root / "template")
    clean = crashlab.clone(template, root / "clean")
    started = time.monotonic()
    assert crashlab.run_once(clean, root / "clean-home") == 0
    took = time.monotonic() - started
    assert crashlab.check_invariants(clean, 0) == []  # never killed: one run, all done
    return template, len(crashlab.log_of(clean)), took


def _event_point(template: Path, where: Path, seq: int) -> list[str]:
    repo = crashlab.clone(template, where / "repo")
    code = crashlab.run_once(repo, where / "home", kill_at_seq=seq)
    if code != -signal.SIGKILL:
        return [f"kill at event {seq}: the runner exited {code} instead of dying"]
    if crashlab.run_once(repo, where / "home") != 0:
        return [f"kill at event {seq}: the resumed run did not succeed"]
    return [f"kill at event {seq}: {p}" for p in crashlab.check_invariants(repo, seq)]


def _time_point(template: Path, where: Path, delay: float) -> list[str]:
    repo = crashlab.clone(template, where / "repo")
    runner = crashlab.spawn_once(repo, where / "home")
    try:
        runner.wait(timeout=delay)
    except Exception:
        runner.send_signal(signal.SIGKILL)
        runner.wait()
    killed_after = crashlab.log_of(repo)[-1].seq if crashlab.log_of(repo) else 0
    if crashlab.run_once(repo, where / "home") != 0:
        return [f"kill after {delay:.2f}s: the resumed run did not succeed"]
    return [f"kill after {delay:.2f}s: {p}" for p in crashlab.check_invariants(repo, killed_after)]


# About 150 loopctl runs, in shards that xdist spreads over its workers: one test of them all
# held one worker for minutes while the other sat idle at the end of the suite. A shard runs its
# points one after another; the shards together are every point.
SHARDS = 4


@pytest.mark.timeout(900)
@pytest.mark.parametrize("shard", range(SHARDS))
def test_crash_anywhere_then_resume(
    template: tuple[Path, int, float], tmp_path: Path, long_mode: bool, shard: int
) -> None:
    repo, total_events, clean_seconds = template
    points = LONG_POINTS if long_mode else POINTS
    rng = random.Random(20261130)
    event_points = list(range(1, total_events + 1))
    while len(event_points) < points // 2:
        event_points.append(rng.randint(1, total_events))
    time_points = [rng.uniform(0.05, clean_seconds) for _ in range(points - len(event_points))]
    jobs = [("event", float(seq)) for seq in event_points] + [("time", d) for d in time_points]
    mine = list(enumerate(jobs))[shard::SHARDS]

    def work(index_job: tuple[int, tuple[str, float]]) -> list[str]:
        index, (kind, value) = index_job
        where = tmp_path / f"point-{index}"
        if kind == "event":
            return _event_point(repo, where, int(value))
        return _time_point(repo, where, value)

    results = [work(job) for job in mine]
    broken = [problem for result in results for problem in result]
    print(
        f"\ncrash points of shard {shard}: {len(mine)} of {len(jobs)} ({len(event_points)}"
        f" event-based, {len(time_points)} time-based in all); broken promises: {len(broken)}"
    )
    assert broken == [], "\n".join(broken)
