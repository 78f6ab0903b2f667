"""`up` carries a hundred loops (issue 30): loops sharing a slot are spread, a tick with nothing
to do is a few events and no git, and projections are not re-rendered per event."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from support.journal import events
from support.repos import PY, commit_all, loop_worktrees, make_project, toml_value, write_loop

from loopctl.definitions import load_project
from loopctl.definitions.loops import TriggerKind
from loopctl.engine.runner import Engine
from loopctl.journal.events import EventLog, EventType
from loopctl.journal.recorder import Recorder
from loopctl.scheduling.scheduler import Options, Scheduled, Scheduler
from loopctl.scheduling.timing import (
    MAX_SPREAD_S,
    Action,
    LoopTiming,
    Schedule,
    decide,
    default_spreads,
    spread_offset,
    with_spreads,
)

NOW = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def every(seconds: float, jitter_s: float | None = None) -> Schedule:
    return Schedule(TriggerKind.EVERY, every_s=seconds, jitter_s=jitter_s)


# --- the default spread --------------------------------------------------------------------------


def test_loops_sharing_a_slot_are_spread_over_half_their_period_and_a_lone_loop_is_not() -> None:
    schedules = {
        "a": every(30),
        "b": every(30),
        "alone": every(60),
        "own-jitter": every(30, jitter_s=10.0),
        "no-jitter": every(30, jitter_s=0.0),  # `jitter = "0s"`: its exact time, on purpose
        "hourly-1": every(3600),
        "hourly-2": every(3600),
        "nightly-1": Schedule(TriggerKind.CRON, cron="0 3 * * *", tz="UTC"),
        "nightly-2": Schedule(TriggerKind.CRON, cron="0 3 * * *", tz="UTC"),
        "watch-1": Schedule(TriggerKind.WATCH, watch=("src/**",)),
        "watch-2": Schedule(TriggerKind.WATCH, watch=("src/**",)),
    }
    assert default_spreads(schedules, NOW) == {
        "a": 15.0,
        "b": 15.0,
        "hourly-1": MAX_SPREAD_S,
        "hourly-2": MAX_SPREAD_S,
        "nightly-1": MAX_SPREAD_S,
        "nightly-2": MAX_SPREAD_S,
    }


def test_a_spread_offset_lies_within_the_spread_and_differs_between_loops() -> None:
    offsets = {spread_offset(f"loop-{i:03d}", 15.0) for i in range(100)}
    assert all(0.0 <= offset < 15.0 for offset in offsets)
    assert len(offsets) == 100
    # Spread, not bunched: each third of the window holds some of them.
    for start in (0.0, 5.0, 10.0):
        assert any(start <= offset < start + 5.0 for offset in offsets)
    assert spread_offset("loop-000", 0.0) == 0.0


def test_a_spread_offset_is_the_same_in_another_process() -> None:
    """A restarted `up` (another process, another hash seed) fires each loop when the first
    one would have."""
    code = (
        "from loopctl.scheduling.timing import spread_offset;"
        " print(repr(spread_offset('babysit', 15.0)))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
    )
    assert float(other.stdout) == spread_offset("babysit", 15.0)


def test_a_spread_loop_fires_at_its_offset_after_the_slot_and_on_time() -> None:
    spread = with_spreads({"a": every(30), "b": every(30)}, NOW)
    offset = spread_offset("a", 15.0)
    slot = NOW + timedelta(seconds=30)
    timing = LoopTiming(started=NOW)
    waiting = decide("a", spread["a"], timing, slot)
    assert waiting.action is Action.WAIT
    assert waiting.wake == slot + timedelta(seconds=offset)
    fired = decide("a", spread["a"], timing, slot + timedelta(seconds=offset))
    assert fired.action is Action.FIRE
    assert fired.slot == slot
    assert fired.missed == 0  # late by its spread is on time, not a missed slot


# --- a tick with nothing to do -------------------------------------------------------------------


def test_a_tick_that_finds_nothing_records_four_events_and_makes_no_worktree(repo: Path) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "quiet", f"[tasks]\ncommand = {toml_value([PY, '-c', 'pass'])}\n")
    commit_all(repo, "a loop whose source finds nothing")

    outcome = Engine(Recorder(load_project(repo))).run_loop_once(load_project(repo).loop("quiet"))

    assert outcome.ok
    assert outcome.tasks == ()
    assert [e.type for e in events(repo) if e.run == outcome.run] == [
        EventType.TICK_STARTED,
        EventType.NOTE,  # what confines the run's agents, said on every run
        EventType.TASKS_LISTED,
        EventType.TICK_FINISHED,
    ]
    assert loop_worktrees(repo) == []
    assert "quiet" in (repo / ".loop" / "STATE.md").read_text(encoding="utf-8")


# --- projections --------------------------------------------------------------------------------


def test_a_paced_recorder_renders_once_after_a_burst_and_the_files_end_current(
    repo: Path,
) -> None:
    make_project(repo, "fixer.py")
    rec = Recorder(load_project(repo), pace_s=3600.0)
    renders: list[float] = []
    render = rec._projections._render

    def counted() -> None:
        renders.append(time.monotonic())
        render()

    rec._projections._render = counted
    rec.emit(EventType.TICK_STARTED, run="r1", loop="l", kind="tick")
    rec.refresh_projections()  # the first render is at once
    assert len(renders) == 1
    for number in range(50):  # a hundred loops ticking: one refresh per event
        task = f"task-{number}"
        rec.emit(EventType.TASK_FOUND, run="r1", loop="l", task=task, prompt="p")
        rec.for_project(rec.project).refresh_projections()
    assert len(renders) == 1
    assert "task-49" not in rec.paths.state_md.read_text(encoding="utf-8")

    rec.flush_projections()  # `up` ends

    assert len(renders) == 2
    assert "task-49" in rec.paths.state_md.read_text(encoding="utf-8")
    rec.flush_projections()  # nothing stale: no render
    assert len(renders) == 2


def test_a_paced_render_held_back_happens_by_itself_when_the_pace_allows(repo: Path) -> None:
    make_project(repo, "fixer.py")
    rec = Recorder(load_project(repo), pace_s=0.2)
    rec.emit(EventType.TICK_STARTED, run="r1", loop="l", kind="tick")
    rec.refresh_projections()
    rec.emit(EventType.TASK_FOUND, run="r1", loop="l", task="later-task", prompt="p")
    rec.refresh_projections()
    deadline = time.monotonic() + 60  # a safety net: the timer fires after 0.2 s
    while "later-task" not in rec.paths.state_md.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, "the held-back render never happened"
        time.sleep(0.05)


# --- incremental folds ----------------------------------------------------------------------------


def test_a_fold_sees_each_event_once_and_starts_over_on_a_replaced_log(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    seen: list[list[int]] = []

    def step(total: list[int], new: object) -> list[int]:
        batch = [event.seq for event in new]  # type: ignore[attr-defined]
        seen.append(batch)
        return total + batch

    for _ in range(3):
        log.append("note")
    with log.folding("seqs", step, list) as total:
        assert total == [1, 2, 3]
    log.append("note")
    with log.folding("seqs", step, list) as total:
        assert total == [1, 2, 3, 4]
    with log.folding("seqs", step, list) as total:
        assert total == [1, 2, 3, 4]
    assert seen == [[1, 2, 3], [4]]

    replaced = tmp_path / "other.jsonl"
    EventLog(replaced).append("note")
    replaced.replace(log.path)  # `state pull` writes a merged log wholesale
    with log.folding("seqs", step, list) as total:
        assert total == [1]


def test_up_records_each_spread_loops_delay_with_its_tick(repo: Path) -> None:
    """The scheduler applies the spread and says so in `tick_started` (`trigger.delay`)."""
    loops = 2
    make_project(repo, "fixer.py")
    for index in range(loops):
        write_loop(
            repo,
            f"q{index}",
            f'every = "2s"\n[tasks]\ncommand = {toml_value([PY, "-c", "pass"])}\n',
        )
    commit_all(repo, "two loops sharing a slot")
    project = load_project(repo)
    chosen = {
        name: Scheduled(loop, schedule)
        for name, loop in project.loops.items()
        if (schedule := Schedule.of(loop)) is not None
    }
    scheduler = Scheduler(Recorder(project), chosen, Options(mode="up", max_ticks=loops))
    results = scheduler.run()
    assert len(results) == loops
    started = events(repo, "tick_started")
    delays = {e.loop: e.data["trigger"]["delay"] for e in started}
    assert delays == {f"q{i}": round(spread_offset(f"q{i}", 1.0), 3) for i in range(loops)}
