"""`loopctl up --until/--max-usd` (issue 30, item 4): a night's mandate, compressed to seconds.

Real `up` processes in real repositories with scripted agents: a maker that blocks until the test
releases it (tests/agents/slow_fixer.py), one that reports $0.01 a call (tests/agents/fixer.py).
Every wait is on the journal or a file; the timeouts are safety nets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events, last_seq, wait_event
from support.processes import (
    SAFETY_NET,
    Proc,
    read_pid,
    running_procs,
    spawn,
    wait_for,
    wait_until_gone,
)
from support.repos import commit_all, loop_worktrees, make_project, write_loop

from loopctl.definitions.config import Config
from loopctl.definitions.fields import parse_until
from loopctl.errors import UsageError
from loopctl.lock import read_holder
from loopctl.scheduling.mandate import Mandate, resolve

LOOP = 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n'


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def test_the_deadline_checkpoints_the_running_turn_and_the_next_up_resumes_it(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    marker, release = tmp_path / "maker-started", tmp_path / "release"
    make_project(repo, "slow_fixer.py", marker, release)
    write_loop(repo, "night", 'every = "1s"\n' + LOOP)
    commit_all(repo, "loop")
    # A few seconds: long enough for the first turn to start on a loaded machine.
    up = spawn(procs, repo, tmp_path, "up", "--until", "8s")
    agent = wait_for(lambda: read_pid(marker), "the maker to start", timeout=SAFETY_NET)
    (started,) = events(repo, "scheduler_started")

    code = up.wait(timeout=SAFETY_NET)

    assert code == 0, up.output
    assert "Traceback" not in up.output
    assert "mandate: until " in up.output  # the resolved deadline, said at start
    assert re.search(r"stopped at \d\d:\d\d:\d\d: the mandate's deadline \(", up.output)
    assert "1 turn checkpointed, they resume on the next `loopctl up`" in up.output
    until = datetime.fromisoformat(started.data["until"])
    (stopped,) = events(repo, "scheduler_stopped")
    assert stopped.time >= until
    assert "the mandate's deadline" in stopped.data["reason"]
    assert stopped.data["checkpointed"] == 1
    (interrupted,) = events(repo, "run_interrupted")
    assert interrupted.data["outcome"] == "interrupted"
    assert "mandate's deadline" in interrupted.data["reason"]
    assert wait_until_gone([agent], timeout=SAFETY_NET) == []
    assert read_holder(repo / ".loop" / "locks", "_up") is None
    (worktree,) = loop_worktrees(repo)  # kept for the resume
    state = (repo / ".loop" / "STATE.md").read_text()
    assert "**interrupted**" in state
    assert "the mandate's deadline" in state  # the run's reason

    release.touch()
    mark = last_seq(repo)
    spawn(procs, repo, tmp_path, "up")
    (resumed,) = wait_event(
        repo, "run_resumed", after=mark, what="the checkpointed tick to resume", timeout=SAFETY_NET
    )
    wait_for(
        lambda: [e for e in events(repo, "tick_finished") if e.run == interrupted.run],
        "the resumed tick to finish",
        timeout=SAFETY_NET,
    )
    assert_clean_exit(run_loopctl(repo, "down", timeout=SAFETY_NET), 0)

    assert resumed.run == interrupted.run
    (finished,) = [e for e in events(repo, "tick_finished") if e.run == interrupted.run]
    assert finished.data["status"] == "done"
    # Nothing lost: the same task, in the same worktree, on the same branch, got its commit.
    created = [e for e in events(repo, "worktree_created") if e.run == interrupted.run]
    assert [e.data["path"] for e in created] == [worktree["worktree"]]
    (commit,) = [e for e in events(repo, "commit_created") if e.run == interrupted.run]
    assert commit.task == created[0].task


def test_the_spend_cap_stops_up_once_the_session_spent_it(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    make_project(repo, "fixer.py")  # each call reports total_cost_usd 0.01
    write_loop(repo, "night", 'every = "1s"\n' + LOOP)
    commit_all(repo, "loop")
    # What an earlier session spent does not count against this one.
    assert_clean_exit(run_loopctl(repo, "run", "night", "--once"), 0)
    before = last_seq(repo)

    up = spawn(procs, repo, tmp_path, "up", "--max-usd", "0.025")
    code = up.wait(timeout=SAFETY_NET)

    assert code == 0, up.output
    assert "mandate: at most $0.025 of agent calls" in up.output
    assert "the mandate's spend cap ($0.030 of $0.025)" in up.output
    calls = [e for e in events(repo, "agent_finished") if e.seq > before]
    spent = sum(float(e.data["cost_usd"]) for e in calls)
    assert spent >= 0.025
    # Once the cap was reached no tick started: the last call is the one that reached it.
    assert spent - float(calls[-1].data["cost_usd"]) < 0.025
    (stopped,) = [e for e in events(repo, "scheduler_stopped") if e.seq > before]
    assert "spend cap" in stopped.data["reason"]
    reached = calls[-1].seq
    assert not [e for e in events(repo, "tick_started") if e.seq > reached]


def test_the_config_form_bounds_every_up_and_the_flag_overrides_it(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    make_project(repo, "fixer.py", config_extra='\n[budget]\nup_until = "2s"\n')
    write_loop(repo, "night", 'every = "1h"\n' + LOOP)
    commit_all(repo, "loop with a mandate in config")

    up = spawn(procs, repo, tmp_path, "up")
    code = up.wait(timeout=SAFETY_NET)

    assert code == 0, up.output
    assert "the mandate's deadline" in up.output
    assert "0 turns checkpointed" in up.output
    (started,) = events(repo, "scheduler_started")
    assert started.data["until"]

    # `--until none` lifts it: up runs until `down`.
    mark = last_seq(repo)
    unbounded = spawn(procs, repo, tmp_path, "up", "--until", "none")
    (again,) = wait_event(repo, "scheduler_started", after=mark, timeout=SAFETY_NET)
    assert "until" not in again.data
    assert_clean_exit(run_loopctl(repo, "down", timeout=SAFETY_NET), 0)
    assert unbounded.wait(timeout=SAFETY_NET) == 130


def test_status_shows_the_mandate_while_up_runs(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "night", 'every = "1h"\n' + LOOP)
    commit_all(repo, "loop")
    up = spawn(procs, repo, tmp_path, "up", "--until", "1h", "--max-usd", "5")
    wait_event(repo, "scheduler_started", what="up to start", timeout=SAFETY_NET)

    status = run_loopctl(repo, "status")
    as_json = run_loopctl(repo, "status", "--json")

    assert_clean_exit(status, 0)
    assert f"up: running (pid {up.pid}" in status.stdout
    assert "; up until " in status.stdout
    assert ", $0.00 of $5" in status.stdout
    assert_clean_exit(as_json, 0)
    shown = json.loads(as_json.stdout)
    assert [row["loop"] for row in shown["status"]] == ["night"]
    assert shown["up"]["pid"] == up.pid
    mandate = shown["up"]["mandate"]
    (started,) = events(repo, "scheduler_started")
    assert mandate["until"] == started.data["until"]
    assert (mandate["max_usd"], mandate["spent_usd"], mandate["left_usd"]) == (5, 0, 5)
    assert mandate["text"].startswith("up until ")
    assert_clean_exit(run_loopctl(repo, "down", timeout=SAFETY_NET), 0)
    assert up.wait(timeout=SAFETY_NET) == 130


def test_detach_carries_the_mandate_to_the_background_up(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "night", 'every = "1h"\n' + LOOP)
    commit_all(repo, "loop")

    started = run_loopctl(repo, "up", "--detach", "--until", "3s", "--max-usd", "5")

    assert_clean_exit(started, 0)
    assert "mandate: until " in started.stdout
    (begun,) = events(repo, "scheduler_started")
    assert begun.data["max_usd"] == 5
    (stopped,) = wait_event(repo, "scheduler_stopped", what="the deadline", timeout=SAFETY_NET)
    assert "the mandate's deadline" in stopped.data["reason"]
    wait_for(
        lambda: read_holder(repo / ".loop" / "locks", "_up") is None,
        "the background up to exit",
        timeout=SAFETY_NET,
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--until", "25:99"), "--until: invalid time '25:99'"),
        (("--until", "2001-01-01T07:30"), "--until: '2001-01-01T07:30' is already past"),
        (("--max-usd", "0"), "--max-usd must be more than 0"),
    ],
)
def test_a_bad_mandate_is_one_line_and_exit_2(
    repo: Path, flags: tuple[str, ...], message: str
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "night", 'every = "1h"\n' + LOOP)
    commit_all(repo, "loop")

    refused = run_loopctl(repo, "up", *flags)

    assert_clean_exit(refused, 2)
    assert message in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert not events(repo, "scheduler_started")


def test_a_bad_config_mandate_is_a_definition_error(repo: Path) -> None:
    make_project(repo, "fixer.py", config_extra='\n[budget]\nup_until = "tonight"\n')

    refused = run_loopctl(repo, "validate")

    assert refused.returncode != 0
    assert "'up_until' must be a clock time like \"07:30\" or a duration" in refused.stdout + (
        refused.stderr
    )


def test_until_forms_resolve_to_an_instant_ahead() -> None:
    now = datetime(2026, 12, 5, 18, 0, tzinfo=UTC)
    local = now.astimezone()
    clock = (local + timedelta(hours=1)).strftime("%H:%M")
    earlier = (local - timedelta(hours=1)).strftime("%H:%M")

    assert parse_until("90s", now) == now + timedelta(seconds=90)
    assert parse_until("8h", now) == now + timedelta(hours=8)
    assert parse_until(clock, now) == now + timedelta(hours=1)
    # A time already past today is tomorrow's.
    assert timedelta(hours=22) < parse_until(earlier, now) - now <= timedelta(hours=24)
    assert parse_until("2026-12-06T07:30+00:00", now) == datetime(2026, 12, 6, 7, 30, tzinfo=UTC)
    for bad in ("tonight", "0s", "2026-12-05T07:30+00:00", "24:00"):
        with pytest.raises(ValueError, match=r"use|past|no time"):
            parse_until(bad, now)


def test_the_flags_override_the_config_and_none_lifts_its_deadline() -> None:
    now = datetime(2026, 12, 5, 18, 0, tzinfo=UTC)
    config = Config(up_until="8h", up_max_usd=20.0)

    assert resolve(config, None, None, now) == Mandate(now + timedelta(hours=8), 20.0)
    assert resolve(config, "90s", 3.5, now) == Mandate(now + timedelta(seconds=90), 3.5)
    assert resolve(config, "none", None, now) == Mandate(None, 20.0)
    assert not resolve(Config(), None, None, now).bounded
    with pytest.raises(UsageError, match=r"^\[budget\] up_until: "):
        resolve(Config(up_until="soon"), None, None, now)
    assert Mandate(None, 20.0).describe(3.2) == "$3.20 of $20"


def test_status_json_says_up_is_not_running(repo: Path) -> None:
    make_project(repo, "fixer.py")

    shown = json.loads(run_loopctl(repo, "status", "--json").stdout)

    assert shown["up"] is None
