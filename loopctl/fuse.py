"""The daily budget fuse: what all loops together spent today, and whether more ticks may start.

`[budget] max_tokens_per_day` / `max_usd_per_day` in .loop/config.toml cap the spend of every
loop and goal of the repository per calendar day (in the local time zone). Pure functions over
the event log; the scheduler skips a tick the fuse stops and opens one inbox item a day.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, tzinfo

from loopctl.definitions.config import Config
from loopctl.events import Event, EventType
from loopctl.inbox import new_item_id


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
        data = event.data
        tokens += int(data.get("input_tokens") or 0) + int(data.get("output_tokens") or 0)
        usd += float(data.get("cost_usd") or 0.0)
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
