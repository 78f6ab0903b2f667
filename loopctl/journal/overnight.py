"""The notes of the overnight contract (issue 30): a stalled turn or check, a loop waiting for its
reviewer, a report shown, a backend's rate-limit pause and its end.

Their own module so that loopctl.journal.schema stays one screenful per family; schema lists them
in `NOTES` like every other kind something reads back.
"""

from __future__ import annotations

from typing import ClassVar

from loopctl.journal.payload import NotePayload


def _sparse(*names: str) -> frozenset[str]:
    return frozenset(names)


# The `what` of the note loopctl.engine.liveness records when a turn or a check made no
# progress for [budget] max_idle and was ended (issue 30).
STALLED = "stalled"


class Stalled(NotePayload, frozen=True):
    """The `stalled` note: an agent's turn (`role`, `agent`) or a check (`command`) printed
    nothing and changed no file for `idle_s` seconds, and was ended; `last` is the last
    readable line it printed ("" when none)."""

    WHAT: ClassVar[str] = STALLED
    SPARSE: ClassVar[frozenset[str]] = _sparse("role", "agent", "command")
    attempt: int | None = None
    idle_s: float = 0.0
    last: str = ""
    role: str | None = None
    agent: str | None = None
    command: tuple[str, ...] | None = None  # the check's argv

    @property
    def who(self) -> str:
        if self.command is not None:
            return f"the check `{' '.join(self.command)}`"
        return f"the {self.role or 'agent'} {self.agent!r}" if self.agent else "the agent"


# The `what` of the note a loop's tick records when it waits for its reviewer (issue 30).
WAITING_FOR_REVIEW = "waiting_for_review"


class WaitingForReview(NotePayload, frozen=True):
    """The `waiting_for_review` note: a loop did not start a tick because `open_count` items
    already await a human and `[review] max_open` is `max_open`. Written once per wait; the
    wait ends with the loop's next `tick_started` (or its scheduler stopping)."""

    WHAT: ClassVar[str] = WAITING_FOR_REVIEW
    open_count: int = 0
    max_open: int = 0
    items: tuple[str, ...] = ()  # the ids of the items it waits on
    pid: int | None = None  # the scheduler's process: its `scheduler_stopped` ends the wait


class ReportShown(NotePayload, frozen=True):
    """`loopctl report` was shown (or sent): where the next `--since last` window starts."""

    WHAT: ClassVar[str] = "report_shown"
    until: str | None = None  # the end of the window shown, an ISO time
    since: str | None = None  # its start; None: since the log began
    via: str | None = None  # text | json | notify


# The `what` of the notes journal.pauses writes when a backend reported a rate limit, a quota or
# an overload (issue 30), and when its pause ended.
BACKEND_PAUSED = "backend_paused"
BACKEND_RESUMED = "backend_resumed"


class BackendPaused(NotePayload, frozen=True):
    """The `backend_paused` note: the loops on `backend` wait until `until` (ISO 8601, UTC)."""

    WHAT: ClassVar[str] = BACKEND_PAUSED
    SPARSE: ClassVar[frozenset[str]] = _sparse("attempt", "agent", "item")
    backend: str | None = None
    until: str | None = None
    kind: str | None = None  # rate-limit | quota | overload (backends.rate_limits.LimitKind)
    said: str = ""  # the backend's own words
    stated: bool = False  # `until` is the backend's reset, not loopctl's backoff
    attempt: int | None = None
    agent: str | None = None
    item: str | None = None  # the inbox item that told a human, when this pause opened one


class BackendResumed(NotePayload, frozen=True):
    """The `backend_resumed` note: a backend's pause ended and its loops tick again."""

    WHAT: ClassVar[str] = BACKEND_RESUMED
    backend: str | None = None
    until: str | None = None  # the pause that ended
