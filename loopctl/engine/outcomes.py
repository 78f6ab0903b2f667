"""What a run returns to its caller: each task's outcome and the run's, and a goal's options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from loopctl.journal import outcomes
from loopctl.journal.statuses import Outcome, RunStatus, TaskStatus


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    task: str
    status: TaskStatus
    reason: str
    attempts: int
    commit: str | None = None
    branch: str | None = None
    worktree: str | None = None
    # What a person does next with the result: `git merge <branch>`, or the pull request's URL.
    next_step: str | None = None
    # One of a closed set (issue 30), named where the task ended: no task ends without one.
    outcome: Outcome = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run: str
    loop: str
    status: RunStatus
    reason: str
    tasks: tuple[TaskOutcome, ...] = ()
    resumed: bool = False
    tokens: int = 0
    cost_usd: float = 0.0
    outcome: Outcome = field(kw_only=True)  # the tasks' most pressing (journal.outcomes)

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.DONE


@dataclass(frozen=True, slots=True)
class GoalOptions:
    condition: str
    check: tuple[str, ...] | None = None
    agent: str | None = None
    max_iterations: int | None = None
    in_place: bool = False
    base: str = "HEAD"
    checker_agent: str | None = None  # judges the goal; with --check it runs once the check passes
    fresh: bool = False  # close an interrupted run of this goal instead of resuming it


def run_status(outcomes: Sequence[TaskOutcome]) -> tuple[RunStatus, str]:
    """A run's status and reason, from its tasks' outcomes.

    Done when every task is done, skipped or waits only for a delivery approval; stopped when
    one stopped, paused or waits for a reply; otherwise failed (the first failure's reason).
    """
    statuses = {o.status for o in outcomes}
    ok = {TaskStatus.DONE, TaskStatus.SKIPPED, TaskStatus.AWAITING_APPROVAL}
    halted = {TaskStatus.STOPPED, TaskStatus.AWAITING_REPLY, TaskStatus.PAUSED}
    if not outcomes or statuses <= ok:
        return RunStatus.DONE, ""
    if statuses & halted:
        return RunStatus.STOPPED, next(o.reason for o in outcomes if o.status in halted)
    done = (TaskStatus.DONE, TaskStatus.SKIPPED)
    return RunStatus.FAILED, next(o.reason for o in outcomes if o.status not in done)


def run_outcome(tasks: Sequence[TaskOutcome], status: RunStatus, reason: str) -> Outcome:
    """A finished run's outcome: its most pressing task's (`journal.outcomes.PRECEDENCE`);
    a run without tasks found nothing to do, or failed to list them."""
    named = outcomes.run_outcome(None, status, reason, (t.outcome for t in tasks))
    return named if named is not None else Outcome.FAILED
