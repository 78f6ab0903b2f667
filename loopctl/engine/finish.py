"""How the engine ends a task (`delivery.ending` records it and parks or removes its worktree,
as it does for a task an approval ends), and what leaves a task resting: delivered already,
unchanged since it succeeded, or waiting for a human."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopctl.definitions import Loop
from loopctl.delivery.ending import Ending, FinishedWorktree, end_task, pool_capacity
from loopctl.delivery.gates import last_delivery
from loopctl.engine.context import (
    GOAL_LOOP,
    RunContext,
    ctx_events,
    open_item,
)
from loopctl.engine.liveness import stalled_attempt
from loopctl.engine.outcomes import TaskOutcome
from loopctl.engine.steps import IDENTICAL
from loopctl.engine.workspace import resolve_base
from loopctl.errors import LoopctlError
from loopctl.journal import history, schema
from loopctl.journal.events import EventType
from loopctl.journal.inbox import ItemKind, open_items
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import AttemptFinished, read
from loopctl.journal.statuses import Outcome, TaskStatus
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import (
    Workspace,
)

if TYPE_CHECKING:
    from loopctl.journal.inbox import InboxItem


def unchanged_since_success(
    rec: Recorder, loop: str, task: str, base_sha: str, current_run: str
) -> bool:
    for run in history.fold(rec.log.read()).values():
        if run.loop != loop or run.run == current_run:
            continue
        done = run.tasks.get(task)
        if done is not None and done.status == TaskStatus.DONE and done.base_ref_sha == base_sha:
            return True
    return False


def already_delivered(ctx: RunContext, spec: TaskSpec) -> str | None:
    """Why a task whose result was pushed, opened as a pull request or merged has nothing to
    do now, or None when it is work again.

    Working it again would make a new commit on the delivered branch and ask a human to force
    push it over what they approved. So it rests while it asks for the same work (its prompt:
    a pull request's new review comments are new work) and its base stands where the delivered
    work started, or at the delivered commit itself (it was merged, or pushed to the pull
    request's head); once the base moves on, the goal is checked there like any task's.
    """
    if ctx.in_place:
        return None
    events = ctx.log.read()
    delivered = last_delivery(events, ctx.loop.name, spec.id)
    if delivered is None:
        return None
    asked = next(
        (
            schema.task_found(e).prompt
            for e in events
            if e.type == EventType.TASK_FOUND and (e.run, e.task) == (delivered.run, spec.id)
        ),
        None,
    )
    if asked != spec.prompt:
        return None
    try:
        base_sha = resolve_base(ctx.rec, spec.base_ref or ctx.base_ref)
    except LoopctlError:
        return None  # preparing the worktree says why the base cannot be read
    if base_sha not in (delivered.base_sha, delivered.commit):
        return None
    return (
        f"already delivered at {delivered.commit[:12]} ({delivered.describe()}); nothing to do"
        f" until the base moves on from {base_sha[:12]}"
    )


def finish_task(
    ctx: RunContext,
    spec: TaskSpec,
    status: TaskStatus,
    reason: str,
    workspace: Workspace | None,
    attempts: int,
    last: history.AttemptView | None,
    *,
    commit: str | None = None,
    next_step: str | None = None,
    outcome: Outcome,
) -> TaskOutcome:
    """End the task: record its status, reason and `outcome` (required: no task ends without
    one), open a `failed` item for a failure, and let its worktree go as `keep` says."""
    loop = ctx.loop
    failure = None
    if status in (TaskStatus.FAILED, TaskStatus.STOPPED):
        failure = {
            "reason": reason,
            "branch": workspace.branch if workspace else None,
            "worktree": str(workspace.path) if workspace else None,
            "fingerprint": last.fingerprint if last else None,
            "attempts": attempts,
            "check_tail": (last.output_tail[-1500:] if last else ""),
        }
    finished = None
    if workspace is not None and not ctx.in_place:
        finished = FinishedWorktree(
            workspace.path, workspace.base_sha, loop.worktree.keep, pool_capacity(loop)
        )
    ending = Ending(
        ctx.run_id,
        loop.name,
        spec.id,
        status,
        reason,
        commit,
        attempts,
        failure=failure,
        outcome=outcome,
    )
    end_task(ctx.rec, ending, finished)
    return TaskOutcome(
        spec.id,
        status,
        reason,
        attempts,
        commit,
        workspace.branch if workspace else None,
        str(workspace.path) if workspace else None,
        next_step,
        outcome=outcome,
    )


def stop_outcome(ctx: RunContext, task: str, last: int | None, reason: str) -> Outcome:
    """Why a task stopped or failed, as an outcome, from what its attempts recorded: tampering
    on its last attempt, a stall, a budget (`budget_stopped`), a fingerprinted streak."""
    events = ctx.log.read()
    if last is not None:
        for event in ctx_events(events, ctx.run_id, task, EventType.ATTEMPT_FINISHED):
            if (ended := read(AttemptFinished, event)).attempt == last and ended.tampering:
                return Outcome.TAMPERED
        if stalled_attempt(ctx, task, last):
            return Outcome.STALLED
    if ctx_events(events, ctx.run_id, task, EventType.BUDGET_STOPPED):
        return Outcome.BUDGET_STOP
    return Outcome.REPEATED_FAILURE if IDENTICAL in reason else Outcome.FAILED


def escalate(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    last: history.AttemptView,
    attempts: int,
) -> TaskOutcome:
    """The maker asked a question: open an escalation item and pause the task."""
    asked = ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.ATTEMPT_FINISHED)
    question = next(
        (q for e in reversed(asked) if (q := read(AttemptFinished, e).question)),
        last.reason,
    )
    item = open_item(
        ctx.rec,
        ctx.run_id,
        ctx.loop.name,
        spec.id,
        ItemKind.ESCALATION,
        f"{spec.id} asks: {' '.join(question.split())[:200]}",
        {
            "question": question,
            "branch": workspace.branch,
            "worktree": str(workspace.path),
            "attempts": attempts,
        },
    )
    return finish_task(
        ctx,
        spec,
        TaskStatus.AWAITING_REPLY,
        f'waiting for a human\'s answer: loopctl inbox reply {item} "…"',
        workspace,
        attempts,
        last,
        outcome=Outcome.NEEDS_REPLY,
    )


def waiting_item(rec: Recorder, loop: Loop, task_id: str, run_id: str) -> InboxItem | None:
    """An open approval or question from an earlier run of this loop's task, if any."""
    if loop.name == GOAL_LOOP:
        return None  # `loopctl goal` is asked for by hand: run it
    for item in open_items(rec.log.read()):
        if (
            item.loop == loop.name
            and item.task == task_id
            and item.run != run_id
            and item.kind in (ItemKind.APPROVAL, ItemKind.ESCALATION)
        ):
            return item
    return None
