"""`delivery.ending.end_task`, the one way a task ends (the engine's and an approval's), on a
real repository, real worktrees and a real event log: what it records, what it closes, and a
worktree it cannot let go left in place with a trace in the debug log.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from support.journal import events
from support.repos import git, make_project, write_loop

from loopctl import worktree_pool
from loopctl.definitions import load_project
from loopctl.definitions.config import KeepPolicy
from loopctl.delivery.ending import (
    Ending,
    FinishedWorktree,
    end_task,
    keep_policy,
    lets_go,
    pool_capacity,
)
from loopctl.journal.inbox import ItemKind, open_items
from loopctl.journal.recorder import Recorder
from loopctl.journal.statuses import Outcome, TaskStatus

ENDED = [TaskStatus.DONE, TaskStatus.SKIPPED, TaskStatus.FAILED, TaskStatus.STOPPED]
WAITING = [TaskStatus.AWAITING_APPROVAL, TaskStatus.AWAITING_REPLY, TaskStatus.REJECTED]


@pytest.mark.parametrize("status", ENDED + WAITING)
def test_keep_lets_a_worktree_go_as_the_policy_says(status: TaskStatus) -> None:
    assert lets_go(KeepPolicy.ALWAYS, status) is False
    assert lets_go(KeepPolicy.NEVER, status) is True
    # on-failure keeps what failed, stopped, or waits for a human, for them to look at.
    expected = status in (TaskStatus.DONE, TaskStatus.SKIPPED)
    assert lets_go(KeepPolicy.ON_FAILURE, status) is expected


def test_a_keep_value_this_version_does_not_know_keeps_the_worktree() -> None:
    assert keep_policy("on-failure") is KeepPolicy.ON_FAILURE
    assert keep_policy("sometimes") is KeepPolicy.ALWAYS


def _recorder(repo: Path) -> Recorder:
    make_project(repo, "fixer.py")
    return Recorder(load_project(repo))


def test_a_failure_opens_an_item_and_a_later_success_closes_it(repo: Path) -> None:
    rec = _recorder(repo)
    failed = Ending(
        "r1",
        "ship",
        "t1",
        TaskStatus.FAILED,
        "push failed",
        "abc",
        failure={"stage": "deliver"},
        outcome=Outcome.FAILED,
    )

    end_task(rec, failed, None)

    (item,) = open_items(rec.log.read())
    assert (item.kind, item.run, item.task) == (ItemKind.FAILED, "r1", "t1")
    assert item.summary == "t1: push failed"
    assert item.evidence["stage"] == "deliver"
    assert item.evidence["outcome"] == "failed"  # the inbox's OUTCOME column
    assert item.id in (repo / ".loop" / "INBOX.md").read_text()  # projections rendered

    end_task(
        rec,
        Ending("r2", "ship", "t1", TaskStatus.DONE, "delivered", "def", outcome=Outcome.DONE),
        None,
    )

    assert open_items(rec.log.read()) == []
    (closed,) = [e for e in events(repo, "inbox_closed") if e.data["id"] == item.id]
    assert (closed.data["resolution"], closed.data["by"]) == ("superseded", "r2")
    # The log says why, under the failed run's task (what `history` and `inbox --task` read).
    assert closed.data["reason"] == "the task succeeded in run r2"
    assert (closed.run, closed.loop, closed.task) == ("r1", "ship", "t1")
    assert item.id not in (repo / ".loop" / "INBOX.md").read_text()


def test_task_finished_counts_attempts_only_when_it_has_them(repo: Path) -> None:
    rec = _recorder(repo)

    end_task(
        rec,
        Ending("r1", "ship", "a", TaskStatus.DONE, "ok", attempts=2, outcome=Outcome.DONE),
        None,
    )
    end_task(
        rec,
        Ending("r1", "ship", "b", TaskStatus.DONE, "delivered", "c0ffee", outcome=Outcome.DONE),
        None,
    )

    first, second = events(repo, "task_finished")
    assert first.data == {
        "status": "done",
        "reason": "ok",
        "commit": None,
        "attempts": 2,
        "outcome": "done",
    }
    assert second.data == {
        "status": "done",
        "reason": "delivered",
        "commit": "c0ffee",
        "outcome": "done",
    }


def _ready_worktree(repo: Path, root: Path) -> Path:
    """A linked worktree under `root/ship/t1` that the pool has a record of, as the engine
    leaves one it made."""
    path = root / "ship" / "t1"
    git(repo, "worktree", "add", "-q", "-B", "loop/ship/t1", str(path), "main")
    worktree_pool.mark_ready(repo, root, "ship", path, preserve=(), inputs_hash=None)
    return path


def test_a_worktree_that_cannot_be_parked_stays_and_the_debug_log_says_why(
    repo: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rec = _recorder(repo)
    root = tmp_path / "worktrees"
    path = _ready_worktree(repo, root)
    # The pool's folder of idle worktrees is a file: parking fails with an OSError.
    (worktree_pool.pool_folder(root, "ship") / "idle").write_text("in the way\n")
    head = git(repo, "rev-parse", "main").strip()
    caplog.set_level(logging.DEBUG, logger="loopctl")

    end_task(
        rec,
        Ending("r1", "ship", "t1", TaskStatus.DONE, "delivered", head, outcome=Outcome.DONE),
        FinishedWorktree(path, head, KeepPolicy.ON_FAILURE, capacity=1),
    )

    assert path.is_dir()
    assert [e.data["status"] for e in events(repo, "task_finished")] == ["done"]
    (record,) = [r for r in caplog.records if r.name == "loopctl.delivery.ending"]
    assert record.getMessage() == f"could not park or remove the worktree {path}"
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], OSError)


def test_a_worktree_git_refuses_to_remove_stays_and_the_debug_log_says_why(
    repo: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The main checkout is never removed (git/ refuses it with a LoopctlError): a plan that
    named it ends its task all the same."""
    rec = _recorder(repo)
    head = git(repo, "rev-parse", "main").strip()
    caplog.set_level(logging.DEBUG, logger="loopctl")

    end_task(
        rec,
        Ending("r1", "ship", "t1", TaskStatus.DONE, "delivered", head, outcome=Outcome.DONE),
        FinishedWorktree(repo, head, KeepPolicy.NEVER, capacity=0),
    )

    assert (repo / ".git").is_dir()
    assert [e.data["status"] for e in events(repo, "task_finished")] == ["done"]
    (record,) = [r for r in caplog.records if r.name == "loopctl.delivery.ending"]
    assert record.exc_info is not None
    assert "main worktree" in str(record.exc_info[1])


def test_a_worktree_the_pool_has_room_for_is_parked_and_one_without_room_removed(
    repo: Path, tmp_path: Path
) -> None:
    rec = _recorder(repo)
    root = tmp_path / "worktrees"
    head = git(repo, "rev-parse", "main").strip()
    first = _ready_worktree(repo, root)

    end_task(
        rec,
        Ending("r1", "ship", "t1", TaskStatus.DONE, "ok", head, outcome=Outcome.DONE),
        FinishedWorktree(first, head, KeepPolicy.ON_FAILURE, capacity=1),
    )

    assert not first.exists()
    assert [p.loop for p in worktree_pool.list_pool(root)] == ["ship"]
    second = _ready_worktree(repo, root)  # the same task again: the pool is full now

    end_task(
        rec,
        Ending("r2", "ship", "t1", TaskStatus.DONE, "ok", head, outcome=Outcome.DONE),
        FinishedWorktree(second, head, KeepPolicy.ON_FAILURE, capacity=1),
    )

    assert not second.exists()
    assert [p.loop for p in worktree_pool.list_pool(root)] == ["ship"]
    listed = git(repo, "worktree", "list", "--porcelain")
    assert str(second) not in listed
    assert listed.count("worktree ") == 2  # the main checkout and the parked one


@pytest.mark.parametrize(
    ("settings", "capacity"),
    [
        ("", 1),
        ("[budget]\nmax_parallel = 3\n", 3),
        ("[budget]\nmax_parallel = 3\n\n[worktree]\npool = false\n", 0),
    ],
)
def test_a_loops_pool_holds_one_worktree_per_task_it_runs_at_once(
    repo: Path, settings: str, capacity: int
) -> None:
    make_project(repo, "fixer.py")
    write_loop(repo, "ship", f'goal = "tests green"\nprompt = "fix add"\n\n{settings}')

    loop = load_project(repo).loops["ship"]

    assert pool_capacity(loop) == capacity
