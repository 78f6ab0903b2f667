"""A backend's rate limit pauses the loops on it, which resume by themselves (issue 30 item 3).

Real `loopctl up` and `loopctl run` processes: loopctl's own agent against the scripted model
server answering 429 with Retry-After and then recovering, and the fake Claude Code printing its
usage-limit message. Short stated resets (a few seconds) stand for an hour's; every wait is on
the log, never a sleep.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.backends import install_fake_clis, own_agent_fixes_calc, set_scenario
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import events, last_seq, wait_event
from support.model_server import Reply, Request, ScriptedModelServer
from support.processes import Proc, running_procs, spawn, wait_for
from support.repos import FAST_CHECK, commit_all, make_project, write_loop

from loopctl.journal.events import Event
from loopctl.scheduling.pauses import LOOK_EVERY_S

LOOP = 'goal = "tests green"\nprompt = "Fix add() in calc.py"\n'
# The last 429's Retry-After: long enough to look at (and kill) `up` during it, with two
# `status` calls that take seconds each on a loaded machine.
PAUSE_S = 20
LIMITED = {"error": {"type": "rate_limit_error", "message": "Number of request tokens exceeded"}}


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


def fixes_calc(request: Request, server: ScriptedModelServer) -> Reply:
    return own_agent_fixes_calc(request, FAST_CHECK)


def limit_then_recover(server: ScriptedModelServer, pause_s: int = PAUSE_S) -> None:
    """429s until loopctl's agent gives the turn up (its own retries take the short ones), the
    last asking for `pause_s`; then the script fixes calc.py."""
    server.script = fixes_calc
    short = [Reply(429, LIMITED, {"retry-after-ms": "20"}) for _ in range(5)]
    server.queue = [*short, Reply(429, LIMITED, {"retry-after": str(pause_s)})]


def two_loops(repo: Path, server: ScriptedModelServer) -> None:
    """`api` on loopctl's own agent (backend openai) at the server; `other` on a program."""
    # Each inbox item that opens is sent to a [notify] command: the pause's, once.
    make_project(repo, "fixer.py", config_extra='\n[notify]\ncommand = ["true"]\n')
    (repo / "agents" / "api-maker.toml").write_text(
        'description = "own agent"\nbackend = "openai"\nmodel = "gpt-test"\n'
        f'base_url = "{server.url}/v1"\ntimeout = "60s"\n'
    )
    write_loop(repo, "api", 'every = "1s"\n' + LOOP + '\n[maker]\nagent = "api-maker"\n')
    write_loop(repo, "other", 'every = "1s"\n' + LOOP)
    commit_all(repo, "two loops")


def notes(repo: Path, what: str) -> list[Event]:
    return [e for e in events(repo, "note") if e.data.get("what") == what]


def wait_note(repo: Path, what: str, after: int = 0) -> Event:
    found = wait_for(
        lambda: [e for e in notes(repo, what) if e.seq > after], f"a {what} note", timeout=60
    )
    return found[0]


def until_of(paused: Event) -> datetime:
    return datetime.fromisoformat(paused.data["until"])


def makers_started(repo: Path, loop: str) -> list[Event]:
    return [e for e in events(repo, "attempt_started") if e.loop == loop]


def test_a_429_pauses_the_backends_loops_until_its_retry_after_then_they_resume(
    repo: Path, tmp_path: Path, procs: list[Proc], model_server: ScriptedModelServer
) -> None:
    limit_then_recover(model_server)
    two_loops(repo, model_server)

    spawn(procs, repo, tmp_path, "up")
    paused = wait_note(repo, "backend_paused")
    wait_event(repo, "tick_finished", loop="api", what="the rate-limited tick to end")
    text = run_loopctl(repo, "status", env={**os.environ, "COLUMNS": "160"}).stdout
    status = json.loads(run_loopctl(repo, "status", "--json").stdout)["status"]
    looked = datetime.now(UTC)
    resumed = wait_note(repo, "backend_resumed", after=paused.seq)
    (done, *_) = wait_event(
        repo, "task_finished", loop="api", status="done", after=resumed.seq, what="the fix"
    )
    assert_clean_exit(run_loopctl(repo, "down"), 0)

    until = until_of(paused)
    assert paused.loop == "api"
    assert paused.data["backend"] == "openai"
    assert paused.data["kind"] == "rate-limit"
    assert paused.data["stated"] is True
    assert 0 < (until - paused.time).total_seconds() <= PAUSE_S + 0.5
    assert looked < until, "the machine was too slow to look during the pause"
    # The attempt that hit it ended the task as rate-limited, not as a failure.
    (limited,) = [
        e for e in events(repo, "task_finished") if e.loop == "api" and e.seq < resumed.seq
    ]
    assert limited.data["outcome"] == "rate-limited"
    assert limited.data["status"] == "paused"
    assert not [i for i in events(repo, "inbox_opened") if i.data["kind"] == "failed"]
    # Nothing asked the backend again before the reset; the first call after it succeeded.
    assert resumed.time >= until
    later = [e for e in makers_started(repo, "api") if e.seq > paused.seq]
    assert later
    assert all(e.time >= until for e in later)
    statuses = [s.status for s in model_server.posts()]
    assert statuses[:6] == [429] * 6
    assert set(statuses[6:]) == {200}
    # The other backend's loop went on ticking meanwhile.
    ticking = [
        e
        for e in events(repo, "tick_started")
        if e.loop == "other" and paused.seq < e.seq < resumed.seq
    ]
    assert ticking
    # status said why the loop waited, and when it would go on.
    row = next(s for s in status if s["loop"] == "api")
    assert row["paused"].startswith("rate-limited until ")
    assert row["paused"].endswith("(openai)")
    assert datetime.fromisoformat(row["paused_until"]) == until.replace(microsecond=0)
    assert next(s for s in status if s["loop"] == "other")["paused"] is None
    assert "rate-limited until" in text
    # One inbox item told a human (and [notify]) once; it closed itself when the pause ended.
    opened = [i for i in events(repo, "inbox_opened") if i.data["evidence"].get("backend")]
    assert len(opened) == 1
    assert "resume by themselves" in opened[0].data["summary"]
    closed = [c for c in events(repo, "inbox_closed") if c.data["id"] == opened[0].data["id"]]
    assert [c.data["resolution"] for c in closed] == ["resolved"]
    told = [e for e in events(repo, "notified") if e.data["item"] == opened[0].data["id"]]
    assert [e.data["channel"] for e in told] == ["command"]
    assert done.data.get("outcome") in (None, "done")


def test_up_killed_during_a_pause_keeps_the_pause_when_started_again(
    repo: Path, tmp_path: Path, procs: list[Proc], model_server: ScriptedModelServer
) -> None:
    limit_then_recover(model_server)
    two_loops(repo, model_server)
    first = spawn(procs, repo, tmp_path, "up")
    paused = wait_note(repo, "backend_paused")
    wait_event(repo, "tick_finished", loop="api", what="the rate-limited tick to end")
    assert first.signal(signal.SIGKILL) == -signal.SIGKILL
    mark = last_seq(repo)

    spawn(procs, repo, tmp_path, "up")
    (restarted,) = wait_event(repo, "scheduler_started", after=mark)
    resumed = wait_note(repo, "backend_resumed", after=mark)
    wait_event(repo, "task_finished", loop="api", status="done", after=resumed.seq)
    assert_clean_exit(run_loopctl(repo, "down"), 0)

    until = until_of(paused)
    assert restarted.time < until  # it really started again during the pause
    # It resumed the pause, not the work: no maker turn of the loop before the reset.
    after_restart = [e for e in makers_started(repo, "api") if e.seq > mark]
    assert after_restart
    assert all(e.time >= until for e in after_restart)
    assert len(notes(repo, "backend_paused")) == 1
    assert len(notes(repo, "backend_resumed")) == 1
    # The other loop ticked in the restarted `up` during the pause.
    assert any(
        e.loop == "other" and mark < e.seq < resumed.seq for e in events(repo, "tick_started")
    )


def test_up_killed_as_it_records_the_pause_resumes_the_pause_not_the_work(
    repo: Path, tmp_path: Path, procs: list[Proc], model_server: ScriptedModelServer
) -> None:
    """kill -9 the instant the pause is durable, its tick not yet ended: the next `up` holds
    the loop until the reset and only then works the task, once."""
    limit_then_recover(model_server)
    two_loops(repo, model_server)

    killed = run_loopctl(repo, "up", kill_at_seq="note:backend_paused", timeout=120)

    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    (paused,) = notes(repo, "backend_paused")
    assert not [e for e in events(repo, "tick_finished") if e.run == paused.run]
    # Killed between the note and its inbox item: nobody was told of the pause yet.
    assert not [e for e in events(repo, "inbox_opened") if e.data["id"] == paused.data["item"]]
    mark = last_seq(repo)
    spawn(procs, repo, tmp_path, "up")
    (restarted,) = wait_event(repo, "scheduler_started", after=mark)
    resumed = wait_note(repo, "backend_resumed", after=mark)
    # The restarted up told it (once), before the pause ended.
    (told,) = [e for e in events(repo, "inbox_opened") if e.data["id"] == paused.data["item"]]
    assert mark < told.seq < resumed.seq
    (done, *_) = wait_event(
        repo, "task_finished", loop="api", status="done", after=resumed.seq, what="the fix"
    )
    assert_clean_exit(run_loopctl(repo, "down"), 0)

    until = until_of(paused)
    assert restarted.time < until  # it started again during the pause
    # It resumed the pause, not the work: no turn of the loop, and no call to the backend,
    # before the reset; the 429s were the first up's, the rest answered after the reset.
    after_restart = [e for e in makers_started(repo, "api") if e.seq > mark]
    assert after_restart
    assert all(e.time >= until for e in after_restart)
    assert [s.status for s in model_server.posts()][:6] == [429] * 6
    assert len(notes(repo, "backend_paused")) == 1
    assert len(notes(repo, "backend_resumed")) == 1
    # The work went on after the reset: the task was fixed and committed.
    assert [e for e in events(repo, "commit_created") if e.loop == "api" and e.seq <= done.seq]


def test_claude_codes_usage_limit_pauses_its_loop_until_the_stated_reset(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, procs: list[Proc]
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    make_project(repo, "fixer.py")
    (repo / "agents" / "claude-maker.toml").write_text(
        'description = "claude"\nbackend = "claude"\n\n[sandbox]\nwrite = ["~/.fake-cli"]\n'
    )
    write_loop(repo, "claude", 'every = "1s"\n' + LOOP + '\n[maker]\nagent = "claude-maker"\n')
    commit_all(repo, "a loop on claude")
    set_scenario("claude", mode="usage_limit", limited_calls=1, reset_in=2)

    run = spawn(procs, repo, tmp_path, "run", "claude", "--max-ticks", "2")
    code = run.wait(60)

    assert code == 1, run.output  # its first tick did not succeed
    (paused,) = notes(repo, "backend_paused")
    assert paused.data["backend"] == "claude"
    assert paused.data["kind"] == "quota"
    assert paused.data["stated"] is True
    assert paused.data["said"].startswith("Claude AI usage limit reached|")
    until = until_of(paused)
    assert int(until.timestamp()) == int(paused.data["said"].rsplit("|", 1)[1])
    (resumed,) = notes(repo, "backend_resumed")
    first, second = events(repo, "task_finished")
    assert (first.data["status"], first.data["outcome"]) == ("paused", "rate-limited")
    assert second.data["status"] == "done"
    (_, again) = makers_started(repo, "claude")
    assert again.time >= until
    assert resumed.seq < again.seq


def test_a_rate_limited_checker_pauses_its_backend_too(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    make_project(repo, "fixer.py")
    (repo / "agents" / "judge.toml").write_text(
        'description = "judge"\nbackend = "claude"\n\n[sandbox]\nwrite = ["~/.fake-cli"]\n'
    )
    commit_all(repo, "a claude judge")
    set_scenario("claude", mode="overloaded")

    result = invoke(monkeypatch, repo, "goal", "tests green", "--checker-agent", "judge")

    assert result.exit_code == 1, result.output
    (paused,) = notes(repo, "backend_paused")
    assert (paused.data["backend"], paused.data["kind"]) == ("claude", "overload")
    assert paused.data["stated"] is False
    assert paused.data["agent"] == "judge"
    (finished,) = events(repo, "task_finished")
    assert (finished.data["status"], finished.data["outcome"]) == ("paused", "rate-limited")
    (attempt,) = events(repo, "attempt_finished")
    assert attempt.data["fingerprint"] is None
    assert "overloaded until" in attempt.data["reason"]


def test_a_pause_another_process_recorded_holds_ups_loops_too(
    repo: Path, tmp_path: Path, procs: list[Proc], model_server: ScriptedModelServer
) -> None:
    model_server.script = fixes_calc
    two_loops(repo, model_server)
    with ScriptedModelServer() as limited:  # what a `goal` on the same backend is answered
        limit_then_recover(limited)
        (repo / "agents" / "api-goal.toml").write_text(
            'description = "own agent"\nbackend = "openai"\nmodel = "gpt-test"\n'
            f'base_url = "{limited.url}/v1"\ntimeout = "60s"\n'
        )
        commit_all(repo, "a second agent on the backend")
        spawn(procs, repo, tmp_path, "up")
        wait_event(repo, "tick_finished", loop="api", what="a first tick of the api loop")

        goal = run_loopctl(repo, "goal", "tests green", "--agent", "api-goal")
        paused = wait_note(repo, "backend_paused")
        # Only a scheduler ends a pause: `up` saw the one the goal recorded.
        resumed = wait_note(repo, "backend_resumed", after=paused.seq)
        wait_event(repo, "tick_started", loop="api", after=resumed.seq, what="the api loop again")
        assert_clean_exit(run_loopctl(repo, "down"), 0)

    assert goal.returncode == 1, goal.stdout + goal.stderr
    assert paused.loop == "goal"
    until = until_of(paused)
    seen_by_up = paused.time + timedelta(seconds=LOOK_EVERY_S + 1)
    held = [
        e for e in events(repo, "tick_started") if e.loop == "api" and seen_by_up < e.time < until
    ]
    assert held == []
    assert resumed.time >= until
