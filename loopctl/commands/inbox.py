"""What a person does with an inbox item: show, approve, reject, retry, dismiss, reply.

Every action is an event. Decisions are serialised by one inbox lock (a short, blocking flock),
and delivery by the loop's RunnerLock: when a tick of the loop holds it, an approval is recorded
and that tick delivers it when it ends; otherwise the approving process delivers it itself.
`retry` and `reply` re-queue the task (`task_requeued`) and run it at once as a new run of the
loop limited to that task, or, while the loop is running, leave it to the loop's next tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from loopctl import git
from loopctl.delivery.gates import (
    GateView,
    Plan,
    approval_problem,
    delivery_view,
    follow_up,
)
from loopctl.delivery.pipeline import Checkpoint, DeliveryResult, complete, resume
from loopctl.errors import LockHeld, LoopctlError
from loopctl.journal import history
from loopctl.journal.claimed import ClaimedView
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import InboxItem, ItemKind, items
from loopctl.journal.recorder import Recorder
from loopctl.journal.statuses import TaskStatus
from loopctl.lock import RunnerLock, inbox_lock, read_holder
from loopctl.tasks.spec import requeued_specs

if TYPE_CHECKING:
    from loopctl.definitions import Project
    from loopctl.definitions.config import Budget
    from loopctl.engine.runner import Engine, RunOutcome
    from loopctl.journal.fuse import Allowance
    from loopctl.paths import ProjectPaths

GOAL_LOOP = "goal"


class InboxError(LoopctlError):
    """An inbox action that cannot be done: unknown, ambiguous or closed id, wrong kind (exit 1)."""


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What an inbox action did, for the CLI to print (`ok` False exits 1)."""

    item: str
    action: str  # approve | reject | retry | dismiss | reply
    message: str
    ok: bool = True
    queued: bool = False
    delivery: DeliveryResult | None = None
    run: RunOutcome | None = None

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
        }


@dataclass(frozen=True, slots=True)
class ItemDetail:
    """The evidence behind an item, for `loopctl inbox show`."""

    item: InboxItem
    branch: str | None = None
    commit: str | None = None
    base_sha: str | None = None
    diff_stat: str = ""
    check_output: str = ""
    fingerprint: str | None = None
    attempts: tuple[dict[str, Any], ...] = ()
    tokens: int = 0
    cost_usd: float = 0.0
    action: str | None = None  # the exact action awaiting approval
    then: tuple[str, ...] = ()
    question: str | None = None
    task_status: str | None = None
    history: tuple[str, ...] = field(default_factory=tuple)  # what was done to the item
    # The whole patch of an approval (commit against base), undecodable bytes as U+FFFD; None
    # when not asked for or when the item has none.
    patch: str | None = None
    # The last readable lines of the last attempt's agent, how its turn ended, and the folder
    # holding that attempt's prompt and whole output.
    agent_output: str = ""
    agent_status: str | None = None
    attempt_dir: str | None = None
    # host:port the egress proxy refused the task's agents and checks (issue 25)
    network_refused: tuple[str, ...] = ()
    # What the maker said it did beside what loopctl measured, for its latest attempt.
    claims: ClaimedView | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.item.to_json(),
            "branch": self.branch,
            "commit": self.commit,
            "base_sha": self.base_sha,
            "diff_stat": self.diff_stat,
            "check_output": self.check_output,
            "fingerprint": self.fingerprint,
            "attempts": list(self.attempts),
            "spend": {"tokens": self.tokens, "usd": round(self.cost_usd, 6)},
            "action_awaiting_approval": self.action,
            "then": list(self.then),
            "question": self.question,
            "task_status": self.task_status,
            "history": list(self.history),
            "patch": self.patch,
            "agent_output": self.agent_output,
            "agent_status": self.agent_status,
            "attempt_dir": self.attempt_dir,
            "network_refused": list(self.network_refused),
            "claims": self.claims.to_json() if self.claims is not None else None,
        }


# --- finding an item -----------------------------------------------------------------------------


def find_item(found: Sequence[InboxItem], ref: str, *, open_only: bool = True) -> InboxItem:
    """The item `ref` names (its id or a unique prefix of it)."""
    ref = ref.strip().lower()
    exact = [i for i in found if i.id == ref]
    matches = exact or ([i for i in found if i.id.startswith(ref)] if ref else [])
    if not matches:
        open_ids = [i.id for i in found if i.is_open][-8:]
        listing = ", ".join(open_ids) if open_ids else "none"
        raise InboxError(f"no inbox item {ref!r} (open items: {listing}; see `loopctl inbox`)")
    if len(matches) > 1:
        shown = ", ".join(i.id for i in matches[:6])
        raise InboxError(f"inbox id {ref!r} is ambiguous: it starts {shown}; type more of it")
    item = matches[0]
    if open_only and not item.is_open:
        raise InboxError(
            f"inbox item {item.id} is already closed ({item.resolution}, {str(item.closed)[:19]})"
        )
    return item


def lock_name(loop: str, task: str | None) -> str:
    """The RunnerLock a loop's runs take (a goal locks per condition, like the engine)."""
    return f"goal-{task}" if loop == GOAL_LOOP and task else loop


def _holder(paths: ProjectPaths, name: str) -> str:
    info = read_holder(paths.locks_dir, name)
    pid = info.get("pid") if info else None
    return f"pid {pid}" if pid else "another process"


def _engine(project: Project) -> Engine:
    from loopctl.engine.runner import Engine

    return Engine(Recorder(project))


# --- show ---------------------------------------------------------------------------------------


def show(project: Project, ref: str, *, with_patch: bool = False) -> ItemDetail:
    """The evidence of an item, open or closed; `with_patch`: an approval's whole patch too."""
    from loopctl.journal.events import EventLog
    from loopctl.paths import attempt_folder

    events = EventLog(project.paths.events_file).read()
    item = find_item(items(events), ref, open_only=False)
    evidence = item.evidence
    task = _task_view(events, item)
    plan: Plan | None = None
    gate: GateView | None = None
    if item.run and item.task:
        view = delivery_view(events, item.run, item.task)
        plan = view.plan
        gate = next((g for g in view.gates.values() if g.item == item.id), None)
    commit = evidence.get("commit") or (task.commit if task else None)
    branch = evidence.get("branch") or (task.branch if task else None)
    base_sha = plan.base_sha if plan else (task.base_sha if task else None)
    diff_stat = ""
    if commit and base_sha and commit != base_sha:
        try:
            diff_stat = git.diff_stat_between(project.root, base_sha, str(commit)).rstrip()
        except LoopctlError as exc:
            diff_stat = f"(unavailable: {exc})"
    attempts = tuple(
        {
            "number": a.number,
            "verdict": a.verdict or "interrupted",
            "reason": a.reason,
            "fingerprint": a.fingerprint,
            "tokens": a.tokens,
        }
        for a in (task.attempts if task else [])
    )
    last = task.attempts[-1] if task and task.attempts else None
    check_output = str(evidence.get("check_tail") or (last.output_tail if last else "") or "")
    fingerprint = evidence.get("fingerprint") or next(
        (a.fingerprint for a in reversed(task.attempts if task else []) if a.fingerprint), None
    )
    action = None
    then: tuple[str, ...] = ()
    if item.kind == ItemKind.APPROVAL:
        step = plan.step(gate.step) if plan and gate else None
        action = plan.describe(step) if plan and step else evidence.get("describe")
        if evidence.get("replaces"):
            action = evidence.get("describe")  # it says the push is forced, and over what
        then = tuple(str(t) for t in evidence.get("then") or ())
    return ItemDetail(
        item=item,
        branch=branch,
        commit=commit,
        base_sha=base_sha,
        diff_stat=diff_stat,
        check_output=check_output,
        fingerprint=fingerprint,
        attempts=attempts,
        tokens=task.tokens if task else 0,
        cost_usd=task.cost_usd if task else 0.0,
        action=action,
        then=then,
        question=evidence.get("question"),
        task_status=task.status if task else None,
        history=tuple(_item_history(events, item.id)),
        patch=_patch_text(project, item, base_sha, commit) if with_patch else None,
        agent_output=last.agent_tail if last else "",
        agent_status=last.agent_status if last else None,
        attempt_dir=attempt_folder(item.run, item.task, last.number)
        if last and item.run and item.task
        else None,
        network_refused=tuple(task.refused) if task else (),
        claims=next((a.claims for a in reversed(task.attempts) if a.claims), None)
        if task
        else None,
    )


def _patch_text(project: Project, item: InboxItem, base: str | None, commit: Any) -> str | None:
    if item.kind != ItemKind.APPROVAL or not commit or not base or commit == base:
        return None
    try:
        data = git.patch_between(project.root, base, str(commit))
    except LoopctlError as exc:
        return f"(unavailable: {exc})\n"
    return data.decode("utf-8", "replace")


def patch(project: Project, ref: str) -> bytes:
    """An approval's patch (the commit it is bound to against its base), exact bytes for
    `git apply`; InboxError for any other item."""
    detail = show(project, ref)
    item = detail.item
    if item.kind != ItemKind.APPROVAL:
        raise InboxError(f"inbox item {item.id} is {item.kind}, not an approval: it has no diff")
    if not detail.commit or not detail.base_sha:
        raise InboxError(
            f"approval {item.id} is bound to no commit (an agent asked to run a command): no diff"
        )
    if detail.commit == detail.base_sha:
        return b""
    return git.patch_between(project.root, detail.base_sha, str(detail.commit))


def _task_view(events: Sequence[Event], item: InboxItem) -> history.TaskView | None:
    if not item.run or not item.task:
        return None
    run = history.fold(events).get(item.run)
    return run.tasks.get(item.task) if run else None


def _item_history(events: Sequence[Event], item_id: str) -> list[str]:
    lines = []
    for event in events:
        data = event.data
        if data.get("id") != item_id and data.get("item") != item_id:
            continue
        when = event.ts[:19]
        if event.type == EventType.INBOX_OPENED:
            lines.append(f"{when} opened")
        elif event.type == EventType.APPROVED:
            note = f": {data.get('note')}" if data.get("note") else ""
            lines.append(f"{when} approved at {str(data.get('sha'))[:12]}{note}")
        elif event.type == EventType.APPROVAL_REFUSED:
            lines.append(f"{when} approval refused: {data.get('reason')}")
        elif event.type == EventType.INBOX_CLOSED:
            why = data.get("reason") or data.get("outcome")
            lines.append(f"{when} closed: {data.get('resolution')}" + (f" ({why})" if why else ""))
        elif event.type == EventType.TASK_REQUEUED:
            lines.append(f"{when} task re-queued ({data.get('reason')})")
        elif event.type in (EventType.NOTIFIED, EventType.NOTIFY_FAILED):
            state = "notified" if event.type == EventType.NOTIFIED else "notification failed"
            lines.append(f"{when} {state} via {data.get('channel')}")
    return lines


# --- approve / reject ---------------------------------------------------------------------------


def _is_gate(item: InboxItem) -> bool:
    """Whether an approval item is a delivery gate (others come from agents asking to run)."""
    return isinstance(item.evidence.get("step"), int)


def _item_event(rec: Recorder, item: InboxItem, type_: str, /, **data: Any) -> None:
    """An event about `item`, filed under the run, loop and task the item belongs to."""
    rec.emit(type_, run=item.run, loop=item.loop, task=item.task, **data)


def _decide_plain(
    rec: Recorder, item: InboxItem, resolution: str, note: str | None
) -> ActionResult:
    """Record a decision on an approval that gates no delivery, e.g. a command an agent asked
    to run: the agent's next turn (the loop's next run) finds it in the log."""
    if resolution == "approved":
        _item_event(
            rec,
            item,
            EventType.APPROVED,
            id=item.id,
            sha=None,
            action=item.evidence.get("action"),
            note=note,
        )
    _item_event(
        rec,
        item,
        EventType.INBOX_CLOSED,
        id=item.id,
        resolution=resolution,
        reason=note,
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
    project: Project, ref: str, note: str | None = None, *, checkpoint: Checkpoint | None = None
) -> ActionResult:
    """Approve an item and deliver what it covers (here, or in the loop's running tick)."""
    rec = Recorder(project)
    paths = project.paths
    with inbox_lock(paths.locks_dir):
        events = rec.log.read()
        item = find_item(items(events), ref)
        if item.kind != ItemKind.APPROVAL:
            hints = {
                ItemKind.ESCALATION.value: "answer it with `loopctl inbox reply`",
                ItemKind.FAILED.value: "run it again with `loopctl inbox retry`",
            }
            hint = hints.get(item.kind, "dismiss it")
            raise InboxError(f"{item.id} is a {item.kind} item, not an approval: {hint}")
        if not _is_gate(item):
            return _decide_plain(rec, item, "approved", note)
        from loopctl.checks.integrity import held_by

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
                EventType.APPROVAL_REFUSED,
                id=item.id,
                reason=problem,
            )
            rec.refresh_projections()
            return ActionResult(item.id, "approve", f"approval refused: {problem}", ok=False)
        already = item.approved is not None
        if not already:
            # Invariant 3: this event, bound to the sha the item showed, is what lets it run.
            _item_event(
                rec,
                item,
                EventType.APPROVED,
                id=item.id,
                sha=gate.sha,
                step=gate.step,
                action=item.evidence.get("action"),
                note=note,
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


def _delivery_message(item: InboxItem, result: DeliveryResult) -> str:
    action = item.evidence.get("action", "the action")
    status = str(result.status)
    if status == "done":
        return f"approved {item.id}: `{action}` and the rest of the delivery ran"
    if status == TaskStatus.AWAITING_APPROVAL and result.item and result.item != item.id:
        return f"approved {item.id}: `{action}` ran; {result.reason}"
    return f"approved {item.id}, but the delivery is {status}: {result.reason}"


def reject(project: Project, ref: str, reason: str | None = None) -> ActionResult:
    """Close an approval without delivering; the task ends `rejected`."""
    rec = Recorder(project)
    paths = project.paths
    with inbox_lock(paths.locks_dir):
        events = rec.log.read()
        item = find_item(items(events), ref)
        if item.kind != ItemKind.APPROVAL:
            raise InboxError(
                f"{item.id} is a {item.kind} item; only approvals are rejected"
                f" (use `loopctl inbox dismiss {item.id}`)"
            )
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
                EventType.INBOX_CLOSED,
                id=item.id,
                resolution="rejected",
                reason=why,
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
        if item.kind == ItemKind.APPROVAL:
            raise InboxError(
                f"{item.id} is an approval: approve it, or reject it with"
                f" `loopctl inbox reject {item.id}`"
            )
        _item_event(
            rec,
            item,
            EventType.INBOX_CLOSED,
            id=item.id,
            resolution="dismissed",
        )
        if item.kind == ItemKind.ESCALATION and item.run and item.task:
            _item_event(
                rec,
                item,
                EventType.TASK_FINISHED,
                status="stopped",
                reason="the question was dismissed without an answer",
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
        if not item.is_open and not decided_ask:
            find_item(listed, ref)  # raises: the item is already closed
        wanted = (
            (ItemKind.ESCALATION,) if action == "reply" else (ItemKind.FAILED, ItemKind.UNHANDLED)
        )
        if item.kind not in wanted and not decided_ask:
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
                EventType.TASK_REQUEUED,
                item=item.id,
                reason=action,
                raw_id=spec.get("raw_id", item.task),
                prompt=spec.get("prompt", ""),
                title=spec.get("title", ""),
                base_ref=spec.get("base_ref"),
                fields=spec.get("fields") or {},
                question=item.evidence.get("question") if answer is not None else None,
                answer=answer,
            )
        if item.is_open:
            _item_event(
                rec,
                item,
                EventType.INBOX_CLOSED,
                id=item.id,
                resolution="replied" if action == "reply" else "retried",
            )
        rec.refresh_projections()
    return _run_again(project, item, action, allowance)


_DECIDED = ("approved", "rejected")


def _is_ask(item: InboxItem) -> bool:
    """An approval of a command an agent asked to run (not a delivery gate)."""
    return item.kind == ItemKind.APPROVAL and not _is_gate(item) and "argv" in item.evidence


def _allowance(
    rec: Recorder, project: Project, events: Sequence[Event], item: InboxItem
) -> Allowance:
    """The daily fuse, for a task run again by hand: counted like any tick (loopctl.fuse)."""
    from loopctl.journal.fuse import retry_allowance
    from loopctl.scheduling.timing import zone

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
    from loopctl.journal.events import EventLog

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
    verb = "answered" if action == "reply" else "retried"
    return ActionResult(
        item.id,
        action,
        f"{verb} {item.id}: run {outcome.run} {outcome.status}"
        + (f" ({outcome.reason})" if outcome.reason else ""),
        ok=outcome.ok,
        run=outcome,
    )


def _goal_options(events: Sequence[Event], item: InboxItem) -> Any:
    from loopctl.engine.runner import GoalOptions

    started = next(
        (e for e in events if e.type == EventType.TICK_STARTED and e.run == item.run), None
    )
    data = started.data if started else {}
    condition = data.get("condition")
    if not isinstance(condition, str) or not condition:
        raise InboxError(f"cannot tell which goal {item.id} belongs to; run `loopctl goal` again")
    check = data.get("check")
    return GoalOptions(
        condition=condition,
        check=tuple(str(a) for a in check) if isinstance(check, list) and check else None,
        agent=data.get("maker"),
        in_place=data.get("in_place") is True,
    )
