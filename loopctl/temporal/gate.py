"""The activities around an attempt that keep the daily fuse across workers (temporal.ledger).

`admit` runs before the attempt, on whichever worker takes it: with a daily cap configured, it
asks the task queue's ledger (started on first use) whether the attempt may start, after
checking this clone's own journal as the local scheduler would (a `loopctl run` here spends
too). A refused tick is recorded here as the local fuse records one: `tick_skipped` and the
day's fuse item. `settle` counts the attempt's spend in the ledger once it ended.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError

from loopctl.definitions import load_project
from loopctl.journal import fuse
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import TickSkipped
from loopctl.scheduling.timing import zone
from loopctl.temporal.ledger import SpendLedger
from loopctl.temporal.shapes import (
    ADMIT,
    SETTLE,
    Admission,
    Admitted,
    AttemptRequest,
    LedgerState,
    Settlement,
    ledger_workflow_id,
)


@dataclass(frozen=True, slots=True)
class FuseGate:
    root: str
    worker: str
    task_queue: str  # the shared queue: it names the ledger, whose workflow runs there
    client: Client

    def _ledger(self) -> WithStartWorkflowOperation[SpendLedger, None]:
        return WithStartWorkflowOperation(
            SpendLedger.run,
            LedgerState(),
            id=ledger_workflow_id(self.task_queue),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )

    @activity.defn(name=ADMIT)
    async def admit(self, request: AttemptRequest) -> Admitted:
        """Whether `request`'s attempt may start today, under the caps of this clone's config."""
        project = load_project(Path(self.root))
        config = project.config
        if not fuse.configured(config):
            return Admitted(True, worker=self.worker)
        rec = Recorder(project)
        now = datetime.now(UTC)
        here = fuse.day_spend(await asyncio.to_thread(rec.log.read), now, zone(None))
        local = fuse.fuse_reason(config, here)
        if local is not None:
            answer = Admitted(False, here.day.isoformat(), local, here.tokens, here.usd)
        else:
            ask = Admission(
                request.attempt_id,
                here.day.isoformat(),
                config.max_tokens_per_day,
                config.max_usd_per_day,
            )
            answer = await self.client.execute_update_with_start_workflow(
                SpendLedger.admit, ask, start_workflow_operation=self._ledger()
            )
            if answer.wait:
                # Retried by Temporal (with backoff) until the running attempt has settled.
                raise ApplicationError(answer.reason, type="FuseWait")
        if not answer.ok:
            await asyncio.to_thread(self._record_refusal, rec, request, answer)
        return replace(answer, worker=self.worker)

    @activity.defn(name=SETTLE)
    async def settle(self, spent: Settlement) -> bool:
        """Count an attempt's spend in the ledger (once: a repeat counts nothing)."""
        counted: bool = await self.client.execute_update_with_start_workflow(
            SpendLedger.settle, spent, start_workflow_operation=self._ledger()
        )
        return counted

    def _record_refusal(self, rec: Recorder, request: AttemptRequest, answer: Admitted) -> None:
        trigger = {"by": "temporal", "worker": self.worker, "attempt": request.attempt_id}
        if request.due:
            trigger["due"] = request.due
        rec.record(TickSkipped(reason=answer.reason, trigger=trigger), run=None, loop=request.loop)
        spent = fuse.DaySpend(date.fromisoformat(answer.day), answer.tokens, answer.usd)
        fuse.open_fuse_item(rec, answer.reason, spent, request.loop)
