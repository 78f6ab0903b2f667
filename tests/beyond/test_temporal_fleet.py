"""Two workers on two clones (two machines: separate HOMEs, journals and worktree roots) share
one daily fuse: the spend ledger of their task queue (loopctl.temporal.ledger) counts what every
worker's attempts spent, so a tick the day's cap no longer allows is refused on whichever
machine takes it, even one whose own journal has spent nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from support.beyond import QUEUE, loopctl_worker, machine_env, wait_until
from support.journal import events
from support.repos import git, make_project, write_loop

from loopctl.journal.events import EventType
from loopctl.temporal.claims import CLAIMED, ELSEWHERE
from loopctl.temporal.shapes import AttemptRequest, AttemptResult

LOOP = 'every = "1h"\ngoal = "tests green"\nprompt = "Make add() add."\n'
# The fixer reports 1200 tokens a tick: one tick spends the whole day.
FUSE = "\n[budget]\nmax_tokens_per_day = 1200\n"


def _clones(outside: Path, *agent: str | Path, config: str = FUSE) -> tuple[Path, Path]:
    remote = outside / "remote.git"
    git(outside, "init", "-q", "--bare", "-b", "main", str(remote))
    home = outside / "home" / "project"
    home.mkdir(parents=True)
    git(home, "init", "-q", "-b", "main")
    make_project(home, *(agent or ("fixer.py",)), config_extra=config)
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


async def _tick(address: str, workflow_id: str, wait: bool = True) -> AttemptResult | None:
    from temporalio.client import Client

    client = await Client.connect(address)
    handle = await client.start_workflow(
        "loopctl.LoopTick",
        AttemptRequest(loop="nightly", attempt_id=""),
        id=workflow_id,
        task_queue=QUEUE,
        result_type=AttemptResult,
    )
    if not wait:
        return None
    result: AttemptResult = await asyncio.wait_for(handle.result(), 240)
    return result


def _run(address: str, workflow_id: str) -> AttemptResult:
    result = asyncio.run(_tick(address, workflow_id))
    assert result is not None
    return result


async def _result(address: str, workflow_id: str) -> AttemptResult:
    from temporalio.client import Client

    client = await Client.connect(address)
    handle = client.get_workflow_handle(workflow_id, result_type=AttemptResult)
    result: AttemptResult = await asyncio.wait_for(handle.result(), 240)
    return result


def _worker(server: str, clone: Path, name: str, log: Path) -> Any:
    """Machine `name`'s worker: its own HOME and loopctl folder beside its clone."""
    env = machine_env(clone.parent / "home")
    return loopctl_worker(server, clone, name, log, env=env)


def _agents(project: Path) -> int:
    return len(events(project, EventType.AGENT_FINISHED))


def _agents_anywhere(projects: Iterable[Path]) -> int:
    """The agents run on any of `projects`, each once: a worker's state push merges what the
    others pushed into its own journal (docs/beyond.md, the state branch), so one agent's
    `agent_finished` may be in several clones' journals, with the same run and attempt."""
    return len(
        {
            (e.run, e.data["attempt"], e.data["role"])
            for project in projects
            for e in events(project, EventType.AGENT_FINISHED)
        }
    )


def test_two_workers_together_stay_within_the_daily_fuse(
    temporal_server: str, outside: Path
) -> None:
    clones = dict(zip(("machine-a", "machine-b"), _clones(outside), strict=True))
    with contextlib.ExitStack() as stack:
        workers = {
            name: stack.enter_context(
                _worker(temporal_server, clone, name, outside / f"{name}.log")
            )
            for name, clone in clones.items()
        }
        first = _run(temporal_server, "nightly-1")
        assert (first.status, first.tokens) == ("done", 1200), first
        spent_on = first.worker
        # The machine that spent goes away: the next ticks can only go to the other one,
        # whose own journal has spent nothing today.
        workers[spent_on].kill()
        workers[spent_on].wait()
        other = next(name for name in clones if name != spent_on)

        later = [_run(temporal_server, f"nightly-{n}") for n in (2, 3)]

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


def _claimed_by(clones: dict[str, Path]) -> str:
    """The machine whose journal claimed an attempt first (empty: none yet)."""
    for name, clone in clones.items():
        if any(e.data["what"] == CLAIMED for e in events(clone, EventType.NOTE)):
            return name
    return ""


def test_a_worker_killed_mid_attempt_does_not_resume_what_another_finished(
    temporal_server: str, outside: Path
) -> None:
    """Worker A dies by SIGKILL while its agent works; Temporal gives the attempt to B, on its
    own clone, which finishes it. A's journal still holds the interrupted run: restarted, A
    closes it as gone on elsewhere and starts its next attempt afresh, without an agent for it."""
    marker, release = outside / "agent.pid", outside / "release"
    a_clone, b_clone = _clones(outside, "slow_fixer.py", marker, release, config="")
    clones = {"machine-a": a_clone, "machine-b": b_clone}
    logs = {name: outside / f"{name}.log" for name in clones}
    try:
        with contextlib.ExitStack() as stack:
            workers = {
                name: stack.enter_context(_worker(temporal_server, clone, name, logs[name]))
                for name, clone in clones.items()
            }
            asyncio.run(_tick(temporal_server, "nightly-k9", wait=False))
            wait_until(marker.exists, "the agent runs")
            wait_until(lambda: bool(_claimed_by(clones)), "the claim")
            dying = _claimed_by(clones)
            survivor = next(name for name in clones if name != dying)
            os.kill(workers[dying].pid, signal.SIGKILL)
            workers[dying].wait()
            wait_until(
                lambda: bool(events(clones[survivor], EventType.AGENT_STARTED)), "the takeover", 120
            )
            release.touch()
            taken = asyncio.run(_result(temporal_server, "nightly-k9"))
        assert (taken.status, taken.worker) == ("done", survivor)
        (interrupted,) = [e.run for e in events(clones[dying], EventType.TICK_STARTED)]

        # The dead machine comes back (the same name: the same queue); the next attempt is its.
        with _worker(temporal_server, clones[dying], dying, outside / "again.log"):
            after = _run(temporal_server, "nightly-next")
    finally:
        release.touch()

    assert (after.status, after.worker) == ("done", dying)
    assert after.run != interrupted
    found = events(clones[dying])
    told = "\n".join(f"{e.seq} {e.type} {e.run} {dict(e.data)}"[:300] for e in found)
    closed = [e for e in found if e.type == EventType.TICK_FINISHED and e.run == interrupted]
    assert [e.data["status"] for e in closed] == ["stopped"]
    assert (
        "attempt nightly-k9 was interrupted on this worker and went on elsewhere"
        in (closed[0].data["reason"])
    )
    (note,) = [e for e in found if e.type == EventType.NOTE and e.data["what"] == ELSEWHERE]
    assert (note.data["attempt"], note.data["closed_by"]) == ("nightly-k9", "nightly-next")
    # No agent ran again for the interrupted run, and it was never resumed. (The journal may
    # also hold the other machine's records: the state branch brings them over.)
    started = [e.run for e in found if e.type == EventType.AGENT_STARTED]
    assert (started.count(interrupted), started.count(after.run)) == (1, 1), told
    assert EventType.RUN_RESUMED not in [e.type for e in found], told
    seqs = [e.seq for e in found]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_the_ledger_reserves_the_mean_cost_of_each_attempt_still_running() -> None:
    """Admission is a check and a reservation: with one attempt of 1200 tokens settled, an
    attempt running counts as another 1200, so a 2400 day admits no third one meanwhile."""
    from loopctl.temporal.ledger import refusal
    from loopctl.temporal.shapes import Admission, DayTotal, LedgerState

    state = LedgerState(days={"2026-12-06": DayTotal(1200, 0.0, 1)})
    ask = Admission("third", "2026-12-06", max_tokens=2400)
    assert refusal(state, ask) == ""  # nothing running: 1200 of 2400

    state.running["second"] = "2026-12-06"
    reason = refusal(state, ask)
    assert "daily budget fuse: 1200 of 2400 tokens used on 2026-12-06" in reason
    assert "1 attempt(s) still running" in reason

    state.running["second"] = "2026-12-05"  # running on another day: not today's to reserve
    assert refusal(state, ask) == ""
    assert refusal(state, Admission("x", "2026-12-06", max_usd=0.0))  # a spent USD cap


async def _ticks_at_once(address: str, ids: list[str]) -> list[AttemptResult]:
    from temporalio.client import Client

    client = await Client.connect(address)
    handles = [
        await client.start_workflow(
            "loopctl.LoopTick",
            AttemptRequest(loop="nightly", attempt_id=""),
            id=workflow_id,
            task_queue=QUEUE,
            result_type=AttemptResult,
        )
        for workflow_id in ids
    ]
    done = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 300)
    return list(done)


def test_ticks_started_together_on_two_workers_run_no_more_agents_than_the_day_allows(
    temporal_server: str, outside: Path
) -> None:
    """A day of 2400 tokens allows two attempts of 1200: four ticks started at once, on two
    machines, run at most two agents; the others are refused by the fuse."""
    clones = dict(
        zip(
            ("machine-a", "machine-b"),
            _clones(outside, config="\n[budget]\nmax_tokens_per_day = 2400\n"),
            strict=True,
        )
    )
    with contextlib.ExitStack() as stack:
        for name, clone in clones.items():
            stack.enter_context(_worker(temporal_server, clone, name, outside / f"{name}.log"))
        results = asyncio.run(_ticks_at_once(temporal_server, [f"t-{n}" for n in range(4)]))

    agents = _agents_anywhere(clones.values())
    assert 1 <= agents <= 2, results
    assert sum(r.tokens for r in results) == 1200 * agents
    skipped = [r for r in results if r.status == "skipped"]
    assert len(skipped) >= 2, results
    assert all("daily budget fuse" in r.reason for r in skipped)
