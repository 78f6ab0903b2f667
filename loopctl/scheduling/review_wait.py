"""The scheduler's side of `[review] max_open` (loopctl.engine.review_gate): a loop whose tick
would open another item while the cap is reached does not start it, and says so once.

The slot is not skipped: the scheduler keeps it owed (queued) and looks again every
`RECHECK_S` while any loop waits, so the tick starts within about a second of a decision, made
here or by `loopctl inbox approve` in another process (it reads the log, which every decision
is appended to).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Container
from datetime import datetime, timedelta

from loopctl.definitions import Loop
from loopctl.engine import review_gate
from loopctl.journal.overnight import WaitingForReview
from loopctl.journal.recorder import Recorder

RECHECK_S = 1.0


class ReviewWait:
    """Which of a scheduler's loops wait for their reviewer now (to write one note per wait)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: set[str] = set()

    def may_start(self, rec: Recorder, loop: Loop) -> bool:
        """True, with room held for the tick (see `tick_ended`), or False: it waits."""
        full = review_gate.hold(rec, loop)
        with self._lock:
            if full is None:
                self._waiting.discard(loop.name)
                return True
            if loop.name in self._waiting:
                return False
            self._waiting.add(loop.name)
        note = WaitingForReview(
            open_count=full.open_count,
            max_open=full.max_open,
            items=full.items,
            pid=os.getpid(),
        )
        rec.record(note, run=None, loop=loop.name)
        return False

    def tick_ended(self, rec: Recorder, name: str) -> None:
        review_gate.release_hold(rec, name)

    def forget(self, name: str) -> None:
        with self._lock:
            self._waiting.discard(name)

    def waiting(self, name: str) -> bool:
        with self._lock:
            return name in self._waiting

    def wake(self, now: datetime, loops: Container[str]) -> datetime | None:
        """When to look again for a waiting loop of `loops`; None while none waits."""
        with self._lock:
            waits = any(name in loops for name in self._waiting)
        return now + timedelta(seconds=RECHECK_S) if waits else None
