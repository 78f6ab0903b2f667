"""The statuses the log records, as StrEnums: tasks, runs, attempt verdicts and inbox items.

Each member *is* its string (`TaskStatus.DONE == "done"`), so the log's format does not change
and a log written before these existed reads the same. Readers that fold an old or hand-edited
log keep plain strings where a value may be unknown; writers use the members.
"""

from __future__ import annotations

from enum import StrEnum


class TaskStatus(StrEnum):
    """Where a task stands: `open` until its `task_finished`, then one of the others."""

    OPEN = "open"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"  # a fatal verdict, identical failures, a budget, or Ctrl-C
    SKIPPED = "skipped"  # nothing to do (base unchanged) or it waits for a human
    PAUSED = "paused"  # an agent asked to run a command, or definitions are held
    AWAITING_APPROVAL = "awaiting_approval"  # checked; a gated delivery step waits
    AWAITING_REPLY = "awaiting_reply"  # the maker asked a question
    REJECTED = "rejected"  # a human rejected a gated delivery step


def task_status(value: str) -> TaskStatus:
    """A folded task status as a member; one this version does not know reads as failed."""
    try:
        return TaskStatus(value)
    except ValueError:
        return TaskStatus.FAILED


class RunStatus(StrEnum):
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"


class Verdict(StrEnum):
    """An attempt's verdict (`attempt_finished`); none while it runs or was interrupted."""

    PASSED = "passed"
    FAILED = "failed"
    ESCALATED = "escalated"  # the maker asked a human a question
    AWAITING_APPROVAL = "awaiting_approval"  # the maker asked to run a command


class Outcome(StrEnum):
    """How a task or a run ended, from a closed set (issue 30): what `status`, STATE.md, the
    inbox, `--json`, the dashboard, notifications and `report` say. Every `task_finished` and
    `tick_finished` carries one; a log written before these existed reads through
    `loopctl.journal.outcomes`, which also ranks them (`PRECEDENCE`) for a run's outcome."""

    DONE = "done"  # checked and delivered, or delivered as far as no gate holds it
    NOTHING_TO_DO = "nothing-to-do"  # the source had no task, or the base was already green
    NEEDS_APPROVAL = "needs-approval"  # a gated step or an agent's command waits for a human
    NEEDS_REPLY = "needs-reply"  # the maker asked a question
    WAITING_FOR_REVIEW = "waiting-for-review"  # [review] max_open items already wait
    REJECTED = "rejected"  # a human rejected the delivery, or dismissed the maker's question
    SUPERSEDED = "superseded"  # a newer run reworked the task before its approval
    FAILED = "failed"  # the attempts ran out without a pass
    REPEATED_FAILURE = "repeated-failure"  # the same failure, fingerprinted, again
    BUDGET_STOP = "budget-stop"  # a budget (max_usd, max_tokens, max_wall) or the daily fuse
    STALLED = "stalled"  # no output, no file change, no stream event for [budget] max_idle
    RATE_LIMITED = "rate-limited"  # the backend reported a rate limit, a quota or an overload
    INTERRUPTED = "interrupted"  # Ctrl-C, `stop`, `down` or the end of `up`'s mandate: resumable
    TAMPERED = "tampered"  # the agent touched what it must not (integrity, sabotage)
    CRASHED_RECOVERED = "crashed-recovered"  # loopctl died mid-run; the next start closed it


def outcome(value: object) -> Outcome | None:
    """A recorded outcome as a member; None for a missing or unknown one."""
    try:
        return Outcome(value) if isinstance(value, str) else None
    except ValueError:
        return None


class ItemState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
