"""Gated delivery: after the checker passes, push / pr / merge / custom actions, in order.

A gated step stops the pipeline and opens an `approval` item bound to the commit it shows; an
approval runs the steps up to the next gate, exactly as planned (invariants 3 and 9). Each step
is bracketed by `action_started` / `action_finished`: a step found started but not finished (the
process died) is reconciled against the remote or pull request before anything runs again, and a
custom action, whose effect loopctl cannot observe, is never run a second time.

The caller holds the loop's RunnerLock, so two processes never deliver the same task at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import git
from loopctl.checks.sabotage import Finding
from loopctl.checks.sabotage import summary as sabotage_summary
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
    REVIEW_STEP,
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
from loopctl.errors import LoopctlError
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import ItemKind, items
from loopctl.journal.recorder import Recorder
from loopctl.journal.statuses import TaskStatus

if TYPE_CHECKING:
    from loopctl.process import Completed

GH_TIMEOUT = 120.0
CUSTOM_TIMEOUT = 1800.0

Checkpoint = Callable[[str, Step], None]


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    """Where a task's delivery stopped: done | failed | awaiting_approval | rejected | stopped."""

    status: TaskStatus
    reason: str
    item: str | None = None  # the approval item it waits for


@dataclass(frozen=True, slots=True)
class StepOutcome:
    ok: bool | None  # None: the outcome is unknown (a custom action that was interrupted)
    detail: str
    url: str | None = None


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
    pull_request: bool | None = None,
) -> None:
    from loopctl.definitions.environment import delivery_path, missing_delivery_tools

    path = delivery_path(project)
    missing = missing_delivery_tools(actions, path, where, pull_request=pull_request)
    if missing:
        more = f" (and {len(missing) - 1} more: `loopctl validate`)" if len(missing) > 1 else ""
        raise LoopctlError(f"loop {loop!r} cannot deliver: {missing[0]}{more}; nothing ran")


def _check_plan_tools(rec: Recorder, plan: Plan, view: DeliveryView) -> None:
    """The same, for the steps of a planned delivery that have not run yet."""
    left = [
        Action(step.name, step.argv) for step in plan.steps if not view.state(step.index).finished
    ]
    # A merge after a pull request needs gh even when `pr` itself already ran.
    _refuse_missing(rec.project, plan.loop, left, None, pull_request=plan.has("pr"))


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
    event = rec.emit(
        EventType.DELIVERY_PLANNED, run=run, loop=loop.name, task=task, plan=plan.to_json()
    )
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
        replaces = _force_target(rec, plan) if step.name == "push" else None
        asks = step.gated or replaces is not None
        if asks:
            if gate is not None and replaces != _shown_replaces(rec, gate):
                _retire_gate(rec, plan, gate, "the remote branch changed since it was shown")
                gate = None
            waiting = _gate_check(rec, plan, step, gate, replaces)
            if waiting is not None:
                return waiting
            assert gate is not None
        rec.emit(
            EventType.ACTION_STARTED,
            run=run,
            loop=plan.loop,
            task=task,
            step=step.index,
            action=step.name,
            commit=plan.commit,
            gated=asks,
            approval=gate.item if asks and gate is not None else None,
        )
        if checkpoint is not None:
            checkpoint("started", step)
        outcome = run_step(rec, plan, step)
        if checkpoint is not None:
            checkpoint("ran", step)
        _finish_step(rec, plan, step, outcome, gate if asks else None)
        if not outcome.ok:
            return DeliveryResult(TaskStatus.FAILED, f"{step.name} failed: {outcome.detail}")


def _force_target(rec: Recorder, plan: Plan) -> str | None:
    """The commit a push of the plan would replace on the remote, or None (a fast-forward).

    A pull request's branch is never forced (its push leases the head it started from). A
    remote that cannot be read is left to the push itself, which reads it again.
    """
    if plan.push_branch:
        return None
    root = rec.paths.root
    try:
        current = git.remote_branch_sha(root, _push_url(rec, plan), plan.branch)
    except LoopctlError:
        return None
    if current is None or current == plan.commit or git.is_ancestor(root, current, plan.commit):
        return None
    return current


def _shown_replaces(rec: Recorder, gate: GateView) -> str | None:
    """The remote commit the approval item said its push replaces (None: a plain push)."""
    item = next((i for i in items(rec.log.read()) if i.id == gate.item), None)
    shown = item.evidence.get("replaces") if item is not None else None
    return shown if isinstance(shown, str) else None


def _retire_gate(rec: Recorder, plan: Plan, gate: GateView, why: str) -> None:
    """Close an approval that no longer shows what would happen; a new one replaces it."""
    if gate.is_open:
        rec.emit(
            EventType.INBOX_CLOSED,
            run=plan.run,
            loop=plan.loop,
            task=plan.task,
            id=gate.item,
            resolution="superseded",
            reason=why,
        )


def _gate_check(
    rec: Recorder, plan: Plan, step: Step, gate: GateView | None, replaces: str | None = None
) -> DeliveryResult | None:
    """None when the gated `step` may run now; otherwise why the pipeline stops here."""
    what = f"`{step.name}`"
    if step.name == REVIEW_STEP:
        what = "a change that looks like it tampers with the test run"
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
        rec.emit(
            EventType.APPROVAL_REFUSED,
            run=plan.run,
            loop=plan.loop,
            task=plan.task,
            id=gate.item,
            reason=problem,
        )
        return DeliveryResult(
            TaskStatus.AWAITING_APPROVAL, f"approval refused: {problem}", gate.item
        )
    return None


def _finish_step(
    rec: Recorder, plan: Plan, step: Step, outcome: StepOutcome, gate: GateView | None
) -> None:
    rec.emit(
        EventType.ACTION_FINISHED,
        run=plan.run,
        loop=plan.loop,
        task=plan.task,
        step=step.index,
        action=step.name,
        commit=plan.commit,
        ok=outcome.ok,
        detail=outcome.detail[-2000:],
        url=outcome.url,
    )
    if gate is not None and gate.is_open:
        rec.emit(
            EventType.INBOX_CLOSED,
            run=plan.run,
            loop=plan.loop,
            task=plan.task,
            id=gate.item,
            resolution="approved",
            outcome="delivered" if outcome.ok else "failed",
        )


def _close_finished_gates(rec: Recorder, plan: Plan, view: DeliveryView) -> None:
    """An approval item whose step finished before a crash could close it is closed now."""
    for index, gate in view.gates.items():
        if gate.is_open and gate.approved and view.state(index).finished:
            rec.emit(
                EventType.INBOX_CLOSED,
                run=plan.run,
                loop=plan.loop,
                task=plan.task,
                id=gate.item,
                resolution="approved",
            )


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
    summary = f"approve `{step.name}` of {plan.branch} at {plan.commit[:12]}"
    if step.name == REVIEW_STEP:
        findings = [Finding.from_json(r) for r in plan.review]
        summary = f"{sabotage_summary(findings)} (approve to let {plan.commit[:12]} through)"
    if step.name == "push" and plan.push_branch:
        summary += f" onto {plan.push_branch}, the pull request's branch"
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
    if step.name == REVIEW_STEP:
        evidence["sabotage"] = list(plan.review)
    if step.name == "push":
        from loopctl.delivery import remotes

        # The approver sees where the push goes: the URL recorded before the agent ran.
        pin = remotes.run_pin(events, plan.run)
        evidence["remote_url"] = pin.url if pin is not None and pin.name == plan.remote else None
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
            rec.emit(
                EventType.INBOX_CLOSED,
                run=item.run,
                loop=item.loop,
                task=item.task,
                id=item.id,
                resolution="superseded",
                by=plan.run,
            )
            rec.emit(
                EventType.TASK_FINISHED,
                run=item.run,
                loop=item.loop,
                task=item.task,
                status="stopped",
                reason=f"superseded by run {plan.run} before it was approved",
                commit=item.evidence.get("commit"),
            )


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
        plan.run, plan.loop, plan.task, result.status, reason, plan.commit, failure=failure
    )
    end_task(rec, ending, worktree)


def deliver_approved(
    rec: Recorder, loop: str, *, checkpoint: Checkpoint | None = None
) -> list[DeliveryResult]:
    """Deliver every approved, not yet delivered item of `loop` (the caller holds its lock)."""
    targets: list[tuple[str, str]] = []
    for item in items(rec.log.read()):
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


# --- the steps -----------------------------------------------------------------------------------


def run_step(rec: Recorder, plan: Plan, step: Step) -> StepOutcome:
    """Run one step; every failure is an outcome, not an exception."""
    try:
        if step.name == REVIEW_STEP:
            return StepOutcome(True, "a human let the change through")
        if step.name == "push":
            return _push(rec, plan)
        if step.name == "pr":
            return _pr(rec, plan)
        if step.name == "merge":
            return _merge(rec, plan)
        return _custom(rec, plan, step)
    except LoopctlError as exc:
        return StepOutcome(False, str(exc))


def _reconcile(rec: Recorder, plan: Plan, step: Step) -> StepOutcome | None:
    """The outcome of a step that was interrupted, when it can be known; None: not done, redo."""
    if step.name == REVIEW_STEP:
        return None  # it does nothing: run it again
    try:
        if step.name == "push":
            target = plan.push_branch or plan.branch
            url = _push_url(rec, plan)
            remote = git.remote_branch_sha(rec.paths.root, url, target)
            if remote == plan.commit:
                return StepOutcome(True, "found on the remote after an interruption")
            return None
        if step.name == "pr":
            found = _find_pr(rec, plan)
            if found is not None:
                return StepOutcome(True, "found after an interruption", found.get("url"))
            return None
        if step.name == "merge":
            if plan.has("pr"):
                found = _find_pr(rec, plan, state="merged")
                if found is not None:
                    return StepOutcome(
                        True, "merged (found after an interruption)", found.get("url")
                    )
                return None
            if plan.base_branch is None:
                return None
            head = git.branch_head(rec.paths.root, plan.base_branch)
            if head is not None and git.is_ancestor(rec.paths.root, plan.commit, head):
                return StepOutcome(True, f"{plan.base_branch} already contains the commit")
            return None
    except LoopctlError as exc:
        return StepOutcome(
            False, f"cannot tell whether the interrupted {step.name} happened: {exc}"
        )
    # A custom action's effect is invisible to loopctl: at most once means never again.
    return StepOutcome(
        None,
        f"`{' '.join(step.argv or ())}` was interrupted and its outcome is unknown; loopctl does"
        " not run it again — check by hand",
    )


def _push_url(rec: Recorder, plan: Plan) -> str:
    """Where the plan's pushes go: the URL its run recorded before any agent ran, never the
    remote's name, which an agent could have repointed since (see loopctl.delivery.remotes)."""
    from loopctl.delivery import remotes

    return remotes.push_url(rec.paths.root, rec.log.read(), plan.run, plan.remote)


def _push(rec: Recorder, plan: Plan) -> StepOutcome:
    root = rec.paths.root
    url = _push_url(rec, plan)
    if plan.push_branch:
        return _push_to_pr_head(rec, plan, plan.push_branch, url)
    current = git.remote_branch_sha(root, url, plan.branch)
    if current == plan.commit:
        return StepOutcome(True, f"{plan.remote} already has {plan.branch} at {plan.commit[:12]}")
    forced = current is not None and not git.is_ancestor(root, current, plan.commit)
    if forced and _approved_replaces(rec, plan) != current:
        assert current is not None
        # The remote moved after the approval was shown: this force push was never approved.
        return StepOutcome(
            False,
            f"{plan.remote} has {plan.branch} at {current[:12]}, which pushing"
            f" {plan.commit[:12]} would replace (a force push no approval showed); nothing was"
            " pushed",
        )
    git.push_commit(root, url, plan.commit, plan.branch, expect=current)
    shown = git.display_url(url)
    verb = f"force-pushed (replacing {str(current)[:12]})" if forced else "pushed"
    return StepOutcome(True, f"{verb} {plan.commit[:12]} to {plan.remote} ({shown}) {plan.branch}")


def _approved_replaces(rec: Recorder, plan: Plan) -> str | None:
    """The remote commit the approved `push` item of this plan said it replaces."""
    view = delivery_view(rec.log.read(), plan.run, plan.task)
    step = next((s for s in plan.steps if s.name == "push"), None)
    gate = view.gates.get(step.index) if step is not None else None
    if gate is None or not gate.approved:
        return None
    return _shown_replaces(rec, gate)


def _push_to_pr_head(rec: Recorder, plan: Plan, target: str, url: str) -> StepOutcome:
    """Add the task's commits to a pull request's branch; never replace what others pushed.

    The work was built on the PR head as it was (base_sha): the push leases exactly that, so a
    commit someone pushed meanwhile is never overwritten, and the task is found again next tick.
    """
    root = rec.paths.root
    current = git.remote_branch_sha(root, url, target)
    if current == plan.commit:
        return StepOutcome(True, f"{plan.remote} already has {target} at {plan.commit[:12]}")
    if current != plan.base_sha:
        now = current[:12] if current else "deleted"
        return StepOutcome(
            False,
            f"the pull request's branch {target} moved from {plan.base_sha[:12]} to {now}"
            " since the task started; nothing was pushed (the next tick works on the new head)",
        )
    git.push_commit(root, url, plan.commit, target, expect=plan.base_sha)
    shown = git.display_url(url)
    return StepOutcome(True, f"pushed {plan.commit[:12]} to {plan.remote} ({shown}) {target}")


def _gh(rec: Recorder, plan: Plan, args: list[str], stdin: str | None = None) -> Completed:
    from loopctl import gh

    folder = rec.paths.runs_dir / plan.run / plan.task
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = gh.run(
            args,
            cwd=rec.paths.root,
            allow=rec.project.config.env_allow,
            timeout=GH_TIMEOUT,
            stdin=stdin,
            stdout_path=folder / "deliver-gh.out",
            stderr_path=folder / "deliver-gh.err",
            redactor=rec.redactor,
        )
    except gh.ProgramNotFound as exc:
        raise LoopctlError(
            "the `gh` CLI is not installed or not on PATH (https://cli.github.com), and the"
            f" `pr`/`merge` actions need it: {exc}"
        ) from None
    if not done.ok:
        tail = " ".join(done.stderr_tail.split())[-300:] or f"exit {done.exit_code}"
        raise LoopctlError(f"gh {' '.join(args[:2])} failed: {tail}")
    return done


def _find_pr(rec: Recorder, plan: Plan, state: str = "open") -> dict[str, Any] | None:
    done = _gh(
        rec,
        plan,
        [
            "pr",
            "list",
            f"--head={plan.branch}",
            f"--state={state}",
            "--json=number,url,headRefOid,state",
            "--limit=5",
        ],
    )
    try:
        found = json.loads(done.stdout_tail or "[]")
    except ValueError:
        raise LoopctlError("gh pr list printed something that is not JSON") from None
    if not isinstance(found, list):
        return None
    for pr in found:
        if isinstance(pr, dict) and isinstance(pr.get("number"), int):
            return pr
    return None


def pr_text(events: list[Event], plan: Plan) -> tuple[str, str]:
    """A pull request's title and body, from the task and its attempts."""
    from loopctl.journal import history

    run = history.fold(events).get(plan.run)
    view = run.tasks.get(plan.task) if run else None
    prompt = view.prompt.strip() if view else ""
    subject = (view.title if view and view.title else "") or (prompt.splitlines() or [""])[0]
    title = " ".join((subject or f"{plan.loop}: {plan.task}").split())
    if len(title) > 72:
        title = title[:71] + "…"
    lines = ["## Task", "", prompt[:2000] or plan.task, "", "## How it was checked", ""]
    for attempt in view.attempts if view else []:
        fp = f" `{attempt.fingerprint}`" if attempt.fingerprint else ""
        reason = " ".join(attempt.reason.split())[:200]
        lines.append(
            f"- attempt {attempt.number}: {attempt.verdict or 'interrupted'}{fp}: {reason}"
        )
    lines += [
        "",
        f"Made by loopctl: loop `{plan.loop}`, task `{plan.task}`, run `{plan.run}`,"
        f" commit `{plan.commit[:12]}`.",
        f"<!-- loopctl:{plan.loop}/{plan.task} -->",
    ]
    return title, "\n".join(lines) + "\n"


def _pr(rec: Recorder, plan: Plan) -> StepOutcome:
    title, body = pr_text(rec.log.read(), plan)
    existing = _find_pr(rec, plan)
    if existing is not None:
        number = str(existing["number"])
        _gh(rec, plan, ["pr", "edit", number, f"--title={title}", "--body-file=-"], stdin=body)
        return StepOutcome(True, f"updated pull request #{number}", existing.get("url"))
    args = ["pr", "create", f"--head={plan.branch}", f"--title={title}", "--body-file=-"]
    if plan.base_branch:
        args.insert(3, f"--base={plan.base_branch}")
    done = _gh(rec, plan, args, stdin=body)
    url = next((ln.strip() for ln in reversed(done.stdout_tail.splitlines()) if ln.strip()), "")
    return StepOutcome(True, "opened a pull request", url or None)


def _merge(rec: Recorder, plan: Plan) -> StepOutcome:
    if plan.has("pr"):
        found = _find_pr(rec, plan)
        if found is None:
            return StepOutcome(False, f"no open pull request for {plan.branch} to merge")
        number = str(found["number"])
        _gh(rec, plan, ["pr", "merge", number, "--merge", f"--match-head-commit={plan.commit}"])
        return StepOutcome(True, f"merged pull request #{number}", found.get("url"))
    if plan.base_branch is None:
        return StepOutcome(False, "no base branch to fast-forward (HEAD was detached)")
    moved = git.fast_forward(rec.paths.root, plan.base_branch, plan.commit)
    if not moved:
        return StepOutcome(True, f"{plan.base_branch} already contains {plan.commit[:12]}")
    return StepOutcome(True, f"fast-forwarded {plan.base_branch} to {plan.commit[:12]}")


def _custom(rec: Recorder, plan: Plan, step: Step) -> StepOutcome:
    from loopctl import process
    from loopctl.secrets import build_env
    from loopctl.worktrees import ensure_worktree

    config = rec.project.config
    worktree_root = config.worktree_root or rec.paths.default_worktree_root()
    workspace = ensure_worktree(rec.paths.root, worktree_root, plan.loop, plan.task, plan.commit)
    head = git.head_sha(workspace.path)
    if head != plan.commit:
        return StepOutcome(
            False, f"the worktree is at {head[:12]}, not the approved {plan.commit[:12]}"
        )
    env = build_env(
        allow=config.env_allow,
        extra={
            "LOOPCTL_LOOP": plan.loop,
            "LOOPCTL_TASK": plan.task,
            "LOOPCTL_RUN": plan.run,
            "LOOPCTL_COMMIT": plan.commit,
            "LOOPCTL_BRANCH": plan.branch,
            "LOOPCTL_WORKTREE": str(workspace.path),
            "LOOPCTL_ACTION": step.name,
            "PYTHONDONTWRITEBYTECODE": "1",
        },
    )
    folder = rec.paths.runs_dir / plan.run / plan.task
    assert step.argv is not None
    done = process.run(
        list(step.argv),
        cwd=workspace.path,
        env=env,
        timeout=CUSTOM_TIMEOUT,
        stdout_path=folder / f"deliver-{step.index}-{step.name}.out",
        stderr_path=folder / f"deliver-{step.index}-{step.name}.err",
        redactor=rec.redactor,
    )
    tail = done.output_tail(600).strip()
    if done.ok:
        return StepOutcome(True, f"`{step.name}` exited 0" + (f": {tail[-300:]}" if tail else ""))
    why = "timed out" if done.timed_out else f"exited {done.exit_code}"
    return StepOutcome(False, f"`{step.name}` {why}" + (f": {tail}" if tail else ""))
