"""One attempt, claimed in the journal: a retried activity never runs a second agent for it.

Temporal retries an activity whose worker stopped heartbeating, and may deliver one twice. The
attempt id (the workflow's id) is claimed under a lock the kernel frees when its holder dies:
- a live claim (another activity of this machine is working it) refuses the newcomer, which
  Temporal retries later;
- a finished attempt is answered from its `note` events, without an agent and without counting
  its spend again;
- a claim whose holder died is taken over, and the engine resumes the interrupted tick from the
  log as after any crash.
The claim and its end are `note` events (`what` names them), so the log format is unchanged.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from loopctl.definitions import Loop
from loopctl.engine.runner import Engine, RunOutcome
from loopctl.engine.setup import resumable
from loopctl.errors import LockHeld, LoopctlError
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import ItemKind, items
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import Note, TickFinished
from loopctl.journal.statuses import Outcome, RunStatus
from loopctl.lock import RunnerLock
from loopctl.temporal.shapes import ApprovalWait, AttemptRequest, AttemptResult

CLAIMED = "temporal_attempt_claimed"
FINISHED = "temporal_attempt_finished"
# A run this machine left interrupted, closed because its attempt went on elsewhere.
ELSEWHERE = "temporal_attempt_elsewhere"
# loopctl's own locks start with "_", which no loop name can.
_LOCK_PREFIX = "_temporal-"


class AttemptBusy(LoopctlError):
    """Another live process of this machine is working the attempt right now."""


def finished(events: Sequence[Event], attempt_id: str) -> AttemptResult | None:
    """The recorded end of attempt `attempt_id`, if it has one."""
    for event in reversed(events):
        data = event.data
        ours = data.get("what") == FINISHED and data.get("attempt") == attempt_id
        if event.type == EventType.NOTE and ours:
            return AttemptResult(
                attempt_id=attempt_id,
                run=str(data.get("run_id", "")),
                status=str(data.get("status", "")),
                reason=str(data.get("reason", "")),
                tokens=int(data.get("tokens", 0)),
                cost_usd=float(data.get("cost_usd", 0.0)),
                worker=str(data.get("worker", "")),
                outcome=str(data.get("outcome", "")),
            )
    return None


def claims(events: Sequence[Event], attempt_id: str) -> int:
    """How many times attempt `attempt_id` has been claimed."""
    return sum(
        1
        for event in events
        if event.type == EventType.NOTE
        and event.data.get("what") == CLAIMED
        and event.data.get("attempt") == attempt_id
    )


def waiting_gates(events: Sequence[Event], run: str, queue: str) -> list[ApprovalWait]:
    """The open delivery gates of run `run`, each bound to the commit its item shows."""
    return [
        ApprovalWait(item=i.id, sha=str(i.evidence.get("commit")), loop=i.loop or "", queue=queue)
        for i in items(events)
        if run
        and i.run == run
        and i.is_open
        and i.kind == ItemKind.APPROVAL
        and isinstance(i.evidence.get("step"), int)
    ]


def run_claimed(
    rec: Recorder,
    loop: Loop,
    request: AttemptRequest,
    worker: str,
    *,
    beat: Callable[[], None],
    cancelled: Callable[[], bool],
    beat_every: float,
    queue: str = "",
) -> AttemptResult:
    """Claim `request`'s attempt and run one tick of `loop` for it, calling `beat` meanwhile.
    `queue`: this worker's own task queue, where a delivery the tick left at a gate resumes."""
    lock = RunnerLock(rec.paths.locks_dir, _LOCK_PREFIX + request.attempt_id)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise AttemptBusy(f"attempt {request.attempt_id} is being worked: {exc}") from None
    try:
        events = rec.log.read()
        done = finished(events, request.attempt_id)
        if done is not None:
            return replace(done, replayed=True, waiting=waiting_gates(events, done.run, queue))
        earlier = claims(events, request.attempt_id)
        # The attempt id is a string, not the note's attempt number: it goes in `extra`.
        claim = {
            "attempt": request.attempt_id,
            "worker": worker,
            "pid": os.getpid(),
            "claim": earlier + 1,
        }
        rec.record(Note(what=CLAIMED, extra=claim), run=None, loop=loop.name)
        close_taken_over(rec, loop, request.attempt_id)
        outcome = _tick(rec, loop, request, worker, beat, cancelled, beat_every)
        result = AttemptResult(
            attempt_id=request.attempt_id,
            run=outcome.run,
            status=str(outcome.status),
            reason=outcome.reason,
            tokens=outcome.tokens,
            cost_usd=outcome.cost_usd,
            worker=worker,
            waiting=waiting_gates(rec.log.read(), outcome.run, queue),
            outcome=outcome.outcome.value,
        )
        end = {
            "attempt": request.attempt_id,
            "run_id": outcome.run,
            "status": result.status,
            "reason": result.reason,  # in `extra` too: always written, even when empty
            "tokens": result.tokens,
            "cost_usd": result.cost_usd,
            "worker": worker,
            "outcome": result.outcome,
        }
        rec.record(Note(what=FINISHED, extra=end), run=outcome.run, loop=loop.name)
        return result
    finally:
        lock.release()


def close_taken_over(rec: Recorder, loop: Loop, attempt_id: str) -> str | None:
    """Close `loop`'s interrupted run when it belongs to another attempt than `attempt_id`; the
    run closed, or None.

    A worker killed mid-attempt leaves its run interrupted in its own journal, and Temporal
    gives the attempt to another worker, whose clone finishes it. Resumed here by the next
    attempt, that run would spend on an agent for work done elsewhere: it is finished as
    stopped instead. Only a retry of the same attempt resumes it (this worker took it back).
    An attempt this machine is still working (its claim's lock is held) is left alone.
    """
    previous = resumable(rec, loop, None)
    if previous is None:
        return None
    trigger = previous.data.get("trigger")
    theirs = str(trigger.get("attempt") or "") if isinstance(trigger, dict) else ""
    if not theirs or theirs == attempt_id:
        return None
    try:
        with RunnerLock(rec.paths.locks_dir, _LOCK_PREFIX + theirs):
            pass
    except LockHeld:
        return None  # a live claim of this machine: the engine's own lock decides
    with RunnerLock(rec.paths.locks_dir, loop.name):
        again = resumable(rec, loop, None)
        if again is None or again.run != previous.run:
            return None
        done = finished(rec.log.read(), theirs)
        where = "here" if done is not None else "elsewhere (or given up)"
        reason = (
            f"closed unfinished: attempt {theirs} was interrupted on this worker and went on"
            f" {where}; attempt {attempt_id} starts a new run"
        )
        # This worker died with the run (kill -9, a lost machine) and the attempt was recovered.
        ended = TickFinished(
            status=RunStatus.STOPPED, reason=reason, outcome=Outcome.CRASHED_RECOVERED
        )
        rec.record(ended, run=previous.run, loop=loop.name)
        extra = {"attempt": theirs, "closed_by": attempt_id}
        rec.record(Note(what=ELSEWHERE, extra=extra), run=previous.run, loop=loop.name)
        rec.refresh_projections()
    return previous.run


def _tick(
    rec: Recorder,
    loop: Loop,
    request: AttemptRequest,
    worker: str,
    beat: Callable[[], None],
    cancelled: Callable[[], bool],
    beat_every: float,
) -> RunOutcome:
    """The engine's tick on a thread of its own, so that this one keeps heartbeating."""
    trigger: dict[str, Any] = {"fired": request.fired, "by": "temporal", "worker": worker}
    if request.due:
        trigger["due"] = request.due
    trigger["attempt"] = request.attempt_id
    stop = threading.Event()
    ended = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["outcome"] = Engine(rec).run_loop_once(loop, trigger=trigger, stop=stop)
        except BaseException as exc:  # handed to the heartbeating thread, which raises it
            box["error"] = exc
        finally:
            ended.set()

    # Not a daemon: a worker that exits waits for the tick to stop and be recorded.
    thread = threading.Thread(target=work, name=f"attempt-{request.attempt_id}")
    thread.start()
    try:
        while not ended.wait(beat_every):
            beat()
            if cancelled():
                stop.set()  # the engine stops the tick as Ctrl-C would, and records it
    except BaseException:
        # The SDK cancels a threaded activity by raising in this thread (a worker shutting
        # down, a workflow cancelled): stop the tick and let the engine record it before the
        # claim is given up, or the next claimant would find an agent still running.
        stop.set()
        thread.join()
        raise
    thread.join()
    if "error" in box:
        raise box["error"]
    outcome: RunOutcome = box["outcome"]
    return outcome
