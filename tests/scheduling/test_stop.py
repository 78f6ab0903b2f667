"""`loopctl stop NAME|RUN`: one loop or run ends gracefully, every other one keeps running.

Real processes throughout: an `up` with two loops, a foreground `loopctl run`, a `loopctl goal`,
each with a maker that blocks until the test releases it (tests/agents/slow_fixer.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events, last_seq, wait_event
from support.processes import Proc, read_pid, running_procs, spawn, wait_for, wait_until_gone
from support.repos import commit_all, make_project, write_agent, write_loop

from loopctl.lock import read_holder

LOOP = 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n'


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def _blocked_project(repo: Path, tmp_path: Path) -> tuple[Path, Path]:
    marker, release = tmp_path / "maker-started", tmp_path / "release"
    make_project(repo, "slow_fixer.py", marker, release)
    return marker, release


def test_stop_one_loop_under_up_the_other_keeps_ticking(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    marker, release = _blocked_project(repo, tmp_path)
    write_agent(repo, "quick", "fixer.py")
    write_loop(repo, "slow", 'every = "1s"\n' + LOOP)
    write_loop(repo, "beat", 'every = "1s"\n' + LOOP + '[maker]\nagent = "quick"\n')
    commit_all(repo, "two loops")
    up = spawn(procs, repo, tmp_path, "up")
    agent = wait_for(lambda: read_pid(marker), "the slow loop's maker to start")

    stopped = run_loopctl(repo, "stop", "slow", "--json")

    assert_clean_exit(stopped, 0)
    result = json.loads(stopped.stdout)["stop"]
    assert result["loop"] == "slow"
    assert result["via"] == "up"
    assert result["pid"] == up.pid
    (interrupted,) = events(repo, "run_interrupted")
    assert interrupted.loop == "slow"
    assert result["run"] == interrupted.run
    assert wait_until_gone([agent], timeout=10) == []  # its agent was stopped
    assert read_holder(repo / ".loop" / "locks", "slow") is None
    assert up.popen.poll() is None  # `up` itself goes on
    mark = last_seq(repo)
    wait_event(repo, "tick_finished", loop="beat", after=mark, count=2, what="beat ticking on")
    assert not [e for e in events(repo) if e.seq > mark and e.loop == "slow" and e.run]
    assert not list((repo / ".loop" / "locks").glob("*.stop"))  # the request was taken
    again = run_loopctl(repo, "stop", "slow")
    assert_clean_exit(again, 1)
    assert "loop slow is not running" in again.stderr

    assert_clean_exit(run_loopctl(repo, "down"), 0)
    assert up.wait() == 130
    release.touch()
    resumed = run_loopctl(repo, "run", "slow", "--once")
    assert_clean_exit(resumed, 0)
    (back,) = events(repo, "run_resumed")
    assert back.run == interrupted.run


def test_stop_a_foreground_run_mid_agent_then_run_resumes_it(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    marker, release = _blocked_project(repo, tmp_path)
    write_loop(repo, "slow", 'every = "1h"\n' + LOOP)
    commit_all(repo, "loop")
    runner = spawn(procs, repo, tmp_path, "run", "slow")
    agent = wait_for(lambda: read_pid(marker), "the maker to start")
    (started,) = events(repo, "tick_started")

    stopped = run_loopctl(repo, "stop", str(started.run)[:12])

    assert_clean_exit(stopped, 0)
    assert f"loop slow stopped (its process, pid {runner.pid}), run {started.run}" in stopped.stdout
    assert "loopctl run slow --once" in stopped.stdout
    assert runner.wait() == 130
    assert "Traceback" not in runner.output
    (interrupted,) = events(repo, "run_interrupted")
    assert interrupted.run == started.run
    assert wait_until_gone([agent], timeout=10) == []
    finished_run = run_loopctl(repo, "stop", str(started.run))
    assert_clean_exit(finished_run, 1)
    assert "is not running" in finished_run.stderr or "already ended" in finished_run.stderr

    release.touch()
    resumed = run_loopctl(repo, "run", "slow", "--once")
    assert_clean_exit(resumed, 0)
    (back,) = events(repo, "run_resumed")
    assert back.run == started.run
    (done,) = [e for e in events(repo, "tick_finished") if e.run == started.run]
    assert done.data["status"] == "done"


def test_stop_a_goal_leaves_another_loop_running(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    marker, release = _blocked_project(repo, tmp_path)
    write_agent(repo, "quick", "fixer.py")
    write_loop(repo, "beat", 'every = "1s"\n' + LOOP + '[maker]\nagent = "quick"\n')
    commit_all(repo, "loop")
    beat = spawn(procs, repo, tmp_path, "run", "beat")
    goal = spawn(procs, repo, tmp_path, "goal", "tests green")
    wait_for(lambda: read_pid(marker), "the goal's maker to start")

    stopped = run_loopctl(repo, "stop", "goal")

    assert_clean_exit(stopped, 0)
    assert goal.wait() == 130
    assert [e.loop for e in events(repo, "run_interrupted")] == ["goal"]
    mark = last_seq(repo)
    wait_event(repo, "tick_finished", loop="beat", after=mark, what="beat ticking on")
    assert beat.popen.poll() is None
    release.touch()


def test_unknown_names_are_one_line_with_a_suggestion_and_agents_are_refused(
    repo: Path, tmp_path: Path
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "nightly", 'every = "1h"\n' + LOOP)
    commit_all(repo, "loop")

    unknown = run_loopctl(repo, "stop", "nighlty")
    idle = run_loopctl(repo, "stop", "nightly")
    as_agent = run_loopctl(repo, "stop", "nightly", env={**os.environ, "LOOPCTL_ROLE": "maker"})

    assert_clean_exit(unknown, 2)
    assert unknown.stderr.strip().splitlines() == [
        "loopctl: no loop or run 'nighlty' (loops: nightly); did you mean 'nightly'?"
    ]
    assert_clean_exit(idle, 1)
    assert "loop nightly is not running" in idle.stderr
    assert_clean_exit(as_agent, 1)
    assert "stop" in as_agent.stderr
