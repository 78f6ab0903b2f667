"""A passed task: its checked snapshot committed, then handed to delivery."""

from __future__ import annotations

from loopctl.definitions import Loop
from loopctl.engine.context import (
    GOAL_LOOP,
    RunContext,
    author,
    printable,
    task_view,
)
from loopctl.engine.finish import finish_task
from loopctl.engine.outcomes import TaskOutcome
from loopctl.engine.snapshot import commit_checked, makers_commit
from loopctl.engine.workspace import reattach
from loopctl.errors import LoopctlError
from loopctl.journal.recorder import Recorder
from loopctl.journal.statuses import TaskStatus
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace


def deliver(ctx: RunContext, spec: TaskSpec, workspace: Workspace, attempt: int) -> TaskOutcome:
    loop = ctx.loop
    commit: str | None = None
    if ctx.in_place:
        return finish_task(
            ctx,
            spec,
            TaskStatus.DONE,
            "condition met (changes left in the working tree)",
            workspace,
            attempt,
            None,
        )
    view = task_view(ctx.rec, ctx.run_id, spec.id)
    commit = view.commit if view else None
    if commit is None and any(a.name == "commit" for a in loop.deliver.actions):
        name, email = author(loop.deliver.author or ctx.project.config.author)
        message = (
            f"loopctl: {loop.name}/{spec.id} (attempt {attempt})\n\n"
            f"{printable(spec.prompt.strip()[:500])}\n\n"
            f"Loop: {loop.name}\nTask: {spec.id}\nAttempt: {attempt}\nRun: {ctx.run_id}\n"
        )
        try:
            reattach(ctx, spec, workspace)
            commit = commit_checked(ctx, spec, workspace, attempt, message, name, email)
        except LoopctlError as exc:  # one task's delivery failing must not end the tick
            return finish_task(
                ctx, spec, TaskStatus.FAILED, f"commit failed: {exc}", workspace, attempt, None
            )
    elif commit is None:
        try:
            commit = makers_commit(ctx, spec, workspace, attempt)
        except LoopctlError as exc:
            return finish_task(ctx, spec, TaskStatus.FAILED, str(exc), workspace, attempt, None)
    # Push, PR, merge and custom actions: gated ones wait in the inbox (loopctl.delivery).
    from loopctl.delivery import pipeline as delivery
    from loopctl.tasks.github import push_branch

    result = delivery.deliver_task(
        ctx.rec,
        loop,
        ctx.run_id,
        spec.id,
        commit=commit,
        branch=workspace.branch,
        base_sha=workspace.base_sha,
        base_ref=spec.base_ref or ctx.base_ref,
        worktree=str(workspace.path),
        push_branch=push_branch(loop, spec.fields),
    )
    return finish_task(
        ctx,
        spec,
        result.status,
        result.reason or ("condition met" if loop.goal else "checks passed"),
        workspace,
        attempt,
        None,
        commit=commit,
    )


def deliver_approved(rec: Recorder, loop: Loop) -> None:
    """Approvals given while this loop held its lock (or before a crash) are delivered now."""
    if loop.name == GOAL_LOOP:
        return
    from loopctl.delivery import pipeline as delivery

    delivery.deliver_approved(rec, loop.name)
