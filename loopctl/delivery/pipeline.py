"""Gated delivery: after the checker passes, push / pr / merge / custom actions, in order.

A gated step stops the pipeline and opens an `approval` item bound to the commit it shows; an
approval runs the steps up to the next gate, exactly as planned (invariants 3 and 9). Each step
is bracketed by `action_started` / `action_finished`: a step found started but not finished (the
process died) is reconciled against the remote or pull request before anything runs again, and a
custom action, whose effect loopctl cannot observe, is never run a second time.

The caller holds the loop's RunnerLock, so two processes never deliver the same task at once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopctl import git
from loopctl.definitions import Loop, Project
from loopctl.definitions.loops import Action
from loopctl.delivery.ending import (
    Ending,
    FinishedWorktree,
    end_task,
    keep_policy,
    pool_capacity,
)
from loopctl.delivery.gates import (
    Delivered,
    DeliveryView,
    GateView,
    Plan,
    Step,
    approval_problem,
    deliveries,
    delivery_view,
    plan_steps,
)
from loopctl.delivery.steps import StepOutcome, step_for
from loopctl.delivery.steps.base import shown_replaces
from loopctl.delivery.tools import delivery_path, missing_tools
from loopctl.errors import LoopctlError
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import ItemKind, current_items, items
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import (
    ActionFinished,
    ActionStarted,
    ApprovalRefused,
    DeliveryPlanned,
    InboxClosed,
    TaskFinished,
)
from loopctl.journal.statuses import Outcome, TaskStatus

Checkpoint = Callable[[str, Step], None]


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """Where a task's delivery stopped: done | failed | awaiting_approval | rejected | stopped."""

    status: TaskStatus
    reason: str
    item: str | None = None  # the approval item it waits for


# --- preflight -----------------------------------------------------------------------------------


def check_tools(project: Project, loop: Loop) -> None:
    """Refuse, before anything runs, when a delivery step's program is missing.

    Otherwise a `pr` without `gh` would fail only after `push` (and a custom deploy) had run.
    """
    _refuse_missing(project, loop.name, loop.deliver.actions, loop.path)


def _refuse_missing(
    project: Project,
    loop: str,
    actions: Iterable[Action],
    where: Path | None,
    among: Collection[str] | None = None,
) -> None:
    path = delivery_path(project)
    missing = missing_tools(actions, path, where, among=among)
    if missing:
        more = f" (and {len(missing) - 1} more: `loopctl validate`)" if len(missing) > 1 else ""
        raise LoopctlError(f"loop {loop!r} cannot deliver: {missing[0]}{more}; nothing ran")


def _check_plan_tools(rec: Recorder, plan: Plan, view: DeliveryView) -> None:
    """The same, for the steps of a planned delivery that have not run yet."""
    left = [
        Action(step.name, step.argv) for step in plan.steps if not view.state(step.index).finished
    ]
    # A step may need a tool because of one that already ran (a merge after a pull request).
    _refuse_missing(rec.project, plan.loop, left, None, among=[s.name for s in plan.steps])


# --- planning ------------------------------------------------------------------------------------


def base_branch(root: Path, base_ref: str | None) -> str | None:
    """The branch `pr` targets and `merge` fast-forwards: the task's base, else the checkout's."""
    if base_ref and base_ref != "HEAD" and not base_ref.startswith("-"):
        if git.branch_exists(root, base_ref):
            return base_ref
        remote_name, _, rest = base_ref.partition("/")
        if rest and git.branch_exists(root, rest) and remote_name == "origin":
            return rest
        return base_ref.removeprefix("origin/")
    return git.current_branch(root)


def plan_delivery(
    rec: Recorder,
    loop: Loop,
    run: str,
    task: str,
    *,
    commit: str,
    branch: str,
    base_sha: str,
    base_ref: str | None,
    worktree: str | None,
    push_branch: str | None = None,
    review: Sequence[Mapping[str, Any]] = (),
) -> Plan:
    """The task's delivery plan: recorded once, so a resumed run and an approval use the same.
    `review`: the sabotage scan's findings, which a human approves before anything else runs."""
    for event in reversed(rec.log.read()):
        if event.type == EventType.DELIVERY_PLANNED and event.run == run and event.task == task:
            recorded = Plan.from_event(event)
            if recorded.commit == commit:
                return recorded
            break
    root = rec.paths.root
    plan = Plan(
        run=run,
        loop=loop.name,
        task=task,
        commit=commit,
        branch=branch,
        base_sha=base_sha,
        base_branch=base_branch(root, base_ref),
        remote=loop.deliver.remote,
        worktree=worktree,
        keep=loop.worktree.keep.value,
        steps=plan_steps(loop.deliver, review=bool(review)),
        push_branch=push_branch,
        review=tuple(dict(r) for r in review),
    )
    event = rec.record(DeliveryPlanned(plan=plan.to_json()), run=run, loop=loop.name, task=task)
    return Plan.from_event(event)


def deliver_task(
    rec: Recorder,
    loop: Loop,
    run: str,
    task: str,
    *,
    commit: str | None,
    branch: str,
    base_sha: str,
    base_ref: str | None,
    worktree: str | None,
    checkpoint: Checkpoint | None = None,
    push_branch: str | None = None,
    review: Sequence[Mapping[str, Any]] = (),
) -> DeliveryResult:
    """Plan (once) and advance the delivery of a task whose check passed.

    `commit`: exactly what was checked (loopctl's commit of the checked snapshot, or the maker's
    own commit when its tree is that snapshot); never the worktree's HEAD as it is now, which
    a process the agent left behind can still move. None: nothing to deliver.
    `push_branch`: a pull request task's head branch, which `push` updates instead of `branch`.
    `review`: the sabotage scan's findings; the delivery waits for a human's approval first.
    """
    if not plan_steps(loop.deliver, review=bool(review)):
        return DeliveryResult(TaskStatus.DONE, "")
    if commit is None:
        return DeliveryResult(TaskStatus.DONE, "checks passed; nothing new to deliver (no commit)")
    plan_delivery(
        rec,
        loop,
        run,
        task,
        commit=commit,
        branch=branch,
        base_sha=base_sha,
        base_ref=base_ref,
        worktree=worktree,
        push_branch=push_branch,
        review=review,
    )
    return advance(rec, run, task, checkpoint=checkpoint)


# --- advancing -----------------------------------------------------------------------------------


def advance(
    rec: Recorder, run: str, task: str, *, checkpoint: Checkpoint | None = None
) -> DeliveryResult:
    """Run the task's next delivery steps until it is delivered, fails or waits for a human."""
    while True:
        view = delivery_view(rec.log.read(), run, task)
        plan = view.plan
        if plan is None:
            return DeliveryResult(TaskStatus.DONE, "")
        _close_finished_gates(rec, plan, view)
        step = view.next_step()
        if step is None:
            return DeliveryResult(TaskStatus.DONE, "")
        state = view.state(step.index)
        if state.starts:
            # Started but never finished: the process died mid-action. Look before re-running.
            outcome = _reconcile(rec, plan, step)
            if outcome is not None:
                _finish_step(rec, plan, step, outcome, view.gates.get(step.index))
                if outcome.ok is not True:
                    return DeliveryResult(TaskStatus.FAILED, f"{step.name}: {outcome.detail}")
                continue
        gate = view.gates.get(step.index)
        # A push that would replace what the remote has (a re-run's new commit on a branch an
        # earlier run pushed) is a force push: it always waits for a human who was told so.
        replaces = step_for(step).overwrites(rec, plan)
        asks = step.gated or replaces is not None
        if asks:
            if gate is not None and replaces != shown_replaces(rec, gate):
                _retire_gate(rec, plan, gate, "the remote branch changed since it was shown")
                gate = None
            waiting = _gate_check(rec, plan, step, gate, replaces)
            if waiting is not None:
                return waiting
            assert gate is not None
        started = ActionStarted(
            step=step.index,
            action=step.name,
            commit=plan.commit,
            gated=asks,
            approval=gate.item if asks and gate is not None else None,
        )
        rec.record(started, run=run, loop=plan.loop, task=task)
        if checkpoint is not None:
            checkpoint("started", step)
        outcome = run_step(rec, plan, step, gate)
        if checkpoint is not None:
            checkpoint("ran", step)
        _finish_step(rec, plan, step, outcome, gate if asks else None)
        if not outcome.ok:
            return DeliveryResult(TaskStatus.FAILED, f"{step.name} failed: {outcome.detail}")


def _retire_gate(rec: Recorder, plan: Plan, gate: GateView, why: str) -> None:
    """Close an approval that no longer shows what would happen; a new one replaces it."""
    if gate.is_open:
        closed = InboxClosed(id=gate.item, resolution="superseded", reason=why)
        rec.record(closed, run=plan.run, loop=plan.loop, task=plan.task)


def _gate_check(
    rec: Recorder, plan: Plan, step: Step, gate: GateView | None, replaces: str | None = None
) -> DeliveryResult | None:
    """None when the gated `step` may run now; otherwise why the pipeline stops here."""
    what = step_for(step).asks(step)
    if gate is None or gate.sha != plan.commit:
        item = open_gate(rec, plan, step, replaces=replaces)
        return DeliveryResult(
            TaskStatus.AWAITING_APPROVAL,
            f"waiting for approval of {what} (loopctl inbox approve {item}, or reject it)",
            item,
        )
    if gate.resolution is not None and not gate.approved:
        if gate.resolution == "superseded":
            return DeliveryResult(
                TaskStatus.STOPPED, "a newer run of the task superseded this delivery"
            )
        return DeliveryResult(TaskStatus.REJECTED, f"`{step.name}` was {gate.resolution}")
    if not gate.approved:
        why = f"; the last approval was refused: {gate.refused}" if gate.refused else ""
        return DeliveryResult(
            TaskStatus.AWAITING_APPROVAL,
            f"waiting for approval of {what} (loopctl inbox approve {gate.item}){why}",
            gate.item,
        )
    problem = approval_problem(
        gate.approved_sha, plan, git.branch_head(rec.paths.root, plan.branch)
    )
    if gate.sha != gate.approved_sha:
        problem = problem or "the approval does not match the commit the item showed"
    if problem is not None:
        refused = ApprovalRefused(id=gate.item, reason=problem)
        rec.record(refused, run=plan.run, loop=plan.loop, task=plan.task)
        return DeliveryResult(
            TaskStatus.AWAITING_APPROVAL, f"approval refused: {problem}", gate.item
        )
    return None


def _finish_step(
    rec: Recorder, plan: Plan, step: Step, outcome: StepOutcome, gate: GateView | None
) -> None:
    finished = ActionFinished(
        step=step.index,
        action=step.name,
        commit=plan.commit,
        ok=outcome.ok,
        detail=outcome.detail[-2000:],
        url=outcome.url,
    )
    rec.record(finished, run=plan.run, loop=plan.loop, task=plan.task)
    if gate is not None and gate.is_open:
        closed = InboxClosed(
            id=gate.item, resolution="approved", outcome="delivered" if outcome.ok else "failed"
        )
        rec.record(closed, run=plan.run, loop=plan.loop, task=plan.task)


def _close_finished_gates(rec: Recorder, plan: Plan, view: DeliveryView) -> None:
    """An approval item whose step finished before a crash could close it is closed now."""
    for index, gate in view.gates.items():
        if gate.is_open and gate.approved and view.state(index).finished:
            closed = InboxClosed(id=gate.item, resolution="approved")
            rec.record(closed, run=plan.run, loop=plan.loop, task=plan.task)


def open_gate(rec: Recorder, plan: Plan, step: Step, *, replaces: str | None = None) -> str:
    """Open the approval item for `step`, bound to the plan's commit; return its id.

    `replaces`: the remote commit a push would overwrite; the item says it is a force push.
    """
    events = rec.log.read()
    _supersede_older_gates(rec, events, plan)
    following: list[str] = []
    for later in plan.steps:
        if later.index <= step.index:
            continue
        if later.gated:
            following.append(f"then `{later.name}` waits for another approval")
            break
        following.append(plan.describe(later))
    kind = step_for(step)
    summary = kind.summary(plan, step)
    describe = plan.describe(step)
    overwritten = _delivery_of(events, plan, replaces) if replaces is not None else None
    if overwritten is not None:
        # The commit it replaces is a result loopctl delivered (a human may have approved it):
        # approving this undoes that delivery, and the item says so in as many words.
        who = (
            f"approved in inbox {', '.join(overwritten.approvals)}"
            if overwritten.approvals
            else "pushed without an approval"
        )
        force = (
            f"FORCE PUSH over a delivered result: overwrites {overwritten.commit[:12]}, which run"
            f" {overwritten.run} delivered to {plan.remote} {plan.branch} ({who});"
            f" {plan.commit[:12]} does not contain it"
        )
        summary += f" ({force})"
        describe += f" ({force})"
    elif replaces is not None:
        force = (
            f"FORCE PUSH: replaces {replaces[:12]}, which {plan.remote} already has on"
            f" {plan.branch} and {plan.commit[:12]} does not contain"
        )
        summary += f" ({force})"
        describe += f" ({force})"
    evidence = {
        "action": step.name,
        "step": step.index,
        "describe": describe,
        "replaces": replaces,
        "overwrites_delivery": (
            {
                "run": overwritten.run,
                "commit": overwritten.commit,
                "approved_in": list(overwritten.approvals),
            }
            if overwritten is not None
            else None
        ),
        "argv": list(step.argv) if step.argv else None,
        "then": following,
        "commit": plan.commit,
        "branch": plan.branch,
        "base_branch": plan.base_branch,
        "remote": plan.remote,
        "worktree": plan.worktree,
    }
    evidence.update(kind.evidence(events, plan))
    item_id = rec.open_item(
        ItemKind.APPROVAL, summary, evidence, run=plan.run, loop=plan.loop, task=plan.task
    )
    assert item_id is not None  # an item without a fixed id always opens
    return item_id


def _delivery_of(events: list[Event], plan: Plan, commit: str) -> Delivered | None:
    """The earlier delivery of this task that pushed `commit`, if one did."""
    return next(
        (
            d
            for d in reversed(deliveries(events, plan.loop, plan.task))
            if d.commit == commit and d.run != plan.run and "push" in d.actions
        ),
        None,
    )


def _supersede_older_gates(rec: Recorder, events: list[Event], plan: Plan) -> None:
    """A task reworked by a newer run leaves the older approval with nothing to deliver."""
    for item in items(events):
        if (
            item.is_open
            and item.kind == ItemKind.APPROVAL
            and item.loop == plan.loop
            and item.task == plan.task
            and item.run != plan.run
        ):
            closed = InboxClosed(id=item.id, resolution="superseded", by=plan.run)
            rec.record(closed, run=item.run, loop=item.loop, task=item.task)
            ended = TaskFinished(
                status="stopped",
                reason=f"superseded by run {plan.run} before it was approved",
                commit=item.evidence.get("commit"),
                outcome=Outcome.SUPERSEDED,
            )
            # The commit key was always written, None or not.
            rec.record(ended, run=item.run, loop=item.loop, task=item.task, keep=("commit",))


# --- finishing outside the engine ----------------------------------------------------------------


def complete(rec: Recorder, plan: Plan, result: DeliveryResult) -> None:
    """Record where a delivery run by an approval ended: the task ends as the engine ends one,
    its worktree parked in the loop's pool or removed as its `keep` policy says."""
    reason = result.reason or "delivered"
    failure = None
    if result.status == TaskStatus.FAILED:
        failure = {
            "reason": reason,
            "stage": "deliver",
            "branch": plan.branch,
            "commit": plan.commit,
            "worktree": plan.worktree,
        }
    worktree = None
    if plan.worktree:
        # The pool is the loop's as it is defined now; a loop no longer defined has none.
        loop = rec.project.loops.get(plan.loop)
        worktree = FinishedWorktree(
            Path(plan.worktree),
            plan.base_sha,
            keep_policy(plan.keep),
            pool_capacity(loop) if loop is not None else 0,
        )
    ending = Ending(
        plan.run,
        plan.loop,
        plan.task,
        result.status,
        reason,
        plan.commit,
        failure=failure,
        outcome=approved_outcome(result.status),
    )
    end_task(rec, ending, worktree)


def approved_outcome(status: str) -> Outcome:
    """How a task an approval (or a rejection) finished ended."""
    if status == TaskStatus.DONE:
        return Outcome.DONE
    if status == TaskStatus.REJECTED:
        return Outcome.REJECTED
    if status == TaskStatus.AWAITING_APPROVAL:
        return Outcome.NEEDS_APPROVAL  # the next gated step waits
    return Outcome.FAILED


def deliver_approved(
    rec: Recorder, loop: str, *, checkpoint: Checkpoint | None = None
) -> list[DeliveryResult]:
    """Deliver every approved, not yet delivered item of `loop` (the caller holds its lock)."""
    targets: list[tuple[str, str]] = []
    for item in current_items(rec.log):
        if (
            item.is_open
            and item.approved
            and item.kind == ItemKind.APPROVAL
            and item.loop == loop
            and item.run is not None
            and item.task is not None
            and (item.run, item.task) not in targets
        ):
            targets.append((item.run, item.task))
    results = []
    for run, task in targets:
        results.append(resume(rec, run, task, checkpoint=checkpoint))
    return results


def resume(
    rec: Recorder, run: str, task: str, *, checkpoint: Checkpoint | None = None
) -> DeliveryResult:
    """Advance a planned delivery outside the engine and record where it ended."""
    view = delivery_view(rec.log.read(), run, task)
    if view.plan is None:
        return DeliveryResult(TaskStatus.DONE, "")
    _check_plan_tools(rec, view.plan, view)
    result = advance(rec, run, task, checkpoint=checkpoint)
    complete(rec, view.plan, result)
    return result


# --- the steps ----------------------------------------------------------------------------------


def run_step(rec: Recorder, plan: Plan, step: Step, gate: GateView | None = None) -> StepOutcome:
    """Run one step; every failure is an outcome, not an exception."""
    try:
        return step_for(step).run(rec, plan, step, gate)
    except LoopctlError as exc:
        return StepOutcome(False, str(exc))


def _reconcile(rec: Recorder, plan: Plan, step: Step) -> StepOutcome | None:
    """The outcome of a step that was interrupted, when it can be known; None: not done, redo."""
    try:
        return step_for(step).reconcile(rec, plan, step)
    except LoopctlError as exc:
        return StepOutcome(
            False, f"cannot tell whether the interrupted {step.name} happened: {exc}"
        )
