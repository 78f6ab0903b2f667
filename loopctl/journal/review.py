"""The reviewer's side of the log (issue 30): which open items await a human's decision, which
loops wait for their reviewer, and how fast items are decided.

Pure folds over events; `loopctl.engine.review_gate` decides with them, `status` shows them.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import InboxItem, ItemKind, items
from loopctl.journal.overnight import WaitingForReview
from loopctl.journal.schema import (
    Approved,
    InboxClosed,
    SchedulerStarted,
    SchedulerStopped,
    inbox_opened,
    read,
    read_note,
)

# How an item left the inbox by a human's hand; `superseded` (the work changed, or the task
# succeeded later) is loopctl's doing and decides nothing.
HUMAN_RESOLUTIONS = frozenset({"approved", "rejected", "dismissed", "replied", "retried"})


def awaits_human(item: InboxItem) -> bool:
    """Whether an open item waits for a human's decision before its work can go on: a gated
    delivery step or an agent's command not yet approved, or a maker's question. Failures and
    escalations without a question are for information: nothing waits on them."""
    if not item.is_open:
        return False
    if item.kind == ItemKind.APPROVAL:
        return item.approved is None
    return item.kind == ItemKind.ESCALATION and bool(item.evidence.get("question"))


def awaiting(found: Iterable[InboxItem]) -> list[InboxItem]:
    """The open items that await a human, oldest first (`[review] max_open` counts these)."""
    return [item for item in found if awaits_human(item)]


@dataclass(frozen=True, slots=True)
class Waiting:
    """A loop waiting for its reviewer: since when, and how full the inbox was."""

    loop: str
    since: str
    open_count: int
    max_open: int
    items: tuple[str, ...] = ()
    pid: int | None = None

    def describe(self) -> str:
        return f"waiting-for-review ({self.open_count}/{self.max_open} open)"

    def to_json(self) -> dict[str, object]:
        return {
            "since": self.since,
            "open": self.open_count,
            "max_open": self.max_open,
            "items": list(self.items),
        }


def waiting_loops(events: Iterable[Event]) -> dict[str, Waiting]:
    """Per loop, the wait it is in now: its last `waiting_for_review` note not followed by a
    tick of the loop, nor by the scheduler that recorded it stopping or starting again."""
    found: dict[str, Waiting] = {}
    for event in events:
        if event.type == EventType.NOTE and event.loop is not None:
            note = read_note(WaitingForReview, event)
            if note is not None:
                found[event.loop] = Waiting(
                    event.loop, event.ts, note.open_count, note.max_open, note.items, note.pid
                )
        elif event.type in (EventType.TICK_STARTED, EventType.RUN_RESUMED):
            if event.loop is not None:
                found.pop(event.loop, None)
        elif event.type == EventType.SCHEDULER_STOPPED:
            pid = read(SchedulerStopped, event).pid
            for name in [n for n, w in found.items() if w.pid is None or w.pid == pid]:
                del found[name]
        elif event.type == EventType.SCHEDULER_STARTED:
            for name in read(SchedulerStarted, event).loops:
                found.pop(str(name), None)
    return found


@dataclass(frozen=True, slots=True)
class Throughput:
    """How fast the reviewer decides: items decided in the window, the median time from an
    item's opening to its decision, and how many await a human now."""

    decided: int
    median_s: float | None
    open_now: int
    window_s: float

    def describe(self) -> str:
        window = _span(self.window_s)
        median = (
            f", median {_span(self.median_s)} open→decision" if self.median_s is not None else ""
        )
        return f"review: {self.decided} decided in {window}{median}, {self.open_now} open"

    def to_json(self) -> dict[str, object]:
        return {
            "decided": self.decided,
            "median_s": None if self.median_s is None else round(self.median_s, 3),
            "open": self.open_now,
            "window_s": self.window_s,
        }


def throughput(
    events: Sequence[Event], now: datetime, window: timedelta = timedelta(hours=24)
) -> Throughput:
    """Review throughput from the log: items that await a human (approvals and questions),
    from `inbox_opened` to their first decision (an `approved`, or a close by a human), for
    the decisions made in the `window` before `now`."""
    opened: dict[str, datetime] = {}
    decided: dict[str, datetime] = {}
    for event in events:
        if event.type == EventType.INBOX_OPENED:
            item = inbox_opened(event)
            question = item.kind == ItemKind.ESCALATION and bool(item.evidence.get("question"))
            if item.id and (item.kind == ItemKind.APPROVAL or question):
                opened.setdefault(item.id, event.time)
        elif event.type == EventType.APPROVED:
            ident = read(Approved, event).id
            if ident in opened:
                decided.setdefault(ident, event.time)
        elif event.type == EventType.INBOX_CLOSED:
            closed = read(InboxClosed, event)
            if closed.id in opened and closed.resolution in HUMAN_RESOLUTIONS:
                decided.setdefault(closed.id, event.time)
    start = now - window
    spans = [
        (at - opened[ident]).total_seconds() for ident, at in decided.items() if start <= at <= now
    ]
    return Throughput(
        decided=len(spans),
        median_s=statistics.median(spans) if spans else None,
        open_now=len(awaiting(items(events))),
        window_s=window.total_seconds(),
    )


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{round(seconds)}s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)}m"
    if seconds < 36 * 3600:
        return f"{round(seconds / 3600)}h"
    return f"{round(seconds / 86400)}d"
