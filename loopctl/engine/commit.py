"""A passed task: its checked snapshot committed, then handed to delivery."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loopctl.checks.sabotage import Finding
from loopctl.checks.sabotage import summary as sabotage_summary
from loopctl.definitions import Loop
from loopctl.delivery import pipeline as delivery
from loopctl.delivery.gates import delivery_view, follow_up
from loopctl.engine.context import (
    GOAL_LOOP,
    RunContext,
    author,
    ctx_events,
    printable,
    task_view,
)
from loopctl.engine.finish import finish_task
from loopctl.engine.outcomes import TaskOutcome
from loopctl.engine.snapshot import commit_checked, makers_commit
from loopctl.engine.workspace import reattach
from loopctl.errors import LoopctlError
from loopctl.journal import schema
from loopctl.journal.events import Event, EventType
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import AttemptFinished, read
from loopctl.journal.statuses import Outcome, TaskStatus, Verdict
from loopctl.tasks.github import push_branch
from loopctl.tasks.spec import TaskSpec
from loopctl.text import strip_controls
from loopctl.worktrees import Workspace

# The agent's summary in a commit message: enough to say what changed, never a transcript.
SUMMARY_CHARS = 1500
SUMMARY_LINES = 30


def deliver(ctx: RunContext, spec: TaskSpec, workspace: Workspace, attempt: int) -> TaskOutcome:
    loop = ctx.loop
    commit: str | None = None
    review = held_findings(ctx, spec, attempt)  # the sabotage scan's (engine.review)
    if ctx.in_place and review:
        # Nothing is committed in place, so there is no gate to hold it at: it fails, quoted.
        findings = [Finding.from_json(f) for f in review]
        why = f"{sabotage_summary(findings)} (left in the working tree for you to look at)"
        return finish_task(
            ctx, spec, TaskStatus.FAILED, why, workspace, attempt, None, outcome=Outcome.TAMPERED
        )
    if ctx.in_place:
        return finish_task(
            ctx,
            spec,
            TaskStatus.DONE,
            "condition met (changes left in the working tree)",
            workspace,
            attempt,
            None,
            outcome=Outcome.DONE,
        )
    view = task_view(ctx.rec, ctx.run_id, spec.id)
    commit = view.commit if view else None
    if commit is None and any(a.name == "commit" for a in loop.deliver.actions):
        name, email = author(loop.deliver.author or ctx.project.config.author)
        message = commit_message(ctx, spec, attempt)
        try:
            reattach(ctx, spec, workspace)
            commit = commit_checked(ctx, spec, workspace, attempt, message, name, email)
        except LoopctlError as exc:  # one task's delivery failing must not end the tick
            return finish_task(
                ctx,
                spec,
                TaskStatus.FAILED,
                f"commit failed: {exc}",
                workspace,
                attempt,
                None,
                outcome=Outcome.FAILED,
            )
    elif commit is None:
        try:
            commit = makers_commit(ctx, spec, workspace, attempt)
        except LoopctlError as exc:
            return finish_task(
                ctx,
                spec,
                TaskStatus.FAILED,
                str(exc),
                workspace,
                attempt,
                None,
                outcome=Outcome.FAILED,
            )
    # Push, PR, merge and custom actions: gated ones wait in the inbox (loopctl.delivery).

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
        review=review,
    )
    follow = None
    status = result.status
    if result.status == TaskStatus.DONE and commit is not None:
        shipped = delivery_view(ctx.log.read(), ctx.run_id, spec.id)
        follow = follow_up(shipped, workspace.branch)
    elif review and status == TaskStatus.AWAITING_APPROVAL:
        gate = delivery_view(ctx.log.read(), ctx.run_id, spec.id).gates.get(0)
        if gate is not None and not gate.approved:
            # Not a met goal whose delivery waits: whether it is met at all waits for a human.
            status = TaskStatus.PAUSED
    return finish_task(
        ctx,
        spec,
        status,
        result.reason or ("condition met" if loop.goal else "checks passed"),
        workspace,
        attempt,
        None,
        commit=commit,
        next_step=follow,
        outcome=delivered_outcome(status),
    )


def delivered_outcome(status: TaskStatus) -> Outcome:
    """A checked task's outcome from where its delivery left it."""
    if status in (TaskStatus.AWAITING_APPROVAL, TaskStatus.PAUSED):
        return Outcome.NEEDS_APPROVAL  # a gated step, or the sabotage scan's hold
    if status == TaskStatus.REJECTED:
        return Outcome.REJECTED
    return Outcome.DONE if status == TaskStatus.DONE else Outcome.FAILED


def held_findings(ctx: RunContext, spec: TaskSpec, attempt: int) -> list[dict[str, Any]]:
    """The sabotage findings recorded on the passing `attempt` (none: it goes through)."""
    finished = ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.ATTEMPT_FINISHED)
    for event in reversed(finished):
        ended = read(AttemptFinished, event)
        if ended.attempt == attempt and ended.verdict == Verdict.PASSED:
            found = event.data.get("sabotage")
            return [f for f in found if isinstance(f, dict)] if isinstance(found, list) else []
    return []


def commit_message(ctx: RunContext, spec: TaskSpec, attempt: int) -> str:
    """The checked snapshot's commit message: the maker's own summary of what it did as the
    body (a reviewer reads why, not only which task), then the task and where it came from.
    Read from the log, so a commit redone after a crash is the same object.
    """
    loop = ctx.loop
    summary = maker_summary(
        ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.AGENT_FINISHED), attempt
    )
    task = printable(spec.prompt.strip()[:500])
    body = f"{summary}\n\nPrompt: {task}" if summary else task
    return (
        f"loopctl: {loop.name}/{spec.id} (attempt {attempt})\n\n{body}\n\n"
        f"Loop: {loop.name}\nTask: {spec.id}\nAttempt: {attempt}\nRun: {ctx.run_id}\n"
    )


def maker_summary(finished: Sequence[Event], attempt: int) -> str:
    """The final text of the maker's last turn in `attempt`, made fit for a commit message:
    no control sequences, no trailing protocol line, at most SUMMARY_LINES lines."""
    text = ""
    for event in finished:
        turn = schema.agent_finished(event)
        if turn.attempt == attempt and turn.role in (None, "maker"):
            text = turn.text
    lines = [line.rstrip() for line in printable(strip_controls(text)).strip().splitlines()]
    if lines and lines[-1].startswith("{") and lines[-1].endswith("}"):
        lines.pop()  # the protocol's JSON result line, when the agent's text is its stdout
    while lines and not lines[-1]:
        lines.pop()
    cut = len(lines) > SUMMARY_LINES
    summary = "\n".join(lines[:SUMMARY_LINES]).strip()
    if len(summary) > SUMMARY_CHARS:
        summary, cut = summary[:SUMMARY_CHARS].rstrip(), True
    return summary + ("\n[…]" if cut and summary else "")


def deliver_approved(rec: Recorder, loop: Loop) -> None:
    """Approvals given while this loop held its lock (or before a crash) are delivered now."""
    if loop.name == GOAL_LOOP:
        return

    delivery.deliver_approved(rec, loop.name)
