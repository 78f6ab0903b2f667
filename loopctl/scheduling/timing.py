"""When a loop is due: a pure function of its schedule, its last recorded tick and the time.

No clock, no threads, no I/O. `loopctl run`, `loopctl up` and `loopctl status` all ask the same
question here ("what should happen to this loop at time T?"), and the answer only depends on
what the event log says, so a restart after a crash decides exactly as the process that died
would have (invariant 1, docs/INVARIANTS.md; issue 4). APScheduler is used as a cron
calculator only.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from loopctl.definitions.loops import Loop, Trigger, TriggerKind
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import RunResumed, TickSkipped, TickStarted, read

# Counting missed cron slots after a long downtime is a walk over fire times; past this many
# the count is reported as a lower bound.
_MAX_COUNTED = 100_000
_TINY = timedelta(microseconds=1)
# Loops sharing a slot are spread over this part of their period, at most MAX_SPREAD_S: a
# hundred loops every 30 s then start a few a second rather than all in one instant.
SPREAD_FRACTION = 0.5
MAX_SPREAD_S = 300.0


class Overlap(StrEnum):
    """What happens to a tick that comes due while the previous one still runs."""

    SKIP = "skip"
    QUEUE_ONE = "queue-one"


class CatchUp(StrEnum):
    """What happens to slots that passed while nothing was running the loop."""

    ONE = "one"
    NONE = "none"


class Action(StrEnum):
    WAIT = "wait"  # nothing to do before `wake`
    FIRE = "fire"  # start a tick for `slot`
    SKIP = "skip"  # record `slot` as skipped, with `reason`
    QUEUE = "queue"  # run one tick for `slot` as soon as the running one ends


class Fired(StrEnum):
    """Why a tick started; recorded in its `tick_started` event."""

    START = "start"  # the first tick of `loopctl run`
    SCHEDULE = "schedule"  # its slot came
    CATCH_UP = "catch-up"  # one tick for the slots missed while loopctl was not running
    QUEUED = "queued"  # it came due while the previous tick ran (overlap = "queue-one")
    WATCH = "watch"  # files it watches changed


JitterFn = Callable[[str, datetime, float], float]


@dataclass(frozen=True, slots=True)
class Schedule:
    """The timing part of a loop: its trigger plus the overlap / catch-up / jitter / tz options."""

    kind: TriggerKind
    every_s: float | None = None
    cron: str | None = None
    watch: tuple[str, ...] = ()
    tz: str | None = None  # None: the local time zone
    jitter_s: float | None = None  # None: not set (a loop sharing its slot may get a spread)
    catch_up: CatchUp = CatchUp.ONE
    overlap: Overlap = Overlap.SKIP
    spread_s: float = 0.0  # `up`: the default spread of loops sharing a slot (default_spreads)

    @classmethod
    def of(cls, loop: Loop, trigger: Trigger | None = None) -> Schedule | None:
        """The schedule of `loop`, with `trigger` (from the command line) replacing its own."""
        chosen = trigger or loop.trigger
        if chosen is None:
            return None
        return cls(
            kind=chosen.kind,
            every_s=chosen.every_s,
            cron=chosen.cron,
            watch=chosen.watch,
            tz=loop.tz,
            jitter_s=loop.jitter_s,
            catch_up=CatchUp(loop.catch_up),
            overlap=Overlap(loop.overlap),
        )

    @property
    def timed(self) -> bool:
        return self.kind is not TriggerKind.WATCH

    def describe(self) -> str:
        return Trigger(self.kind, self.every_s, self.cron, self.watch).describe()


@dataclass(frozen=True, slots=True)
class LoopTiming:
    """What is known about one loop when deciding."""

    started: datetime  # when the scheduler began: the anchor of a loop that never ticked
    last_slot: datetime | None = None  # the slot of its last recorded tick (fired or skipped)
    fire_on_start: bool = False  # a loop with no last slot fires at `started` (`loopctl run`)
    running: bool = False
    queued: datetime | None = None  # the slot of a tick waiting for the running one
    changes: tuple[str, ...] = ()  # paths a watch saw since the last tick (repository-relative)


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    slot: datetime | None = None  # the due time of the tick fired, skipped or queued
    wake: datetime | None = None  # WAIT: when to ask again (None: only when something happens)
    fired: Fired | None = None
    missed: int = 0  # slots passed over by this tick (coalesced into it)
    reason: str = ""  # SKIP: why
    changed: tuple[str, ...] = ()

    @property
    def due(self) -> bool:
        return self.action is Action.FIRE


def zone(name: str | None) -> tzinfo:
    """The time zone called `name`, or the machine's local one (honours $TZ)."""
    if name:
        return ZoneInfo(name)
    # lazy: only a loop without `tz` asks for the local zone
    from tzlocal import get_localzone

    local: tzinfo = get_localzone()
    return local


def stable_jitter(name: str, slot: datetime, jitter_s: float) -> float:
    """A delay in [0, jitter_s) that depends only on the loop and the slot.

    Stable, so that every process (and a restarted one) agrees on when a slot fires.
    """
    if jitter_s <= 0:
        return 0.0
    seed = f"{name}\x1f{slot.astimezone(UTC).isoformat()}"
    return random.Random(seed).uniform(0.0, jitter_s)


def spread_offset(name: str, spread_s: float) -> float:
    """Where in [0, spread_s) loop `name` fires after each slot: the same offset every slot and
    in every process (a hash of the name, not Python's salted `hash`), so restarts agree."""
    if spread_s <= 0:
        return 0.0
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()
    return spread_s * int.from_bytes(digest[:8], "big") / 2**64


def delay_s(
    name: str, schedule: Schedule, slot: datetime, jitter: JitterFn = stable_jitter
) -> float:
    """How long after `slot` loop `name` fires: its jitter, or its default spread."""
    return jitter(name, slot, schedule.jitter_s or 0.0) + spread_offset(name, schedule.spread_s)


def period_s(schedule: Schedule, now: datetime) -> float | None:
    """The time between two slots of a timed schedule (for a cron, the two after `now`)."""
    if schedule.kind is TriggerKind.EVERY:
        return schedule.every_s
    first = next_slot(schedule, now)
    second = next_slot(schedule, first) if first is not None else None
    return (second - first).total_seconds() if first and second else None


def default_spreads(schedules: Mapping[str, Schedule], now: datetime) -> dict[str, float]:
    """The spread each loop gets when several share a slot (issue 30): loops with the same
    every/cron (and zone) and no `jitter` of their own fire spread over SPREAD_FRACTION of the
    period (at most MAX_SPREAD_S), each at its own stable offset, instead of all at once. A
    loop alone in its slot, or with `jitter` set (even "0s"), keeps its exact time."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, schedule in schedules.items():
        if not schedule.timed or schedule.jitter_s is not None:
            continue
        key = (schedule.kind, schedule.every_s, schedule.cron, schedule.tz)
        groups.setdefault(key, []).append(name)
    spreads: dict[str, float] = {}
    for names in groups.values():
        if len(names) < 2:
            continue
        period = period_s(schedules[names[0]], now)
        if not period:
            continue
        spread = min(MAX_SPREAD_S, period * SPREAD_FRACTION)
        spreads.update(dict.fromkeys(names, spread))
    return spreads


def with_spreads(schedules: Mapping[str, Schedule], now: datetime) -> dict[str, Schedule]:
    """`schedules`, each with its default spread (see `default_spreads`) set."""
    spreads = default_spreads(schedules, now)
    return {
        name: replace(schedule, spread_s=spreads.get(name, 0.0))
        for name, schedule in schedules.items()
    }


@functools.lru_cache(maxsize=64)
def _cron_trigger(expr: str, tz: str | None) -> Any:
    # lazy: apscheduler is slow to import and only cron loops need it (bench/startup.py)
    from apscheduler.triggers.cron import CronTrigger

    return CronTrigger.from_crontab(expr, timezone=zone(tz))


def _fixed_hour(expr: str) -> bool:
    fields = expr.split()
    return len(fields) == 5 and "*" not in fields[1]


def next_slot(schedule: Schedule, after: datetime) -> datetime | None:
    """The first slot strictly after `after` (None for a watch, or a cron that never fires)."""
    if schedule.kind is TriggerKind.EVERY and schedule.every_s:
        return after + timedelta(seconds=schedule.every_s)
    if schedule.kind is not TriggerKind.CRON or not schedule.cron:
        return None
    trigger = _cron_trigger(schedule.cron, schedule.tz)
    # Hand APScheduler UTC instants, adding after the conversion: arithmetic on a local time
    # drops its `fold`, and a time in the repeated hour of a DST change then means the other one.
    candidate: datetime | None = trigger.get_next_fire_time(None, after.astimezone(UTC) + _TINY)
    if candidate is not None and _fixed_hour(schedule.cron):
        # When clocks fall back, a job at a fixed hour does not run again at a wall time it
        # already ran at (as cron does); jobs with a wildcard hour keep their elapsed-time pace.
        seen = after.astimezone(candidate.tzinfo).replace(tzinfo=None)
        while candidate is not None and candidate.replace(tzinfo=None) <= seen:
            candidate = trigger.get_next_fire_time(None, candidate.astimezone(UTC) + _TINY)
    return candidate.astimezone(UTC) if candidate is not None else None


def _latest_slot(schedule: Schedule, first: datetime, now: datetime) -> tuple[datetime, int]:
    """The last slot at or before `now`, starting from slot `first`, and how many there were."""
    if schedule.kind is TriggerKind.EVERY and schedule.every_s:
        steps = math.floor((now - first).total_seconds() / schedule.every_s)
        steps = max(steps, 0)
        return first + timedelta(seconds=schedule.every_s * steps), steps + 1
    latest, count = first, 1
    while count < _MAX_COUNTED:
        following = next_slot(schedule, latest)
        if following is None or following > now:
            return latest, count
        latest, count = following, count + 1
    # A very long downtime of a frequent cron: jump to the last day instead of walking on.
    jump, following = now - timedelta(days=1), None
    while (following := next_slot(schedule, jump)) is not None and following <= now:
        jump = following
    return (jump if jump > latest else latest), count


def grace_s(period_s: float) -> float:
    """How late a slot may fire and still count as on time rather than as a catch-up."""
    return min(300.0, max(0.5, period_s / 2))


def decide(
    name: str,
    schedule: Schedule,
    timing: LoopTiming,
    now: datetime,
    *,
    jitter: JitterFn = stable_jitter,
) -> Decision:
    """What should happen to loop `name` at `now`.

    Apply the decision (FIRE: start the tick and set `running`; SKIP/QUEUE: advance
    `last_slot` to its slot) and ask again until the answer is WAIT.
    """
    if timing.queued is not None and not timing.running:
        return Decision(Action.FIRE, slot=timing.queued, fired=Fired.QUEUED)
    if timing.last_slot is None and timing.fire_on_start and not timing.running:
        return Decision(Action.FIRE, slot=timing.started, fired=Fired.START)
    if not schedule.timed:
        return _decide_watch(schedule, timing, now)
    anchor = timing.last_slot or timing.started
    first = next_slot(schedule, anchor)
    if first is None:
        return Decision(Action.WAIT)
    due_at = first + timedelta(seconds=delay_s(name, schedule, first, jitter))
    if now < due_at:
        return Decision(Action.WAIT, wake=due_at)
    latest, count = _latest_slot(schedule, first, now)
    if timing.running:
        if schedule.overlap is Overlap.QUEUE_ONE and timing.queued is None:
            return Decision(Action.QUEUE, slot=latest, missed=count - 1)
        reason = (
            "the previous tick is still running and another is already queued"
            if timing.queued is not None
            else "the previous tick is still running"
        )
        return Decision(Action.SKIP, slot=latest, missed=count - 1, reason=reason)
    following = next_slot(schedule, latest)
    period = (
        schedule.every_s
        if schedule.every_s
        else ((following - latest).total_seconds() if following else 86400.0)
    )
    late = (now - latest).total_seconds() - delay_s(name, schedule, latest, jitter)
    stale = late > grace_s(period)
    missed = count if stale else count - 1  # slots that did not fire on time
    if not missed:
        return Decision(Action.FIRE, slot=latest, fired=Fired.SCHEDULE)
    if schedule.catch_up is CatchUp.ONE:
        # One tick for everything missed; the latest slot stands for them all.
        return Decision(Action.FIRE, slot=latest, fired=Fired.CATCH_UP, missed=missed)
    if not stale:
        return Decision(Action.FIRE, slot=latest, fired=Fired.SCHEDULE, missed=missed)
    return Decision(
        Action.SKIP,
        slot=latest,
        missed=missed,
        reason=f'{missed} slot(s) missed while nothing ran the loop (catch_up = "none")',
    )


def _decide_watch(schedule: Schedule, timing: LoopTiming, now: datetime) -> Decision:
    if not timing.changes:
        return Decision(Action.WAIT)
    if timing.running:
        if schedule.overlap is Overlap.QUEUE_ONE:
            # The changes stay pending and fire one tick when the running one ends.
            return Decision(Action.WAIT)
        return Decision(
            Action.SKIP,
            slot=now,
            reason="the previous tick is still running",
            changed=timing.changes,
        )
    return Decision(Action.FIRE, slot=now, fired=Fired.WATCH, changed=timing.changes)


def due_loops(
    loops: Mapping[str, tuple[Schedule, LoopTiming]],
    now: datetime,
    *,
    jitter: JitterFn = stable_jitter,
) -> dict[str, Decision]:
    """Which loops are due at `now`, given their schedules and last ticks: one decision each."""
    return {
        name: decide(name, schedule, timing, now, jitter=jitter)
        for name, (schedule, timing) in loops.items()
    }


def slot_of(event: Event) -> datetime | None:
    """The slot a tick event stands for: its recorded due time, else when it happened."""
    if event.type not in (EventType.TICK_STARTED, EventType.RUN_RESUMED, EventType.TICK_SKIPPED):
        return None
    trigger = (
        read(TickStarted, event).trigger
        if event.type == EventType.TICK_STARTED
        else read(RunResumed, event).trigger
        if event.type == EventType.RUN_RESUMED
        else read(TickSkipped, event).trigger
    )
    due = trigger.get("due") if isinstance(trigger, Mapping) else None
    if isinstance(due, str):
        try:
            parsed = datetime.fromisoformat(due)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    return event.time


def last_slots(events: Iterable[Event]) -> dict[str, datetime]:
    """Per loop, the slot of its last recorded tick (started, resumed or skipped)."""
    found: dict[str, datetime] = {}
    for event in events:
        if event.loop is None:
            continue
        slot = slot_of(event)
        if slot is None:
            continue
        previous = found.get(event.loop)
        if previous is None or slot > previous:
            found[event.loop] = slot
    return found


def next_fire(
    name: str,
    schedule: Schedule,
    timing: LoopTiming,
    now: datetime,
    *,
    jitter: JitterFn = stable_jitter,
) -> datetime | None:
    """When the loop will next fire: `now` if it is due, None if only a change can fire it."""
    decision = decide(name, schedule, timing, now, jitter=jitter)
    if decision.action is Action.WAIT:
        return decision.wake
    return now
