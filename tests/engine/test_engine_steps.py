"""The task state machine as a table: `engine.steps.next_step(view, budget, now) -> Step`,
and the run's status from its tasks' outcomes (`engine.outcomes.run_status`).

Each row is a task's attempts so far (as the log folds them) and the run's budget; the answer is
what the engine does next. The end-to-end tests (test_engine_*.py) show the engine applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopctl.definitions.config import Budget
from loopctl.engine.outcomes import TaskOutcome, run_status
from loopctl.engine.steps import Do, RunBudget, next_step
from loopctl.journal.events import Event, EventType
from loopctl.journal.history import AttemptView, TaskView
from loopctl.journal.statuses import Outcome, RunStatus, TaskStatus

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def attempt(number: int, verdict: str | None, **more: Any) -> AttemptView:
    return AttemptView(number=number, started=NOW.isoformat(), verdict=verdict, **more)


def failed(number: int, fingerprint: str, reason: str = "1 test failed") -> AttemptView:
    return attempt(number, "failed", fingerprint=fingerprint, reason=reason)


def view(*attempts: AttemptView) -> TaskView:
    return TaskView(run="r1", loop="l", task="t", attempts=list(attempts))


def event(seq: int, type_: str, at: datetime, **data: Any) -> Event:
    return Event(seq, at.isoformat(), type_, "r1", "l", "t", data)


def spent(tokens: int, *, started: datetime = NOW) -> list[Event]:
    """A run that started at `started` and whose one attempt used `tokens` tokens."""
    return [
        event(1, EventType.TICK_STARTED, started),
        event(2, EventType.AGENT_FINISHED, started, attempt=1, input_tokens=tokens),
    ]


@dataclass(frozen=True)
class Row:
    name: str
    view: TaskView | None
    want: Do
    number: int = 0
    reason: str = ""  # a part of the reason
    limits: Budget = field(default_factory=Budget)
    events: list[Event] = field(default_factory=list)
    budget_stop: bool = False


ROWS = [
    Row("a new task starts attempt 1", None, Do.ATTEMPT, 1),
    Row("no attempt yet", view(), Do.ATTEMPT, 1),
    Row("a passed attempt is delivered", view(failed(1, "a"), attempt(2, "passed")), Do.DELIVER, 2),
    Row(
        "an escalated attempt asks a human",
        view(attempt(1, "escalated", reason="which API?")),
        Do.ESCALATE,
        1,
        "which API?",
    ),
    Row(
        "an attempt waiting for approval pauses the task",
        view(attempt(1, "awaiting_approval", reason="asked to run `make db`")),
        Do.PAUSE,
        1,
        "asked to run `make db`",
    ),
    Row(
        "a fatal verdict stops at once",
        view(attempt(1, "failed", reason="the check cannot run", fatal=True)),
        Do.STOP,
        1,
        "the check cannot run",
    ),
    Row("one failure: try again", view(failed(1, "a")), Do.ATTEMPT, 2),
    Row(
        "two identical failures in a row stop",
        view(failed(1, "a"), failed(2, "a", "same test")),
        Do.STOP,
        2,
        "2 identical failures in a row (fingerprint a): same test",
    ),
    Row("different failures go on", view(failed(1, "a"), failed(2, "b")), Do.ATTEMPT, 3),
    Row(
        "the streak limit is the loop's",
        view(failed(1, "a"), failed(2, "a")),
        Do.ATTEMPT,
        3,
        limits=Budget(stop_after_identical_failures=3),
    ),
    Row(
        "max_iterations attempts without a pass fail",
        view(failed(1, "a"), failed(2, "b", "still red")),
        Do.FAIL,
        2,
        "not met after 2 attempts: still red",
        limits=Budget(max_iterations=2),
    ),
    Row(
        "an interrupted attempt is redone under its own number",
        view(failed(1, "a"), attempt(2, None)),
        Do.ATTEMPT,
        2,
    ),
    Row(
        "an attempt interrupted twice is abandoned",
        view(failed(1, "a"), attempt(2, None, starts=2)),
        Do.ABANDON,
        2,
        "interrupted twice",
    ),
    Row(
        "an interrupted attempt may be redone even at max_iterations",
        view(failed(1, "a"), attempt(2, None)),
        Do.ATTEMPT,
        2,
        limits=Budget(max_iterations=2),
    ),
    Row(
        "a token budget the next attempt would pass stops the task",
        view(failed(1, "a")),
        Do.STOP,
        2,
        "token budget: 600 of 1000 used and an attempt takes about 600",
        limits=Budget(max_tokens=1000),
        events=spent(600),
        budget_stop=True,
    ),
    Row(
        "a token budget with room left goes on",
        view(failed(1, "a")),
        Do.ATTEMPT,
        2,
        limits=Budget(max_tokens=1300),
        events=spent(600),
    ),
    Row(
        "a spent wall budget stops the task",
        view(failed(1, "a")),
        Do.STOP,
        2,
        "time budget: 600s of 300s used",
        limits=Budget(max_wall_s=300),
        events=spent(0, started=NOW - timedelta(minutes=10)),
        budget_stop=True,
    ),
    Row(
        "a pass is delivered even with the budget spent",
        view(attempt(1, "passed")),
        Do.DELIVER,
        1,
        limits=Budget(max_tokens=10),
        events=spent(600),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_next_step(row: Row) -> None:
    step = next_step(row.view, RunBudget(row.limits, row.events), NOW)

    assert (step.do, step.number) == (row.want, row.number)
    assert row.reason in step.reason
    assert step.budget_stop is row.budget_stop
    assert step.attempts == (len(row.view.attempts) if row.view else 0)


def test_a_step_that_ends_the_task_names_the_attempt_it_ends_on() -> None:
    last = failed(2, "b", "still red")
    step = next_step(view(failed(1, "a"), last), RunBudget(Budget(max_iterations=2)), NOW)

    assert step.do is Do.FAIL
    assert step.last is last


def outcome(status: TaskStatus, reason: str = "") -> TaskOutcome:
    return TaskOutcome("t", status, reason, 1, outcome=Outcome.DONE)


@pytest.mark.parametrize(
    ("tasks", "want"),
    [
        ([], (RunStatus.DONE, "")),
        ([outcome(TaskStatus.DONE), outcome(TaskStatus.SKIPPED)], (RunStatus.DONE, "")),
        ([outcome(TaskStatus.AWAITING_APPROVAL, "gate")], (RunStatus.DONE, "")),
        (
            [outcome(TaskStatus.FAILED, "red"), outcome(TaskStatus.PAUSED, "asks to run")],
            (RunStatus.STOPPED, "asks to run"),
        ),
        ([outcome(TaskStatus.AWAITING_REPLY, "a question")], (RunStatus.STOPPED, "a question")),
        (
            [outcome(TaskStatus.DONE, "ok"), outcome(TaskStatus.FAILED, "red")],
            (RunStatus.FAILED, "red"),
        ),
        ([outcome(TaskStatus.REJECTED, "rejected: no")], (RunStatus.FAILED, "rejected: no")),
    ],
)
def test_run_status(tasks: list[TaskOutcome], want: tuple[RunStatus, str]) -> None:
    assert run_status(tasks) == want
