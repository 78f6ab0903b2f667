"""The daily budget fuse as pure functions: what a retried task may still spend today.

`inbox retry`/`reply` ask `retry_allowance`; the reliability suite drives it end to end, these
pin each boundary (issue 18: mutation testing found them unchecked by fast tests).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.journal import events
from support.repos import make_project

from loopctl.definitions import load_project
from loopctl.definitions.config import Config
from loopctl.journal.events import Event, EventType
from loopctl.journal.fuse import (
    Allowance,
    configured,
    day_spend,
    fuse_item_id,
    fuse_reason,
    open_fuse_item,
    retry_allowance,
    task_attempt_cost,
)
from loopctl.journal.inbox import open_items
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import InboxClosed

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
DAY = "2026-03-02"


def turn(
    seq: int, run: str, task: str, attempt: int | None, tokens: int, usd: float, **kw: Any
) -> Event:
    at = kw.get("at", NOW - timedelta(hours=1))
    data = {"attempt": attempt, "input_tokens": tokens, "output_tokens": 0, "cost_usd": usd}
    return Event(
        seq, at.isoformat(), EventType.AGENT_FINISHED, run, kw.get("loop", "l"), task, data
    )


# Task t: two attempts in run r1 (the first with a maker and a checker turn), one in run r2.
LOG = [
    turn(1, "r1", "t", 1, 300, 0.25),
    turn(2, "r1", "t", 1, 100, 0.0),
    turn(3, "r1", "t", 2, 400, 0.25),
    turn(4, "r2", "t", 1, 400, 0.25),
    turn(5, "r1", "other", 1, 5000, 1.0),  # another task of the same loop
    turn(6, "r1", "t", 1, 7000, 2.0, loop="elsewhere"),  # the same task name in another loop
]


def test_a_tasks_attempt_cost_is_its_mean_over_every_run_it_was_worked_in() -> None:
    # (300 + 100), 400 and 400 over three attempts; attempt 1 of r1 and of r2 are two.
    assert task_attempt_cost(LOG, "l", "t") == (400.0, 0.25)
    assert task_attempt_cost(LOG, "l", "missing") == (0.0, 0.0)


def test_the_day_spend_counts_only_agent_turns_of_today() -> None:
    yesterday = turn(7, "r0", "t", 1, 999, 9.0, at=NOW - timedelta(days=1))
    other = Event(8, NOW.isoformat(), EventType.TICK_STARTED, "r3", "l", None, {"x": 1})
    spent = day_spend([yesterday, other, *LOG, yesterday, other], NOW, UTC)
    assert (spent.day.isoformat(), spent.tokens, spent.usd) == (DAY, 13200, 3.75)


def test_no_daily_cap_allows_everything_without_reading_the_log() -> None:
    assert not configured(Config())
    assert configured(Config(max_tokens_per_day=1))
    assert configured(Config(max_usd_per_day=1.0))
    assert retry_allowance(Config(), LOG, "l", "t", NOW, UTC) == Allowance()


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # 13200 tokens and $3.75 spent today; an attempt of t takes 400 tokens and $0.25.
        (Config(max_tokens_per_day=13200), "daily budget fuse: 13200 of 13200 tokens used on"),
        (Config(max_usd_per_day=3.75), "daily budget fuse: $3.75 of $3.75 used on"),
        (Config(max_tokens_per_day=13599), "and an attempt of this task takes about 400"),
        (Config(max_usd_per_day=3.99), "and an attempt of this task costs about $0.25"),
        (Config(max_tokens_per_day=13600), None),
        (Config(max_usd_per_day=4.0), None),
    ],
)
def test_a_retry_is_refused_when_its_next_attempt_would_pass_a_daily_cap(
    config: Config, expected: str | None
) -> None:
    allowance = retry_allowance(config, LOG, "l", "t", NOW, UTC)
    if expected is None:
        assert allowance.refused is None
    else:
        assert allowance.refused is not None
        assert expected in allowance.refused
        assert f"on {DAY}" in allowance.refused


def test_the_room_left_under_each_cap_goes_to_the_retried_run() -> None:
    both = Config(max_tokens_per_day=20000, max_usd_per_day=5.0)
    assert retry_allowance(both, LOG, "l", "t", NOW, UTC) == Allowance(tokens=6800, usd=1.25)
    tokens_only = Config(max_tokens_per_day=20000)
    assert retry_allowance(tokens_only, LOG, "l", "t", NOW, UTC) == Allowance(tokens=6800)
    usd_only = Config(max_usd_per_day=5.0)
    assert retry_allowance(usd_only, LOG, "l", "t", NOW, UTC) == Allowance(usd=1.25)


def test_an_item_without_a_task_is_held_only_to_the_fuse_itself() -> None:
    config = Config(max_tokens_per_day=13201)
    assert retry_allowance(config, LOG, "l", None, NOW, UTC) == Allowance(tokens=1)
    # No attempt cost is predicted: a cent of room is room.
    usd = retry_allowance(Config(max_usd_per_day=3.76), LOG, "l", None, NOW, UTC)
    assert usd.refused is None
    assert round(usd.usd or 0.0, 6) == 0.01


def test_the_fuse_blows_at_its_cap_not_after() -> None:
    spent = day_spend(LOG, NOW, UTC)
    assert fuse_reason(Config(max_tokens_per_day=13201), spent) is None
    assert fuse_reason(Config(max_usd_per_day=3.76), spent) is None
    assert fuse_reason(Config(max_tokens_per_day=13200), spent) == (
        f"daily budget fuse: 13200 of 13200 tokens used on {DAY}"
        " ([budget] max_tokens_per_day in .loop/config.toml)"
    )
    assert fuse_reason(Config(max_usd_per_day=3.75), spent) == (
        f"daily budget fuse: $3.75 of $3.75 used on {DAY}"
        " ([budget] max_usd_per_day in .loop/config.toml)"
    )
    assert day_spend([], NOW, UTC) == type(spent)(date(2026, 3, 2), 0, 0.0)


def test_a_retry_is_refused_once_the_fuse_has_blown_even_with_no_history() -> None:
    # The day's spend is exactly at the cap: no attempt is predicted (no task), yet nothing
    # more runs today, and the human is told it is the fuse.
    config = Config(max_tokens_per_day=13200)
    refused = retry_allowance(config, LOG, "l", None, NOW, UTC)
    assert refused == Allowance(refused=fuse_reason(config, day_spend(LOG, NOW, UTC)))
    assert refused.refused is not None
    assert "an attempt of this task" not in refused.refused


def test_a_dismissed_fuse_item_stays_dismissed_that_day(repo: Path) -> None:
    make_project(repo, "fixer.py")
    rec = Recorder(load_project(repo))
    spent = day_spend(LOG, NOW, UTC)
    reason = "daily budget fuse: 13200 of 13200 tokens used on 2026-03-02"

    open_fuse_item(rec, reason, spent, "l")
    (item,) = open_items(rec.log.read())
    rec.record(InboxClosed(id=item.id, resolution="dismissed"), run=None, loop="l")
    open_fuse_item(rec, reason, spent, "other-loop")  # the next skipped tick, any loop

    assert open_items(rec.log.read()) == []
    assert [e.data["id"] for e in events(repo, "inbox_opened")] == [fuse_item_id(spent.day)]


def test_the_fuse_item_states_the_days_dollars_to_the_micro_dollar(repo: Path) -> None:
    # What the human reads is what was spent, rounded to a millionth of a dollar: neither the
    # float's noise nor a cent-level rounding that hides a run of tiny calls.
    make_project(repo, "fixer.py")
    rec = Recorder(load_project(repo))
    spent = day_spend([turn(1, "r1", "t", 1, 10, 0.1234567)], NOW, UTC)

    open_fuse_item(rec, "daily budget fuse: $0.12 of $0.10 used", spent, "l")

    (item,) = open_items(rec.log.read())
    assert item.evidence["usd"] == 0.123457
