"""What a person decides on an inbox item: approve, reject, retry, dismiss, reply.

(Reading an item, `loopctl inbox show` and its patch, is `commands/inbox_show.py`.)

Every action is an event. Decisions are serialised by one inbox lock (a short, blocking flock),
and delivery by the loop's RunnerLock: when a tick of the loop holds it, an approval is recorded
and that tick delivers it when it ends; otherwise the approving process delivers it itself.
`retry` and `reply` re-queue the task (`task_requeued`) and run it at once as a new run of the
loop limited to that task, or, while the loop is running, leave it to the loop's next tick.
`request_changes` rejects a delivery and re-queues its task the way `reply` does, the note as
the answer the next attempt's prompt carries.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from loopctl import git
from loopctl.checks.integrity import held_by
from loopctl.commands import proposals
from loopctl.commands.inbox_show import InboxError, find_item
from loopctl.commands.proposals import Decision
from loopctl.delivery.gates import (
    GateView,
    Plan,
    approval_problem,
    delivery_view,
    follow_up,
)
from loopctl.delivery.pipeline import Checkpoint, DeliveryResult, complete, resume
from loopctl.engine import drift_gate
from loopctl.engine.runner import Engine, GoalOptions, RunOutcome
from loopctl.errors import LockHeld
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.fuse import Allowance, retry_allowance
from loopctl.journal.inbox import InboxItem, ItemKind, items
from loopctl.journal.payload import Payload
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import (
    ApprovalRefused,
    Approved,
    InboxClosed,
    TaskFinished,
    TaskRequeued,
    TickStarted,
    read,
)
from loopctl.journal.statuses import Outcome, TaskStatus
from loopctl.lock import RunnerLock, inbox_lock, read_holder
from loopctl.scheduling.timing import zone
from loopctl.tasks.spec import requeued_specs

if TYPE_CHECKING:
    from loopctl.definitions import Project
    from loopctl.definitions.config import Budget
    from loopctl.paths import ProjectPaths

GOAL_LOOP = "goal"


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What an inbox action did, for the CLI to print (`ok` False exits 1)."""

    item: str
    action: str  # approve | reject | retry | dismiss | reply | changes
    message: str
    ok: bool = True
    queued: bool = False
    delivery: DeliveryResult | None = None
    run: RunOutcome | None = None
    proposal: Decision | None = None  # a decision on a proposal (commands.proposals)
    # Decided by a signal to a Temporal workflow (commands.on_temporal): this process used the
    # SDK's client, and the CLI leaves without interpreter teardown (commands.worker.exit_now).
    signalled: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "action": self.action,
            "ok": self.ok,
            "queued": self.queued,
            "message": self.message,
            "delivery": (
                {"status": str(self.delivery.status), "reason": self.delivery.reason}
                if self.delivery
                else None
            ),
            "run": (
                {"run": self.run.run, "status": self.run.status, "reason": self.run.reason}
                if self.run
                else None
            ),
            **({"proposal": self.proposal.to_json()} if self.proposal else {}),
        }


def lock_name(loop: str, task: str | None) -> str:
    """The RunnerLock a loop's runs take (a goal locks per condition, like the engine)."""
    return f"goal-{task}" if loop == GOAL_LOOP and task else loop


def _holder(paths: ProjectPaths, name: str) -> str:
    info = read_holder(paths.locks_dir, name)
    pid = info.get("pid") if info else None
    return f"pid {pid}" if pid else "another process"


def _engine(project: Project) -> Engine:
    return Engine(Recorder(project))


# --- approve / reject ---------------------------------------------------------------------------


def _is_gate(item: InboxItem) -> bool:
    """Whether an approval item is a delivery gate (others come from agents asking to run)."""
    return isinstance(item.evidence.get("step"), int)


def _item_event(
    rec: Recorder, item: InboxItem, payload: Payload, keep: Collection[str] = ()
) -> None:
    """An event about `item`, filed under the run, loop and task the item belongs to."""
    rec.record(payload, run=item.run, loop=item.loop, task=item.task, keep=keep)


def _decide_plain(
    rec: Recorder, item: InboxItem, resolution: str, note: str | None
) -> ActionResult:
    """Record a decision on an approval that gates no delivery, e.g. a command an agent asked
    to run: the agent's next turn (the loop's next run) finds it in the log."""
    if resolution == "approved":
        _item_event(
            rec,
            item,
            Approved(id=item.id, sha=None, action=item.evidence.get("action"), note=note),
        )
    _item_event(
        rec,
        item,
        InboxClosed(id=item.id, resolution=resolution, reason=note),
        keep=("reason",),
    )
    rec.refresh_projections()
    what = item.evidence.get("command") or item.summary
    then = (
        f"`loopctl inbox retry {item.id}` runs the task again now (or the loop's next run"
        " takes it up)"
        if _is_ask(item)
        else "run the loop again for it to take effect"
    )
    return ActionResult(
        item.id,
        "approve" if resolution == "approved" else "reject",
        f"{resolution} {item.id} ({what}); {then}",
    )


def _gate_of(events: Sequence[Event], item: InboxItem) -> tuple[Plan, GateView]:
    if not item.run or not item.task:
        raise InboxError(f"approval {item.id} is not tied to a task's delivery")
    view = delivery_view(events, item.run, item.task)
    gate = next((g for g in view.gates.values() if g.item == item.id), None)
    if view.plan is None or gate is None:
        raise InboxError(
            f"approval {item.id} has no delivery plan in the log; reject or dismiss it"
        )
    return view.plan, gate


def approve(
    project: Project,
    ref: str,
    note: str | None = None,
    *,
    checkpoint: Checkpoint | None = None,
    local: bool = False,
) -> ActionResult:
    """Approve an item and deliver what it covers (here, or in the loop's running tick).

    A delivery of a loop this clone scheduled on Temporal is approved by a signal to the worker
    that holds its commit (commands.on_temporal), unless `local` (that worker, releasing it).
    """
    if not local:
        from loopctl.commands.on_temporal import signalled_approval  # lazy: a cycle

        signalled = signalled_approval(project, ref, note)
        if signalled is not None:
            return signalled
    rec = Recorder(project)
    paths = project.paths
    with inbox_lock(paths.locks_dir):
        events = rec.log.read()
        item = find_item(items(events), ref)
        if item.kind == ItemKind.PROPOSAL:
            decided = proposals.approve(project, rec, item, note)
            return ActionResult(
                item.id, "approve", decided.message, ok=decided.ok, proposal=decided
            )
        if item.kind != ItemKind.APPROVAL:
            hints = {
                ItemKind.ESCALATION.value: "answer it with `loopctl inbox reply`",
                ItemKind.FAILED.value: "run it again with `loopctl inbox retry`",
            }
            hint = hints.get(item.kind, "dismiss it")
            raise InboxError(f"{item.id} is a {item.kind} item, not an approval: {hint}")
        if drift_gate.is_drift(item):
            return _approve_drift(rec, item, note)
        if not _is_gate(item):
            return _decide_plain(rec, item, "approved", note)
        held = held_by(events)
        if held:
            # A tampered git config (a remote's URL, say) must not steer a push or a merge.
            raise InboxError(
                "deliveries are held: an agent turn changed"
                f" {', '.join(str(f) for f in held[0].evidence.get('files') or ())}; look at it,"
                f" approve {held[0].id} first, then approve {item.id}"
            )
        plan, gate = _gate_of(events, item)
        problem = approval_problem(gate.sha, plan, git.branch_head(project.root, plan.branch))
        if problem is not None:
            _item_event(
                rec,
                item,
                ApprovalRefused(id=item.id, reason=problem),
            )
            rec.refresh_projections()
            return ActionResult(item.id, "approve", f"approval refused: {problem}", ok=False)
        already = item.approved is not None
        if not already:
            # Invariant 3: this event, bound to the sha the item showed, is what lets it run.
            _item_event(
                rec,
                item,
                Approved(
                    id=item.id,
                    sha=gate.sha,
                    step=gate.step,
                    action=item.evidence.get("action"),
                    note=note,
                ),
            )
        runner = RunnerLock(paths.locks_dir, lock_name(plan.loop, plan.task))
        try:
            runner.acquire()
        except LockHeld:
            who = _holder(paths, runner.name)
            if already:
                raise InboxError(
                    f"{item.id} is already approved and {who} is delivering it"
                ) from None
            rec.refresh_projections()
            return ActionResult(
                item.id,
                "approve",
                f"approved {item.id}; loop {plan.loop!r} is running ({who}) and delivers it when"
                " its current tick ends",
                queued=True,
            )
        # Whoever held the lock a moment ago may have delivered it since we read the log.
        current = next((i for i in items(rec.log.read()) if i.id == item.id), item)
        if not current.is_open:
            runner.release()
            raise InboxError(
                f"inbox item {item.id} was just {current.resolution} by another process"
            )
    try:
        result = resume(rec, plan.run, plan.task, checkpoint=checkpoint)
    finally:
        runner.release()
    message = _delivery_message(item, result)
    if str(result.status) == "done":
        follow = follow_up(delivery_view(rec.log.read(), plan.run, plan.task), plan.branch)
        message += f"; next: {follow}" if follow else ""
    return ActionResult(
        item.id,
        "approve",
        message,
        ok=result.status in ("done", TaskStatus.AWAITING_APPROVAL)
        and not result.reason.startswith("approval refused"),
        delivery=result,
    )


def _approve_drift(rec: Recorder, item: InboxItem, note: str | None) -> ActionResult:
    """Commit and deliver the out-of-scope work an item held back (engine.drift_gate), under
    the task's runner lock, as a gate's delivery is."""
    paths = rec.paths
    runner = RunnerLock(paths.locks_dir, lock_name(item.loop or "", item.task))
    try:
        runner.acquire()
    except LockHeld:
        raise InboxError(
            f"loop {item.loop!r} is working {item.task} ({_holder(paths, runner.name)}); approve"
            f" {item.id} once it is done"
        ) from None
    try:
        ok, message = drift_gate.approve(rec, item, note)
    finally:
        runner.release()
    return ActionResult(item.id, "approve", message, ok=ok)


def _delivery_message(item: InboxItem, result: DeliveryResult) -> str:
    action = item.evidence.get("action", "the action")
    status = str(result.status)
    if status == "done":
        return f"approved {item.id}: `{action}` and the rest of the delivery ran"
    if status == TaskStatus.AWAITING_APPROVAL and result.item and result.item != item.id:
        return f"approved {item.id}: `{action}` ran; {result.reason}"
    return f"approved {item.id}, but the delivery is {status}: {result.reason}"


def reject(
    project: Project, ref: str, reason: str | None = None, *, local: bool = False
) -> ActionResult:
    """Close an approval without delivering; the task ends `rejected`.

    A delivery of a loop this clone scheduled on Temporal is rejected by a signal to the
    worker that holds it (its gate's workflow ends), unless `local` (that worker, closing it).
    """
    if not local:
        from loopctl.commands.on_temporal import signalled_decision  # lazy: a cycle

        signalled = signalled_decision(project, ref, reason, reject=True)
        if signalled is not None:
            return signalled
    rec = Recorder(project)
    paths = project.paths
    with inbox_lock(paths.locks_dir):
        events = rec.log.read()
        item = find_item(items(events), ref)
        if item.kind == ItemKind.PROPOSAL:
            decided = proposals.reject(rec, item, reason)
            return ActionResult(item.id, "reject", decided.message, proposal=decided)
        if item.kind != ItemKind.APPROVAL:
            raise InboxError(
                f"{item.id} is a {item.kind} item; only approvals are rejected"
                f" (use `loopctl inbox dismiss {item.id}`)"
            )
        if drift_gate.is_drift(item):
            return ActionResult(item.id, "reject", drift_gate.reject(rec, item, reason))
        if not _is_gate(item):
            return _decide_plain(rec, item, "rejected", reason)
        try:
            plan, gate = _gate_of(events, item)
        except InboxError:
            # Its plan was replaced (the task was re-planned): nothing left to deliver anyway.
            return _decide_plain(rec, item, "rejected", reason)
        runner = RunnerLock(paths.locks_dir, lock_name(plan.loop, plan.task))
        if item.approved:
            try:
                runner.acquire()
            except LockHeld:
                raise InboxError(
                    f"{item.id} is approved and {_holder(paths, runner.name)} is delivering it;"
                    " it is too late to reject it"
                ) from None
        try:
            if delivery_view(events, plan.run, plan.task).state(gate.step).starts:
                raise InboxError(
                    f"`{gate.step}` of {item.id} has already started; too late to reject"
                )
            why = reason or "no reason given"
            _item_event(
                rec,
                item,
                InboxClosed(id=item.id, resolution="rejected", reason=why),
                keep=("reason",),
            )
            complete(rec, plan, DeliveryResult(TaskStatus.REJECTED, f"rejected: {why}"))
        finally:
            runner.release()
    return ActionResult(item.id, "reject", f"rejected {item.id}: nothing was delivered")


def dismiss(project: Project, ref: str) -> ActionResult:
    """Close an item that needs nothing more (approvals are approved or rejected instead)."""
    rec = Recorder(project)
    with inbox_lock(project.paths.locks_dir):
        item = find_item(items(rec.log.read()), ref)
        if item.kind in (ItemKind.APPROVAL, ItemKind.PROPOSAL):
            raise InboxError(
                f"{item.id} is an {item.kind}: approve it, or reject it with"
                f" `loopctl inbox reject {item.id}`"
            )
        _item_event(
            rec,
            item,
            InboxClosed(id=item.id, resolution="dismissed"),
        )
        if item.kind == ItemKind.ESCALATION and item.run and item.task:
            _item_event(
                rec,
                item,
                TaskFinished(
                    status="stopped",
                    reason="the question was dismissed without an answer",
                    outcome=Outcome.REJECTED,
                ),
            )
        rec.refresh_projections()
    return ActionResult(item.id, "dismiss", f"dismissed {item.id}")


# --- retry / reply ------------------------------------------------------------------------------


def retry(project: Project, ref: str) -> ActionResult:
    """Run a failed task again, with a fresh attempt budget."""
    return _requeue(project, ref, "retry", None)


def reply(project: Project, ref: str, answer: str) -> ActionResult:
    """Answer an agent's question; its task runs again with the answer in its prompt."""
    if not answer.strip():
        raise InboxError('the answer is empty: loopctl inbox reply ID "your answer"')
    return _requeue(project, ref, "reply", answer)


def _requeue(project: Project, ref: str, action: str, answer: str | None) -> ActionResult:
    rec = Recorder(project)
    with inbox_lock(project.paths.locks_dir):
        events = rec.log.read()
        listed = items(events)
        item = find_item(listed, ref, open_only=False)
        # A command an agent asked to run, once decided, is what the paused task waits for:
        # `retry` runs the task again with the decision (the pause message says so).
        decided_ask = action == "retry" and _is_ask(item) and item.resolution in _DECIDED
        # A delivery `request_changes` has just rejected: its task runs again with the note.
        sent_back = action == "changes" and item.resolution == "rejected"
        if not item.is_open and not decided_ask and not sent_back:
            find_item(listed, ref)  # raises: the item is already closed
        wanted = (
            (ItemKind.ESCALATION,) if action == "reply" else (ItemKind.FAILED, ItemKind.UNHANDLED)
        )
        if item.kind not in wanted and not decided_ask and not sent_back:
            hint = "reply to it" if item.kind == ItemKind.ESCALATION else "approve or reject it"
            if action == "retry" and _is_ask(item):
                hint = f"approve or reject it first; then `loopctl inbox retry {item.id}`"
            raise InboxError(f"{item.id} is a {item.kind} item: {hint} instead of `{action}`")
        if item.loop is None:
            raise InboxError(f"{item.id} is not tied to a loop: fix its cause and run the loop")
        if item.loop != GOAL_LOOP and item.loop not in project.loops:
            raise InboxError(f"loop {item.loop!r} no longer exists (.loop/loops/{item.loop}.toml)")
        allowance = _allowance(rec, project, events, item)
        if allowance.refused is not None:
            # The item stays open: the human can retry once the day's budget allows it.
            return ActionResult(
                item.id, action, f"not run: {allowance.refused}; {item.id} stays open", ok=False
            )
        if item.task:
            found = next(
                (
                    e
                    for e in events
                    if e.type == EventType.TASK_FOUND and e.run == item.run and e.task == item.task
                ),
                None,
            )
            spec = dict(found.data) if found else {}
            _item_event(
                rec,
                item,
                TaskRequeued(
                    item=item.id,
                    reason=action,
                    raw_id=spec.get("raw_id", item.task),
                    prompt=spec.get("prompt", ""),
                    title=spec.get("title", ""),
                    base_ref=spec.get("base_ref"),
                    fields=spec.get("fields") or {},
                    question=item.evidence.get("question") if answer is not None else None,
                    answer=answer,
                ),
            )
        if item.is_open:
            _item_event(
                rec,
                item,
                InboxClosed(id=item.id, resolution="replied" if action == "reply" else "retried"),
            )
        rec.refresh_projections()
    return _run_again(project, item, action, allowance)


_DECIDED = ("approved", "rejected")


def request_changes(project: Project, ref: str, note: str) -> ActionResult:
    """Reject a delivery and run its task again with `note` as the next attempt's guidance
    (carried as `reply` carries an answer: `task_requeued`, then the maker's prompt)."""
    if not note.strip():
        raise InboxError("the note is empty: say what the next attempt should change")
    rec = Recorder(project)
    events = rec.log.read()
    item = find_item(items(events), ref)
    if item.kind != ItemKind.APPROVAL or not _is_gate(item) or not item.task:
        raise InboxError(
            f"{item.id} is not a task's delivery: changes are requested of a delivery awaiting"
            " approval (reject or dismiss this one)"
        )
    if item.loop != GOAL_LOOP and item.loop not in project.loops:
        raise InboxError(f"loop {item.loop!r} no longer exists (.loop/loops/{item.loop}.toml)")
    allowance = _allowance(rec, project, events, item)
    if allowance.refused is not None:
        return ActionResult(
            item.id, "changes", f"not sent back: {allowance.refused}; {item.id} stays open", False
        )
    from loopctl.commands.on_temporal import signalled_decision  # lazy: a cycle

    why = f"changes requested: {note}"
    signalled = signalled_decision(project, item.id, why, reject=True)
    if signalled is not None:
        # On Temporal the worker holding the delivery rejects it; the task is worked again by
        # the loop's next tick there (the note is on record as the reason, not in its prompt).
        message = signalled.message
        if signalled.ok:
            message += "; the loop's next tick on its workers works the task again"
        return ActionResult(item.id, "changes", message, signalled.ok, queued=signalled.queued)
    reject(project, item.id, why)
    return _requeue(project, item.id, "changes", note)


def _is_ask(item: InboxItem) -> bool:
    """An approval of a command an agent asked to run (not a delivery gate)."""
    return item.kind == ItemKind.APPROVAL and not _is_gate(item) and "argv" in item.evidence


def _allowance(
    rec: Recorder, project: Project, events: Sequence[Event], item: InboxItem
) -> Allowance:
    """The daily fuse, for a task run again by hand: counted like any tick (journal.fuse)."""
    assert item.loop is not None
    now = rec.clock()
    return retry_allowance(project.config, events, item.loop, item.task, now, zone(None))


def _within(budget: Budget, allowance: Allowance) -> Budget:
    """`budget` narrowed to what the day has left, so the retried run stops at the daily cap."""
    tokens, usd = budget.max_tokens, budget.max_usd
    if allowance.tokens is not None:
        tokens = allowance.tokens if tokens is None else min(tokens, allowance.tokens)
    if allowance.usd is not None:
        usd = allowance.usd if usd is None else min(usd, allowance.usd)
    return replace(budget, max_tokens=tokens, max_usd=usd)


def _run_again(
    project: Project, item: InboxItem, action: str, allowance: Allowance
) -> ActionResult:
    assert item.loop is not None
    config = replace(project.config, budget=_within(project.config.budget, allowance))
    engine = _engine(replace(project, config=config))
    try:
        if item.loop == GOAL_LOOP:
            outcome = engine.run_goal(
                _goal_options(EventLog(project.paths.events_file).read(), item)
            )
        else:
            loop = project.loop(item.loop)
            loop = replace(loop, budget=_within(loop.budget, allowance))
            outcome = engine.run_loop_once(loop, requeued_only=item.task is not None)
            if outcome.resumed and requeued_specs(engine.log.read(), loop.name):
                # The loop's interrupted run came first; now the task itself.
                outcome = engine.run_loop_once(loop, requeued_only=True)
    except LockHeld:
        who = _holder(project.paths, lock_name(item.loop, item.task))
        return ActionResult(
            item.id,
            action,
            f"{'answered' if action == 'reply' else 'queued'} {item.id}; loop {item.loop!r} is"
            f" running ({who}) and works the task in its next tick",
            queued=True,
        )
    verb = {"reply": "answered", "changes": "sent back"}.get(action, "retried")
    return ActionResult(
        item.id,
        action,
        f"{verb} {item.id}: run {outcome.run} {outcome.status}"
        + (f" ({outcome.reason})" if outcome.reason else ""),
        ok=outcome.ok,
        run=outcome,
    )


def _goal_options(events: Sequence[Event], item: InboxItem) -> GoalOptions:
    started = next(
        (e for e in events if e.type == EventType.TICK_STARTED and e.run == item.run), None
    )
    tick = read(TickStarted, started) if started else TickStarted()
    if tick.condition is None:
        raise InboxError(f"cannot tell which goal {item.id} belongs to; run `loopctl goal` again")
    return GoalOptions(
        condition=tick.condition,
        check=tick.check or None,
        agent=tick.maker,
        in_place=tick.in_place,
    )
