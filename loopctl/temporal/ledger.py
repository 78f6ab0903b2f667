"""The daily budget fuse across workers: a ledger workflow every worker of a task queue asks.

A worker's journal holds its own spend and only what other workers had pushed to the state branch
when it last pushed, so the fuse a worker computes alone would let two machines together spend up
to twice the day's cap (it can only ever refuse earlier, never admit more). The ledger is a
workflow (one per task queue): Temporal runs its updates one at a time and keeps its state in its
own history, so admission is a check and a reservation at once, whichever worker asks. An attempt
is admitted while the day's settled spend plus, for each attempt admitted and still running, the
mean cost of a settled attempt stays under the cap (`[budget] max_tokens_per_day` /
`max_usd_per_day`); its spend is settled once, by attempt id, when it ends. Before any attempt has
ended (no mean cost yet), a second attempt waits for the first instead of starting unreserved.
Imported by the workflow sandbox: nothing of loopctl's but the plain shapes.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from loopctl.temporal.shapes import (
        ADMIT,
        LEDGER_WORKFLOW,
        SETTLE,
        Admission,
        Admitted,
        DayTotal,
        LedgerState,
        Settlement,
    )

# Days kept: the mean cost of an attempt is taken over them; older ones are dropped.
KEEP_DAYS = 7


@workflow.defn(name=LEDGER_WORKFLOW)
class SpendLedger:
    @workflow.init
    def __init__(self, state: LedgerState) -> None:
        self._state = state

    @workflow.run
    async def run(self, state: LedgerState) -> None:
        # Runs for good; a long history is cut by continuing as new with the same state.
        await workflow.wait_condition(lambda: workflow.info().is_continue_as_new_suggested())
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(self._state)

    @workflow.update(name=ADMIT)
    def admit(self, ask: Admission) -> Admitted:
        state = self._state
        today = state.days.get(ask.day) or DayTotal()
        if ask.attempt_id in state.running:  # a retried ask: it was admitted
            return Admitted(True, ask.day, "", today.tokens, today.usd)
        if not any(day.attempts for day in state.days.values()) and ask.day in (
            state.running.values()
        ):
            # No attempt has ended yet, so the one running has no cost to reserve: this one
            # waits for it rather than start blind.
            why = "waiting for the day's first attempt to end: no attempt's cost is known yet"
            return Admitted(False, ask.day, why, today.tokens, today.usd, wait=True)
        reason = refusal(state, ask)
        if reason:
            return Admitted(False, ask.day, reason, today.tokens, today.usd)
        state.running[ask.attempt_id] = ask.day
        for old in sorted(state.days)[:-KEEP_DAYS]:
            del state.days[old]
        return Admitted(True, ask.day, "", today.tokens, today.usd)

    @workflow.update(name=SETTLE)
    def settle(self, spent: Settlement) -> bool:
        """Count an admitted attempt's spend; False (nothing counted) when already settled."""
        if self._state.running.pop(spent.attempt_id, None) is None:
            return False
        total = self._state.days.setdefault(spent.day, DayTotal())
        total.tokens += spent.tokens
        total.usd += spent.usd
        total.attempts += 1
        return True


def refusal(state: LedgerState, ask: Admission) -> str:
    """Why attempt `ask` may not start today (empty: it may), as the local fuse words it."""
    today = state.days.get(ask.day) or DayTotal()
    attempts = sum(day.attempts for day in state.days.values())
    mean_tokens = sum(day.tokens for day in state.days.values()) / attempts if attempts else 0.0
    mean_usd = sum(day.usd for day in state.days.values()) / attempts if attempts else 0.0
    running = sum(1 for day in state.running.values() if day == ask.day)
    where = "across the workers; [budget] in .loop/config.toml"
    tokens = today.tokens + running * mean_tokens
    if ask.max_tokens is not None and tokens >= ask.max_tokens:
        return (
            f"daily budget fuse: {today.tokens} of {ask.max_tokens} tokens used on {ask.day}"
            f" ({running} attempt(s) still running; {where})"
        )
    usd = today.usd + running * mean_usd
    if ask.max_usd is not None and usd >= ask.max_usd:
        return (
            f"daily budget fuse: ${today.usd:.2f} of ${ask.max_usd:.2f} used on {ask.day}"
            f" ({running} attempt(s) still running; {where})"
        )
    return ""
