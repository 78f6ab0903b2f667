"""One task of a run: the thin loop that applies `steps.next_step` until the task ends."""

from __future__ import annotations

from typing import Any

from loopctl.checks import integrity
from loopctl.checks.verdicts import Verdict as CheckVerdict
from loopctl.engine import check_cache, drift_gate, review_gate
from loopctl.engine.agents import cannot_start
from loopctl.engine.attempt import run_attempt
from loopctl.engine.commit import deliver
from loopctl.engine.context import (
    RunContext,
    task_view,
)
from loopctl.engine.finish import (
    already_delivered,
    escalate,
    finish_task,
    stop_outcome,
    unchanged_since_success,
    waiting_item,
)
from loopctl.engine.liveness import STALLED_SOURCE
from loopctl.engine.outcomes import TaskOutcome
from loopctl.engine.steps import Do, RunBudget, next_step
from loopctl.engine.verdict import BaseRun, check_baseline, check_first
from loopctl.engine.workspace import prepare, resolve_base, stop_orphans
from loopctl.errors import LoopctlError
from loopctl.journal import history, outcomes
from loopctl.journal.history import TaskView
from loopctl.journal.inbox import ItemKind, open_items
from loopctl.journal.schema import AttemptFinished, BudgetStopped
from loopctl.journal.statuses import Outcome, TaskStatus, Verdict, task_status
from loopctl.tasks.spec import TaskSpec


def work_task(ctx: RunContext, spec: TaskSpec) -> TaskOutcome:
    """Work one task of the run to its end (or resume it): skip it, prepare its workspace,
    check the goal on the base, then apply `next_step` until it delivers, pauses or stops."""
    loop = ctx.loop
    view = task_view(ctx.rec, ctx.run_id, spec.id)
    if view is not None and view.finished:
        return TaskOutcome(
            spec.id,
            task_status(view.status),
            view.reason,
            len(view.attempts),
            view.commit,
            view.branch,
            view.worktree,
            outcome=finished_outcome(ctx, view),
        )
    fresh = view is None or (view.worktree is None and not view.attempts)
    waiting = waiting_item(ctx.rec, loop, spec.id, ctx.run_id) if fresh else None
    if waiting is not None:
        # Reworking it would throw away the work the human is about to look at.
        return finish_task(
            ctx,
            spec,
            TaskStatus.SKIPPED,
            f"waits for a human: inbox {waiting.kind} {waiting.id}",
            None,
            0,
            None,
            outcome=(
                Outcome.NEEDS_REPLY
                if waiting.kind == ItemKind.ESCALATION
                else Outcome.NEEDS_APPROVAL
            ),
        )
    delivered = already_delivered(ctx, spec) if fresh else None
    if delivered is not None:
        return finish_task(
            ctx, spec, TaskStatus.SKIPPED, delivered, None, 0, None, outcome=Outcome.NOTHING_TO_DO
        )
    if loop.tasks is not None and loop.tasks.dedupe == "base" and fresh:
        try:
            base_now = resolve_base(ctx.rec, spec.base_ref or ctx.base_ref)
        except LoopctlError as exc:
            return finish_task(
                ctx, spec, TaskStatus.FAILED, str(exc), None, 0, None, outcome=Outcome.FAILED
            )
        if unchanged_since_success(ctx.rec, loop.name, spec.id, base_now, ctx.run_id):
            return finish_task(
                ctx,
                spec,
                TaskStatus.SKIPPED,
                f"base {base_now[:12]} unchanged since the task last succeeded",
                None,
                0,
                None,
                outcome=Outcome.NOTHING_TO_DO,
            )
    cached = check_cache.lookup(ctx, spec) if fresh else None
    if cached is not None and cached.verdict is not None:
        # The goal held on this very base tree and nothing it depends on changed: no worktree,
        # no suite run, no agent.
        return finish_task(
            ctx,
            spec,
            TaskStatus.DONE,
            cached.verdict.reason,
            None,
            0,
            None,
            outcome=Outcome.NOTHING_TO_DO,
        )
    if fresh:
        # The last step before any work: at `[review] max_open` the task is not started.
        full = review_gate.admit(ctx, spec)
        if full is not None:
            return review_gate.not_started(ctx, spec, full)
    try:
        workspace = prepare(ctx, spec, view)
    except LoopctlError as exc:
        return finish_task(
            ctx,
            spec,
            TaskStatus.FAILED,
            f"cannot prepare the worktree: {exc}",
            None,
            0,
            None,
            outcome=Outcome.FAILED,
        )
    attempted = view is not None and bool(view.attempts)
    if attempted:
        stop_orphans(ctx, spec, workspace)
    cannot = cannot_start(ctx, spec, workspace)
    if cannot is not None:
        # Each attempt would fail the same way, and each failure be blamed on the check.
        done = len(view.attempts) if view is not None else 0
        return finish_task(
            ctx, spec, TaskStatus.STOPPED, cannot, workspace, done, None, outcome=Outcome.FAILED
        )
    base_runs: dict[tuple[str, ...], BaseRun] = {}  # the baseline's runs, reused just below
    baseline = check_baseline(ctx, spec, workspace, base_runs)
    ran: list[dict[str, Any]] = []
    first = check_first(ctx, spec, workspace, baseline, base_runs, ran) if not attempted else None
    if first is not None and cached is not None:
        check_cache.remember(ctx, spec, cached, workspace, first, ran)
    if first is not None:  # the goal already holds, or cannot be checked: no agent runs
        status = (
            TaskStatus.DONE
            if first.passed
            else (TaskStatus.STOPPED if first.fatal else TaskStatus.FAILED)
        )
        return finish_task(
            ctx, spec, status, first.reason, workspace, 0, None, outcome=first_outcome(first)
        )
    while True:
        if ctx.stop.is_set():
            raise KeyboardInterrupt
        view = task_view(ctx.rec, ctx.run_id, spec.id)
        run_events = [e for e in ctx.log.read() if e.run == ctx.run_id]
        step = next_step(view, RunBudget(loop.budget, run_events), ctx.clock())
        attempts = view.attempts if view else []
        if step.do is Do.DELIVER:
            found = drift_gate.held(ctx, spec, step.number)
            if found:
                # Outside the task's scope: a human decides before anything is committed.
                return drift_gate.pause(
                    ctx, spec, workspace, step.number, found, step.last, step.attempts
                )
            return deliver(ctx, spec, workspace, step.number)
        if step.do is Do.ESCALATE:
            assert step.last is not None
            return escalate(ctx, spec, workspace, step.last, step.attempts)
        if step.do is Do.PAUSE:
            # Not "awaiting_approval" (a met goal whose delivery waits): the work isn't done.
            asked = next(
                (
                    i.id
                    for i in reversed(open_items(ctx.log.read()))
                    if (i.run, i.task, i.kind) == (ctx.run_id, spec.id, ItemKind.APPROVAL)
                ),
                "ID",
            )
            reason = (
                step.reason + f" (approve it with `loopctl inbox approve {asked}`; then `loopctl"
                f" inbox retry {asked}` runs the task again now)"
            )
            return finish_task(
                ctx,
                spec,
                TaskStatus.PAUSED,
                reason,
                workspace,
                step.attempts,
                step.last,
                outcome=Outcome.NEEDS_APPROVAL,
            )
        if step.do is Do.ABANDON:
            ctx.record(
                spec.id,
                AttemptFinished(
                    attempt=step.number,
                    verdict=Verdict.FAILED,
                    reason=step.reason,
                    fingerprint=None,
                ),
            )
            continue
        if step.do in (Do.STOP, Do.FAIL):
            if step.budget_stop:
                ctx.record(spec.id, BudgetStopped(reason=step.reason))
            status = TaskStatus.STOPPED if step.do is Do.STOP else TaskStatus.FAILED
            last = step.last.number if step.last is not None else None
            return finish_task(
                ctx,
                spec,
                status,
                step.reason,
                workspace,
                step.attempts,
                step.last,
                outcome=stop_outcome(ctx, spec.id, last, step.reason),
            )
        held = integrity.held_by(ctx.log.read())
        if held:
            # Another task's turn changed a definition: no attempt starts until a human looks.
            return finish_task(
                ctx,
                spec,
                TaskStatus.PAUSED,
                integrity.held_reason(held),
                workspace,
                step.attempts,
                None,
                outcome=Outcome.TAMPERED,
            )
        with integrity.turn():
            limited = run_attempt(ctx, spec, workspace, step.number, attempts, baseline)
        if limited is not None:
            # Not a failure of the work: the task rests, and the loop's next tick (once the
            # scheduler lets the backend's pause end) takes it up again, with no human.
            return finish_task(
                ctx,
                spec,
                TaskStatus.PAUSED,
                f"{limited.describe()}: {limited.said}"[:400],
                workspace,
                step.number,
                None,
                outcome=Outcome.RATE_LIMITED,
            )


def first_outcome(first: CheckVerdict) -> Outcome:
    """The outcome of a task its first check ended before any agent ran: the goal already
    held (nothing to do), a check stalled, a budget ran out, or it cannot be checked."""
    if first.passed:
        return Outcome.NOTHING_TO_DO
    if first.source == STALLED_SOURCE:
        return Outcome.STALLED
    return Outcome.BUDGET_STOP if first.source == "budget" else Outcome.FAILED


def finished_outcome(ctx: RunContext, view: TaskView) -> Outcome:
    """The outcome a task already finished in this (resumed) run recorded, or derived."""
    run = history.fold(e for e in ctx.log.read() if e.run == ctx.run_id).get(ctx.run_id)
    named = outcomes.of_task(run, view) if run is not None else None
    return named if named is not None else Outcome.FAILED
