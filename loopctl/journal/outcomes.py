"""How a task and a run ended, as one `Outcome` from a closed set (issue 30), read from the log.

Every `task_finished` and `tick_finished` written now carries its outcome, named where the
engine (or an approval) ended the work; this module reads it back, and for a log written
before the field existed derives it from what that log did record: the status, the reason,
the attempts and any `budget_stopped`. A run's outcome, when it has to be derived, is its
most pressing task's (`PRECEDENCE`): what a person reading `status` in the morning must act on
first, whatever else the run did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from loopctl.journal.events import EventType
from loopctl.journal.history import RunView, TaskView
from loopctl.journal.statuses import Outcome, RunStatus, TaskStatus, outcome

# First the outcomes a human must act on (most pressing first), then those that resolve
# themselves, then those that wait for a human's yes, and last the quiet ones.
PRECEDENCE: tuple[Outcome, ...] = (
    Outcome.TAMPERED,  # the agent touched what it must not: look before anything else runs
    Outcome.CRASHED_RECOVERED,
    Outcome.STALLED,
    Outcome.REPEATED_FAILURE,
    Outcome.FAILED,
    Outcome.BUDGET_STOP,
    Outcome.REJECTED,
    Outcome.NEEDS_REPLY,
    Outcome.NEEDS_APPROVAL,
    Outcome.INTERRUPTED,  # resumable: the next run takes it up
    Outcome.RATE_LIMITED,  # resumes by itself once the backend's pause ends
    Outcome.WAITING_FOR_REVIEW,
    Outcome.DONE,
    Outcome.SUPERSEDED,
    Outcome.NOTHING_TO_DO,
)
_RANK = {named: rank for rank, named in enumerate(PRECEDENCE)}

# The reason `engine.steps` gives a fingerprinted streak, and the one `--fresh` closes a run with.
_STREAK = "identical failures"
_CLOSED = "closed unfinished"


def strongest(outcomes: Iterable[Outcome]) -> Outcome | None:
    """The most pressing of `outcomes` by `PRECEDENCE`; None when there are none."""
    return min(outcomes, key=_RANK.__getitem__, default=None)


def task_outcome(
    recorded: object,
    status: str,
    reason: str,
    *,
    attempts: int,
    budget_stopped: bool = False,
) -> Outcome:
    """A finished task's outcome: the one its `task_finished` recorded, or for a log older
    than the field, the one its status and reason say."""
    named = outcome(recorded)
    if named is not None:
        return named
    if budget_stopped:
        return Outcome.BUDGET_STOP
    if status == TaskStatus.DONE:
        # Done without an attempt: the check already passed on the base (nothing to do).
        return Outcome.DONE if attempts else Outcome.NOTHING_TO_DO
    if status == TaskStatus.SKIPPED:
        return Outcome.NOTHING_TO_DO
    if status in (TaskStatus.AWAITING_APPROVAL, TaskStatus.PAUSED):
        return Outcome.NEEDS_APPROVAL
    if status == TaskStatus.AWAITING_REPLY:
        return Outcome.NEEDS_REPLY
    if status == TaskStatus.REJECTED:
        return Outcome.REJECTED
    if _STREAK in reason:
        return Outcome.REPEATED_FAILURE
    if reason.startswith("superseded by run"):
        return Outcome.SUPERSEDED
    return Outcome.FAILED


def run_outcome(
    recorded: object,
    status: str,
    reason: str,
    tasks: Iterable[Outcome],
    *,
    interrupted: bool = False,
) -> Outcome | None:
    """A run's outcome: the one its `tick_finished` (or `run_interrupted`) recorded, else the
    most pressing of its tasks'; None while it runs. `interrupted`: the run recorded being
    interrupted before it was closed (a run closed without that died: crashed-recovered)."""
    named = outcome(recorded)
    if named is not None:
        return named
    if status == RunStatus.RUNNING:
        return None
    if status == RunStatus.INTERRUPTED:
        return Outcome.INTERRUPTED
    if reason.startswith(_CLOSED):
        return Outcome.INTERRUPTED if interrupted else Outcome.CRASHED_RECOVERED
    found = strongest(tasks)
    if found is not None:
        return found
    return Outcome.NOTHING_TO_DO if status == RunStatus.DONE else Outcome.FAILED


def of_task(run: RunView, task: TaskView) -> Outcome | None:
    """The outcome of `task` in the folded `run`; None while it is open."""
    if not task.finished:
        return None
    stopped = any(e.type == EventType.BUDGET_STOPPED and e.task == task.task for e in run.events)
    return task_outcome(
        task.outcome, task.status, task.reason, attempts=len(task.attempts), budget_stopped=stopped
    )


def of_run(run: RunView) -> Outcome | None:
    """The outcome of the folded `run`; None while it runs."""
    if run.status == RunStatus.RUNNING:
        return None
    tasks = (of_task(run, task) for task in run.tasks.values())
    interrupted = any(e.type == EventType.RUN_INTERRUPTED for e in run.events)
    return run_outcome(
        run.outcome,
        run.status,
        run.reason,
        (t for t in tasks if t is not None),
        interrupted=interrupted,
    )


def item_outcome(kind: str, evidence: Mapping[str, Any]) -> Outcome | None:
    """The outcome an inbox item stands for: the one its opener wrote in its evidence, or for
    an item older than that, the one its kind and evidence say (None: an unhandled error)."""
    named = outcome(evidence.get("outcome"))
    if named is not None:
        return named
    if evidence.get("tampering"):
        return Outcome.TAMPERED
    if kind in ("approval", "proposal"):
        return Outcome.NEEDS_APPROVAL
    if kind == "escalation":
        if "backend" in evidence:
            return Outcome.RATE_LIMITED  # journal.pauses: a backend's pause
        return Outcome.BUDGET_STOP if "day" in evidence else Outcome.NEEDS_REPLY
    if kind == "failed":
        reason = evidence.get("reason")
        return task_outcome(None, "failed", reason if isinstance(reason, str) else "", attempts=1)
    return None
