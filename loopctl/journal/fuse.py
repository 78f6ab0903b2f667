"""The daily budget fuse: what all loops together spent today, and whether more ticks may start.

`[budget] max_tokens_per_day` / `max_usd_per_day` in .loop/config.toml cap the spend of every
loop and goal of the repository per calendar day (in the local time zone). Pure functions over
the event log; the scheduler skips a tick the fuse stops and opens one inbox item a day.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING

from loopctl.definitions.config import Config
from loopctl.journal.budgets import mean_attempt_cost
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import ItemKind, new_item_id
from loopctl.journal.schema import agent_finished
from loopctl.journal.statuses import Outcome

if TYPE_CHECKING:
    from loopctl.journal.recorder import Recorder


@dataclass(frozen=True, slots=True)
class DaySpend:
    day: date
    tokens: int = 0
    usd: float = 0.0


def day_spend(events: Iterable[Event], now: datetime, tz: tzinfo) -> DaySpend:
    """Tokens and USD every agent call reported on `now`'s calendar day in `tz`."""
    today = now.astimezone(tz).date()
    tokens = 0
    usd = 0.0
    for event in events:
        if event.type != EventType.AGENT_FINISHED or event.time.astimezone(tz).date() != today:
            continue
        turn = agent_finished(event)  # clamped: an old log may hold 1e999 or NaN
        tokens += turn.tokens
        usd += turn.cost_usd or 0.0
    return DaySpend(today, tokens, usd)


def configured(config: Config) -> bool:
    return config.max_tokens_per_day is not None or config.max_usd_per_day is not None


def fuse_reason(config: Config, spent: DaySpend) -> str | None:
    """Why no further tick may start today, or None while the fuse holds."""
    cap_tokens, cap_usd = config.max_tokens_per_day, config.max_usd_per_day
    if cap_tokens is not None and spent.tokens >= cap_tokens:
        return (
            f"daily budget fuse: {spent.tokens} of {cap_tokens} tokens used on {spent.day}"
            " ([budget] max_tokens_per_day in .loop/config.toml)"
        )
    if cap_usd is not None and spent.usd >= cap_usd:
        return (
            f"daily budget fuse: ${spent.usd:.2f} of ${cap_usd:.2f} used on {spent.day}"
            " ([budget] max_usd_per_day in .loop/config.toml)"
        )
    return None


def fuse_item_id(day: date) -> str:
    """The inbox item a blown fuse opens: one per day, whichever loop hit it first."""
    return new_item_id("budget-fuse", day.isoformat())


def open_fuse_item(rec: Recorder, reason: str, spent: DaySpend, loop: str) -> None:
    """The inbox item a blown fuse opens: one a day, whichever loop (or worker) hit it first;
    dismissed, it stays dismissed."""
    rec.open_item(
        ItemKind.ESCALATION,
        f"{reason}; scheduled ticks are skipped until tomorrow",
        {
            "reason": reason,
            "tokens": spent.tokens,
            "usd": round(spent.usd, 6),
            "day": spent.day.isoformat(),
            "outcome": Outcome.BUDGET_STOP.value,
        },
        run=None,
        loop=loop,
        item_id=fuse_item_id(spent.day),
        again_once_closed=False,
    )


def task_attempt_cost(events: Iterable[Event], loop: str, task: str) -> tuple[float, float]:
    """Mean tokens and USD of one attempt of `task`, over every run it was worked in.

    A retried task keeps its spend history: what its earlier attempts cost predicts the next.
    """
    return mean_attempt_cost(
        (event for event in events if event.loop == loop and event.task == task),
        attempt_of=lambda event: (event.run, agent_finished(event).attempt),
    )


@dataclass(frozen=True, slots=True)
class Allowance:
    """What a retried task may still spend today: a refusal, or the room left under the caps."""

    refused: str | None = None
    tokens: int | None = None  # None: no daily token cap
    usd: float | None = None


def retry_allowance(
    config: Config, events: Iterable[Event], loop: str, task: str | None, now: datetime, tz: tzinfo
) -> Allowance:
    """Whether `inbox retry`/`reply` may run a task again today, counted like any tick.

    Refused when the fuse is blown, or when the task's next attempt (as its history predicts)
    would pass a daily cap; otherwise the room left, for the retried run's own budget.
    """
    if not configured(config):
        return Allowance()
    seen = list(events)
    spent = day_spend(seen, now, tz)
    reason = fuse_reason(config, spent)
    if reason is not None:
        return Allowance(refused=reason)
    tokens, usd = task_attempt_cost(seen, loop, task) if task else (0.0, 0.0)
    cap_tokens, cap_usd = config.max_tokens_per_day, config.max_usd_per_day
    if cap_tokens is not None and spent.tokens + tokens > cap_tokens:
        return Allowance(
            refused=f"daily budget fuse: {spent.tokens} of {cap_tokens} tokens used on"
            f" {spent.day} and an attempt of this task takes about {int(tokens)}"
            " ([budget] max_tokens_per_day in .loop/config.toml)"
        )
    if cap_usd is not None and spent.usd + usd > cap_usd:
        return Allowance(
            refused=f"daily budget fuse: ${spent.usd:.2f} of ${cap_usd:.2f} used on {spent.day}"
            f" and an attempt of this task costs about ${usd:.2f}"
            " ([budget] max_usd_per_day in .loop/config.toml)"
        )
    return Allowance(
        tokens=cap_tokens - spent.tokens if cap_tokens is not None else None,
        usd=cap_usd - spent.usd if cap_usd is not None else None,
    )
