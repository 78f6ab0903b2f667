"""Approvals as signals, between two machines: a worker's clone and the approver's home clone.

The home clone schedules the loop (`up --engine temporal`); a `loopctl worker` with a HOME and
worktree root of its own works it in another clone of the same bare remote, and its gated push
waits in an AwaitApproval workflow. Its records come home with `state pull`; `inbox approve` at
home signals the workflow with the commit the home inbox shows. A signal carrying another sha is
refused and recorded in the worker's journal; the right one delivers, once; a repeat does nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.beyond import QUEUE, loopctl_worker, machine_env
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.repos import git, make_project, remote_refs, write_loop

from loopctl.journal.events import EventType
from loopctl.temporal.shapes import (
    ANSWER_QUERY,
    APPROVE_SIGNAL,
    ApprovalAnswer,
    ApprovalSignal,
    AttemptResult,
    approval_workflow_id,
)

LOOP = (
    'every = "1h"\ngoal = "tests green"\nprompt = "Make add() add."\n\n'
    '[deliver]\nactions = ["commit", "push"]\n'
)
BRANCH = "refs/heads/loop/nightly/main"


def _home_and_remote(outside: Path) -> tuple[Path, Path]:
    remote = outside / "remote.git"
    git(outside, "init", "-q", "--bare", "-b", "main", str(remote))
    home = outside / "home" / "project"
    home.mkdir(parents=True)
    git(home, "init", "-q", "-b", "main")
    make_project(home)
    write_loop(home, "nightly", LOOP)
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "a gated loop")
    git(home, "remote", "add", "origin", str(remote))
    git(home, "push", "-q", "origin", "main")
    return home, remote


def _clone(remote: Path, where: Path) -> Path:
    where.mkdir(parents=True)
    git(where, "clone", "-q", str(remote), "project")
    return where / "project"


@pytest.fixture
def machines(temporal_server: str, outside: Path) -> Iterator[dict[str, Any]]:
    """The home clone, the bare remote, and machine A's clone with its worker polling."""
    home, remote = _home_and_remote(outside)
    clone = _clone(remote, outside / "machine-a")
    env = machine_env(outside / "machine-a" / "home")
    log = outside / "a.log"
    with loopctl_worker(temporal_server, clone, "machine-a", log, env=env):
        yield {"home": home, "remote": remote, "clone": clone, "log": log, "env": env}


async def _fire_and_wait(address: str) -> AttemptResult:
    """Fire the loop's schedule now; the tick it starts, once finished."""
    from temporalio.client import Client

    client = await Client.connect(address)
    await client.get_schedule_handle("loopctl-nightly").trigger()
    while True:
        async for execution in client.list_workflows('WorkflowType = "loopctl.LoopTick"'):
            handle = client.get_workflow_handle(execution.id, result_type=AttemptResult)
            result: AttemptResult = await asyncio.wait_for(handle.result(), 240)
            return result
        await asyncio.sleep(0.2)  # a polling interval: the listing decides


async def _signal(address: str, item: str, sha: str, nonce: str) -> ApprovalAnswer:
    """Signal `item`'s workflow as another client would; the answer to this signal."""
    from temporalio.client import Client

    client = await Client.connect(address)
    handle = client.get_workflow_handle(approval_workflow_id(item))
    await handle.signal(APPROVE_SIGNAL, ApprovalSignal(item, sha, nonce))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        answer: ApprovalAnswer = await handle.query(ANSWER_QUERY, nonce, result_type=ApprovalAnswer)
        if answer.outcome != "pending":
            return answer
        await asyncio.sleep(0.2)  # a polling interval: the answer decides
    raise AssertionError(f"no answer to signal {nonce} within 240s")


async def _status(address: str, workflow_id: str) -> str:
    from temporalio.client import Client

    client = await Client.connect(address)
    described = await client.get_workflow_handle(workflow_id).describe()
    return str(described.status.name if described.status else "")


def _inbox(project: Path, *flags: str) -> list[dict[str, Any]]:
    done = run_loopctl(project, "inbox", "--json", *flags)
    assert_clean_exit(done, 0)
    found: list[dict[str, Any]] = json.loads(done.stdout)["inbox"]
    return found


def test_a_wrong_sha_is_refused_and_the_right_one_delivers_once(
    temporal_server: str, machines: dict[str, Any]
) -> None:
    home, remote, clone = machines["home"], machines["remote"], machines["clone"]
    up = run_loopctl(
        home, "up", "--engine", "temporal", "--server", temporal_server, "--task-queue", QUEUE
    )
    assert_clean_exit(up, 0)

    tick = asyncio.run(_fire_and_wait(temporal_server))

    assert tick.worker == "machine-a", machines["log"].read_text()
    (wait,) = tick.waiting
    sha = git(clone, "rev-parse", "loop/nightly/main").strip()
    assert (wait.sha, wait.loop, wait.queue) == (sha, "nightly", f"{QUEUE}@machine-a")
    assert BRANCH not in remote_refs(remote)  # the push waits
    # The worker's records came home: the same approval, bound to the same commit.
    assert_clean_exit(run_loopctl(home, "state", "pull"), 0)
    (item,) = _inbox(home)
    assert (item["id"], item["kind"], item["evidence"]["commit"]) == (wait.item, "approval", sha)
    workflow_id = approval_workflow_id(wait.item)
    assert asyncio.run(_status(temporal_server, workflow_id)) == "RUNNING"

    # A stale approver's signal, for another commit: refused, recorded, and the gate waits on.
    wrong = asyncio.run(_signal(temporal_server, wait.item, "0" * 40, "stale"))

    assert (wrong.outcome, wrong.ok) == ("refused", False)
    (refused,) = events(clone, EventType.APPROVAL_REFUSED)
    assert refused.data["id"] == wait.item
    assert "000000000000" in refused.data["reason"]
    assert sha[:12] in refused.data["reason"]
    assert BRANCH not in remote_refs(remote)
    assert asyncio.run(_status(temporal_server, workflow_id)) == "RUNNING"

    # The approver at home: `inbox approve` signals with the sha its inbox shows.
    approved = run_loopctl(home, "inbox", "approve", wait.item, timeout=300)

    assert_clean_exit(approved, 0)
    assert f"approved {wait.item}" in approved.stdout
    assert remote_refs(remote)[BRANCH] == sha
    assert asyncio.run(_status(temporal_server, workflow_id)) == "COMPLETED"

    # Approved again (a second click, a second approver): nothing waits, nothing runs.
    again = run_loopctl(home, "inbox", "approve", wait.item, timeout=300)

    assert_clean_exit(again, 1)
    assert f"nothing waits for {wait.item}" in again.stderr
    found = events(clone)
    assert [e.type for e in found].count(EventType.APPROVED) == 1
    pushes = [e for e in found if e.type == EventType.ACTION_STARTED and e.data["action"] == "push"]
    assert len(pushes) == 1
    assert pushes[0].data["approval"] == wait.item

    # And home knows it all after a pull: the item closed as approved, the refusal on record.
    assert_clean_exit(run_loopctl(home, "state", "pull"), 0)
    assert _inbox(home) == []
    (closed,) = [i for i in _inbox(home, "--all") if i["id"] == wait.item]
    assert closed["resolution"] == "approved"
    assert [e.data["id"] for e in events(home, EventType.APPROVAL_REFUSED)] == [wait.item]
    assert os.environ["HOME"] != machines["env"]["HOME"]  # two machines, two homes


def _same_shape(item: dict[str, Any], sha: str, run: str) -> dict[str, Any]:
    """An inbox item without what differs between two runs of one loop (ids, sha, paths)."""
    evidence = item["evidence"]
    kept = ("action", "step", "branch", "base_branch", "remote", "then", "replaces")
    return {
        "kind": item["kind"],
        "loop": item["loop"],
        "task": item["task"],
        "summary": item["summary"].replace(sha[:12], "SHA").replace(run, "RUN"),
        "status": item["status"],
        "evidence": {key: evidence.get(key) for key in kept},
    }


def _loop_status(project: Path) -> dict[str, Any]:
    done = run_loopctl(project, "status", "--json")
    assert_clean_exit(done, 0)
    (row,) = [r for r in json.loads(done.stdout)["status"] if r["loop"] == "nightly"]
    shown = {key: row[key] for key in ("loop", "trigger", "last_status", "open_items")}
    return {**shown, "tokens": row["spend"]["tokens"]}


def _report(project: Path, sha: str, run: str, item: str) -> dict[str, Any]:
    """`report --since all`'s sections, their lines' text without ids and times."""
    done = run_loopctl(project, "report", "--since", "all", "--json", "--no-mark")
    assert_clean_exit(done, 0)
    report = json.loads(done.stdout)["report"]

    def plain(text: str) -> str:
        return text.replace(sha[:12], "SHA").replace(run, "RUN").replace(item, "ITEM")

    sections = {
        name: [(plain(line["text"]), line["loop"], line["task"]) for line in lines]
        for name, lines in report["sections"].items()
    }
    return {"sections": sections, "tokens": report["spent"]["total"]}


def test_the_home_inbox_after_a_pull_is_the_inbox_of_a_local_run(
    temporal_server: str, machines: dict[str, Any], outside: Path
) -> None:
    """One truth: what a worker's tick leaves for a human, pulled home, reads as a local run's."""
    home, remote, clone = machines["home"], machines["remote"], machines["clone"]
    laptop = _clone(remote, outside / "laptop")
    local = run_loopctl(laptop, "run", "nightly", "--once", timeout=300)
    assert_clean_exit(local, 0)
    (here,) = _inbox(laptop)
    here_sha = here["evidence"]["commit"]

    up = run_loopctl(
        home, "up", "--engine", "temporal", "--server", temporal_server, "--task-queue", QUEUE
    )
    assert_clean_exit(up, 0)
    tick = asyncio.run(_fire_and_wait(temporal_server))
    assert tick.worker == "machine-a", machines["log"].read_text()
    assert_clean_exit(run_loopctl(home, "state", "pull"), 0)
    (pulled,) = _inbox(home)
    worker_sha = git(clone, "rev-parse", "loop/nightly/main").strip()

    assert _same_shape(pulled, worker_sha, tick.run) == _same_shape(here, here_sha, here["run"])
    assert pulled["evidence"]["commit"] == worker_sha
    assert _loop_status(home) == _loop_status(laptop)
    assert _report(home, worker_sha, tick.run, pulled["id"]) == _report(
        laptop, here_sha, here["run"], here["id"]
    )
    shown = run_loopctl(home, "inbox", "show", pulled["id"])
    assert_clean_exit(shown, 0)
    assert worker_sha[:12] in shown.stdout


async def _two_at_once(address: str, item: str, sha: str) -> list[str]:
    """Two approvals of the same sha sent together (two approvers, a double click): what each
    signal did; `gone` for one that found the workflow already ended."""
    from temporalio.service import RPCError, RPCStatusCode

    async def one(nonce: str) -> str:
        try:
            return (await _signal(address, item, sha, nonce)).outcome
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            return "gone"

    return list(await asyncio.gather(one("first"), one("second")))


def test_two_approvals_sent_together_deliver_once(
    temporal_server: str, machines: dict[str, Any]
) -> None:
    home, remote, clone = machines["home"], machines["remote"], machines["clone"]
    up = run_loopctl(
        home, "up", "--engine", "temporal", "--server", temporal_server, "--task-queue", QUEUE
    )
    assert_clean_exit(up, 0)
    (wait,) = asyncio.run(_fire_and_wait(temporal_server)).waiting

    outcomes = asyncio.run(_two_at_once(temporal_server, wait.item, wait.sha))

    assert sorted(outcomes) in (["closed", "released"], ["gone", "released"]), outcomes
    assert remote_refs(remote)[BRANCH] == wait.sha
    found = events(clone)
    assert [e.type for e in found].count(EventType.APPROVED) == 1
    pushes = [e for e in found if e.type == EventType.ACTION_STARTED and e.data["action"] == "push"]
    assert len(pushes) == 1


def test_a_rejection_at_home_closes_the_waiting_gate_on_the_worker(
    temporal_server: str, machines: dict[str, Any]
) -> None:
    """`inbox reject` at home signals the gate's workflow: the worker closes the item in its
    journal (the task ends rejected, nothing pushed) and the workflow ends, so nothing waits."""
    home, remote, clone = machines["home"], machines["remote"], machines["clone"]
    up = run_loopctl(
        home, "up", "--engine", "temporal", "--server", temporal_server, "--task-queue", QUEUE
    )
    assert_clean_exit(up, 0)
    (wait,) = asyncio.run(_fire_and_wait(temporal_server)).waiting
    assert_clean_exit(run_loopctl(home, "state", "pull"), 0)
    workflow_id = approval_workflow_id(wait.item)

    rejected = run_loopctl(home, "inbox", "reject", wait.item, "--reason", "not now", timeout=300)

    assert_clean_exit(rejected, 0)
    assert f"rejected {wait.item}" in rejected.stdout
    assert asyncio.run(_status(temporal_server, workflow_id)) == "COMPLETED"
    assert BRANCH not in remote_refs(remote)
    (closed,) = [e for e in events(clone, EventType.INBOX_CLOSED) if e.data["id"] == wait.item]
    assert (closed.data["resolution"], closed.data["reason"]) == ("rejected", "not now")
    assert EventType.APPROVED not in [e.type for e in events(clone)]

    # Approving it now finds nothing waiting; home learns the rejection with a pull.
    late = run_loopctl(home, "inbox", "approve", wait.item, timeout=300)
    assert_clean_exit(late, 1)
    assert f"nothing waits for {wait.item}" in late.stderr
    assert_clean_exit(run_loopctl(home, "state", "pull"), 0)
    (item,) = [i for i in _inbox(home, "--all") if i["id"] == wait.item]
    assert item["resolution"] == "rejected"


def test_a_restarted_worker_keeps_its_name_and_serves_the_delivery_it_left_waiting(
    temporal_server: str, outside: Path
) -> None:
    """Without --identity a worker is named by its host and clone, not its process: restarted,
    it polls the same queue of its own, where its waiting delivery's approval is handed."""
    from loopctl.commands.worker import default_identity

    home, remote = _home_and_remote(outside)
    clone = _clone(remote, outside / "machine-a")
    env = machine_env(outside / "machine-a" / "home")
    up = run_loopctl(
        home, "up", "--engine", "temporal", "--server", temporal_server, "--task-queue", QUEUE
    )
    assert_clean_exit(up, 0)
    with loopctl_worker(temporal_server, clone, "a", outside / "a.log", env=env, named=False):
        tick = asyncio.run(_fire_and_wait(temporal_server))
    name = default_identity(clone)
    assert tick.worker == name
    assert str(clone) not in name  # hashed: no long or private path in Temporal's UI
    (wait,) = tick.waiting
    assert wait.queue == f"{QUEUE}@{name}"
    assert_clean_exit(run_loopctl(home, "state", "pull"), 0)

    # The same clone's worker again, a new process: the approval reaches it and delivers.
    with loopctl_worker(temporal_server, clone, "a", outside / "again.log", env=env, named=False):
        approved = run_loopctl(home, "inbox", "approve", wait.item, timeout=300)

    assert_clean_exit(approved, 0)
    assert remote_refs(remote)[BRANCH] == wait.sha
