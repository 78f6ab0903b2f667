"""What the scheduler holds back while a backend is paused by a rate limit (issue 30).

The pauses themselves are folded from the log (journal.pauses): read when the scheduler starts
(so an `up` killed during a pause and started again keeps it) and again after a tick whose task
hit a limit. A loop whose maker or checker agent uses a paused backend gets no tick before the
pause's `until`; its next one then runs by itself, as any tick that came due while nothing ran
it (a catch-up). Loops on other backends go on. Nothing is read per tick while no pause holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime

from loopctl.definitions import Loop, Project
from loopctl.journal import pauses
from loopctl.journal.events import Event
from loopctl.journal.pauses import Pause
from loopctl.journal.recorder import Recorder

LOOK_EVERY_S = 2.0  # how stale the scheduler's view of pauses other processes recorded may be


def loop_backends(project: Project, loop: Loop) -> frozenset[str]:
    """The backends of the agents a tick of `loop` may call: its maker and its checker (the
    default checker only where no command checks the loop: it may judge the goal)."""
    agents = project.agents
    checker = loop.checker.agent
    if checker is None and not loop.checker.commands:
        checker = project.config.checker
    names = {loop.maker.agent or project.config.maker, checker}
    if loop.maker.agent is None and project.config.maker is None and len(agents) == 1:
        names.add(next(iter(agents)))  # the one agent is the maker (engine.setup.maker_agent)
    return frozenset(agents[n].backend.value for n in names if n is not None and n in agents)


class BackendPauses:
    """The pauses in force, as the scheduler last read them from the log.

    The log is looked at again at most every LOOK_EVERY_S (and at once after a tick of this
    scheduler hit a limit), folding only the events appended since: a pause another process
    recorded (a `goal`, a `run --once`) holds this scheduler's loops too, a few seconds later.
    """

    def __init__(self) -> None:
        self._held: dict[str, Pause] = {}
        self._folded = 0  # how many events of the log `_held` has seen
        self._looked: float | None = None  # time.monotonic() of the last look

    def refresh(self, events: Sequence[Event]) -> None:
        """Fold what `events` (the whole log) adds to what was folded before."""
        if len(events) < self._folded:
            self._held, self._folded = {}, 0  # the log was replaced: fold it all again
        self._held = pauses.pauses(events[self._folded :], self._held)
        self._folded = len(events)
        self._looked = time.monotonic()

    def look(self, read: Callable[[], Sequence[Event]], *, now_too: bool = False) -> None:
        """Refresh from the log when the last look is older than LOOK_EVERY_S (or `now_too`)."""
        if now_too or self._looked is None or time.monotonic() - self._looked >= LOOK_EVERY_S:
            self.refresh(read())

    def holding(self, project: Project, loop: Loop, now: datetime) -> Pause | None:
        """The pause (the one ending last) that holds `loop`'s next tick at `now`, if any."""
        if not self._held:
            return None
        held = [
            pause
            for backend in loop_backends(project, loop)
            if (pause := self._held.get(backend)) is not None and pause.until > now
        ]
        return max(held, key=lambda pause: pause.until) if held else None

    def tell_unheard(self, rec: Recorder, now: datetime) -> None:
        """Open the inbox item of each pause in force that a killed process never opened."""
        for pause in list(self._held.values()):
            if pause.until > now:
                pauses.tell(rec, pause, run=None, loop=None)

    def resume_due(self, rec: Recorder, now: datetime) -> None:
        """Record `backend_resumed` for each pause whose time has passed (once)."""
        for backend, pause in list(self._held.items()):
            if pause.until <= now:
                pauses.record_resumed(rec, pause)
                del self._held[backend]
