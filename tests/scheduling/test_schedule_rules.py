"""Edges of the scheduling rules that the table tests in test_schedule.py leave open (found by
mutation testing, issue 18): the grace bounds, when a loop next fires, and which slot a tick
event stands for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopctl.definitions import TriggerKind
from loopctl.journal.events import Event, EventType
from loopctl.scheduling.timing import (
    LoopTiming,
    Schedule,
    grace_s,
    last_slots,
    next_fire,
    slot_of,
)

T = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def no_jitter(name: str, slot: datetime, jitter_s: float) -> float:
    return 0.0


@pytest.mark.parametrize(
    ("period", "grace"),
    [(0.2, 0.5), (1.0, 0.5), (2.0, 1.0), (300.0, 150.0), (600.0, 300.0), (86400.0, 300.0)],
)
def test_the_grace_is_half_a_period_between_half_a_second_and_five_minutes(
    period: float, grace: float
) -> None:
    assert grace_s(period) == grace


def test_next_fire_is_the_wake_time_or_now_when_due() -> None:
    every = Schedule(TriggerKind.EVERY, every_s=60.0)
    waiting = LoopTiming(T, last_slot=T)
    assert next_fire("l", every, waiting, T + timedelta(seconds=10), jitter=no_jitter) == (
        T + timedelta(seconds=60)
    )
    now = T + timedelta(seconds=61)
    assert next_fire("l", every, waiting, now, jitter=no_jitter) == now
    watch = Schedule(TriggerKind.WATCH, watch=("src/**",))
    assert next_fire("l", watch, LoopTiming(T), now, jitter=no_jitter) is None
    changed = LoopTiming(T, changes=("src/a.py",))
    assert next_fire("l", watch, changed, now, jitter=no_jitter) == now


def _tick(seq: int, type_: str, loop: str | None, at: datetime, **data: Any) -> Event:
    return Event(seq, at.isoformat(), type_, "r", loop, None, data)


@pytest.mark.parametrize(
    ("trigger", "slot"),
    [
        ({"due": (T - timedelta(seconds=7)).isoformat()}, T - timedelta(seconds=7)),
        ({"due": "not a time"}, T),
        ({"due": "2026-01-05T09:59:53"}, T),  # no zone: not trusted
        ({"due": 12}, T),
        ("due", T),
        (None, T),
    ],
)
def test_a_tick_stands_for_its_recorded_due_time_else_when_it_happened(
    trigger: object, slot: datetime
) -> None:
    for kind in (EventType.TICK_STARTED, EventType.RUN_RESUMED, EventType.TICK_SKIPPED):
        assert slot_of(_tick(1, kind, "a", T, trigger=trigger)) == slot
    assert slot_of(_tick(1, EventType.TICK_FINISHED, "a", T, trigger=trigger)) is None


def test_the_last_slot_is_the_latest_whatever_the_order_of_the_log() -> None:
    log = [
        _tick(1, EventType.TICK_STARTED, "a", T + timedelta(minutes=5)),
        _tick(2, EventType.TICK_SKIPPED, "a", T),  # an older slot recorded later
        _tick(3, EventType.TICK_STARTED, None, T + timedelta(hours=1)),  # a goal: no loop
        _tick(4, EventType.TICK_FINISHED, "a", T + timedelta(hours=2)),
        _tick(5, EventType.TICK_STARTED, "b", T),
    ]
    assert last_slots(log) == {"a": T + timedelta(minutes=5), "b": T}


def test_a_schedule_comes_from_the_loop_or_the_command_lines_trigger() -> None:
    from loopctl.definitions.loops import Loop, Trigger

    own = Trigger(TriggerKind.EVERY, every_s=300.0)
    loop = Loop(name="l", path=Path("l.toml"), trigger=own, tz="Europe/Berlin", jitter_s=5.0)
    assert Schedule.of(loop) == Schedule(
        TriggerKind.EVERY, every_s=300.0, tz="Europe/Berlin", jitter_s=5.0
    )
    given = Trigger(TriggerKind.CRON, cron="0 9 * * *")
    assert Schedule.of(loop, given) == Schedule(
        TriggerKind.CRON, cron="0 9 * * *", tz="Europe/Berlin", jitter_s=5.0
    )
    bare = Loop(name="l", path=Path("l.toml"))
    assert Schedule.of(bare) is None
    assert Schedule.of(bare, given) == Schedule(TriggerKind.CRON, cron="0 9 * * *")


def test_a_downtime_of_more_slots_than_are_counted_still_fires_the_latest_slot() -> None:
    from loopctl.scheduling.timing import Action, Fired, decide

    # Every second for 2.5 days: 216 000 slots, counted exactly (arithmetic, no walking).
    every = Schedule(TriggerKind.EVERY, every_s=1.0)
    now = T + timedelta(days=2, hours=12, milliseconds=400)
    decision = decide("l", every, LoopTiming(T, last_slot=T), now, jitter=no_jitter)
    assert (decision.action, decision.fired) == (Action.FIRE, Fired.CATCH_UP)
    assert decision.slot == T + timedelta(days=2, hours=12)
    assert decision.missed == 216_000 - 1
    # Every minute by cron for 100 days: past the walking limit, the last day is searched.
    cron = Schedule(TriggerKind.CRON, cron="* * * * *", tz="UTC")
    later = T + timedelta(days=100, seconds=30)
    decision = decide("l", cron, LoopTiming(T, last_slot=T), later, jitter=no_jitter)
    assert (decision.action, decision.fired) == (Action.FIRE, Fired.CATCH_UP)
    assert decision.slot == T + timedelta(days=100)
    assert decision.missed == 100_000 - 1  # counted up to the limit, not past it
    exactly = T + timedelta(days=100)  # on a slot to the microsecond: that slot, not the one before
    decision = decide("l", cron, LoopTiming(T, last_slot=T), exactly, jitter=no_jitter)
    assert decision.slot == exactly


def test_a_cron_slots_grace_is_half_the_gap_to_its_next_slot() -> None:
    from loopctl.scheduling.timing import Action, Fired, decide

    five = Schedule(TriggerKind.CRON, cron="*/5 * * * *", tz="UTC")
    timing = LoopTiming(T, last_slot=T)
    slot = T + timedelta(minutes=5)
    on_time = decide("l", five, timing, slot + timedelta(seconds=150), jitter=no_jitter)
    late = decide("l", five, timing, slot + timedelta(seconds=151), jitter=no_jitter)
    assert (on_time.action, on_time.fired, on_time.missed) == (Action.FIRE, Fired.SCHEDULE, 0)
    assert (late.action, late.fired, late.missed) == (Action.FIRE, Fired.CATCH_UP, 1)


def test_a_cron_slot_exactly_now_is_the_latest_slot() -> None:
    from loopctl.scheduling.timing import Action, Fired, decide

    five = Schedule(TriggerKind.CRON, cron="*/5 * * * *", tz="UTC")
    now = T + timedelta(minutes=15)  # on a slot to the microsecond
    decision = decide("l", five, LoopTiming(T, last_slot=T), now, jitter=no_jitter)
    assert (decision.action, decision.fired, decision.slot) == (Action.FIRE, Fired.CATCH_UP, now)
    assert decision.missed == 2  # 10:05 and 10:10 passed; 10:15 fires now


@pytest.mark.parametrize(
    ("queued", "reason"),
    [
        (None, "the previous tick is still running"),
        (T, "the previous tick is still running and another is already queued"),
    ],
)
def test_a_slot_that_comes_while_a_tick_runs_is_skipped_saying_why(
    queued: datetime | None, reason: str
) -> None:
    from loopctl.scheduling.timing import Action, Overlap, decide

    every = Schedule(TriggerKind.EVERY, every_s=60.0, overlap=Overlap.SKIP)
    timing = LoopTiming(T, last_slot=T, running=True, queued=queued)
    decision = decide("l", every, timing, T + timedelta(seconds=61), jitter=no_jitter)
    assert (decision.action, decision.reason) == (Action.SKIP, reason)


def test_a_jitter_under_a_second_still_spreads_the_slots() -> None:
    from loopctl.scheduling.timing import stable_jitter

    values = {stable_jitter(f"loop-{i}", T, 0.5) for i in range(10)}
    assert len(values) == 10
    assert all(0.0 < v < 0.5 for v in values)


def test_a_schedule_without_jitter_fires_on_its_slot_with_the_real_jitter() -> None:
    from loopctl.scheduling.timing import Action, decide

    every = Schedule(TriggerKind.EVERY, every_s=60.0)  # no jitter given
    on_time = decide("l", every, LoopTiming(T, last_slot=T), T + timedelta(seconds=60))
    assert (on_time.action, on_time.slot) == (Action.FIRE, T + timedelta(seconds=60))


def test_a_slot_is_late_only_by_what_passed_after_its_own_jitter() -> None:
    from loopctl.scheduling.timing import Action, Fired, decide

    def hundred(name: str, slot: datetime, jitter_s: float) -> float:
        return 100.0

    every = Schedule(TriggerKind.EVERY, every_s=300.0, jitter_s=120.0)  # grace: 150 s
    timing = LoopTiming(T, last_slot=T)
    slot = T + timedelta(seconds=300)
    # Due at slot + 100 s; 150 s after that it is still on time, 151 s after it is late.
    on_time = decide("l", every, timing, slot + timedelta(seconds=250), jitter=hundred)
    late = decide("l", every, timing, slot + timedelta(seconds=251), jitter=hundred)
    assert (on_time.action, on_time.fired, on_time.slot) == (Action.FIRE, Fired.SCHEDULE, slot)
    assert (late.action, late.fired, late.missed) == (Action.FIRE, Fired.CATCH_UP, 1)
