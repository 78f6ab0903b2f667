"""Two workers on two clones (two machines: separate HOMEs, journals and worktree roots) share
one daily fuse: the spend ledger of their task queue (loopctl.temporal.ledger) counts what every
worker's attempts spent, so a tick the day's cap no longer allows is refused on whichever
machine takes it, even one whose own journal has spent nothing."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from support.beyond import QUEUE, loopctl_worker, machine_env
from support.journal import events
from support.repos import git, make_project, write_loop

from loopctl.journal.events import EventType
from loopctl.temporal.shapes import AttemptRequest, AttemptResult

LOOP = 'every = "1h"\ngoal = "tests green"\nprompt = "Make add() add."\n'
# The fixer reports 1200 tokens a tick: one tick spends the whole day.
FUSE = "\n[budget]\nmax_tokens_per_day = 1200\n"


def _clones(outside: Path) -> tuple[Path, Path]:
    remote = outside / "remote.git"
    git(outside, "init", "-q", "--bare", "-b", "main", str(remote))
    home = outside / "home" / "project"
    home.mkdir(parents=True)
    git(home, "init", "-q", "-b", "main")
    make_project(home, config_extra=FUSE)
    write_loop(home, "nightly", LOOP)
    git(home, "add", "-A")
    git(home, "commit", "-q", "-m", "a loop under a daily fuse")
    git(home, "remote", "add", "origin", str(remote))
    git(home, "push", "-q", "origin", "main")
    clones = []
    for machine in ("machine-a", "machine-b"):
        (outside / machine).mkdir()
        git(outside / machine, "clone", "-q", str(remote), "project")
        clones.append(outside / machine / "project")
    return clones[0], clones[1]


async def _tick(address: str, workflow_id: str) -> AttemptResult:
    from temporalio.client import Client

    client = await Client.connect(address)
    result: AttemptResult = await client.execute_workflow(
        "loopctl.LoopTick",
        AttemptRequest(loop="nightly", attempt_id=""),
        id=workflow_id,
        task_queue=QUEUE,
        result_type=AttemptResult,
    )
    return result


def _agents(project: Path) -> int:
    return len(events(project, EventType.AGENT_FINISHED))


def test_two_workers_together_stay_within_the_daily_fuse(
    temporal_server: str, outside: Path
) -> None:
    clones = dict(zip(("machine-a", "machine-b"), _clones(outside), strict=True))
    with contextlib.ExitStack() as stack:
        workers = {
            name: stack.enter_context(
                loopctl_worker(
                    temporal_server,
                    clone,
                    name,
                    outside / f"{name}.log",
                    env=machine_env(outside / name / "home"),
                )
            )
            for name, clone in clones.items()
        }
        first = asyncio.run(_tick(temporal_server, "nightly-1"))
        assert (first.status, first.tokens) == ("done", 1200), first
        spent_on = first.worker
        # The machine that spent goes away: the next ticks can only go to the other one,
        # whose own journal has spent nothing today.
        workers[spent_on].kill()
        workers[spent_on].wait()
        other = next(name for name in clones if name != spent_on)

        later = [asyncio.run(_tick(temporal_server, f"nightly-{n}")) for n in (2, 3)]

    assert [(r.status, r.worker, r.tokens) for r in later] == [("skipped", other, 0)] * 2
    assert all("daily budget fuse: 1200 of 1200 tokens" in r.reason for r in later), later
    assert all("across the workers" in r.reason for r in later)
    # One agent ran in all: the one that spent the day's budget.
    assert (_agents(clones[spent_on]), _agents(clones[other])) == (1, 0)
    # The refusals are on record where they happened, as the local fuse records them.
    skipped = events(clones[other], EventType.TICK_SKIPPED)
    assert [e.data["trigger"]["worker"] for e in skipped] == [other, other]
    (opened,) = events(clones[other], EventType.INBOX_OPENED)
    assert opened.data["kind"] == "escalation"
    assert "daily budget fuse" in opened.data["summary"]
