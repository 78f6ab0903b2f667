"""How a task ends, whoever ends it: the engine when its attempts are over, or an approval
delivered outside any run (`inbox approve` and `reject`, or a tick delivering what was approved
while it held the loop's lock).

One routine for both, so they cannot drift apart: the outcome is recorded (`task_finished`, a
`failed` item when there is one to open, the task's older failures closed once it succeeded),
then a worktree that its `keep` policy lets go is parked in the loop's pool, or removed, under
the worktree lock (git's worktree bookkeeping races under concurrent adds and removals), and
the projections are rendered again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl import worktree_pool
from loopctl.definitions import Loop
from loopctl.definitions.config import KeepPolicy
from loopctl.errors import LoopctlError
from loopctl.journal.inbox import ItemKind, items
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import InboxClosed, TaskFinished
from loopctl.journal.statuses import Outcome, TaskStatus
from loopctl.lock import worktree_lock

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ending:
    """Where a task ended, as `task_finished` records it."""

    run: str
    loop: str
    task: str
    status: TaskStatus
    reason: str
    commit: str | None = None
    attempts: int | None = None  # the engine counts them; a delivery has none to add
    failure: Mapping[str, Any] | None = None  # the evidence of a `failed` item to open
    # Recorded on `task_finished` (and in the `failed` item): every ending names one.
    outcome: Outcome = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class FinishedWorktree:
    """The task's worktree, and what decides whether it is kept, parked or removed."""

    path: Path
    head: str  # a commit to park it detached at: its base (acquiring resets it anyway)
    keep: KeepPolicy
    capacity: int  # how many worktrees the loop's pool holds; 0 when it has none


def pool_capacity(loop: Loop) -> int:
    """How many finished worktrees `loop` keeps parked: one per task it may run at once."""
    return max(1, loop.budget.max_parallel or 1) if loop.worktree.pool else 0


def keep_policy(value: str) -> KeepPolicy:
    """A `keep` value read back from the log; one this version does not know keeps the worktree
    (removing a human's work is the mistake that cannot be undone)."""
    try:
        return KeepPolicy(value)
    except ValueError:
        return KeepPolicy.ALWAYS


def lets_go(keep: KeepPolicy, status: TaskStatus) -> bool:
    """Whether a task that ended `status` gives up its worktree under `keep`: `on-failure`
    keeps what failed, or waits for a human, for them to look at."""
    if keep is KeepPolicy.NEVER:
        return True
    return keep is KeepPolicy.ON_FAILURE and status in (TaskStatus.DONE, TaskStatus.SKIPPED)


def end_task(rec: Recorder, ending: Ending, worktree: FinishedWorktree | None) -> None:
    """Record `ending`, then park or remove the worktree its `keep` policy lets go."""
    if ending.failure is not None:
        rec.open_item(
            ItemKind.FAILED,
            f"{ending.task}: {ending.reason}",
            {**ending.failure, "outcome": ending.outcome.value},
            run=ending.run,
            loop=ending.loop,
            task=ending.task,
        )
    finished = TaskFinished(
        status=ending.status,
        reason=ending.reason,
        commit=ending.commit,
        attempts=ending.attempts,  # written only when counted
        outcome=ending.outcome,
    )
    rec.record(finished, run=ending.run, loop=ending.loop, task=ending.task, keep=("commit",))
    if ending.status == TaskStatus.DONE:
        close_stale_failures(rec, ending.run, ending.loop, ending.task)
    # A rate-limited task was not worked: its next run starts afresh once the pause ends.
    limited = ending.outcome is Outcome.RATE_LIMITED
    if worktree is not None and (lets_go(worktree.keep, ending.status) or limited):
        retire(rec, ending.loop, worktree)
    rec.refresh_projections()


def retire(rec: Recorder, loop: str, worktree: FinishedWorktree) -> None:
    """Park the worktree in `loop`'s pool, or remove it, holding the worktree lock."""
    root = rec.paths.root
    with worktree_lock(rec.paths.locks_dir):
        try:
            worktree_pool.retire(
                root,
                worktree.path.parent.parent,
                loop,
                worktree.path,
                worktree.capacity,
                worktree.head,
            )
        except (LoopctlError, OSError):
            # Left where it is: `loopctl worktrees prune` removes it, and the next task of
            # the loop makes a fresh one. The task's outcome stands either way.
            logger.debug("could not park or remove the worktree %s", worktree.path, exc_info=True)


def close_stale_failures(rec: Recorder, run: str, loop: str, task: str) -> None:
    """Close the open `failed` items of earlier runs of a task that has now succeeded."""
    for item in items(rec.log.read()):
        if (
            item.is_open
            and item.kind == ItemKind.FAILED
            and (item.loop, item.task) == (loop, task)
            and item.run != run
        ):
            closed = InboxClosed(
                id=item.id,
                resolution="superseded",
                by=run,
                reason=f"the task succeeded in run {run}",
            )
            rec.record(closed, run=item.run, loop=item.loop, task=item.task)
