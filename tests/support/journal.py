"""Reading a test repository's event log, and waiting for an event to be written."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from loopctl.journal.events import Event, EventLog
from loopctl.paths import ProjectPaths
from support.processes import wait_for


def events(repo: Path, type_: str | None = None, task: str | None = None) -> list[Event]:
    found = EventLog(ProjectPaths(repo).events_file).read()
    return [
        e for e in found if (type_ is None or e.type == type_) and (task is None or e.task == task)
    ]


def attempt_starts(repo: Path, task: str) -> list[int]:
    """The attempt number of every attempt_started event of `task`, in order."""
    return [int(e.data["attempt"]) for e in events(repo, "attempt_started", task)]


def wait_event(
    repo: Path,
    type_: str,
    *,
    after: int = 0,
    count: int = 1,
    what: str = "",
    timeout: float = 30,
    **match: Any,
) -> list[Event]:
    """Wait until the log holds `count` events of `type_` after seq `after` matching `match`."""

    def found() -> list[Event] | None:
        hits = [
            e
            for e in events(repo, type_)
            if e.seq > after and all(_get(e, k) == v for k, v in match.items())
        ]
        return hits if len(hits) >= count else None

    return wait_for(found, what or f"{count} {type_} event(s) {match}", timeout=timeout)


def _get(event: Event, key: str) -> Any:
    if key == "loop":
        return event.loop
    if key.startswith("trigger."):
        trigger = event.data.get("trigger") or {}
        return trigger.get(key.split(".", 1)[1])
    return event.data.get(key)


def last_seq(repo: Path) -> int:
    found = events(repo)
    return found[-1].seq if found else 0


def due(event: Event) -> datetime:
    return datetime.fromisoformat(event.data["trigger"]["due"])
