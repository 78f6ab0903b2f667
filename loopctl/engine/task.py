"""One task of a run: the thin loop that applies `steps.next_step` until the task ends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopctl.checks import integrity
from loopctl.errors import LoopctlError
from loopctl.journal import budgets
from loopctl.journal.events import EventType
from loopctl.journal.inbox import ItemKind, open_items
from loopctl.tasks.spec import TaskSpec

if TYPE_CHECKING:
    pass
from loopctl.engine.attempt import run_attempt
from loopctl.engine.commit import deliver
from loopctl.engine.context import (
    RunContext,
    task_view,
)
from loopctl.engine.finish import escalate, finish_task, unchanged_since_success, waiting_item
from loopctl.engine.outcomes import TaskOutcome
from loopctl.engine.verdict import check_baseline, check_first
from loopctl.engine.workspace import prepare, resolve_base, stop_orphans


def work_task(ctx: RunContext, spec: TaskSpec) -> TaskOutcome:
    loop = ctx.loop
    view = task_view(ctx.rec, ctx.run_id, spec.id)
    if view is not None and view.finished:
        return TaskOutcome(
            spec.id,
            view.status,
            view.reason,
            len(view.attempts),
            view.commit,
            view.branch,
            view.worktree,
        )
    fresh = view is None or (view.worktree is None and not view.attempts)
    waiting = waiting_item(ctx.rec, loop, spec.id, ctx.run_id) if fresh else None
    if waiting is not None:
        # Reworking it would throw away the work the human is about to look at.
        return finish_task(
            ctx,
            spec,
            "skipped",
            f"waits for a human: inbox {waiting.kind} {waiting.id}",
            None,
            0,
            None,
        )
    if loop.tasks is not None and loop.tasks.dedupe == "base" and fresh:
        try:
            base_now = resolve_base(ctx.rec, spec.base_ref or ctx.base_ref)
        except LoopctlError as exc:
            return finish_task(ctx, spec, "failed", str(exc), None, 0, None)
        if unchanged_since_success(ctx.rec, loop.name, spec.id, base_now, ctx.run_id):
            return finish_task(
                ctx,
                spec,
                "skipped",
                f"base {base_now[:12]} unchanged since the task last succeeded",
                None,
                0,
                None,
            )
    try:
        workspace = prepare(ctx, spec, view)
    except LoopctlError as exc:
        return finish_task(
            ctx, spec, "failed", f"cannot prepare the worktree: {exc}", None, 0, None
        )
    attempted = view is not None and bool(view.attempts)
    if attempted:
        stop_orphans(ctx, spec, workspace)
    baseline = check_baseline(ctx, spec, workspace)
    first = check_first(ctx, spec, workspace, baseline) if not attempted else None
    if first is not None:  # the goal already holds, or cannot be checked: no agent runs
        status = "done" if first.passed else ("stopped" if first.fatal else "failed")
        return finish_task(ctx, spec, status, first.reason, workspace, 0, None)
    while True:
        if ctx.stop.is_set():
            raise KeyboardInterrupt
        view = task_view(ctx.rec, ctx.run_id, spec.id)
        attempts = view.attempts if view else []
        finished = [a for a in attempts if a.verdict is not None]
        fingerprints = [a.fingerprint if a.verdict == "failed" else None for a in finished]
        if finished and finished[-1].verdict == "passed":
            return deliver(ctx, spec, workspace, finished[-1].number)
        if finished and finished[-1].verdict == "escalated":
            return escalate(ctx, spec, workspace, finished[-1], len(attempts))
        if finished and finished[-1].verdict == "awaiting_approval":
            # Not "awaiting_approval" (a met goal whose delivery waits): the work isn't done.
            asked = next(
                (
                    i.id
                    for i in reversed(open_items(ctx.log.read()))
                    if (i.run, i.task, i.kind) == (ctx.run_id, spec.id, ItemKind.APPROVAL)
                ),
                "ID",
            )
            return finish_task(
                ctx,
                spec,
                "paused",
                finished[-1].reason
                + f" (approve it with `loopctl inbox approve {asked}`; then `loopctl inbox"
                f" retry {asked}` runs the task again now)",
                workspace,
                len(attempts),
                finished[-1],
            )
        if finished and finished[-1].fatal:
            return finish_task(
                ctx,
                spec,
                "stopped",
                finished[-1].reason,
                workspace,
                len(attempts),
                finished[-1],
            )
        streak = budgets.identical_failure_streak(fingerprints)
        if streak >= loop.budget.stop_after_identical_failures:
            last = finished[-1]
            return finish_task(
                ctx,
                spec,
                "stopped",
                f"{streak} identical failures in a row"
                f" (fingerprint {last.fingerprint}): {last.reason}",
                workspace,
                len(attempts),
                last,
            )
        pending = next((a for a in attempts if a.verdict is None), None)
        if pending is not None and pending.starts >= 2:
            # Interrupted twice: redoing it once was the promise; record it as failed.
            ctx.event(
                spec.id,
                EventType.ATTEMPT_FINISHED,
                attempt=pending.number,
                verdict="failed",
                reason="interrupted twice",
                fingerprint=None,
            )
            continue
        number = pending.number if pending is not None else len(attempts) + 1
        if pending is None and number > loop.budget.max_iterations:
            final = finished[-1] if finished else None
            return finish_task(
                ctx,
                spec,
                "failed",
                f"not met after {loop.budget.max_iterations} attempts:"
                f" {final.reason if final else ''}",
                workspace,
                len(attempts),
                final,
            )
        run_events = [e for e in ctx.log.read() if e.run == ctx.run_id]
        reason = budgets.stop_reason(loop.budget, run_events, ctx.clock())
        if reason is not None:
            ctx.event(spec.id, EventType.BUDGET_STOPPED, reason=reason)
            return finish_task(
                ctx,
                spec,
                "stopped",
                reason,
                workspace,
                len(attempts),
                finished[-1] if finished else None,
            )
        held = integrity.held_by(ctx.log.read())
        if held:
            # Another task's turn changed a definition: no attempt starts until a human looks.
            return finish_task(
                ctx, spec, "paused", integrity.held_reason(held), workspace, len(attempts), None
            )
        with integrity.turn():
            run_attempt(ctx, spec, workspace, number, attempts, baseline)
