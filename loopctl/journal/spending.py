"""Spend over time: tokens and USD of every agent call in the log, grouped by loop, backend,
day or task. Pure functions over events; `loopctl spend` renders the result.

Days are calendar days in a given time zone (the CLI passes the local one, as the daily budget
fuse does), so "today" here is the fuse's today.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import Any

from loopctl.definitions.fields import parse_duration
from loopctl.errors import UsageError
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import AgentFinished, agent_finished


class GroupBy(StrEnum):
    LOOP = "loop"
    BACKEND = "backend"
    DAY = "day"
    TASK = "task"


@dataclass(frozen=True, slots=True)
class SpendRow:
    """What the agent calls of one group cost; `unpriced` calls reported no cost."""

    key: str
    tokens: int = 0
    usd: float = 0.0
    calls: int = 0
    unpriced: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "tokens": self.tokens,
            "usd": round(self.usd, 6),
            "calls": self.calls,
            "unpriced_calls": self.unpriced,
        }


@dataclass(frozen=True, slots=True)
class SpendReport:
    """Spend in a window, grouped one way, with a per-day series for a chart."""

    by: GroupBy
    since: datetime | None  # None: since the log began
    until: datetime
    rows: tuple[SpendRow, ...]
    total: SpendRow
    days: tuple[SpendRow, ...]  # every calendar day of the window, oldest first, zeros included

    def to_json(self) -> dict[str, Any]:
        return {
            "by": self.by.value,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat(),
            "rows": [row.to_json() for row in self.rows],
            "total": self.total.to_json(),
        }


def parse_since(text: str, now: datetime) -> datetime | None:
    """`--since`: a duration back from `now` ("7d", "24h", "30m"), or "all" (None)."""
    if text.strip().lower() == "all":
        return None

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}, or all") from None
    if seconds <= 0:
        raise UsageError(f"--since: {text!r} is no time at all; use forms like 7d, 24h, 30m")
    try:
        return now - timedelta(seconds=seconds)
    except OverflowError:
        return None  # further back than any log: the same as "all"


class _Sum:
    __slots__ = ("calls", "tokens", "unpriced", "usd")

    def __init__(self) -> None:
        self.tokens = 0
        self.usd = 0.0
        self.calls = 0
        self.unpriced = 0

    def row(self, key: str) -> SpendRow:
        return SpendRow(key, self.tokens, self.usd, self.calls, self.unpriced)


def _key(event: Event, turn: AgentFinished, by: GroupBy, day: date) -> str:
    if by is GroupBy.DAY:
        return day.isoformat()
    if by is GroupBy.LOOP:
        return event.loop or "-"
    if by is GroupBy.BACKEND:
        return turn.backend or "unknown"
    return f"{event.loop or '-'}/{event.task or '-'}"


def spend_report(
    events: Iterable[Event],
    *,
    by: GroupBy,
    since: datetime | None,
    now: datetime,
    tz: tzinfo,
) -> SpendReport:
    """Sum `agent_finished` events from `since` to `now` (values clamped as on every read)."""
    groups: dict[str, _Sum] = {}
    per_day: dict[date, _Sum] = {}
    total = _Sum()
    for event in events:
        if event.type != EventType.AGENT_FINISHED:
            continue
        when = event.time
        if (since is not None and when < since) or when > now:
            continue
        turn = agent_finished(event)  # clamped: an old log may hold 1e999 or NaN
        tokens, cost = turn.tokens, turn.cost_usd
        day = when.astimezone(tz).date()
        buckets = [total, groups.setdefault(_key(event, turn, by, day), _Sum())]
        if by is not GroupBy.DAY:  # by day, the groups are the days already
            buckets.append(per_day.setdefault(day, _Sum()))
        for bucket in buckets:
            bucket.tokens += tokens
            bucket.calls += 1
            if cost is None:
                bucket.unpriced += 1
            else:
                bucket.usd += cost
    if by is GroupBy.DAY:
        per_day = {date.fromisoformat(key): value for key, value in groups.items()}
        rows = sorted((s.row(k) for k, s in groups.items()), key=lambda r: r.key)
    else:
        rows = sorted(
            (s.row(k) for k, s in groups.items()), key=lambda r: (-r.usd, -r.tokens, r.key)
        )
    return SpendReport(
        by=by,
        since=since,
        until=now,
        rows=tuple(rows),
        total=total.row("total"),
        days=_days(per_day, since, now, tz),
    )


def _days(
    per_day: dict[date, _Sum], since: datetime | None, now: datetime, tz: tzinfo
) -> tuple[SpendRow, ...]:
    """One row per calendar day from the window's first day (or the first spend) to today."""
    last = now.astimezone(tz).date()
    if since is not None:
        first = since.astimezone(tz).date()
    elif per_day:
        first = min(per_day)
    else:
        return ()
    empty = _Sum()
    span = (last - first).days
    return tuple(
        per_day.get(day, empty).row(day.isoformat())
        for day in (first + timedelta(days=n) for n in range(span + 1))
    )
