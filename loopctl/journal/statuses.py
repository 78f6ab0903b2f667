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


class ItemState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
