"""`loopctl up` / `down`: several loops in one process, one `up` at a time, restarts, reloads."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import due, events, last_seq, wait_event
from support.processes import (
    SAFETY_NET,
    Proc,
    pid_alive,
    read_pid,
    running_procs,
    spawn,
    wait_for,
    wait_until_gone,
)
from support.repos import commit_all, make_project, write_loop

from loopctl.lock import read_holder
from loopctl.scheduling.timing import last_slots

LOOP = 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n'


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def _status(repo: Path) -> dict[str, dict[str, object]]:
    done = run_loopctl(repo, "status", "--json")
    assert_clean_exit(done, 0)
    return {row["loop"]: row for row in json.loads(done.stdout)["status"]}


def _ticks(repo: Path, after: int) -> list[tuple[str, dict[str, object]]]:
    """(type, trigger) of every tick started or resumed after seq `after`."""
    return [
        (e.type, dict(e.data["trigger"]))
        for e in events(repo)
        if e.seq > after and e.type in ("tick_started", "run_resumed")
    ]


def test_up_runs_two_loops_refuses_a_second_up_and_stops_with_down(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "beat", 'every = "1s"\n' + LOOP)
    write_loop(repo, "docs", 'watch = ["*.txt"]\n' + LOOP)
    write_loop(repo, "manual", LOOP)  # no trigger: not `up`'s business
    commit_all(repo, "loops")
    up = spawn(procs, repo, tmp_path, "up")
    (started,) = wait_event(repo, "scheduler_started", what="up to start")
    assert started.data["loops"] == {"beat": "every 1s", "docs": "watch *.txt"}

    second = run_loopctl(repo, "up")
    run_on_top = run_loopctl(repo, "run", "beat", "--every", "1s")
    (repo / "notes.txt").write_text("new\n")
    wait_event(repo, "tick_finished", loop="docs", what="the watched loop's tick")
    wait_event(repo, "tick_finished", loop="beat", what="the timed loop's tick")
    status = _status(repo)
    down = run_loopctl(repo, "down")
    code = up.wait()

    assert_clean_exit(second, 1)
    assert f"loopctl up is already running here (pid {up.pid}" in second.stderr
    assert_clean_exit(run_on_top, 1)
    assert "scheduled by `loopctl up`" in run_on_top.stderr
    assert status["beat"]["up_pid"] == up.pid
    assert status["beat"]["next_tick"] is not None
    assert status["docs"]["next_tick"] == "on change"
    assert status["manual"]["up_pid"] is None
    assert_clean_exit(down, 0)
    assert f"loopctl up (pid {up.pid}) stopped" in down.stdout
    assert code == 130, up.output
    assert events(repo, "scheduler_stopped")[-1].data["by"] == "up"
    assert read_holder(repo / ".loop" / "locks", "_up") is None
    assert "not running" in run_loopctl(repo, "down").stdout
    docs = [t for t in _ticks(repo, 0) if t[1]["fired"] == "watch"]
    assert [t[1]["changed"] for t in docs] == [["notes.txt"]]


def test_up_killed_with_sigkill_and_restarted_runs_exactly_one_catch_up_tick(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "beat", 'every = "1s"\n' + LOOP)
    commit_all(repo, "loop")
    first = spawn(procs, repo, tmp_path, "up")
    wait_event(repo, "tick_finished", what="a first tick")
    assert first.signal(signal.SIGKILL) == -signal.SIGKILL
    last = last_slots(events(repo))["beat"]
    # While nothing runs the loop, at least two of its slots pass.
    wait_for(lambda: datetime.now(UTC) > last + timedelta(seconds=2.6), "two slots to pass")
    mark = last_seq(repo)

    spawn(procs, repo, tmp_path, "up")
    wait_event(repo, "tick_finished", after=mark, count=2, what="a catch-up and a normal tick")
    assert_clean_exit(run_loopctl(repo, "down"), 0)

    ticks = _ticks(repo, mark)
    catch_up = ticks[0][1]
    assert catch_up["fired"] == "catch-up"
    assert isinstance(catch_up["missed"], int)
    assert catch_up["missed"] >= 2
    assert [t[1]["fired"] for t in ticks[1:]] == ["schedule"] * (len(ticks) - 1)
    # No burst of missed runs: one tick stands for every slot that passed while it was down.
    fired = [e for e in events(repo) if e.seq > mark and e.type in ("tick_started", "run_resumed")]
    (restarted,) = [e for e in events(repo, "scheduler_started") if e.seq > mark]
    assert sum(1 for e in fired if due(e) < restarted.time) <= 1
    assert due(fired[0]) > last
    dues = [due(e) for e in fired]
    assert dues == sorted(set(dues))


def test_sigterm_during_a_tick_leaves_a_consistent_state_and_the_next_up_resumes(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    marker, release = tmp_path / "maker-started", tmp_path / "release"
    make_project(repo, "slow_fixer.py", marker, release)
    write_loop(repo, "beat", 'every = "1s"\n' + LOOP)
    commit_all(repo, "loop")
    up = spawn(procs, repo, tmp_path, "up")
    agent = wait_for(lambda: read_pid(marker), "the maker to start")

    code = up.signal(signal.SIGTERM)

    assert code == 130, up.output
    assert "Traceback" not in up.output
    (interrupted,) = events(repo, "run_interrupted")
    assert wait_until_gone([agent], timeout=10) == []
    state = (repo / ".loop" / "STATE.md").read_text()
    assert state.startswith("# Loop state\n")
    assert state.endswith("\n")
    assert "**interrupted**" in state
    assert (repo / ".loop" / "INBOX.md").read_text().startswith("# Inbox\n")
    assert not list((repo / ".loop").glob("*.tmp*"))

    release.touch()
    mark = last_seq(repo)
    spawn(procs, repo, tmp_path, "up")
    (resumed,) = wait_event(repo, "run_resumed", after=mark, what="the interrupted tick to resume")
    wait_event(repo, "tick_finished", after=mark, what="the resumed tick to finish")
    assert_clean_exit(run_loopctl(repo, "down"), 0)

    assert resumed.run == interrupted.run
    (finished,) = [e for e in events(repo, "tick_finished") if e.run == interrupted.run]
    assert finished.data["status"] == "done"
    assert resumed.data["trigger"]["by"] == "up"


def test_a_definition_that_turns_invalid_keeps_running_its_last_valid_version(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "beat", 'every = "1s"\n' + LOOP)
    commit_all(repo, "loop")
    spawn(procs, repo, tmp_path, "up")
    # Every wait is on an event in the journal; the timeouts are only safety nets.
    wait_event(repo, "tick_finished", loop="beat", what="a first tick", timeout=SAFETY_NET)

    write_loop(repo, "beat", 'every = "1s"\n' + LOOP + "bogus = 1\n")
    write_loop(repo, "late", 'every = "1s"\n' + LOOP)
    (opened,) = wait_event(
        repo, "inbox_opened", what="an inbox item for the bad definition", timeout=SAFETY_NET
    )
    # The two writes may reach the watcher as one batch or two: wait for the reload that adds late.
    (reloaded,) = wait_event(
        repo, "note", what="the reload adding late", added=["late"], timeout=SAFETY_NET
    )
    wait_event(
        repo,
        "tick_finished",
        loop="beat",
        after=opened.seq,
        what="beat to tick on",
        timeout=SAFETY_NET,
    )
    wait_event(repo, "tick_finished", loop="late", what="the new loop to tick", timeout=SAFETY_NET)
    assert_clean_exit(run_loopctl(repo, "down", timeout=SAFETY_NET), 0)

    assert opened.data["kind"] == "unhandled"
    assert opened.loop == "beat"
    assert ".loop/loops/beat.toml:4" in opened.data["summary"]
    assert "keeps running the last valid one" in opened.data["summary"]
    assert reloaded.data["kept"] == ["beat"]
    reloads = [
        e
        for e in events(repo, "note")
        if e.seq > opened.seq and e.data.get("what") == "definitions_reloaded"
    ]
    assert all(e.data["kept"] == ["beat"] for e in reloads)
    assert len(events(repo, "inbox_opened")) == 1  # not one per reload or per tick


def test_up_detach_runs_in_the_background_until_down(repo: Path) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "docs", 'watch = ["*.txt"]\n' + LOOP)
    commit_all(repo, "loop")

    started = run_loopctl(repo, "up", "--detach")
    pid = int(started.stdout.split("pid ")[1].split(")")[0])
    try:
        assert_clean_exit(started, 0)
        assert pid_alive(pid)
        # A session of its own, led by it: the terminal's hang-up and Ctrl-C, sent to the
        # session and group that started it, never reach it.
        assert os.getsid(pid) == pid != os.getsid(0)
        assert os.getpgid(pid) == pid
        holder = read_holder(repo / ".loop" / "locks", "_up")
        assert holder is not None
        assert holder["pid"] == pid
        again = run_loopctl(repo, "up", "--detach")
        assert_clean_exit(again, 1)
        assert f"pid {pid}" in again.stderr
        down = run_loopctl(repo, "down")
        assert_clean_exit(down, 0)
        assert wait_until_gone([pid], timeout=10) == []
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    log = (repo / ".loop" / "log" / "up.log").read_text()
    assert f"up started (pid {pid})" in log
