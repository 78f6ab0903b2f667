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


# --- two tasks in one run (issue 18: every budget test above has one task) --------------------


def task_agent(seq: int, at: float, task: str, attempt: int, tokens: int, usd: float) -> Event:
    event = agent(seq, at, attempt, tokens, usd)
    return Event(event.seq, event.ts, event.type, "r1", "loop", task, event.data)


TWO_TASKS = [
    ev(1, EventType.TICK_STARTED, 0),
    # Attempt 1 of task a and attempt 1 of task b are two attempts, not one.
    # Costs are binary fractions, so a sum can equal a limit exactly.
    task_agent(2, 10, "a", 1, 1000, 0.125),
    task_agent(3, 11, "b", 1, 1000, 0.125),
    task_agent(4, 12, "a", 2, 1000, 0.125),
]


def test_the_mean_attempt_cost_keeps_the_attempts_of_two_tasks_apart() -> None:
    from loopctl.journal.budgets import mean_attempt_cost

    tokens, usd = mean_attempt_cost(TWO_TASKS)
    assert (tokens, usd) == (1000, 0.125)  # merged by number, attempt 1 would be 2000


def test_a_maker_and_a_checker_turn_of_one_attempt_are_one_attempt() -> None:
    from loopctl.journal.budgets import mean_attempt_cost

    events = [task_agent(1, 0, "a", 1, 600, 0.0625), task_agent(2, 1, "a", 1, 400, 0.0625)]
    tokens, usd = mean_attempt_cost(events)
    assert (tokens, usd) == (1000, 0.125)
    assert mean_attempt_cost([]) == (0.0, 0.0)


def test_a_turn_without_an_attempt_number_is_not_counted_into_attempt_1() -> None:
    from loopctl.journal.budgets import mean_attempt_cost

    loose = task_agent(1, 0, "a", 0, 3000, 0.375)
    loose = Event(1, loose.ts, loose.type, "r1", "loop", "a", {**loose.data, "attempt": None})
    events = [loose, task_agent(2, 1, "a", 1, 1000, 0.125)]
    assert mean_attempt_cost(events) == (2000, 0.25)  # two attempts: (3000 + 1000) / 2


def test_an_attempt_of_unknown_cost_adds_no_guessed_dollars_to_the_mean() -> None:
    # A subscription CLI reports tokens but no price: its attempt costs nothing known, not a
    # dollar (a guess would stop a cost budget that has all the room it needs).
    from loopctl.journal.budgets import mean_attempt_cost

    events = [task_agent(1, 0, "a", 1, 1000, None), task_agent(2, 1, "a", 2, 1000, 0.25)]
    assert mean_attempt_cost(events) == (1000, 0.125)


@pytest.mark.parametrize(("limit", "stops"), [(3999, True), (4000, False)])
def test_a_token_budget_counts_every_task_of_the_run(limit: int, stops: bool) -> None:
    # 3000 used over both tasks, an attempt costs 1000: one more fits a 4000 budget exactly.
    # Counted per task, task a alone (2000) would never reach 3999.
    reason = stop_reason(Budget(max_tokens=limit), TWO_TASKS, T0 + timedelta(seconds=20))
    if stops:
        assert reason == f"token budget: 3000 of {limit} used and an attempt takes about 1000"
    else:
        assert reason is None


@pytest.mark.parametrize(("limit", "stops"), [(0.499, True), (0.5, False)])
def test_a_cost_budget_counts_every_task_of_the_run(limit: float, stops: bool) -> None:
    # $0.375 used over both tasks and an attempt costs $0.125: one more fits $0.50 exactly.
    reason = stop_reason(Budget(max_usd=limit), TWO_TASKS, T0 + timedelta(seconds=20))
    if stops:
        assert reason == "cost budget: $0.38 of $0.50 used and an attempt costs about $0.12"
    else:
        assert reason is None


def test_the_time_budget_stops_at_its_limit_not_after() -> None:
    at_limit = stop_reason(Budget(max_wall_s=20), TWO_TASKS, T0 + timedelta(seconds=20))
    assert at_limit == "time budget: 20s of 20s used"
    assert stop_reason(Budget(max_wall_s=21), TWO_TASKS, T0 + timedelta(seconds=20)) is None


def test_wall_time_counts_each_tick_from_its_start_to_its_finish() -> None:
    events = [
        ev(1, EventType.TICK_STARTED, 0),
        ev(2, EventType.TICK_FINISHED, 40),
        ev(3, EventType.TICK_STARTED, 100),  # the idle minute between ticks is not work
        ev(4, EventType.TICK_FINISHED, 110),
        ev(5, EventType.TICK_STARTED, 200),
    ]
    assert spend(events, T0 + timedelta(seconds=205)).wall_s == 40 + 10 + 5
    assert spend(events[:4], T0 + timedelta(seconds=500)).wall_s == 50  # nothing open


def test_wall_time_is_zero_without_a_tick_and_never_negative() -> None:
    assert spend([agent(1, 5, 1, 10, 0.0)], T0 + timedelta(seconds=60)).wall_s == 0.0
    # A clock stepped back between two events (NTP) must not make the run's time negative.
    backwards = [ev(1, EventType.TICK_STARTED, 100), ev(2, EventType.TICK_FINISHED, 40)]
    assert spend(backwards, T0 + timedelta(seconds=200)).wall_s == 0.0
