"""How the schedulers' sessions ended, and the runs they left interrupted (issue 30).

`loopctl report` says why `up` stopped: its mandate's deadline or spend cap (the
`scheduler_stopped` reason, with the ticks it checkpointed), `loopctl down` or a signal (no
reason), or no word at all (killed: the next `up` started with no stop of the one before). A
`loopctl run` is named only when its mandate stopped it. The runs still interrupted, with their
`run_interrupted` reason, wait for the next start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from loopctl.journal.events import Event, EventType
from loopctl.journal.history import RunView
from loopctl.journal.schema import RunInterrupted, SchedulerStarted, SchedulerStopped, read
from loopctl.journal.statuses import RunStatus


@dataclass(frozen=True, slots=True)
class Ended:
    """One scheduler's end: its `scheduler_stopped`, or the next start that found none."""

    event: Event
    by: str  # up | run
    pid: int | None
    reason: str  # the mandate's words; "" for `loopctl down`, Ctrl-C or a signal
    checkpointed: int = 0
    killed: bool = False  # it recorded no stop (kill -9, a crash, a power cut)
    loops: tuple[str, ...] = ()  # what it scheduled (a `run`'s one loop)

    def words(self, tz: tzinfo) -> str:
        at = self.event.time.astimezone(tz).strftime("%H:%M")
        who = "up" if self.by == "up" else f"run {', '.join(self.loops) or '?'}"
        if self.killed:
            return f"{who} (pid {self.pid}) ended without a word (killed?) before {at}"
        if not self.reason:
            return f"{who} stopped at {at} by `loopctl down`, Ctrl-C or a signal"
        count = self.checkpointed
        return (
            f"{who} stopped at {at}: {self.reason};"
            f" {count} turn{'s' if count != 1 else ''} checkpointed"
        )

    def command(self) -> str:
        return "loopctl up" if self.by == "up" else f"loopctl run {' '.join(self.loops[:1])}"

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.event.ts,
            "by": self.by,
            "pid": self.pid,
            "reason": self.reason,
            "checkpointed": self.checkpointed,
            "killed": self.killed,
            "loops": list(self.loops),
        }


def ended(events: Iterable[Event], since: datetime | None, now: datetime) -> list[Ended]:
    """The ends of `up` sessions (and of mandate-bounded `run`s) between `since` and `now`."""
    found: list[Ended] = []
    open_up: tuple[int | None, tuple[str, ...]] | None = None  # an `up` started, not stopped
    loops_of: dict[int | None, tuple[str, ...]] = {}
    for event in events:
        if event.type == EventType.SCHEDULER_STARTED:
            started = read(SchedulerStarted, event)
            names = tuple(str(name) for name in started.loops)
            loops_of[started.pid] = names
            if started.by != "up":
                continue
            if open_up is not None and open_up[0] != started.pid and _within(event, since, now):
                found.append(Ended(event, "up", open_up[0], "", killed=True, loops=open_up[1]))
            open_up = (started.pid, names)
        elif event.type == EventType.SCHEDULER_STOPPED:
            stopped = read(SchedulerStopped, event)
            by = stopped.by or ""
            if by == "up":
                open_up = None
            if not _within(event, since, now) or by not in ("up", "run"):
                continue
            if by == "run" and not stopped.reason:
                continue  # a foreground run a person stopped: nothing to tell them
            found.append(
                Ended(
                    event,
                    by,
                    stopped.pid,
                    stopped.reason,
                    stopped.checkpointed,
                    loops=loops_of.get(stopped.pid, ()),
                )
            )
    return found


def left_interrupted(
    events: Sequence[Event], runs: Mapping[str, RunView], since: datetime | None, now: datetime
) -> list[tuple[Event, str]]:
    """Each `run_interrupted` in the window whose run is still interrupted, with its reason."""
    found: dict[str, tuple[Event, str]] = {}
    for event in events:
        if event.type != EventType.RUN_INTERRUPTED or not event.run:
            continue
        view = runs.get(event.run)
        if view is None or view.status != RunStatus.INTERRUPTED:
            continue
        if _within(event, since, now):
            found[event.run] = (event, read(RunInterrupted, event).reason)
    return list(found.values())


def _within(event: Event, since: datetime | None, now: datetime) -> bool:
    try:
        when = event.time
    except ValueError:
        return False
    return (since is None or when >= since) and when <= now
