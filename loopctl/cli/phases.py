"""Named phases of a task (baseline check, agent, checks, commit) and how long each took.

Read from the events a run already writes, in order, so the live views and `replay` say the
same thing and the log format does not change: a phase opens on the event that starts it and
closes on the one that ends it. The baseline check writes no event when it starts, so it opens
when the task's workspace is ready (the next thing a task does is check its base).
"""

from __future__ import annotations

from datetime import datetime

from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import (
    AgentStarted,
    WorkspaceReady,
    agent_finished,
    check_finished,
    read,
    read_note,
)
from loopctl.text import strip_controls

BASELINE = "baseline check"
AGENT = "agent"
CHECKS = "checks"
COMMIT = "commit"


def _at(event: Event) -> datetime | None:
    try:
        return datetime.fromisoformat(event.ts)
    except ValueError:
        return None


def _took(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return "?"
    return f"{max(0.0, (end - start).total_seconds()):.1f}s"


class PhaseClock:
    """Feed it every event of a run, in order; it says which phase starts and which ended."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], tuple[str, datetime | None]] = {}

    def lines(self, event: Event) -> list[str]:
        """The phase lines this event implies (none for most events)."""
        if event.task is None:
            return []
        key = (event.run or "", event.task)
        kind = event.type
        said: list[str] = []
        if kind == EventType.WORKTREE_CREATED or read_note(WorkspaceReady, event) is not None:
            if self._open.get(key, ("", None))[0] != BASELINE:
                said += self._start(key, event, BASELINE, "the checks run on the base commit")
        elif kind == EventType.BASELINE_CHECKED:
            said += self._end(key, event, BASELINE)
        elif kind == EventType.AGENT_STARTED:
            said += self._end(key, event, BASELINE)
            turn = read(AgentStarted, event)
            who = strip_controls(f"{turn.role or 'agent'} {turn.agent or ''}")
            said += self._start(key, event, AGENT, who.strip())
        elif kind == EventType.AGENT_FINISHED:
            # Its own line says how long the turn took; the checks follow a maker's turn.
            self._open.pop(key, None)
            ended = agent_finished(event)
            if ended.role in (None, "maker") and ended.status in (None, "ok"):
                said += self._start(key, event, CHECKS, "")
        elif kind == EventType.CHECK_FINISHED:
            said += self._end(key, event, CHECKS)
            if check_finished(event).passed:
                said += self._start(key, event, COMMIT, "")
        elif kind == EventType.COMMIT_CREATED:
            said += self._end(key, event, COMMIT)
        elif kind in (EventType.TASK_FINISHED, EventType.ATTEMPT_STARTED):
            if kind == EventType.ATTEMPT_STARTED:
                said += self._end(key, event, BASELINE)
            else:
                self._open.pop(key, None)
        return said

    def _start(self, key: tuple[str, str], event: Event, phase: str, what: str) -> list[str]:
        self._open[key] = (phase, _at(event))
        return [f"task {key[1]} {phase}" + (f" ({what})" if what else "") + "..."]

    def _end(self, key: tuple[str, str], event: Event, phase: str) -> list[str]:
        current = self._open.get(key)
        if current is None or current[0] != phase:
            return []
        del self._open[key]
        return [f"task {key[1]} {phase} took {_took(current[1], _at(event))}"]
