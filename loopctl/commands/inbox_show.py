"""What a person reads of an inbox item: find it by id, show its evidence, and its patch.

Reading only: nothing here writes an event or takes a lock. The decisions (approve, reject,
retry, dismiss, reply) are in `commands/inbox.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loopctl import git
from loopctl.delivery.gates import GateView, Plan, delivery_view
from loopctl.errors import LoopctlError
from loopctl.journal import history
from loopctl.journal.claimed import ClaimedView
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.inbox import InboxItem, ItemKind, items
from loopctl.journal.proposals import proposals
from loopctl.journal.schema import (
    ApprovalRefused,
    Approved,
    InboxClosed,
    InboxOpened,
    Notified,
    NotifyFailed,
    TaskRequeued,
    read,
)
from loopctl.nofollow import read_file
from loopctl.paths import attempt_folder

if TYPE_CHECKING:
    from loopctl.definitions import Project


class InboxError(LoopctlError):
    """An inbox action that cannot be done: unknown, ambiguous or closed id, wrong kind (exit 1)."""


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


# --- show ---------------------------------------------------------------------------------------


def show(project: Project, ref: str, *, with_patch: bool = False) -> ItemDetail:
    """The evidence of an item, open or closed; `with_patch`: an approval's whole patch too."""
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
    # Work held back for being out of its scope is no commit yet: its checked tree is the diff.
    held = evidence.get("tree") if isinstance(evidence.get("drift"), list) else None
    shown = held or commit
    diff_stat = ""
    if shown and base_sha and shown != base_sha:
        try:
            diff_stat = git.diff_stat_between(project.root, base_sha, str(shown)).rstrip()
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
        patch=_patch_text(project, item, base_sha, shown) if with_patch else None,
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
    if item.kind == ItemKind.PROPOSAL:
        return _proposal_patch(project, item)
    if item.kind != ItemKind.APPROVAL:
        raise InboxError(f"inbox item {item.id} is {item.kind}, not an approval: it has no diff")
    held = item.evidence.get("tree") if isinstance(item.evidence.get("drift"), list) else None
    if held and detail.base_sha:  # out-of-scope work held back: its checked tree, uncommitted
        return git.patch_between(project.root, detail.base_sha, str(held))
    if not detail.commit or not detail.base_sha:
        raise InboxError(
            f"approval {item.id} is bound to no commit (an agent asked to run a command): no diff"
        )
    if detail.commit == detail.base_sha:
        return b""
    return git.patch_between(project.root, detail.base_sha, str(detail.commit))


def _proposal_patch(project: Project, item: InboxItem) -> bytes:
    """A proposal's stored patch, as recorded (`inbox approve` checks its sha256 again)."""
    made = proposals(EventLog(project.paths.events_file).read()).get(item.id)
    if made is None or not made.made.patch:
        raise InboxError(f"proposal {item.id} has no stored patch")
    try:
        return read_file(project.root / made.made.patch, within=project.root)
    except OSError as exc:
        raise InboxError(f"proposal {item.id}: cannot read {made.made.patch} ({exc})") from None


def _task_view(events: Sequence[Event], item: InboxItem) -> history.TaskView | None:
    if not item.run or not item.task:
        return None
    run = history.fold(events).get(item.run)
    return run.tasks.get(item.task) if run else None


def _item_history(events: Sequence[Event], item_id: str) -> list[str]:
    lines = []
    for event in events:
        line = _history_line(event, item_id)
        if line is not None:
            lines.append(f"{event.ts[:19]} {line}")
    return lines


def _history_line(event: Event, item_id: str) -> str | None:
    """What `event` did to item `item_id`, or None when it is about something else."""
    t = event.type
    if t == EventType.INBOX_OPENED:
        return "opened" if read(InboxOpened, event).id == item_id else None
    if t == EventType.APPROVED:
        yes = read(Approved, event)
        note = f": {yes.note}" if yes.note else ""
        return f"approved at {str(yes.sha)[:12]}{note}" if yes.id == item_id else None
    if t == EventType.APPROVAL_REFUSED:
        no = read(ApprovalRefused, event)
        return f"approval refused: {no.reason}" if no.id == item_id else None
    if t == EventType.INBOX_CLOSED:
        closed = read(InboxClosed, event)
        why = closed.reason or closed.outcome
        said = f"closed: {closed.resolution}" + (f" ({why})" if why else "")
        return said if closed.id == item_id else None
    if t == EventType.TASK_REQUEUED:
        again = read(TaskRequeued, event)
        return f"task re-queued ({again.reason})" if again.item == item_id else None
    if t == EventType.NOTIFIED:
        sent = read(Notified, event)
        return f"notified via {sent.channel}" if sent.item == item_id else None
    if t == EventType.NOTIFY_FAILED:
        unsent = read(NotifyFailed, event)
        return f"notification failed via {unsent.channel}" if unsent.item == item_id else None
    return None
