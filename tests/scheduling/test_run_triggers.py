"""`loopctl run NAME` on a trigger: --every/--cron/--watch, --max-ticks, --no-start, the fuse."""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, invoke, run_loopctl
from support.journal import due, events, wait_event
from support.processes import SAFETY_NET, Proc, running_procs, spawn, wait_for
from support.repos import commit_all, make_project, write_loop

from loopctl.journal.fuse import fuse_item_id
from loopctl.scheduling.watch import RepoWatcher


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def _beat(
    repo: Path,
    script: str = "fixer.py",
    body: str = "",
    config_extra: str = "",
    prompt: str = "Fix add() in calc.py",
) -> None:
    make_project(repo, script, config_extra=config_extra)
    write_loop(repo, "beat", f'goal = "tests green"\nprompt = {json.dumps(prompt)}\n' + body)
    commit_all(repo, "a loop")


def test_every_1s_with_max_ticks_3_runs_three_ticks_on_the_one_second_grid(repo: Path) -> None:
    _beat(repo)

    done = run_loopctl(repo, "run", "beat", "--every", "1s", "--max-ticks", "3", timeout=120)

    assert_clean_exit(done, 0)
    started = events(repo, "tick_started")
    fired = [e.data["trigger"]["fired"] for e in started]
    assert fired[0] == "start"
    # A tick may outlast its second on a loaded machine: the slots it overlapped are skipped,
    # or a late wake-up fires one catch-up tick for them. The ticks stay on the start's
    # one-second grid, and a gap wider than one second is always accounted for.
    assert len(fired) == 3
    assert set(fired[1:]) <= {"schedule", "catch-up"}
    skipped = events(repo, "tick_skipped")
    for event in skipped:
        assert "still running" in event.data["reason"], event.data
    grid = timedelta(seconds=1)
    for before, after in itertools.pairwise(started):
        gap = due(after) - due(before)
        assert gap >= grid, (before.data, after.data)
        assert gap % grid == timedelta(0), (before.data, after.data)
        if gap > grid:
            between = [e for e in skipped if before.seq < e.seq < after.seq]
            assert between or after.data["trigger"].get("missed"), (before.data, after.data)
    assert all((due(e) - due(started[0])) % grid == timedelta(0) for e in skipped)
    assert all(e.time >= due(e) for e in started)  # never early
    assert [e.data["status"] for e in events(repo, "tick_finished")] == ["done"] * 3
    (stopped,) = events(repo, "scheduler_stopped")
    assert (stopped.data["by"], stopped.data["ticks"], stopped.data["failed"]) == ("run", 3, 0)
    assert "3 tick(s): 3 done" in done.stdout
    assert "next tick at" in done.stderr  # the plain view: one line per event


def test_max_ticks_exits_1_when_a_tick_fails(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _beat(repo, "never_fixes.py", body="\n[budget]\nmax_iterations = 1\n")

    result = invoke(monkeypatch, repo, "run", "beat", "--every", "1h", "--max-ticks", "1", "--json")

    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    (tick,) = payload["ticks"]
    assert (tick["fired"], tick["status"]) == ("start", "failed")


def test_no_start_waits_for_the_first_due_time(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _beat(repo, body='every = "1s"\n')

    result = invoke(monkeypatch, repo, "run", "beat", "--max-ticks", "1", "--no-start")

    assert result.exit_code == 0, result.output
    (began,) = events(repo, "scheduler_started")
    (tick,) = events(repo, "tick_started")
    assert tick.data["trigger"]["fired"] == "schedule"
    assert tick.data["trigger"]["schedule"] == "every 1s"  # the loop's own trigger
    assert due(tick) > began.time


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "beat"), "has no trigger"),
        (("run", "beat", "--once", "--every", "1s"), "--once runs one tick now"),
        (("run", "beat", "--every", "1s", "--cron", "* * * * *"), "give one trigger"),
        (("run", "beat", "--every", "soon"), "invalid duration"),
        (("run", "beat", "--every", "0s"), "longer than 0s"),
        (("run", "beat", "--cron", "61 * * * *"), "invalid cron expression"),
        (("run", "beat", "--cron", "* * *"), "expected 5"),
        (("run", "bet", "--every", "1s"), "did you mean 'beat'"),
    ],
)
def test_trigger_usage_errors_exit_2_with_one_line(
    repo: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], message: str
) -> None:
    _beat(repo)

    result = invoke(monkeypatch, repo, *args)

    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert events(repo, "tick_started") == []


def test_a_watch_fires_on_a_file_write_and_not_on_its_own_writes(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    # "**" matches anything: the agent's edits, the commits, the log, STATE.md, INBOX.md are
    # all written while a tick runs, and none of them may start another tick.
    _beat(repo, body='watch = ["**"]\n', prompt="Fix add(). Changed:\n{changed}")
    proc = spawn(procs, repo, tmp_path, "run", "beat", "--no-start")
    # Every wait is on an event in the journal; the timeouts are only safety nets.
    wait_event(repo, "scheduler_started", what="the watch to be ready", timeout=SAFETY_NET)

    (repo / "one.txt").write_text("1\n")
    wait_event(repo, "tick_finished", what="the first tick", timeout=SAFETY_NET)
    (repo / "notes").mkdir()
    (repo / "notes" / "two.txt").write_text("2\n")
    wait_event(repo, "tick_finished", count=2, what="the second tick", timeout=SAFETY_NET)
    code = proc.signal(signal.SIGINT, timeout=SAFETY_NET)

    assert code == 130, proc.output
    started = events(repo, "tick_started")
    assert [e.data["trigger"]["fired"] for e in started] == ["watch", "watch"]
    assert [e.data["trigger"]["changed"] for e in started] == [["one.txt"], ["notes/two.txt"]]
    assert events(repo, "tick_skipped") == []  # nothing written during tick 1 counted
    assert [e.data["status"] for e in events(repo, "task_finished")] == ["done", "done"]
    prompts = [e.data["prompt"] for e in events(repo, "task_found")]
    assert prompts == ["Fix add(). Changed:\none.txt", "Fix add(). Changed:\nnotes/two.txt"]


def test_the_watcher_ignores_the_worktree_root_and_harness_folders(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "wt" / "t").mkdir(parents=True)
    (root / ".loop").mkdir()
    seen: list[list[str]] = []
    watcher = RepoWatcher(root, ["**/*.py"], seen.append, ignore=[root / "wt"], debounce_ms=400)
    watcher.start()
    try:
        assert watcher.ready
        (root / "wt" / "t" / "agent.py").write_text("x = 1\n")
        (root / ".loop" / "state.py").write_text("x = 1\n")
        (root / "editor.py.swp").write_text("x\n")
        (root / "user.py").write_text("y = 2\n")
        wait_for(lambda: seen, "a change batch")
    finally:
        watcher.stop()

    assert [p for batch in seen for p in batch] == ["user.py"]


def test_the_daily_fuse_skips_ticks_with_a_reason_and_one_inbox_item(repo: Path) -> None:
    # The fixer reports 1200 tokens a tick: the first tick blows a 1000-token day.
    _beat(repo, config_extra="\n[budget]\nmax_tokens_per_day = 1000\n")

    done = run_loopctl(repo, "run", "beat", "--every", "1s", "--max-ticks", "3")

    assert_clean_exit(done, 1)
    assert len(events(repo, "tick_started")) == 1
    skipped = events(repo, "tick_skipped")
    # A slow first tick (a loaded machine) may also see a slot skipped as an overlap: those do
    # not count towards --max-ticks; the two refused by the fuse do.
    fused = [e for e in skipped if "daily budget fuse: 1200 of 1000 tokens" in e.data["reason"]]
    assert len(fused) == 2
    assert all(e in fused or e.seq < fused[0].seq for e in skipped)
    skipped = fused
    opened = events(repo, "inbox_opened")
    assert len(opened) == 1
    assert opened[0].data["kind"] == "escalation"
    day = skipped[0].time.astimezone().date()
    assert opened[0].data["id"] == fuse_item_id(day)
    assert opened[0].data["id"] in (repo / ".loop" / "INBOX.md").read_text()
    # What the human is shown, and what reports count it as: the day's spend, not a guess.
    reason = "daily budget fuse: 1200 of 1000 tokens used on " + day.isoformat()
    evidence = opened[0].data["evidence"]
    assert opened[0].data["summary"].startswith(reason)
    assert opened[0].data["summary"].endswith("; scheduled ticks are skipped until tomorrow")
    assert evidence["reason"].startswith(reason)
    assert (evidence["tokens"], evidence["usd"], evidence["day"]) == (1200, 0.01, day.isoformat())
    assert evidence["outcome"] == "budget-stop"
