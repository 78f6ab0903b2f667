"""Budgets as pure functions over a run's events (docs/INVARIANTS.md, invariant 4)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from loopctl.definitions.config import Budget
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import agent_finished


@dataclass(frozen=True, slots=True)
class Spend:
    """What a run has used so far."""

    tokens: int = 0
    usd: float = 0.0
    usd_unknown_calls: int = 0  # agent calls whose cost nobody reported
    wall_s: float = 0.0
    agent_calls: int = 0


def _ts(event: Event) -> datetime:
    return datetime.fromisoformat(event.ts)


def active_wall_seconds(events: Sequence[Event], now: datetime) -> float:
    """Time the run spent working, summed over its segments (a killed run is resumed later)."""
    total = 0.0
    segment_start: datetime | None = None
    last_seen: datetime | None = None
    for event in events:
        when = _ts(event)
        if event.type in (EventType.TICK_STARTED, EventType.RUN_RESUMED):
            if segment_start is not None and last_seen is not None:
                total += (last_seen - segment_start).total_seconds()
            segment_start = when
        last_seen = when
        if event.type == EventType.TICK_FINISHED and segment_start is not None:
            total += (when - segment_start).total_seconds()
            segment_start = None
    if segment_start is not None:
        total += (now - segment_start).total_seconds()
    return max(total, 0.0)


def spend(events: Sequence[Event], now: datetime) -> Spend:
    """Sum tokens, cost and wall time over one run's events."""
    tokens = 0
    usd = 0.0
    unknown = 0
    calls = 0
    for event in events:
        if event.type != EventType.AGENT_FINISHED:
            continue
        calls += 1
        turn = agent_finished(event)  # clamped: an old log may hold 1e999 or NaN
        tokens += turn.tokens
        if turn.cost_usd is None:
            unknown += 1
        else:
            usd += turn.cost_usd
    return Spend(tokens, usd, unknown, active_wall_seconds(events, now), calls)


def _task_and_attempt(event: Event) -> Hashable:
    return (event.task, agent_finished(event).attempt or 0)


def mean_attempt_cost(
    events: Iterable[Event], attempt_of: Callable[[Event], Hashable] = _task_and_attempt
) -> tuple[float, float]:
    """Average tokens and USD of one finished attempt, to predict the next one.

    `attempt_of` says which attempt an agent's turn belongs to (its maker and checker turns
    are one attempt): by default task and number, within one run's events.
    """
    per_attempt: dict[Hashable, list[float]] = {}
    for event in events:
        if event.type != EventType.AGENT_FINISHED:
            continue
        entry = per_attempt.setdefault(attempt_of(event), [0.0, 0.0])
        turn = agent_finished(event)
        entry[0] += turn.tokens
        entry[1] += turn.cost_usd or 0.0
    if not per_attempt:
        return 0.0, 0.0
    count = len(per_attempt)
    return (
        sum(v[0] for v in per_attempt.values()) / count,
        sum(v[1] for v in per_attempt.values()) / count,
    )


def stop_reason(budget: Budget, events: Sequence[Event], now: datetime) -> str | None:
    """Why the run must not start another attempt, or None when it may.

    A limit stops work that *would* pass it: the next attempt is assumed to cost what an
    average attempt of this run has cost so far.
    """
    used = spend(events, now)
    next_tokens, next_usd = mean_attempt_cost(events)
    if budget.max_tokens is not None and used.tokens + next_tokens > budget.max_tokens:
        return (
            f"token budget: {used.tokens} of {budget.max_tokens} used"
            f" and an attempt takes about {int(next_tokens)}"
        )
    if budget.max_usd is not None and used.usd + next_usd > budget.max_usd:
        return (
            f"cost budget: ${used.usd:.2f} of ${budget.max_usd:.2f} used"
            f" and an attempt costs about ${next_usd:.2f}"
        )
    if budget.max_wall_s is not None and used.wall_s >= budget.max_wall_s:
        return f"time budget: {int(used.wall_s)}s of {int(budget.max_wall_s)}s used"
    return None


def wall_left(budget: Budget, events: Sequence[Event], now: datetime) -> float | None:
    """Seconds of `max_wall` the run has left (negative once overspent); None without one.

    `stop_reason` looks only between attempts; a turn or a check started with little time left
    is given at most this long, so one slow attempt cannot overrun the budget."""
    if budget.max_wall_s is None:
        return None
    return budget.max_wall_s - active_wall_seconds(events, now)


def identical_failure_streak(fingerprints: Sequence[str | None]) -> int:
    """How many of the most recent failures share the latest fingerprint."""
    if not fingerprints or fingerprints[-1] is None:
        return 0
    latest = fingerprints[-1]
    streak = 0
    for fingerprint in reversed(fingerprints):
        if fingerprint != latest:
            break
        streak += 1
    return streak
