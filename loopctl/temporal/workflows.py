"""The workflows: one tick of a loop, and a gated delivery waiting for its approval.

Temporal replays this code in a sandbox that refuses modules which start programs: it imports
only the SDK's workflow API and the plain shapes, and names the activities by string.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from loopctl.temporal.shapes import (
        ADMIT,
        ANSWER_QUERY,
        APPROVAL_WORKFLOW,
        APPROVE_SIGNAL,
        REJECT_SIGNAL,
        RELEASE,
        RUN_ATTEMPT,
        SETTLE,
        Admitted,
        ApprovalAnswer,
        ApprovalRelease,
        ApprovalSignal,
        ApprovalWait,
        AttemptRequest,
        AttemptResult,
        Settlement,
        approval_workflow_id,
    )

_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
)


@workflow.defn(name="loopctl.LoopTick")
class LoopTick:
    """Runs one attempt of a loop; the workflow id is the attempt id the journal claims."""

    @workflow.run
    async def run(self, request: AttemptRequest) -> AttemptResult:
        """One tick, the attempt id the workflow's own unless the caller named one."""
        attempt = request
        if not request.attempt_id:
            attempt = AttemptRequest(
                loop=request.loop,
                attempt_id=workflow.info().workflow_id,
                fired=request.fired,
                due=request.due,
            )
        # The daily fuse, across every worker of the queue (temporal.ledger): asked first.
        admitted: Admitted = await workflow.execute_activity(
            ADMIT,
            attempt,
            result_type=Admitted,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=_RETRY,
        )
        if not admitted.ok:
            return AttemptResult(
                attempt.attempt_id, "", "skipped", admitted.reason, 0, 0.0, admitted.worker
            )
        try:
            result: AttemptResult = await workflow.execute_activity(
                RUN_ATTEMPT,
                attempt,
                result_type=AttemptResult,
                # The engine's own budgets end a tick; this only bounds a worker that hangs.
                start_to_close_timeout=timedelta(hours=12),
                # A worker that dies mid-attempt stops heartbeating: another one takes it over.
                heartbeat_timeout=timedelta(seconds=HEARTBEAT_TIMEOUT_S),
                retry_policy=_RETRY,
            )
        except ActivityError:
            # Nothing of it is known to have been spent: the ledger stops reserving for it.
            await _settle(admitted, Settlement(attempt.attempt_id, admitted.day, 0, 0.0))
            raise
        await _settle(
            admitted,
            Settlement(attempt.attempt_id, admitted.day, result.tokens, result.cost_usd),
        )
        # The tick ends here, so the loop's schedule goes on; each gate waits on its own.
        await _await_approvals(result.waiting)
        return result


@workflow.defn(name=APPROVAL_WORKFLOW)
class AwaitApproval:
    """A delivery stopped at a gate, until a signal carrying the item's commit releases it.

    Each signal is handed to the worker that holds the commit, which checks it against the
    journal: another sha is refused and recorded there, and the gate waits on; the right one
    runs the delivery on, once. The workflow then ends, so a repeated signal finds nothing to
    release (a signal still queued behind the release is answered, never acted on).
    """

    def __init__(self) -> None:
        self._signals: list[ApprovalSignal] = []
        self._answers: dict[str, ApprovalAnswer] = {}

    @workflow.signal(name=APPROVE_SIGNAL)
    def approve(self, signal: ApprovalSignal) -> None:
        self._signals.append(signal)

    @workflow.signal(name=REJECT_SIGNAL)
    def reject(self, signal: ApprovalSignal) -> None:
        """A rejection: the worker closes the item (the task ends rejected), then this ends."""
        self._signals.append(replace(signal, reject=True))

    @workflow.query(name=ANSWER_QUERY)
    def answer(self, nonce: str) -> ApprovalAnswer:
        """What signal `nonce` did so far (`pending` until its release activity answered)."""
        return self._answers.get(nonce) or ApprovalAnswer(nonce, "pending", "", ok=False)

    @workflow.run
    async def run(self, wait: ApprovalWait) -> ApprovalAnswer:
        while True:
            await workflow.wait_condition(lambda: bool(self._signals))
            signal = self._signals.pop(0)
            answer: ApprovalAnswer = await workflow.execute_activity(
                RELEASE,
                ApprovalRelease(wait=wait, signal=signal),
                result_type=ApprovalAnswer,
                # Where the commit is: the worker that made it (it may be down a while).
                task_queue=wait.queue,
                start_to_close_timeout=timedelta(hours=2),
                retry_policy=_RETRY,
            )
            self._answers[signal.nonce] = answer
            if answer.outcome == "refused":
                continue
            for repeat in self._signals:
                self._answers[repeat.nonce] = ApprovalAnswer(
                    repeat.nonce, "closed", f"{wait.item} was already {answer.outcome}", ok=False
                )
            await _await_approvals(answer.waiting)
            return answer


async def _settle(admitted: Admitted, spent: Settlement) -> None:
    """Count an admitted attempt's spend in the ledger (none to count without a daily cap)."""
    if admitted.day:
        await workflow.execute_activity(
            SETTLE, spent, start_to_close_timeout=timedelta(minutes=5), retry_policy=_RETRY
        )


async def _await_approvals(waits: Sequence[ApprovalWait]) -> None:
    """Start one AwaitApproval per gate; it outlives the workflow that started it."""
    for wait in waits:
        # A replayed attempt's gate may already wait.
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await workflow.start_child_workflow(
                AwaitApproval.run,
                wait,
                id=approval_workflow_id(wait.item),
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )


# How long a silent worker keeps its attempt; workers beat several times within it.
HEARTBEAT_TIMEOUT_S = 10.0
