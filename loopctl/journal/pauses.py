"""Backends paused by a rate limit, a quota or an overload, folded from the log (issue 30).

A turn that ended on a limit (loopctl.backends.rate_limits) records a `backend_paused` note
with the backend and the time it may be asked again; the scheduler holds every loop whose
agents use that backend until then, records `backend_resumed` once the time has passed, and the
loops tick again by themselves. Everything is in the log, so an `up` killed during a pause and
started again keeps the pause: it is read back here, not kept in memory.

One pause per backend at a time: a second limit while a pause holds extends it (the later
`until` wins) and tells nobody again; the first one opens one inbox item, which `[notify]`
sends, and which closes itself when the pause ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import ItemKind, items, new_item_id
from loopctl.journal.overnight import BackendPaused, BackendResumed
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import (
    AgentFinished,
    InboxClosed,
    read,
    read_note,
)
from loopctl.journal.statuses import Outcome

# Two loops of one `up` may hit the same limit at once: one of them opens the pause.
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Pause:
    backend: str
    until: datetime  # aware, UTC
    kind: str
    said: str
    since: datetime  # when the pause began (its first note)
    loop: str | None = None  # the loop whose turn hit the limit first
    item: str | None = None  # the inbox item that told a human

    def describe(self) -> str:
        """What `status` shows: "rate-limited until 14:05 (claude)"."""
        word = {"quota": "quota used up", "overload": "overloaded"}.get(self.kind, "rate-limited")
        at = self.until.astimezone().strftime("%H:%M:%S" if self._soon() else "%H:%M")
        return f"{word} until {at} ({self.backend})"

    def _soon(self) -> bool:
        return (self.until - self.since).total_seconds() < 120

    def until_text(self) -> str:
        return self.until.astimezone(UTC).isoformat(timespec="seconds")


def _when(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def pauses(events: Iterable[Event], start: Mapping[str, Pause] | None = None) -> dict[str, Pause]:
    """Every backend's pause that no `backend_resumed` ended yet, whether or not its time passed
    (folded on from `start`, the pauses of the events before these, when given)."""
    found: dict[str, Pause] = dict(start or {})
    for event in events:
        if event.type != EventType.NOTE:
            continue
        paused = read_note(BackendPaused, event)
        if paused is not None:
            until = _when(paused.until)
            if paused.backend is None or until is None:
                continue
            held = found.get(paused.backend)
            if held is None:
                found[paused.backend] = Pause(
                    paused.backend,
                    until,
                    paused.kind or "rate-limit",
                    paused.said,
                    event.time,
                    event.loop,
                    paused.item,
                )
            elif until > held.until:
                found[paused.backend] = Pause(
                    held.backend, until, held.kind, held.said, held.since, held.loop, held.item
                )
            continue
        resumed = read_note(BackendResumed, event)
        if resumed is not None and resumed.backend is not None:
            found.pop(resumed.backend, None)
    return found


def holding(events: Iterable[Event], now: datetime) -> dict[str, Pause]:
    """The pauses still in force at `now`."""
    return {name: pause for name, pause in pauses(events).items() if pause.until > now}


def streak(events: Iterable[Event], backend: str) -> int:
    """How many pauses `backend` had since its last turn that ended well: the backoff's power."""
    count = 0
    for event in events:
        if event.type == EventType.AGENT_FINISHED:
            turn = read(AgentFinished, event)
            if turn.backend == backend and turn.status == "ok":
                count = 0
        elif event.type == EventType.NOTE:
            paused = read_note(BackendPaused, event)
            if paused is not None and paused.backend == backend:
                count += 1
    return count


def record_pause(
    rec: Recorder,
    paused: BackendPaused,
    *,
    run: str | None,
    loop: str | None,
    task: str | None,
    now: datetime,
) -> Pause:
    """Record `paused`; the first limit of a pause also opens (and notifies) one inbox item."""
    backend = paused.backend or "?"
    with _LOCK:
        held = holding(rec.log.read(), now).get(backend)
        item = None
        if held is None:
            item = new_item_id("backend-paused", backend, now.isoformat())
        rec.record(
            BackendPaused(
                backend=backend,
                until=paused.until,
                kind=paused.kind,
                said=paused.said,
                stated=paused.stated,
                attempt=paused.attempt,
                agent=paused.agent,
                item=item,
            ),
            run=run,
            loop=loop,
            task=task,
        )
        pause = pauses(rec.log.read())[backend]
    if item is not None:
        tell(rec, pause, run=run, loop=loop)
    return pause


def tell(rec: Recorder, pause: Pause, *, run: str | None, loop: str | None) -> None:
    """Open (and notify) `pause`'s inbox item, at most once ever: a second call does nothing.

    The `backend_paused` note is written first and its item after, so a `kill -9` between the
    two leaves a pause nobody was told of; the next scheduler calls this for every pause it
    finds in force (scheduling.pauses.BackendPauses.tell_unheard)."""
    if pause.item is None:
        return
    # Not tied to the task: an open item of a task makes its next run wait for a human,
    # and this one needs nobody (it closes itself when the pause ends).
    rec.open_item(
        ItemKind.ESCALATION,
        f"{pause.describe()}: {pause.said}"[:300] + "; its loops resume by themselves",
        {
            "backend": pause.backend,
            "until": pause.until_text(),
            "kind": pause.kind,
            "said": pause.said,
            "outcome": Outcome.RATE_LIMITED.value,
        },
        run=run,
        loop=loop if loop is not None else pause.loop,
        item_id=pause.item,
        again_once_closed=False,
    )


def record_resumed(rec: Recorder, pause: Pause) -> None:
    """End `pause`: its loops tick again, and its inbox item closes itself."""
    with _LOCK:
        events = rec.log.read()
        if pauses(events).get(pause.backend) is None:
            return  # another thread (or process) ended it already
        rec.record(
            BackendResumed(backend=pause.backend, until=pause.until_text()), run=None, loop=None
        )
        still_open = any(i.id == pause.item and i.is_open for i in items(events))
    if pause.item is not None and still_open:
        rec.record(
            InboxClosed(
                id=pause.item,
                resolution="resolved",
                by="loopctl",
                reason=f"{pause.backend} resumed after its pause",
            ),
            run=None,
            loop=pause.loop,
        )
        rec.refresh_projections()
