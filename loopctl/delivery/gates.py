"""Approval policy: what needs a human, what an approval covers, and where a delivery stands.

Pure functions over definitions and events (no git, no processes): the delivery module asks
them what to do next, the inbox commands ask them what to show (invariants 3 and 9).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from loopctl.backends.base import escalation, trailing_json
from loopctl.definitions.loops import DeliverSpec
from loopctl.delivery import steps as registry
from loopctl.delivery.steps import review as review_step
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import (
    ActionFinished,
    ActionStarted,
    ApprovalRefused,
    Approved,
    DeliveryPlanned,
    InboxClosed,
    InboxOpened,
    read,
)

PLAN_FORMAT = 1
# The step a change that looks like it tampers with the test run waits at (checks.sabotage):
# first in the plan, gated, and doing nothing once a human approved it.
REVIEW_STEP = review_step.NAME


@dataclass(frozen=True, slots=True)
class Step:
    """One delivery action after `commit`, as planned (and shown to the approver)."""

    index: int
    name: str
    argv: tuple[str, ...] | None = None  # custom actions only
    gated: bool = False

    @property
    def custom(self) -> bool:
        return self.argv is not None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "argv": self.argv, "gated": self.gated}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        argv = data.get("argv")
        return cls(
            index=int(data["index"]),
            name=str(data["name"]),
            argv=tuple(str(a) for a in argv) if isinstance(argv, list | tuple) else None,
            gated=data.get("gated") is True,
        )


@dataclass(frozen=True, slots=True)
class Plan:
    """What delivering one task means, recorded once so an approval runs exactly what it saw."""

    run: str
    loop: str
    task: str
    commit: str
    branch: str
    base_sha: str
    base_branch: str | None  # what `pr` targets and `merge` fast-forwards
    remote: str
    worktree: str | None
    keep: str
    steps: tuple[Step, ...]
    # A pull request task pushes to the PR's own head branch (only if it is still at base_sha).
    push_branch: str | None = None
    # The sabotage scan's findings (checks.sabotage.Finding.to_json) the review step shows.
    review: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"push_branch": self.push_branch} if self.push_branch else {}
        if self.review:
            extra["review"] = list(self.review)
        return {
            "format": PLAN_FORMAT,
            "commit": self.commit,
            "branch": self.branch,
            "base_sha": self.base_sha,
            "base_branch": self.base_branch,
            "remote": self.remote,
            "worktree": self.worktree,
            "keep": self.keep,
            "steps": [s.to_json() for s in self.steps],
            **extra,
        }

    @classmethod
    def from_event(cls, event: Event) -> Plan:
        data = read(DeliveryPlanned, event).plan
        return cls(
            run=event.run or "",
            loop=event.loop or "",
            task=event.task or "",
            commit=str(data["commit"]),
            branch=str(data["branch"]),
            base_sha=str(data["base_sha"]),
            base_branch=data.get("base_branch"),
            remote=str(data.get("remote") or "origin"),
            worktree=data.get("worktree"),
            keep=str(data.get("keep") or "on-failure"),
            steps=tuple(Step.from_json(s) for s in data.get("steps", [])),
            push_branch=data.get("push_branch") or None,
            review=tuple(r for r in data.get("review") or () if isinstance(r, dict)),
        )

    def step(self, index: int) -> Step | None:
        return next((s for s in self.steps if s.index == index), None)

    def has(self, name: str) -> bool:
        return any(s.name == name for s in self.steps)

    def describe(self, step: Step) -> str:
        """The exact action, as a person approving it should read it."""
        return registry.step_for(step).describe(self, step)


def gated_names(deliver: DeliverSpec) -> tuple[str, ...]:
    """The actions that must wait for a human."""
    return tuple(
        a.name
        for a in deliver.actions
        if registry.step_for(a).planned and a.name in deliver.approve
    )


def plan_steps(deliver: DeliverSpec, *, review: bool = False) -> tuple[Step, ...]:
    """The delivery steps after `commit`, in order, each marked gated or not; `review`: the
    change waits for a human first (step 0), as the sabotage scan flagged it."""
    gated = set(gated_names(deliver))
    steps = [a for a in deliver.actions if registry.step_for(a).planned]
    first = (Step(0, REVIEW_STEP, None, True),) if review else ()
    return first + tuple(
        Step(index, a.name, a.argv, a.name in gated) for index, a in enumerate(steps, start=1)
    )


def approval_problem(approved_sha: str | None, plan: Plan, branch_head: str | None) -> str | None:
    """Why an approval does not apply to this plan now (invariant 9), or None when it does."""
    if approved_sha != plan.commit:
        return (
            f"the approval was for {str(approved_sha)[:12]}, but the task delivers"
            f" {plan.commit[:12]}"
        )
    if branch_head is None:
        return f"branch {plan.branch} no longer exists; the approved work is gone from it"
    if branch_head != plan.commit:
        return (
            f"branch {plan.branch} moved from {plan.commit[:12]} to {branch_head[:12]} since the"
            " approval was shown; the approval does not cover the new work"
        )
    return None


# --- where a delivery stands, folded from the log -----------------------------------------------


@dataclass(slots=True)
class StepState:
    starts: int = 0
    finished: bool = False
    ok: bool | None = None  # None with finished: the outcome is unknown (interrupted)
    detail: str = ""
    url: str | None = None  # what the step made (a pull request)
    approval: str | None = None  # the gate item its (last) start was approved by


@dataclass(slots=True)
class GateView:
    """The approval item of one gated step."""

    item: str
    step: int
    sha: str
    opened_seq: int
    approved_sha: str | None = None
    approved_seq: int | None = None
    refused: str | None = None
    resolution: str | None = None  # set once the item is closed

    @property
    def is_open(self) -> bool:
        return self.resolution is None

    @property
    def approved(self) -> bool:
        return self.approved_sha is not None and self.refused is None


@dataclass(slots=True)
class DeliveryView:
    plan: Plan | None = None
    steps: dict[int, StepState] = field(default_factory=dict)
    gates: dict[int, GateView] = field(default_factory=dict)  # the latest item per step

    def state(self, index: int) -> StepState:
        return self.steps.setdefault(index, StepState())

    def next_step(self) -> Step | None:
        """The first step not finished yet."""
        if self.plan is None:
            return None
        for step in self.plan.steps:
            if not self.state(step.index).finished:
                return step
        return None


def delivery_view(events: Iterable[Event], run: str, task: str) -> DeliveryView:
    """Fold the delivery events of one task of one run."""
    view = DeliveryView()
    by_item: dict[str, GateView] = {}
    for event in events:
        if event.run != run or event.task != task:
            continue
        kind = event.type
        if kind == EventType.DELIVERY_PLANNED:
            view = DeliveryView(plan=Plan.from_event(event))
            by_item = {}
        elif kind == EventType.INBOX_OPENED:
            opened = read(InboxOpened, event)
            evidence = opened.evidence
            if opened.kind != "approval" or not isinstance(evidence.get("step"), int):
                continue
            gate = GateView(
                item=opened.id,
                step=int(evidence["step"]),
                sha=str(evidence.get("commit")),
                opened_seq=event.seq,
            )
            by_item[gate.item] = gate
            view.gates[gate.step] = gate
        elif kind == EventType.APPROVED:
            approved = read(Approved, event)
            known = by_item.get(approved.id)
            if known is not None and known.is_open:
                known.approved_sha = str(approved.sha)
                known.approved_seq = event.seq
                known.refused = None
        elif kind == EventType.APPROVAL_REFUSED:
            refused = read(ApprovalRefused, event)
            known = by_item.get(refused.id)
            if known is not None and known.is_open:
                known.approved_sha = None
                known.approved_seq = None
                known.refused = refused.reason
        elif kind == EventType.INBOX_CLOSED:
            closed = read(InboxClosed, event)
            known = by_item.get(closed.id)
            if known is not None and known.is_open:
                known.resolution = closed.resolution
        elif kind == EventType.ACTION_STARTED:
            started = read(ActionStarted, event)
            if started.step is not None:
                state = view.state(started.step)
                state.starts += 1
                state.approval = started.approval
        elif kind == EventType.ACTION_FINISHED:
            finished = read(ActionFinished, event)
            if finished.step is not None:
                state = view.state(finished.step)
                state.finished = True
                state.ok = finished.ok
                state.detail = finished.detail
                state.url = finished.url
    return view


def follow_up(view: DeliveryView, branch: str | None) -> str | None:
    """What a person does next with a delivered task: open its pull request, or merge its
    branch; None when nothing is left (it was merged) or there is no branch to merge."""
    plan = view.plan
    if plan is not None:
        done = {s.name: view.state(s.index) for s in plan.steps if view.state(s.index).ok}
        pr = done.get("pr")
        if pr is not None and pr.url:
            return pr.url
        if "merge" in done or (plan.push_branch and "push" in done):
            return None  # already in its base, or on the pull request it came from
    return f"git merge {branch}" if branch else None


# --- a delivered result, folded from the log ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivered:
    """A task's result that reached someone: pushed, opened as a pull request, or merged."""

    run: str
    seq: int  # the last delivering step's `action_finished`
    commit: str
    base_sha: str
    branch: str
    remote: str
    base_branch: str | None
    push_branch: str | None
    actions: tuple[str, ...]  # the delivering steps that succeeded, in order
    url: str | None = None  # the pull request's
    approvals: tuple[str, ...] = ()  # the inbox items a human approved those steps in

    def describe(self) -> str:
        """How the result was delivered, in a few words ("pushed to origin loop/x/y")."""
        said = [registry.step_for_name(name).delivered(self) for name in self.actions]
        approved = f", approved in inbox {', '.join(self.approvals)}" if self.approvals else ""
        return f"{', '.join(said)} in run {self.run}{approved}"


def deliveries(events: Iterable[Event], loop: str, task: str) -> list[Delivered]:
    """Every delivered result of one task of a loop, oldest first (one per run and commit)."""
    return _fold_deliveries(events, loop, task)[0]


def last_delivery(events: Iterable[Event], loop: str, task: str) -> Delivered | None:
    """The task's latest delivered result, unless a human asked for the task again since
    (`inbox retry` / `reply`): a delivered task is not worked again while its base stands."""
    found, requeued = _fold_deliveries(events, loop, task)
    if not found or requeued > found[-1].seq:
        return None
    return found[-1]


def _fold_deliveries(events: Iterable[Event], loop: str, task: str) -> tuple[list[Delivered], int]:
    plans: dict[str, Plan] = {}
    approvals: dict[tuple[str, int], str] = {}
    found: dict[tuple[str, str], Delivered] = {}
    requeued = -1
    for event in events:
        if event.loop != loop or event.task != task:
            continue
        if event.type == EventType.TASK_REQUEUED:
            requeued = event.seq
        if event.run is None:
            continue
        if event.type == EventType.DELIVERY_PLANNED:
            try:
                plans[event.run] = Plan.from_event(event)
            except (KeyError, TypeError, ValueError):
                continue  # a hand-edited plan: nothing it says can be trusted to have happened
        elif event.type == EventType.ACTION_STARTED:
            started = read(ActionStarted, event)
            approval = started.approval
            if started.step is not None and isinstance(approval, str) and approval:
                approvals[(event.run, started.step)] = approval
        elif event.type == EventType.ACTION_FINISHED and event.run in plans:
            finished = read(ActionFinished, event)
            if finished.ok is not True or not registry.delivers(finished.action):
                continue
            plan = plans[event.run]
            if finished.commit not in (None, plan.commit):
                continue
            key = (event.run, plan.commit)
            before = found.pop(key, None)
            url = finished.url if finished.action == "pr" else None
            step = finished.step
            approval = approvals.get((event.run, step)) if step is not None else None
            found[key] = Delivered(
                run=event.run,
                seq=event.seq,
                commit=plan.commit,
                base_sha=plan.base_sha,
                branch=plan.branch,
                remote=plan.remote,
                base_branch=plan.base_branch,
                push_branch=plan.push_branch,
                actions=(*(before.actions if before else ()), str(finished.action)),
                url=url or (before.url if before else None),
                approvals=(
                    *(before.approvals if before else ()),
                    *([approval] if approval else []),
                ),
            )
    return sorted(found.values(), key=lambda d: d.seq), requeued


def asked_question(escalate: object, text: str) -> str | None:
    """The question an agent's turn ended with, if any.

    The command backend reads `"escalate"` from the protocol's result line; any backend's final
    text may also end with the line `{"escalate": "…"}` the maker's prompt asks for.
    """
    if isinstance(escalate, str) and escalate.strip():
        return escalate.strip()
    payload = trailing_json(text or "")
    return escalation(payload) if payload is not None else None
