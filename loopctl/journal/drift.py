"""Each loop's latest drift, folded from its `attempt_footprint` events (issue 31, item 1):
what `status`, STATE.md and the dashboard show of it. The score itself is computed when the
attempt is measured (checks.drift); this only reads what was recorded."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import AttemptFootprint, read


@dataclass(frozen=True, slots=True)
class LoopDrift:
    """The drift of a loop's latest measured attempt."""

    score: float
    alarm: bool  # a step outside the scope
    outside: tuple[str, ...]  # "path db/schema.sql", "command psql …"
    novelty: float
    size: float
    scoped: bool  # the attempt ran under a declared scope
    run: str | None
    task: str | None
    attempt: int | None

    def describe(self) -> str:
        text = f"{self.score:.2f}"
        if self.outside:
            shown = "; ".join(self.outside[:3]) + (" …" if len(self.outside) > 3 else "")
            text += f", out of scope: {shown}"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "alarm": self.alarm,
            "outside": list(self.outside),
            "novelty": self.novelty,
            "size": self.size,
            "scoped": self.scoped,
            "run": self.run,
            "task": self.task,
            "attempt": self.attempt,
        }


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def of_event(event: Event) -> LoopDrift:
    recorded = read(AttemptFootprint, event)
    drift: Mapping[str, Any] = recorded.drift
    scope = recorded.scope
    return LoopDrift(
        score=_number(drift.get("score")),
        alarm=bool(recorded.outside),
        outside=tuple(
            f"{e.get('kind')} {e.get('what')}" for e in recorded.outside if isinstance(e, dict)
        ),
        novelty=_number(drift.get("novelty")),
        size=_number(drift.get("size")),
        scoped=any(v not in (None, [], ()) for v in scope.values()),
        run=event.run,
        task=event.task,
        attempt=recorded.attempt,
    )


def latest_by_loop(events: Iterable[Event]) -> dict[str, LoopDrift]:
    """loop -> the drift of its most recently measured attempt."""
    found: dict[str, LoopDrift] = {}
    for event in events:
        if event.type == EventType.ATTEMPT_FOOTPRINT and event.loop:
            found[event.loop] = of_event(event)
    return found


def by_attempt(events: Iterable[Event]) -> dict[tuple[str, str, int], LoopDrift]:
    """(run, task, attempt) -> its drift, for the attempt lines of STATE.md."""
    found: dict[tuple[str, str, int], LoopDrift] = {}
    for event in events:
        if event.type == EventType.ATTEMPT_FOOTPRINT and event.run and event.task:
            drift = of_event(event)
            found[(event.run, event.task, drift.attempt or 0)] = drift
    return found
