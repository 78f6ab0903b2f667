"""Budgets are pure functions over a run's events: table tests with fixed times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopctl.definitions.config import Budget
from loopctl.journal.budgets import identical_failure_streak, spend, stop_reason, wall_left
from loopctl.journal.events import Event, EventType

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


def ev(seq: int, kind: str, at: float, **data: Any) -> Event:
    ts = (T0 + timedelta(seconds=at)).isoformat()
    return Event(seq, ts, kind, "r1", "loop", "t", data)


def agent(seq: int, at: float, attempt: int, tokens: int, usd: float | None) -> Event:
    return ev(
        seq,
        EventType.AGENT_FINISHED,
        at,
        attempt=attempt,
        input_tokens=tokens // 2,
        output_tokens=tokens - tokens // 2,
        cost_usd=usd,
    )


RUN = [
    ev(1, EventType.TICK_STARTED, 0),
    agent(2, 10, 1, 1000, 0.10),
    agent(3, 20, 2, 3000, 0.30),
]


def test_spend_sums_tokens_cost_and_wall_time() -> None:
    used = spend(RUN, T0 + timedelta(seconds=60))
    assert (used.tokens, round(used.usd, 2), used.wall_s, used.agent_calls) == (4000, 0.4, 60, 2)


def test_unknown_cost_is_counted_not_guessed() -> None:
    used = spend([*RUN, agent(4, 30, 3, 10, None)], T0 + timedelta(seconds=60))
    assert used.usd_unknown_calls == 1
    assert round(used.usd, 2) == 0.4


def test_wall_time_skips_the_downtime_between_a_kill_and_the_resume() -> None:
    events = [
        ev(1, EventType.TICK_STARTED, 0),
        ev(2, EventType.ATTEMPT_STARTED, 30),  # killed after this
        ev(3, EventType.RUN_RESUMED, 3600),
        ev(4, EventType.ATTEMPT_STARTED, 3610),
    ]
    assert spend(events, T0 + timedelta(seconds=3620)).wall_s == 30 + 20


@pytest.mark.parametrize(
    ("budget", "now", "expected"),
    [
        (Budget(), 60, None),
        # 4000 used, an attempt costs ~2000: a 5000 limit would be passed by the next one.
        (Budget(max_tokens=5000), 60, "token budget"),
        (Budget(max_tokens=6000), 60, None),
        (Budget(max_usd=0.5), 60, "cost budget"),
        (Budget(max_usd=0.61), 60, None),
        (Budget(max_wall_s=60), 60, "time budget"),
        (Budget(max_wall_s=61), 60, None),
    ],
)
def test_stop_reason_before_an_attempt(budget: Budget, now: float, expected: str | None) -> None:
    reason = stop_reason(budget, RUN, T0 + timedelta(seconds=now))
    if expected is None:
        assert reason is None
    else:
        assert reason is not None
        assert reason.startswith(expected)


@pytest.mark.parametrize(
    ("budget", "now", "left"),
    [
        (Budget(), 60, None),
        (Budget(max_wall_s=90), 60, 30),
        (Budget(max_wall_s=60), 60, 0),
        (Budget(max_wall_s=50), 60, -10),
    ],
)
def test_wall_left_bounds_the_next_turn(budget: Budget, now: float, left: float | None) -> None:
    assert wall_left(budget, RUN, T0 + timedelta(seconds=now)) == left


def test_wall_left_counts_only_the_time_the_run_worked() -> None:
    events = [
        ev(1, EventType.TICK_STARTED, 0),
        ev(2, EventType.ATTEMPT_STARTED, 30),  # killed after this
        ev(3, EventType.RUN_RESUMED, 3600),
    ]
    assert wall_left(Budget(max_wall_s=100), events, T0 + timedelta(seconds=3620)) == 50


@pytest.mark.parametrize(
    ("fingerprints", "streak"),
    [
        ([], 0),
        (["a"], 1),
        (["a", "a"], 2),
        (["a", "b", "b"], 2),
        (["b", "a", "b"], 1),
        (["a", None], 0),
        (["a", "a", "a"], 3),
    ],
)
def test_identical_failure_streak(fingerprints: list[str | None], streak: int) -> None:
    assert identical_failure_streak(fingerprints) == streak
