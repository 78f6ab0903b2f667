"""`loopctl up --engine temporal`: a loop's trigger as a Temporal Schedule, with its overlap and
catch-up mapped, fired by a real development server and worked by a real `loopctl worker`."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.beyond import (
    QUEUE,
    free_port,
    loopctl_worker,
    start_dev_server,
    stop_group,
    wait_until,
)
from support.cli import loopctl_argv
from support.journal import events
from support.repos import git, make_project, write_loop

from loopctl import process
from loopctl.definitions import load_project
from loopctl.journal.events import EventType
from loopctl.temporal.schedules import CATCH_UP, schedule_for


@pytest.mark.parametrize(
    ("body", "overlap", "catch_up", "spec"),
    [
        ('every = "2s"\n', "SKIP", timedelta(days=365), ("every", 2.0)),
        (
            'every = "1h"\noverlap = "queue-one"\ncatch_up = "none"\n',
            "BUFFER_ONE",
            timedelta(seconds=10),
            ("every", 3600.0),
        ),
        ('cron = "0 9 * * 1-5"\ntz = "Europe/Paris"\n', "SKIP", CATCH_UP["one"], ("cron", None)),
    ],
)
def test_a_trigger_maps_onto_a_schedule(
    repo: Path, body: str, overlap: str, catch_up: timedelta, spec: tuple[str, float | None]
) -> None:
    make_project(repo)
    write_loop(repo, "nightly", body + 'prompt = "x"\n')
    loop = load_project(repo).loops["nightly"]

    schedule = schedule_for(loop, "q")

    assert schedule.policy.overlap.name == overlap
    assert schedule.policy.catchup_window == catch_up
    if spec[0] == "every":
        (interval,) = schedule.spec.intervals
        assert interval.every == timedelta(seconds=spec[1] or 0)
    else:
        assert list(schedule.spec.cron_expressions) == ["0 9 * * 1-5"]
        assert schedule.spec.time_zone_name == "Europe/Paris"
    action: Any = schedule.action
    assert (action.workflow, action.id, action.task_queue) == (
        "loopctl.LoopTick",
        "loopctl-nightly",
        "q",
    )


async def _describe(address: str) -> Any:
    from temporalio.client import Client

    client = await Client.connect(address)
    return await client.get_schedule_handle("loopctl-nightly").describe()


async def _pause_and_wait(address: str) -> list[int]:
    """Pause the schedule, wait for the workflows it started; each one's activity attempts."""
    from temporalio.client import Client

    client = await Client.connect(address)
    await client.get_schedule_handle("loopctl-nightly").pause(note="test over")
    attempts = []
    async for execution in client.list_workflows('WorkflowType = "loopctl.LoopTick"'):
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        await asyncio.wait_for(handle.result(), 240)
        history = await handle.fetch_history()
        # The attempt's own activity (before it, the daily fuse's admission runs as another).
        ours = {
            e.event_id
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
            and e.activity_task_scheduled_event_attributes.activity_type.name
            == "loopctl.run_attempt"
        }
        started = [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
            and e.activity_task_started_event_attributes.scheduled_event_id in ours
        ]
        attempts.extend(started)
    return attempts


def test_overlap_skip_never_runs_two_attempts_of_a_loop_at_once(
    temporal_server: str, outside: Path
) -> None:
    marker, release = outside / "agent.pid", outside / "release"
    project = outside / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    make_project(project, "slow_fixer.py", marker, release)
    write_loop(project, "nightly", 'every = "2s"\ngoal = "tests green"\nprompt = "Fix add."\n')
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a loop every 2s")

    with loopctl_worker(temporal_server, project, "machine-a", outside / "a.log"):
        try:
            up = process.run(
                loopctl_argv(
                    "up",
                    "--engine",
                    "temporal",
                    "--server",
                    temporal_server,
                    "--task-queue",
                    QUEUE,
                ),
                cwd=project,
                env=dict(os.environ),
                timeout=120,
            )
            assert up.exit_code == 0, up.stderr_tail
            assert "scheduled nightly (every 2s) as loopctl-nightly" in up.stdout_tail

            wait_until(marker.exists, "the first attempt's agent runs", 120)
            # The schedule keeps coming due while that attempt works: each slot is skipped. Six
            # slots of 2 s outlast the activity's heartbeat timeout (10 s): the worker's
            # heartbeats keep the attempt its own (no retry, below).
            wait_until(
                lambda: (
                    asyncio.run(_describe(temporal_server)).info.num_actions_skipped_overlap >= 6
                ),
                "six slots skipped for overlap",
                120,
            )
            described = asyncio.run(_describe(temporal_server))
            assert described.info.num_actions == 1
            assert len(described.info.running_actions) == 1
            assert [e.type for e in events(project)].count(EventType.AGENT_STARTED) == 1
        finally:
            release.touch()
        attempts = asyncio.run(_pause_and_wait(temporal_server))

    found = events(project)
    ticks = [e for e in found if e.type == EventType.TICK_STARTED]
    assert len(ticks) == len(attempts) >= 1
    assert attempts == [1] * len(ticks)  # each activity ran once: no retry, no second claim
    # Never two at once: each tick finished before the next one started.
    order = [e.type for e in found if e.type in (EventType.TICK_STARTED, EventType.TICK_FINISHED)]
    assert order == [EventType.TICK_STARTED, EventType.TICK_FINISHED] * len(ticks)
    assert all(t.data["trigger"]["fired"] == "schedule" for t in ticks)


async def _schedule_info(address: str) -> Any:
    from temporalio.client import Client

    client = await Client.connect(address)
    return (await client.get_schedule_handle("loopctl-nightly").describe()).info


async def _pause(address: str) -> None:
    from temporalio.client import Client

    client = await Client.connect(address)
    await client.get_schedule_handle("loopctl-nightly").pause(note="test over")


def test_a_restarted_server_runs_one_catch_up_tick_not_one_per_missed_slot(
    outside: Path,
) -> None:
    port, db = free_port(), outside / "temporal.db"
    address = f"127.0.0.1:{port}"
    project = _project(outside, 'every = "6s"\n', "fixer.py")
    server = start_dev_server(port, outside, db)
    try:
        with loopctl_worker(address, project, "machine-a", outside / "a.log") as worker:
            up = process.run(
                loopctl_argv(
                    "up", "--engine", "temporal", "--server", address, "--task-queue", QUEUE
                ),
                cwd=project,
                env=dict(os.environ),
                timeout=120,
            )
            assert up.exit_code == 0, up.stderr_tail
            # Down between two slots, no tick running: a tick open across the outage would
            # (rightly) take the missed slots' place, and this tests the catch-up itself.
            wait_until(lambda: _between_ticks(address), "a first tick, finished", 120)
            stop_group(server.pid)
            server.wait()
            down_at = datetime.now(UTC)
            # The outage itself is what is tested: at least three 6 s slots must pass in it.
            wait_until(lambda: datetime.now(UTC) > down_at + timedelta(seconds=19), "an outage")
            up_at = datetime.now(UTC)
            server = start_dev_server(port, outside, db)  # the same store: the schedule is kept
            wait_until(
                lambda: any(
                    down_at < a.scheduled_at < up_at
                    for a in asyncio.run(_schedule_info(address)).recent_actions
                ),
                "the catch-up",
                120,
            )
            asyncio.run(_pause(address))
            info = asyncio.run(_schedule_info(address))
            assert worker.poll() is None  # the worker outlived the outage
    finally:
        stop_group(server.pid)
        server.wait()

    in_outage = [a for a in info.recent_actions if down_at < a.scheduled_at < up_at]
    assert len(in_outage) == 1  # one tick for the three or more missed slots
    assert info.num_actions_skipped_overlap >= 2  # the other missed slots, skipped
    assert info.num_actions_missed_catchup_window == 0


def _project(where: Path, trigger: str, *agent: str | Path) -> Path:
    project = where / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    make_project(project, *agent)
    write_loop(project, "nightly", trigger + 'goal = "tests green"\nprompt = "Fix add."\n')
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a loop")
    return project


def _between_ticks(address: str) -> bool:
    """At least one action taken, none running, and the next slot more than 2 s away."""
    info = asyncio.run(_schedule_info(address))
    soon = datetime.now(UTC) + timedelta(seconds=2)
    quiet = bool(info.next_action_times) and info.next_action_times[0] > soon
    return info.num_actions >= 1 and not info.running_actions and quiet


async def _paused(address: str) -> tuple[bool, str]:
    from temporalio.client import Client

    client = await Client.connect(address)
    described = await client.get_schedule_handle("loopctl-nightly").describe()
    return described.schedule.state.paused, described.schedule.state.note or ""


def test_down_and_stop_pause_the_schedule_and_up_resumes_it(
    temporal_server: str, outside: Path
) -> None:
    """Paused, not deleted: the schedule keeps its id, policies and history."""
    project = _project(outside, 'every = "1h"\n', "fixer.py")

    def loopctl(*args: str) -> str:
        done = process.run(loopctl_argv(*args), cwd=project, env=dict(os.environ), timeout=120)
        assert done.exit_code == 0, done.stderr_tail
        return done.stdout_tail

    up = ("up", "--engine", "temporal", "--server", temporal_server, "--task-queue", QUEUE)
    assert "scheduled nightly" in loopctl(*up)
    assert asyncio.run(_paused(temporal_server)) == (False, "loopctl up")

    said = loopctl("down")

    assert f"paused loopctl-nightly on {temporal_server}" in said
    assert asyncio.run(_paused(temporal_server)) == (True, "loopctl down")

    assert "updated nightly" in loopctl(*up)
    assert asyncio.run(_paused(temporal_server)) == (False, "loopctl up")

    said = loopctl("stop", "nightly")

    assert "schedule loopctl-nightly paused" in said
    assert asyncio.run(_paused(temporal_server))[0] is True
    loopctl(*up)
    assert asyncio.run(_paused(temporal_server))[0] is False
