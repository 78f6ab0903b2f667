"""The workflow: one tick of a loop, its attempt run by whichever worker takes the activity.

Temporal replays this code in a sandbox that refuses modules which start programs: it imports
only the SDK's workflow API and the plain shapes, and names the activity by string.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from loopctl.temporal.shapes import RUN_ATTEMPT, AttemptRequest, AttemptResult


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
        result: AttemptResult = await workflow.execute_activity(
            RUN_ATTEMPT,
            attempt,
            result_type=AttemptResult,
            # The engine's own budgets end a tick; this only bounds a worker that hangs.
            start_to_close_timeout=timedelta(hours=12),
            # A worker that dies mid-attempt stops heartbeating: another one takes it over.
            heartbeat_timeout=timedelta(seconds=HEARTBEAT_TIMEOUT_S),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(seconds=30),
            ),
        )
        return result


# How long a silent worker keeps its attempt; workers beat several times within it.
HEARTBEAT_TIMEOUT_S = 10.0
