"""A turn that ended on a rate limit, a quota or an overload: its backend pauses (issue 30).

`pause_on_limit` asks backends.rate_limits whether the turn's result says so; if it does, the
backend's pause is recorded (journal.pauses: a `backend_paused` note, one inbox item per pause)
and the attempt ends, neither as the work's failure nor fingerprinted, so it cannot add to a
streak of identical failures. The task then rests as `paused` with the outcome `rate-limited`
(engine.task), and the scheduler holds the loops on that backend until the pause ends.
"""

from __future__ import annotations

from loopctl.backends import rate_limits
from loopctl.backends.base import AgentResult
from loopctl.definitions.agents import Agent
from loopctl.engine.context import RunContext
from loopctl.journal import pauses
from loopctl.journal.overnight import BackendPaused
from loopctl.journal.pauses import Pause
from loopctl.journal.schema import AttemptFinished
from loopctl.journal.statuses import Verdict
from loopctl.tasks.spec import TaskSpec


class CheckerPaused(Exception):
    """The checker agent's backend paused mid-verdict: the attempt ends as rate-limited."""

    def __init__(self, pause: Pause) -> None:
        super().__init__(pause.describe())
        self.pause = pause


def pause_on_limit(
    ctx: RunContext, spec: TaskSpec, number: int, agent: Agent, result: AgentResult
) -> Pause | None:
    """When `result` ended on a rate limit, a quota or an overload: pause the agent's backend
    (journal.pauses) and end the attempt, neither counted as the work's failure nor
    fingerprinted (it cannot add to a streak of identical failures)."""
    backend = agent.backend.value
    now = ctx.clock()
    base = ctx.project.config.rate_limit_backoff_s or rate_limits.BACKOFF_S
    limit = rate_limits.detect(result, backend, now, 0, base)
    if limit is None:
        return None  # the common case reads no log
    if not limit.stated:  # the backoff grows with each pause since the backend's last good turn
        streak = pauses.streak(ctx.log.read(), backend)
        limit = rate_limits.detect(result, backend, now, streak, base) or limit
    paused = BackendPaused(
        backend=backend,
        until=limit.until.isoformat(timespec="milliseconds"),
        kind=limit.kind.value,
        said=limit.said,
        stated=limit.stated,
        attempt=number,
        agent=agent.name,
    )
    pause = pauses.record_pause(
        ctx.rec, paused, run=ctx.run_id, loop=ctx.loop.name, task=spec.id, now=now
    )
    ctx.record(
        spec.id,
        AttemptFinished(
            attempt=number,
            verdict=Verdict.FAILED,
            reason=f"{pause.describe()}: {limit.said}"[:400],
            fingerprint=None,
        ),
    )
    ctx.rec.refresh_projections()
    return pause
