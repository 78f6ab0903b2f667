"""What a task does next, decided from what the log says of it: a pure function.

`next_step(view, budget, now)` reads the task's attempts so far (`history.TaskView`) and the
run's budget, and answers with one `Step`: deliver, escalate, pause, stop, fail, abandon an
attempt interrupted twice, or start (or redo) attempt n. It reads no file and runs nothing, so
every rule of the task state machine is a row in a table test (`tests/engine/test_engine_steps.py`);
`engine.task.work_task` applies the step and asks again. It is to a task what
`scheduling.timing.decide` is to a trigger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from loopctl.definitions.config import Budget
from loopctl.journal import budgets
from loopctl.journal.events import Event
from loopctl.journal.history import AttemptView, TaskView
from loopctl.journal.statuses import Verdict

# How a fingerprinted streak's reason reads (the outcome `repeated-failure` is told by it).
IDENTICAL = "identical failures in a row"


class Do(StrEnum):
    DELIVER = "deliver"  # the last attempt passed: commit and hand it to delivery
    ESCALATE = "escalate"  # the maker asked a human a question
    PAUSE = "pause"  # the last attempt waits for a human to approve a command
    STOP = "stop"  # a fatal verdict, identical failures, or a budget: no attempt can help
    FAIL = "fail"  # max_iterations attempts ran and none passed
    ABANDON = "abandon"  # an attempt interrupted twice: record it as failed, then decide again
    ATTEMPT = "attempt"  # start attempt `number` (or redo it, when it was interrupted once)


@dataclass(frozen=True, slots=True)
class RunBudget:
    """The limits of the run and what it has done so far (its events: spend, wall time)."""

    limits: Budget
    events: Sequence[Event] = ()


@dataclass(frozen=True, slots=True)
class Step:
    do: Do
    number: int = 0  # the attempt to deliver, abandon or start
    reason: str = ""
    last: AttemptView | None = None  # the attempt the task ends on
    attempts: int = 0  # attempts recorded so far
    budget_stop: bool = False  # a budget limit stopped it (recorded as `budget_stopped`)


def next_step(view: TaskView | None, budget: RunBudget, now: datetime) -> Step:
    """The next thing to do for a task whose attempts so far `view` holds."""
    attempts = view.attempts if view else []
    count = len(attempts)
    finished = [a for a in attempts if a.verdict is not None]
    last = finished[-1] if finished else None
    if last is not None:
        if last.verdict == Verdict.PASSED:
            return Step(Do.DELIVER, last.number, last=last, attempts=count)
        if last.verdict == Verdict.ESCALATED:
            return Step(Do.ESCALATE, last.number, last.reason, last, count)
        if last.verdict == Verdict.AWAITING_APPROVAL:
            return Step(Do.PAUSE, last.number, last.reason, last, count)
        if last.fatal:
            return Step(Do.STOP, last.number, last.reason, last, count)
    fingerprints = [a.fingerprint if a.verdict == Verdict.FAILED else None for a in finished]
    streak = budgets.identical_failure_streak(fingerprints)
    if last is not None and streak >= budget.limits.stop_after_identical_failures:
        reason = f"{streak} {IDENTICAL} (fingerprint {last.fingerprint}): {last.reason}"
        return Step(Do.STOP, last.number, reason, last, count)
    pending = next((a for a in attempts if a.verdict is None), None)
    if pending is not None and pending.starts >= 2:
        # Interrupted twice: redoing it once was the promise; it is recorded as failed.
        return Step(Do.ABANDON, pending.number, "interrupted twice", attempts=count)
    number = pending.number if pending is not None else count + 1
    if pending is None and number > budget.limits.max_iterations:
        reason = (
            f"not met after {budget.limits.max_iterations} attempts: {last.reason if last else ''}"
        )
        return Step(Do.FAIL, number - 1, reason, last, count)
    stop = budgets.stop_reason(budget.limits, budget.events, now)
    if stop is not None:
        return Step(Do.STOP, number, stop, last, count, budget_stop=True)
    return Step(Do.ATTEMPT, number, attempts=count)
