"""Loops wait for their reviewer (issue 30, item 6): `[review] max_open` under a real `up`.

A scripted human approves at a fixed rate while three loops produce gated work: at no point in
the log do more than `max_open` approvals await a human, and every task's work lands in the
remote. Real processes throughout: `loopctl up`, the fake agent, `loopctl inbox approve`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events, last_seq, wait_event
from support.processes import SAFETY_NET, Proc, running_procs, spawn, wait_for
from support.repos import add_remote, commit_all, make_project, remote_refs, tasks_command
from support.repos import write_loop as write_loop_file

from loopctl.journal.events import Event
from loopctl.lock import RunnerLock

GATED = '[deliver]\nactions = ["commit", "push"]\napprove = ["push"]\n'


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    yield from running_procs()


def _write_loop(repo: Path, name: str, *tasks: str, every: str = "1s") -> None:
    write_loop_file(
        repo,
        name,
        f'every = "{every}"\ngoal = "tests green"\n\n'
        f"[tasks]\n{tasks_command(*tasks)}"
        'prompt = "fix {id}"\n\n' + GATED,
    )


def _open_approvals(repo: Path) -> list[dict[str, object]]:
    done = run_loopctl(repo, "inbox", "--json")
    assert_clean_exit(done, 0)
    return [i for i in json.loads(done.stdout)["inbox"] if i["kind"] == "approval"]


def _most_awaiting(log: list[Event]) -> int:
    """The most approval items awaiting a human at any point of the log."""
    waiting: set[str] = set()
    most = 0
    for event in log:
        ident = event.data.get("id")
        if event.type == "inbox_opened" and event.data.get("kind") == "approval":
            waiting.add(str(ident))
        elif event.type in ("approved", "inbox_closed"):
            waiting.discard(str(ident))
        most = max(most, len(waiting))
    return most


def _status(repo: Path) -> dict[str, dict[str, object]]:
    done = run_loopctl(repo, "status", "--json")
    assert_clean_exit(done, 0)
    return {row["loop"]: row for row in json.loads(done.stdout)["status"]}


class Reviewer:
    """A scripted human: approves the oldest open approval, one every `every_s` seconds."""

    def __init__(self, repo: Path, every_s: float) -> None:
        self.repo = repo
        self.every_s = every_s
        self.stop = threading.Event()
        self.approved: list[str] = []
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            waiting = _open_approvals(self.repo)
            fresh = [i for i in waiting if not i["approved"]]
            if fresh:
                item = str(fresh[0]["id"])
                done = run_loopctl(self.repo, "inbox", "approve", item)
                if done.returncode == 0:
                    self.approved.append(item)
                else:
                    self.failures.append(done.stdout + done.stderr)
            # The human's pace, not a synchronisation: one decision per period at most.
            self.stop.wait(max(0.0, self.every_s - (time.monotonic() - started)))

    def __enter__(self) -> Reviewer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(SAFETY_NET)


def test_three_loops_never_open_more_than_max_open_and_every_task_lands(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    make_project(repo, "fixer.py", config_extra="\n[review]\nmax_open = 2\n")
    remote = add_remote(repo, tmp_path)
    tasks = {"alpha": ("a1", "a2"), "beta": ("b1", "b2"), "gamma": ("g1", "g2")}
    for name, ids in tasks.items():
        _write_loop(repo, name, *ids)
    commit_all(repo, "three gated loops")
    wanted = {f"refs/heads/loop/{name}/{t}" for name, ids in tasks.items() for t in ids}

    up = spawn(procs, repo, tmp_path, "up")
    with Reviewer(repo, every_s=1.5) as human:
        wait_for(
            lambda: wanted <= set(remote_refs(remote)),
            "every task of the three loops to be approved and pushed",
            timeout=SAFETY_NET * 6,
        )
    assert_clean_exit(run_loopctl(repo, "down"), 0)
    up.wait()

    log = events(repo)
    assert human.failures == []
    assert _most_awaiting(log) <= 2
    # The cap was reached, and loops waited for the reviewer rather than opening more.
    waits = [e for e in log if e.type == "note" and e.data.get("what") == "waiting_for_review"]
    assert waits
    assert all(e.data["max_open"] == 2 for e in waits)
    # Nothing lost: each task was delivered exactly once, by the approval of its one item.
    done = {
        (e.loop, e.task) for e in log if e.type == "task_finished" and e.data["status"] == "done"
    }
    assert done == {(name, t) for name, ids in tasks.items() for t in ids}
    approvals = [e for e in log if e.type == "inbox_opened" and e.data.get("kind") == "approval"]
    assert len(approvals) == 6
    assert sorted(human.approved) == sorted(str(e.data["id"]) for e in approvals)


def test_a_loop_waits_visibly_once_and_ticks_again_soon_after_a_decision(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    _one_open_at_a_time(repo, tmp_path)

    # A run of several tasks stops starting them at the cap: t2 is not started, not lost.
    once = run_loopctl(repo, "run", "ship", "--once", "--json")
    assert_clean_exit(once, 0)
    first, second = json.loads(once.stdout)["run"]["tasks"]
    assert first["status"] == "awaiting_approval"
    assert second["status"] == "skipped"
    assert "waiting for review" in second["reason"]
    (skipped,) = events(repo, "task_finished", "t2")
    assert skipped.data["outcome"] == "waiting-for-review"
    assert not [e for e in events(repo, "worktree_created") if e.task == "t2"]

    mark = last_seq(repo)
    up = spawn(procs, repo, tmp_path, "up")
    note = wait_for(lambda: _waits(repo, mark), "the loop to wait for its reviewer")[0]
    assert note.loop == "ship"
    assert (note.data["open_count"], note.data["max_open"]) == (1, 1)
    row = _status(repo)["ship"]
    assert row["waiting_for_review"]["open"] == 1
    assert row["waiting_for_review"]["max_open"] == 1
    text = run_loopctl(repo, "status")
    assert "waiting-for-review (1/1 open)" in text.stdout
    # Slots pass while it waits: none is a started or a skipped tick, and it says so once.
    wait_for(
        lambda: datetime.now(UTC) > note.time + timedelta(seconds=3.2),
        "three slots to pass while the loop waits",
    )
    started = ("tick_started", "tick_skipped")
    assert not [e for e in events(repo) if e.seq > mark and e.type in started]

    (item,) = _open_approvals(repo)
    decided = last_seq(repo)
    assert_clean_exit(run_loopctl(repo, "inbox", "approve", str(item["id"])), 0)
    (tick,) = wait_event(repo, "tick_started", after=decided, what="the tick after the decision")
    wait_event(
        repo, "task_finished", after=decided, what="t2 to be worked", status="awaiting_approval"
    )
    assert_clean_exit(run_loopctl(repo, "down"), 0)
    up.wait()

    assert len([n for n in _waits(repo, mark) if n.seq < tick.seq]) == 1
    assert tick.data["trigger"]["fired"] == "queued"  # the owed slot, not a skipped one
    assert _status(repo)["ship"]["waiting_for_review"] is None


def test_the_owed_tick_waits_for_whoever_works_the_loop_and_is_not_skipped(
    repo: Path, tmp_path: Path, procs: list[Proc]
) -> None:
    # `inbox approve` delivers under the loop's lock in its own process: the tick the decision
    # frees must wait for it, not be recorded as skipped and owed until the next slot (an hour
    # for `every = "1h"`). Here the test holds the lock, for as long as it likes.
    _one_open_at_a_time(repo, tmp_path)
    assert_clean_exit(run_loopctl(repo, "run", "ship", "--once"), 0)
    mark = last_seq(repo)
    up = spawn(procs, repo, tmp_path, "up")
    wait_for(lambda: _waits(repo, mark), "the loop to wait for its reviewer")

    (item,) = _open_approvals(repo)
    decided = last_seq(repo)
    with RunnerLock(repo / ".loop" / "locks", "ship"):
        approved = run_loopctl(repo, "inbox", "approve", str(item["id"]))
        assert_clean_exit(approved, 0)
        assert "delivers it when its current tick ends" in approved.stdout
        at = datetime.now(UTC)
        # Three rechecks pass with the review cap free and the loop held elsewhere.
        wait_for(
            lambda: datetime.now(UTC) > at + timedelta(seconds=3.2),
            "three rechecks while another process holds the loop",
        )
        ticks = ("tick_started", "tick_skipped")
        assert [e.type for e in events(repo) if e.seq > decided and e.type in ticks] == []
    (tick,) = wait_event(repo, "tick_started", after=decided, what="the tick once the loop is free")
    wait_event(repo, "task_finished", after=decided, what="t2 worked", status="awaiting_approval")
    assert_clean_exit(run_loopctl(repo, "down"), 0)
    up.wait()

    assert tick.data["trigger"]["fired"] == "queued"
    # The owed tick was never skipped; the slots that passed meanwhile are, once, as for any
    # tick that ran long (overlap = "skip").
    skipped = [e.data for e in events(repo, "tick_skipped") if e.seq > decided]
    assert [s["trigger"].get("fired") for s in skipped if "fired" in s["trigger"]] == []
    assert {s["reason"] for s in skipped} <= {"the previous tick is still running"}
    # The approval the held lock kept waiting was delivered by that tick, before t2's work.
    (delivered,) = [e for e in events(repo, "inbox_closed") if e.seq > decided]
    assert delivered.data["outcome"] == "delivered"


def _one_open_at_a_time(repo: Path, tmp_path: Path) -> None:
    """Loop `ship`, every second, tasks t1 and t2, each push gated; `max_open = 1`."""
    make_project(repo, "fixer.py", config_extra="\n[review]\nmax_open = 1\n")
    add_remote(repo, tmp_path)
    _write_loop(repo, "ship", "t1", "t2")
    commit_all(repo, "a gated loop")


def _waits(repo: Path, after: int) -> list[Event]:
    return [
        e
        for e in events(repo, "note")
        if e.seq > after and e.data.get("what") == "waiting_for_review"
    ]


def test_tasks_worked_side_by_side_start_only_while_the_cap_has_room(
    repo: Path, tmp_path: Path
) -> None:
    make_project(repo, "fixer.py", config_extra="\n[review]\nmax_open = 2\n")
    add_remote(repo, tmp_path)
    write_loop_file(
        repo,
        "ship",
        'goal = "tests green"\n\n'
        f"[tasks]\n{tasks_command('t1', 't2', 't3')}"
        'prompt = "fix {id}"\n\n[budget]\nmax_parallel = 3\n\n' + GATED,
    )
    commit_all(repo, "a gated loop working three tasks at once")

    once = run_loopctl(repo, "run", "ship", "--once", "--json")

    assert_clean_exit(once, 0)
    statuses = sorted(t["status"] for t in json.loads(once.stdout)["run"]["tasks"])
    assert statuses == ["awaiting_approval", "awaiting_approval", "skipped"]
    log = events(repo)
    assert _most_awaiting(log) == 2
    outcomes = [e.data.get("outcome") for e in log if e.type == "task_finished"]
    assert outcomes.count("waiting-for-review") == 1
    # The task held back made no worktree: nothing of it to lose, and the next tick finds it.
    held = next(e.task for e in log if e.data.get("outcome") == "waiting-for-review")
    assert not [e for e in log if e.type == "worktree_created" and e.task == held]
