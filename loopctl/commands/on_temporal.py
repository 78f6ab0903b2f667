"""Loops on Temporal, as this clone knows them: which loops `up --engine temporal` scheduled
where, pausing and resuming their schedules (`down`, `stop`, `up`), and approvals as signals.

An approval of a delivery a worker left at a gate is a signal to that gate's AwaitApproval
workflow, carrying the commit the item showed here; the worker holding the commit checks it
against its journal (`release`): another sha is refused and recorded, the right one delivers,
once. The SDK (the `temporal` extra) is imported only when a loop is on Temporal.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from loopctl import git
from loopctl.atomicfile import write_atomic
from loopctl.commands.inbox import ActionResult, approve, reject
from loopctl.commands.inbox_show import InboxError, find_item
from loopctl.commands.state_sync import push
from loopctl.commands.worker import need_the_extra
from loopctl.errors import LoopctlError
from loopctl.journal.inbox import InboxItem, ItemKind, items
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import ApprovalRefused
from loopctl.lock import inbox_lock

if TYPE_CHECKING:
    from loopctl.definitions import Project
    from loopctl.paths import ProjectPaths
    from loopctl.temporal.shapes import ApprovalAnswer, ApprovalRelease

# How long `approve` waits for the worker's answer before saying the signal is on its way.
ANSWER_WITHIN_S = 300.0
_ANSWER_POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class OnTemporal:
    """What `up --engine temporal` last set up from this clone (`.loop/log/temporal.json`)."""

    server: str
    namespace: str
    task_queue: str
    loops: list[str] = field(default_factory=list)
    paused: bool = False


def record_path(paths: ProjectPaths) -> Any:
    # In log/: this clone's runtime records, never committed (.loop/.gitignore).
    return paths.log_dir / "temporal.json"


def read_record(paths: ProjectPaths) -> OnTemporal | None:
    """The loops this clone scheduled on Temporal, if any."""
    try:
        data = json.loads(record_path(paths).read_text(encoding="utf-8"))
        return OnTemporal(
            server=str(data["server"]),
            namespace=str(data.get("namespace") or "default"),
            task_queue=str(data.get("task_queue") or "loopctl"),
            loops=[str(name) for name in data.get("loops") or ()],
            paused=data.get("paused") is True,
        )
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise LoopctlError(
            f"{record_path(paths)} is not readable ({exc}); run `loopctl up --engine temporal`"
            " again to rewrite it"
        ) from None


def write_record(paths: ProjectPaths, record: OnTemporal) -> None:
    paths.log_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(record_path(paths), json.dumps(asdict(record), indent=2) + "\n")


# --- schedules: pause (down, stop) and unpause (up) ---------------------------------------------


def set_paused(
    paths: ProjectPaths, record: OnTemporal, loops: Sequence[str], *, paused: bool, note: str
) -> list[str]:
    """Pause (or unpause) the schedules of `loops`; the schedule ids, for the CLI to print.
    A paused schedule keeps its history and policies: `up --engine temporal` resumes it."""
    need_the_extra("loopctl down")
    # lazy: loopctl.temporal imports the `temporal` extra, checked for just above
    from loopctl.temporal.schedules import schedule_id
    from loopctl.temporal.worker import connect

    async def main() -> list[str]:
        client = await connect(record.server, record.namespace)
        done = []
        for name in loops:
            handle = client.get_schedule_handle(schedule_id(name))
            await (handle.pause(note=note) if paused else handle.unpause(note=note))
            done.append(handle.id)
        return done

    done = asyncio.run(main())
    if set(loops) >= set(record.loops):
        write_record(paths, OnTemporal(**{**asdict(record), "paused": paused}))
    return done


# --- approvals as signals: the approver's side ---------------------------------------------------


def signalled_approval(project: Project, ref: str, note: str | None) -> ActionResult | None:
    """Approve `ref` by signal when its loop is on Temporal; None when it runs here."""
    return signalled_decision(project, ref, note, reject=False)


def signalled_decision(
    project: Project, ref: str, note: str | None, *, reject: bool
) -> ActionResult | None:
    """Approve (or reject) `ref` by signal when its loop is on Temporal; None when it runs
    here. A rejection closes the gate's workflow too: the worker closes the item in its
    journal (the task ends rejected) and nothing waits any more."""
    record = read_record(project.paths)
    if record is None:
        return None
    try:
        item = find_item(items(Recorder(project).log.read()), ref)
    except InboxError as exc:
        raise InboxError(f"{exc}; a worker's items come here with `loopctl state pull`") from None
    gate = item.kind == ItemKind.APPROVAL and isinstance(item.evidence.get("step"), int)
    if not gate or item.loop not in record.loops:
        return None
    return _signal(record, item, note or "", reject=reject)


def _signal(record: OnTemporal, item: InboxItem, note: str, *, reject: bool) -> ActionResult:
    action = "reject" if reject else "approve"
    need_the_extra(f"loopctl inbox {action}")
    # lazy: loopctl.temporal imports the `temporal` extra, checked for just above
    from temporalio.service import RPCError, RPCStatusCode

    from loopctl.temporal.shapes import (
        ANSWER_QUERY,
        APPROVE_SIGNAL,
        REJECT_SIGNAL,
        ApprovalAnswer,
        ApprovalSignal,
        approval_workflow_id,
    )
    from loopctl.temporal.worker import connect

    sha = str(item.evidence.get("commit"))
    nonce = uuid.uuid4().hex
    signal = ApprovalSignal(item.id, sha, nonce, note, socket.gethostname(), reject=reject)

    async def main() -> ApprovalAnswer | None:
        client = await connect(record.server, record.namespace)
        handle = client.get_workflow_handle(approval_workflow_id(item.id))
        try:
            await handle.signal(REJECT_SIGNAL if reject else APPROVE_SIGNAL, signal)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return ApprovalAnswer(nonce, "closed", "", ok=False)
            raise LoopctlError(f"cannot signal {handle.id} on {record.server}: {exc}") from None
        deadline = time.monotonic() + ANSWER_WITHIN_S
        while time.monotonic() < deadline:
            answer: ApprovalAnswer = await handle.query(
                ANSWER_QUERY, nonce, result_type=ApprovalAnswer
            )
            if answer.outcome != "pending":
                return answer
            await asyncio.sleep(_ANSWER_POLL_S)  # a polling interval: the answer decides
        return None

    answer = asyncio.run(main())
    if answer is None:
        return ActionResult(
            item.id,
            action,
            f"signalled {'rejection' if reject else 'approval'} of {item.id} ({sha[:12]}) on"
            f" {record.server}; the worker that holds the commit acts on it when it takes the"
            " signal up",
            queued=True,
            signalled=True,
        )
    if answer.outcome == "closed" and not answer.message:
        answer_text = (
            f"nothing waits for {item.id} on {record.server}: it was already released (or"
            " rejected); `loopctl state pull` brings its outcome here"
        )
    else:
        answer_text = answer.message
    return ActionResult(item.id, action, answer_text, ok=answer.ok, signalled=True)


# --- a worker's records go home ----------------------------------------------------------------


def share_state(project: Project, remote: str | None = "origin") -> None:
    """Push this clone's journal to `remote`'s state branch (after each attempt and release),
    so `loopctl state pull` brings it home; nothing when the clone has no such remote. A push
    that fails is said in the worker's output and retried after the next attempt."""
    if remote is None or git.remote_url(project.root, remote) is None:
        return
    try:
        push(project.paths, remote)
    except LoopctlError as exc:
        print(f"loopctl worker: state not pushed to {remote} ({exc})", file=sys.stderr, flush=True)


# --- approvals as signals: the worker's side -----------------------------------------------------


def release(project: Project, request: ApprovalRelease) -> ApprovalAnswer:
    """Check a signal against this clone's journal and release the gate it approves."""
    # lazy: loopctl.temporal is imported only where a loop runs on Temporal (a worker here)
    from loopctl.temporal.claims import waiting_gates
    from loopctl.temporal.shapes import ApprovalAnswer

    wait, signal = request.wait, request.signal
    rec = Recorder(project)
    with inbox_lock(project.paths.locks_dir):
        item = next((i for i in items(rec.log.read()) if i.id == wait.item), None)
        if item is None or not item.is_open:
            how = "not in this worker's journal" if item is None else f"{item.resolution}"
            return ApprovalAnswer(signal.nonce, "closed", f"{wait.item} is already {how}", False)
        shown = str(item.evidence.get("commit"))
        # A rejection delivers nothing: it closes the item whichever commit its sender saw.
        if not signal.reject and signal.sha != shown:
            # Invariant 9: the approval covers the commit its approver saw, nothing else.
            reason = (
                f"the approval signal was for {signal.sha[:12]}, but {item.id} delivers"
                f" {shown[:12]}"
            )
            refused = ApprovalRefused(id=item.id, reason=reason)
            rec.record(refused, run=item.run, loop=item.loop, task=item.task)
            rec.refresh_projections()
            return ApprovalAnswer(signal.nonce, "refused", f"approval refused: {reason}", False)
    if signal.reject:
        try:
            rejected = reject(project, item.id, signal.note or None, local=True)
        except InboxError as exc:  # too late: its delivery started
            return ApprovalAnswer(signal.nonce, "refused", str(exc), False)
        return ApprovalAnswer(signal.nonce, "rejected", rejected.message, True)
    try:
        result = approve(project, item.id, signal.note or None, local=True)
    except InboxError as exc:
        # Not now (a held delivery to look at first): the gate waits for the next signal.
        return ApprovalAnswer(signal.nonce, "refused", str(exc), False)
    if result.queued:
        # Recorded; the loop's tick running in this clone delivers it when it ends.
        return ApprovalAnswer(signal.nonce, "released", result.message, True)
    if result.delivery is None:
        # Refused and recorded by approve itself (the branch moved since): the gate waits on.
        return ApprovalAnswer(signal.nonce, "refused", result.message, False)
    waiting = waiting_gates(rec.log.read(), item.run or "", wait.queue)
    return ApprovalAnswer(signal.nonce, "released", result.message, result.ok, waiting)
