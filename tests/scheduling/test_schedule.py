"""The pure scheduling rules, table-tested with fixed datetimes: no clock, no sleep, no threads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopctl.definitions import Loop, TriggerKind
from loopctl.definitions.config import Config, load_config
from loopctl.definitions.loops import TaskSource, load_loop
from loopctl.definitions.source import Problems
from loopctl.journal.events import Event, EventType
from loopctl.journal.fuse import day_spend, fuse_item_id, fuse_reason
from loopctl.scheduling.timing import (
    Action,
    CatchUp,
    Fired,
    LoopTiming,
    Overlap,
    Schedule,
    decide,
    due_loops,
    last_slots,
    next_slot,
    stable_jitter,
)
from loopctl.tasks.command import tasks_from_items
from loopctl.tasks.spec import single_task


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def no_jitter(name: str, slot: datetime, jitter_s: float) -> float:
    return 0.0


def every(seconds: float, **options: Any) -> Schedule:
    return Schedule(TriggerKind.EVERY, every_s=seconds, **options)


def cron(expr: str, tz: str = "UTC", **options: Any) -> Schedule:
    return Schedule(TriggerKind.CRON, cron=expr, tz=tz, **options)


START = utc(2026, 1, 5, 9, 0)
T10 = utc(2026, 1, 5, 10, 0)
FIVE_MIN = 300.0

# (case, schedule, timing, now, expected action, slot, fired, missed)
EVERY_TABLE = [
    (
        "first tick of `run` fires at once",
        every(FIVE_MIN),
        LoopTiming(START, fire_on_start=True),
        START,
        Action.FIRE,
        START,
        Fired.START,
        0,
    ),
    (
        "a loop `up` never ran waits a period from the start",
        every(FIVE_MIN),
        LoopTiming(START),
        START + timedelta(seconds=299),
        Action.WAIT,
        None,
        None,
        0,
    ),
    (
        "not yet due",
        every(FIVE_MIN),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(seconds=299, microseconds=999_999),
        Action.WAIT,
        None,
        None,
        0,
    ),
    (
        "due: the slot after the last one",
        every(FIVE_MIN),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(minutes=5, milliseconds=10),
        Action.FIRE,
        T10 + timedelta(minutes=5),
        Fired.SCHEDULE,
        0,
    ),
    (
        "late within the grace (half a period) is still on time",
        every(FIVE_MIN),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(minutes=7, seconds=30),
        Action.FIRE,
        T10 + timedelta(minutes=5),
        Fired.SCHEDULE,
        0,
    ),
    (
        "later than the grace is a catch-up",
        every(FIVE_MIN),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(minutes=7, seconds=31),
        Action.FIRE,
        T10 + timedelta(minutes=5),
        Fired.CATCH_UP,
        1,
    ),
    (
        "two hours down, back 30s after a slot: ONE catch-up tick, for that slot",
        every(FIVE_MIN),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(hours=2, seconds=30),
        Action.FIRE,
        T10 + timedelta(hours=2),
        Fired.CATCH_UP,
        23,
    ),
    (
        "two hours down, back 3m after a slot: ONE catch-up tick, for the latest slot",
        every(FIVE_MIN),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(hours=2, minutes=3),
        Action.FIRE,
        T10 + timedelta(hours=2),
        Fired.CATCH_UP,
        24,
    ),
    (
        'catch_up = "none": the missed slots are skipped',
        every(FIVE_MIN, catch_up=CatchUp.NONE),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(hours=2, minutes=3),
        Action.SKIP,
        T10 + timedelta(hours=2),
        None,
        24,
    ),
    (
        'catch_up = "none": a slot that is on time still fires, the missed ones do not',
        every(FIVE_MIN, catch_up=CatchUp.NONE),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(hours=2, seconds=30),
        Action.FIRE,
        T10 + timedelta(hours=2),
        Fired.SCHEDULE,
        23,
    ),
    (
        "overlap skip: due while the previous tick runs",
        every(FIVE_MIN),
        LoopTiming(START, last_slot=T10, running=True),
        T10 + timedelta(minutes=5),
        Action.SKIP,
        T10 + timedelta(minutes=5),
        None,
        0,
    ),
    (
        "overlap queue-one: the first slot that comes while running is queued",
        every(FIVE_MIN, overlap=Overlap.QUEUE_ONE),
        LoopTiming(START, last_slot=T10, running=True),
        T10 + timedelta(minutes=5),
        Action.QUEUE,
        T10 + timedelta(minutes=5),
        None,
        0,
    ),
    (
        "overlap queue-one: one is queued already, so the next is skipped",
        every(FIVE_MIN, overlap=Overlap.QUEUE_ONE),
        LoopTiming(
            START,
            last_slot=T10 + timedelta(minutes=5),
            running=True,
            queued=T10 + timedelta(minutes=5),
        ),
        T10 + timedelta(minutes=10),
        Action.SKIP,
        T10 + timedelta(minutes=10),
        None,
        0,
    ),
    (
        "the queued tick fires when the running one ends",
        every(FIVE_MIN, overlap=Overlap.QUEUE_ONE),
        LoopTiming(START, last_slot=T10 + timedelta(minutes=5), queued=T10 + timedelta(minutes=5)),
        T10 + timedelta(minutes=6),
        Action.FIRE,
        T10 + timedelta(minutes=5),
        Fired.QUEUED,
        0,
    ),
]


@pytest.mark.parametrize(
    ("case", "schedule", "timing", "now", "action", "slot", "fired", "missed"),
    EVERY_TABLE,
    ids=[row[0] for row in EVERY_TABLE],
)
def test_every_decisions(
    case: str,
    schedule: Schedule,
    timing: LoopTiming,
    now: datetime,
    action: Action,
    slot: datetime | None,
    fired: Fired | None,
    missed: int,
) -> None:
    decision = decide("loop", schedule, timing, now, jitter=no_jitter)

    assert decision.action is action
    if action is Action.WAIT:
        assert decision.wake is not None
        assert decision.wake > now
    else:
        assert decision.slot == slot
        assert decision.fired == fired
        assert decision.missed == missed


def test_a_wait_wakes_exactly_at_the_next_slot() -> None:
    decision = decide(
        "loop", every(FIVE_MIN), LoopTiming(START, last_slot=T10), T10, jitter=no_jitter
    )

    assert decision.action is Action.WAIT
    assert decision.wake == T10 + timedelta(minutes=5)


def test_skips_say_why() -> None:
    running = decide(
        "loop",
        every(FIVE_MIN),
        LoopTiming(START, last_slot=T10, running=True),
        T10 + timedelta(minutes=5),
        jitter=no_jitter,
    )
    missed = decide(
        "loop",
        every(FIVE_MIN, catch_up=CatchUp.NONE),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(hours=1, minutes=3),
        jitter=no_jitter,
    )

    assert "still running" in running.reason
    assert missed.action is Action.SKIP
    assert "12 slot(s) missed" in missed.reason
    assert "catch_up" in missed.reason


def test_jitter_delays_the_fire_time_but_not_the_slot() -> None:
    def twelve(name: str, slot: datetime, jitter_s: float) -> float:
        assert jitter_s == 30.0
        return 12.0

    schedule = every(FIVE_MIN, jitter_s=30.0)
    timing = LoopTiming(START, last_slot=T10)
    slot = T10 + timedelta(minutes=5)

    early = decide("loop", schedule, timing, slot + timedelta(seconds=11), jitter=twelve)
    due = decide("loop", schedule, timing, slot + timedelta(seconds=12), jitter=twelve)

    assert early.action is Action.WAIT
    assert early.wake == slot + timedelta(seconds=12)
    assert due.action is Action.FIRE
    assert due.slot == slot
    assert due.fired is Fired.SCHEDULE


def test_stable_jitter_is_deterministic_bounded_and_spreads_loops() -> None:
    slot = T10
    values = {stable_jitter(f"loop-{i}", slot, 30.0) for i in range(20)}

    assert stable_jitter("a", slot, 30.0) == stable_jitter("a", slot, 30.0)
    assert all(0.0 <= v < 30.0 for v in values)
    assert len(values) == 20
    assert stable_jitter("a", slot, 0.0) == 0.0


CRON_TABLE = [
    ("every 15 minutes", cron("*/15 * * * *"), T10, T10 + timedelta(minutes=15)),
    ("the next one strictly after", cron("0 * * * *"), T10, T10 + timedelta(hours=1)),
    (
        "weekdays only: Friday 17:00 -> Monday 09:00",
        cron("0 9 * * mon-fri"),
        utc(2026, 1, 9, 17, 0),
        utc(2026, 1, 12, 9, 0),
    ),
    (
        "in a time zone: 09:00 New York is 14:00 UTC in winter",
        cron("0 9 * * *", tz="America/New_York"),
        utc(2026, 1, 5, 14, 0),
        utc(2026, 1, 6, 14, 0),
    ),
    (
        "spring forward: 02:30 does not exist, it runs once at 03:30 CEST",
        cron("30 2 * * *", tz="Europe/Berlin"),
        utc(2024, 3, 30, 1, 30),
        utc(2024, 3, 31, 1, 30),
    ),
    (
        "the day after spring forward is back at 02:30 CEST",
        cron("30 2 * * *", tz="Europe/Berlin"),
        utc(2024, 3, 31, 1, 30),
        utc(2024, 4, 1, 0, 30),
    ),
    (
        "fall back: a fixed-hour job does not run twice in the repeated hour",
        cron("30 2 * * *", tz="Europe/Berlin"),
        utc(2024, 10, 27, 0, 30),
        utc(2024, 10, 28, 1, 30),
    ),
    (
        "fall back: an hourly job keeps its pace through the repeated hour",
        cron("0 * * * *", tz="Europe/Berlin"),
        utc(2024, 10, 27, 0, 0),
        utc(2024, 10, 27, 1, 0),
    ),
    (
        "spring forward: an hourly job skips the hour that does not exist",
        cron("0 * * * *", tz="Europe/Berlin"),
        utc(2024, 3, 31, 0, 0),
        utc(2024, 3, 31, 1, 0),
    ),
    (
        "every is elapsed time, DST or not",
        Schedule(TriggerKind.EVERY, every_s=3600.0, tz="America/New_York"),
        utc(2024, 3, 10, 6, 30),
        utc(2024, 3, 10, 7, 30),
    ),
]


@pytest.mark.parametrize(
    ("case", "schedule", "after", "expected"), CRON_TABLE, ids=[r[0] for r in CRON_TABLE]
)
def test_next_slot(case: str, schedule: Schedule, after: datetime, expected: datetime) -> None:
    assert next_slot(schedule, after) == expected


def test_a_cron_catch_up_counts_the_missed_slots() -> None:
    decision = decide(
        "loop",
        cron("*/15 * * * *"),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(hours=3, minutes=7),
        jitter=no_jitter,
    )

    assert decision.action is Action.FIRE
    assert decision.fired is Fired.CATCH_UP
    assert decision.slot == T10 + timedelta(hours=3)
    assert decision.missed == 12


def test_a_cron_slot_fires_on_time_in_its_minute() -> None:
    decision = decide(
        "loop",
        cron("*/15 * * * *"),
        LoopTiming(START, last_slot=T10),
        T10 + timedelta(minutes=15, seconds=2),
        jitter=no_jitter,
    )

    assert (decision.action, decision.fired) == (Action.FIRE, Fired.SCHEDULE)


WATCH = Schedule(TriggerKind.WATCH, watch=("src/**",))
WATCH_QUEUE = Schedule(TriggerKind.WATCH, watch=("src/**",), overlap=Overlap.QUEUE_ONE)
NOW = utc(2026, 1, 5, 12, 0)


@pytest.mark.parametrize(
    ("schedule", "timing", "action"),
    [
        (WATCH, LoopTiming(START), Action.WAIT),
        (WATCH, LoopTiming(START, changes=("src/a.py",)), Action.FIRE),
        (WATCH, LoopTiming(START, changes=("src/a.py",), running=True), Action.SKIP),
        (WATCH_QUEUE, LoopTiming(START, changes=("src/a.py",), running=True), Action.WAIT),
        (WATCH, LoopTiming(START, fire_on_start=True), Action.FIRE),
    ],
    ids=["nothing changed", "changed", "changed while running", "queue-one waits", "start"],
)
def test_watch_decisions(schedule: Schedule, timing: LoopTiming, action: Action) -> None:
    decision = decide("w", schedule, timing, NOW)

    assert decision.action is action
    if action is Action.WAIT:
        assert decision.wake is None  # only a change wakes a watch
    if action is not Action.WAIT and timing.changes:
        assert decision.changed == ("src/a.py",)
        assert decision.slot == NOW


def test_due_loops_answers_for_every_loop_at_once() -> None:
    decisions = due_loops(
        {
            "due": (every(60.0), LoopTiming(START, last_slot=T10)),
            "later": (every(3600.0), LoopTiming(START, last_slot=T10)),
        },
        T10 + timedelta(minutes=1),
        jitter=no_jitter,
    )

    assert [name for name, d in decisions.items() if d.due] == ["due"]
    assert decisions["later"].wake == T10 + timedelta(hours=1)


def _event(seq: int, type_: str, loop: str, ts: datetime, **data: Any) -> Event:
    return Event(seq, ts.isoformat(), type_, "r", loop, None, data)


def test_last_slots_come_from_the_log() -> None:
    due = T10 + timedelta(minutes=5)
    log = [
        _event(1, EventType.TICK_STARTED, "a", T10, trigger={"due": T10.isoformat()}),
        _event(2, EventType.TICK_SKIPPED, "a", due, trigger={"due": due.isoformat()}),
        _event(3, EventType.TICK_STARTED, "b", T10 + timedelta(seconds=7)),  # a --once tick
        _event(4, EventType.TASK_FOUND, "c", T10),
        _event(5, EventType.RUN_RESUMED, "b", T10 + timedelta(minutes=1)),
    ]

    assert last_slots(log) == {"a": due, "b": T10 + timedelta(minutes=1)}


def test_the_day_fuse_counts_todays_spend_across_loops() -> None:
    from zoneinfo import ZoneInfo

    tz = ZoneInfo("Europe/Berlin")
    now = utc(2026, 1, 5, 22, 30)  # 23:30 in Berlin
    log = [
        # 00:30 Berlin on the 5th: today. 22:59 UTC on the 4th is 23:59 Berlin: yesterday.
        _event(1, EventType.AGENT_FINISHED, "a", utc(2026, 1, 4, 23, 30), input_tokens=600),
        _event(
            2,
            EventType.AGENT_FINISHED,
            "b",
            utc(2026, 1, 5, 20, 0),
            output_tokens=500,
            cost_usd=0.5,
        ),
        _event(3, EventType.AGENT_FINISHED, "a", utc(2026, 1, 4, 22, 59), input_tokens=9999),
    ]

    spent = day_spend(log, now, tz)

    assert (spent.day.isoformat(), spent.tokens, spent.usd) == ("2026-01-05", 1100, 0.5)
    assert fuse_reason(Config(max_tokens_per_day=1200), spent) is None
    reason = fuse_reason(Config(max_tokens_per_day=1100), spent)
    assert reason is not None
    assert "1100 of 1100 tokens" in reason
    usd = fuse_reason(Config(max_usd_per_day=0.5), spent)
    assert usd is not None
    assert "$0.50 of $0.50" in usd
    assert fuse_item_id(spent.day) == fuse_item_id(spent.day)
    assert fuse_item_id(spent.day) != fuse_item_id(spent.day + timedelta(days=1))


def test_daily_caps_live_in_config_budget_and_not_in_a_loops(tmp_path: Path) -> None:
    config_file = tmp_path / "config.toml"
    config_file.write_text("[budget]\nmax_tokens_per_day = 100000\nmax_usd_per_day = 2.5\n")
    problems = Problems()
    config = load_config(config_file, problems)
    loop_file = tmp_path / "nightly.toml"
    loop_file.write_text('prompt = "x"\n\n[budget]\nmax_usd_per_day = 1.0\n')
    loop_problems = Problems()
    loop = load_loop(loop_file, loop_problems, config)

    assert not problems.items
    assert (config.max_tokens_per_day, config.max_usd_per_day) == (100000, 2.5)
    assert loop is None
    assert any("max_usd_per_day" in p.message and p.line == 4 for p in loop_problems.items), (
        loop_problems.items
    )


def test_changed_paths_fill_the_changed_placeholder(tmp_path: Path) -> None:
    single = Loop(name="w", path=tmp_path / "w.toml", prompt="Review {changed} ({x})")
    listed = Loop(
        name="w",
        path=tmp_path / "w.toml",
        tasks=TaskSource(("true",), "{id}", None, "Fix {id} after:\n{changed}"),
    )

    spec = single_task(single, ["src/a.py", "src/b.py"])
    specs = tasks_from_items(listed, [{"id": "one"}, {"id": "two", "changed": "own"}], ["a.py"])

    assert spec.prompt == "Review src/a.py\nsrc/b.py ({x})"
    assert [s.prompt for s in specs] == ["Fix one after:\na.py", "Fix two after:\nown"]
    assert single_task(single).prompt == "Review  ({x})"
