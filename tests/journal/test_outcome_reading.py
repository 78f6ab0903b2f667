"""Reading outcomes back (journal.outcomes): what a log recorded, what an older log without the
field says through its statuses, and which of a run's tasks' outcomes is the run's."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopctl.journal import history
from loopctl.journal.events import EventLog
from loopctl.journal.outcomes import (
    PRECEDENCE,
    item_outcome,
    of_run,
    of_task,
    run_outcome,
    strongest,
    task_outcome,
)
from loopctl.journal.statuses import Outcome


def test_precedence_ranks_every_outcome_once() -> None:
    assert sorted(PRECEDENCE) == sorted(Outcome)
    assert len(set(PRECEDENCE)) == len(PRECEDENCE)


@pytest.mark.parametrize(
    ("tasks", "want"),
    [
        ([], None),
        ([Outcome.DONE, Outcome.NOTHING_TO_DO], Outcome.DONE),
        ([Outcome.DONE, Outcome.NEEDS_APPROVAL], Outcome.NEEDS_APPROVAL),
        ([Outcome.RATE_LIMITED, Outcome.FAILED], Outcome.FAILED),
        ([Outcome.REPEATED_FAILURE, Outcome.STALLED], Outcome.STALLED),
        ([Outcome.STALLED, Outcome.TAMPERED, Outcome.DONE], Outcome.TAMPERED),
        ([Outcome.WAITING_FOR_REVIEW, Outcome.NOTHING_TO_DO], Outcome.WAITING_FOR_REVIEW),
        ([Outcome.BUDGET_STOP, Outcome.NEEDS_REPLY], Outcome.BUDGET_STOP),
    ],
)
def test_a_runs_outcome_is_its_most_pressing_tasks(
    tasks: list[Outcome], want: Outcome | None
) -> None:
    assert strongest(tasks) == want


@pytest.mark.parametrize(
    ("status", "reason", "attempts", "budget", "want"),
    [
        ("done", "checks passed", 2, False, Outcome.DONE),
        ("done", "the goal already holds", 0, False, Outcome.NOTHING_TO_DO),
        ("skipped", "base unchanged", 0, False, Outcome.NOTHING_TO_DO),
        ("awaiting_approval", "push waits", 1, False, Outcome.NEEDS_APPROVAL),
        ("paused", "asked to run a command", 1, False, Outcome.NEEDS_APPROVAL),
        ("awaiting_reply", "asked", 1, False, Outcome.NEEDS_REPLY),
        ("rejected", "rejected: no", 1, False, Outcome.REJECTED),
        ("stopped", "2 identical failures in a row (fingerprint x): red", 2, False,
         Outcome.REPEATED_FAILURE),
        ("stopped", "cost budget", 1, True, Outcome.BUDGET_STOP),
        ("stopped", "superseded by run r2 before it was approved", 1, False, Outcome.SUPERSEDED),
        ("failed", "not met after 3 attempts", 3, False, Outcome.FAILED),
        ("a-status-from-the-future", "", 0, False, Outcome.FAILED),
    ],
)  # fmt: skip
def test_an_older_log_without_the_field_reads_through_its_status(
    status: str, reason: str, attempts: int, budget: bool, want: Outcome
) -> None:
    assert task_outcome(None, status, reason, attempts=attempts, budget_stopped=budget) == want


def test_a_recorded_outcome_wins_and_an_unknown_one_is_derived() -> None:
    assert task_outcome("stalled", "stopped", "x", attempts=1) == Outcome.STALLED
    assert task_outcome("exploded", "done", "x", attempts=1) == Outcome.DONE
    assert run_outcome("rate-limited", "stopped", "", [Outcome.FAILED]) == Outcome.RATE_LIMITED


@pytest.mark.parametrize(
    ("status", "reason", "interrupted", "want"),
    [
        ("running", "", False, None),
        ("interrupted", "ctrl-c", True, Outcome.INTERRUPTED),
        ("stopped", "closed unfinished: --fresh started a new run", False,
         Outcome.CRASHED_RECOVERED),
        ("stopped", "closed unfinished: --fresh started a new run", True, Outcome.INTERRUPTED),
        ("done", "", False, Outcome.NOTHING_TO_DO),
        ("failed", "the task command failed", False, Outcome.FAILED),
    ],
)  # fmt: skip
def test_a_run_without_tasks_reads_through_its_status(
    status: str, reason: str, interrupted: bool, want: Outcome | None
) -> None:
    assert run_outcome(None, status, reason, [], interrupted=interrupted) == want


def test_an_old_log_folds_to_outcomes(tmp_path: Path) -> None:
    """A log as loopctl wrote it before `outcome` existed: no field anywhere."""
    log = EventLog(tmp_path / "log.jsonl")
    log.append("tick_started", run="r1", loop="ci", data={"kind": "tick"})
    for task in ("a", "b"):
        log.append("task_found", run="r1", loop="ci", task=task, data={"prompt": task})
    log.append("attempt_started", run="r1", loop="ci", task="a", data={"attempt": 1})
    log.append("budget_stopped", run="r1", loop="ci", task="a", data={"reason": "cost budget"})
    finished = {"status": "stopped", "reason": "cost budget", "commit": None}
    log.append("task_finished", run="r1", loop="ci", task="a", data=finished)
    done = {"status": "done", "reason": "checks passed", "commit": None}
    log.append("task_finished", run="r1", loop="ci", task="b", data=done)
    log.append("tick_finished", run="r1", loop="ci", data={"status": "stopped", "reason": "x"})

    run = history.fold(log.read())["r1"]

    assert of_task(run, run.tasks["a"]) == Outcome.BUDGET_STOP
    assert of_task(run, run.tasks["b"]) == Outcome.NOTHING_TO_DO  # no attempt: nothing to do
    assert of_run(run) == Outcome.BUDGET_STOP


@pytest.mark.parametrize(
    ("kind", "evidence", "want"),
    [
        ("failed", {"outcome": "stalled", "reason": "x"}, Outcome.STALLED),
        ("failed", {"reason": "3 identical failures in a row (fingerprint f): red"},
         Outcome.REPEATED_FAILURE),
        ("failed", {"reason": "not met"}, Outcome.FAILED),
        ("approval", {"action": "push"}, Outcome.NEEDS_APPROVAL),
        ("approval", {"tampering": {"refs": ["x"]}}, Outcome.TAMPERED),
        ("escalation", {"question": "which?"}, Outcome.NEEDS_REPLY),
        ("escalation", {"backend": "claude", "until": "14:05"}, Outcome.RATE_LIMITED),
        ("escalation", {"reason": "fuse", "day": "2026-12-01"}, Outcome.BUDGET_STOP),
        ("unhandled", {"reason": "a scheduler error"}, None),
    ],
)  # fmt: skip
def test_an_inbox_item_names_the_outcome_it_stands_for(
    kind: str, evidence: dict[str, object], want: Outcome | None
) -> None:
    assert item_outcome(kind, evidence) == want
