"""Loops wait for their reviewer (issue 30): `[review] max_open` caps the items awaiting a human.

An item awaits a human while it is an unapproved approval (a gated delivery step, a command an
agent asked to run) or a maker's question (`journal.review.awaits_human`). Only a loop whose
delivery has a gated step (`approve` names one; by default every action past `commit`) is held
back: its tasks are what open approval items. A loop that only commits opens none, so it never
waits; nor does a goal.

The cap is kept by counting, under one lock per project in this process, what already awaits a
human (folded from the log, so a decision made by another process counts at once) plus every
task that may still open an item: the tasks working now, and the ticks the scheduler started
whose first task has not begun (a *hold*, which that task takes over). A new task starts only
while that sum is below the cap, so the open count never exceeds it. One `loopctl up` runs all
of a project's loops in one process, which is where the count is exact; a `loopctl run` in
another process sees the items `up` opened, not the tasks `up` is working.

A task refused at the cap is not started: it ends `skipped` with the outcome
`waiting-for-review`, and (it was found again by the source, or requeued again below) the next
tick finds it again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from loopctl.definitions import Loop, Project
from loopctl.delivery.gates import gated_names
from loopctl.engine.context import GOAL_LOOP, RunContext
from loopctl.engine.outcomes import TaskOutcome
from loopctl.journal.events import EventType
from loopctl.journal.inbox import InboxItem, current_items
from loopctl.journal.recorder import Recorder
from loopctl.journal.review import awaiting
from loopctl.journal.schema import TaskFinished, TaskRequeued, read
from loopctl.journal.statuses import Outcome, TaskStatus
from loopctl.tasks.spec import TaskSpec


@dataclass(frozen=True, slots=True)
class Full:
    """The cap is reached: `open_count` items await a human, with `pending` tasks that may add
    one more each, against `max_open`."""

    open_count: int
    pending: int
    max_open: int
    items: tuple[str, ...] = ()

    def reason(self) -> str:
        working = f", {self.pending} more being worked" if self.pending else ""
        return (
            f"waiting for review: {self.open_count} item(s) await a human{working}"
            f" ([review] max_open = {self.max_open})"
        )


@dataclass(slots=True)
class _Books:
    """One project's count in this process."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    holds: dict[str, int] = field(default_factory=dict)  # loop -> ticks started, no task yet
    working: set[tuple[str, str]] = field(default_factory=set)  # (run, task) admitted

    def pending(self) -> int:
        return len(self.working) + sum(self.holds.values())


_BOOKS: dict[Path, _Books] = {}
_BOOKS_LOCK = threading.Lock()


def _books(rec: Recorder) -> _Books:
    with _BOOKS_LOCK:
        return _BOOKS.setdefault(rec.paths.root.resolve(), _Books())


def max_open(project: Project) -> int | None:
    return project.config.review.max_open


def applies(project: Project, loop: Loop) -> bool:
    """Whether `loop` waits for its reviewer: a cap is set and its delivery has a gate."""
    return (
        max_open(project) is not None and loop.name != GOAL_LOOP and bool(gated_names(loop.deliver))
    )


def _awaiting(rec: Recorder) -> list[InboxItem]:
    """What awaits a human now, from the items folded incrementally (the scheduler asks every
    second while a loop waits)."""
    return awaiting(current_items(rec.log))


def _full(rec: Recorder, books: _Books, cap: int) -> Full | None:
    waiting = _awaiting(rec)
    pending = books.pending()
    if len(waiting) + pending < cap:
        return None
    return Full(len(waiting), pending, cap, tuple(item.id for item in waiting))


def hold(rec: Recorder, loop: Loop) -> Full | None:
    """Before the scheduler starts a tick of `loop`: None, with room held for the tick's first
    task, or why the tick must wait. Every None is matched by one `release_hold`."""
    cap = max_open(rec.project)
    if cap is None or not applies(rec.project, loop):
        return None
    books = _books(rec)
    with books.lock:
        full = _full(rec, books, cap)
        if full is None:
            books.holds[loop.name] = books.holds.get(loop.name, 0) + 1
        return full


def release_hold(rec: Recorder, loop: str) -> None:
    """The tick `hold` made room for ended: the room its tasks did not take is given back."""
    books = _books(rec)
    with books.lock:
        if books.holds.get(loop):
            books.holds[loop] -= 1
            if not books.holds[loop]:
                del books.holds[loop]


def admit(ctx: RunContext, spec: TaskSpec) -> Full | None:
    """Before a task starts its work: None (it is counted until `release`), or why it waits."""
    cap = max_open(ctx.project)
    if cap is None or not applies(ctx.project, ctx.loop):
        return None
    books = _books(ctx.rec)
    name = ctx.loop.name
    with books.lock:
        if books.holds.get(name):
            # The tick was started with room held for it: its first task takes that room.
            books.holds[name] -= 1
            if not books.holds[name]:
                del books.holds[name]
        else:
            full = _full(ctx.rec, books, cap)
            if full is not None:
                return full
        books.working.add((ctx.run_id, spec.id))
        return None


def release(ctx: RunContext, spec: TaskSpec) -> None:
    """The task ended (any item it opened is in the log now): it is no longer counted."""
    books = _books(ctx.rec)
    with books.lock:
        books.working.discard((ctx.run_id, spec.id))


def not_started(ctx: RunContext, spec: TaskSpec, full: Full) -> TaskOutcome:
    """End a task the cap held back, before it made a worktree: nothing of it is lost, as the
    next tick finds it again (a task a human sent back is sent back again here)."""
    reason = full.reason()
    _requeue_again(ctx, spec)
    ended = TaskFinished(
        status=TaskStatus.SKIPPED, reason=reason, outcome=Outcome.WAITING_FOR_REVIEW
    )
    ctx.record(spec.id, ended)
    return TaskOutcome(spec.id, TaskStatus.SKIPPED, reason, 0, outcome=Outcome.WAITING_FOR_REVIEW)


def _requeue_again(ctx: RunContext, spec: TaskSpec) -> None:
    """A task `inbox retry` or `reply` queued is taken off the queue by the run that finds it
    (`history.requeued_tasks`); when that run does not work it, it goes back on, with the
    human's answer."""
    last: TaskRequeued | None = None
    for event in ctx.log.read():
        if event.loop != ctx.loop.name or event.task != spec.id:
            continue
        if event.type == EventType.TASK_REQUEUED:
            last = read(TaskRequeued, event)
        elif event.type == EventType.TASK_FOUND:
            if event.run == ctx.run_id:
                break
            last = None
    if last is not None:
        ctx.record(spec.id, last)
