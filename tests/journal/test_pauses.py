"""journal.pauses: backend pauses folded from the log (issue 30 item 3), as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from loopctl.journal.events import Event, EventType
from loopctl.journal.pauses import holding, pauses, streak

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def note(seq: int, what: str, at: datetime = NOW, loop: str | None = "l", **data: Any) -> Event:
    return Event(seq, at.isoformat(), EventType.NOTE, "r", loop, None, {"what": what, **data})


def paused(seq: int, backend: str, until: datetime, **data: Any) -> Event:
    return note(seq, "backend_paused", backend=backend, until=until.isoformat(), **data)


def turn(seq: int, backend: str, status: str) -> Event:
    data = {"backend": backend, "status": status, "role": "maker"}
    return Event(seq, NOW.isoformat(), EventType.AGENT_FINISHED, "r", "l", "t", data)


def test_a_later_limit_extends_the_pause_and_a_resume_ends_it() -> None:
    log = [
        paused(1, "claude", NOW + timedelta(minutes=5), kind="quota", said="hit", item="abc"),
        paused(2, "openai", NOW + timedelta(seconds=30)),
        paused(3, "claude", NOW + timedelta(minutes=9)),  # another loop hit it meanwhile
        paused(4, "claude", NOW + timedelta(minutes=1)),  # an earlier reset does not shorten it
    ]

    held = pauses(log)

    assert held["claude"].until == NOW + timedelta(minutes=9)
    assert (held["claude"].kind, held["claude"].said, held["claude"].item) == (
        "quota",
        "hit",
        "abc",
    )
    assert held["claude"].since == NOW
    assert set(holding(log, NOW + timedelta(minutes=1))) == {"claude"}
    assert holding(log, NOW + timedelta(minutes=10)) == {}
    resumed = [*log, note(5, "backend_resumed", backend="claude")]
    assert set(pauses(resumed)) == {"openai"}


def test_the_status_line_names_the_reset_and_the_backend() -> None:
    log = [paused(1, "claude", datetime(2026, 12, 5, 14, 5, tzinfo=UTC), kind="rate-limit")]
    (pause,) = pauses(log).values()
    at = pause.until.astimezone().strftime("%H:%M")
    assert pause.describe() == f"rate-limited until {at} (claude)"


def test_a_damaged_note_is_no_pause() -> None:
    log = [
        note(1, "backend_paused", backend="claude", until="soon"),
        note(2, "backend_paused", until=NOW.isoformat()),
        note(3, "backend_paused", backend=7, until=NOW.isoformat()),
    ]
    assert pauses(log) == {}


def test_the_backoff_streak_counts_pauses_since_the_backends_last_good_turn() -> None:
    log = [
        paused(1, "claude", NOW),
        turn(2, "claude", "ok"),
        paused(3, "claude", NOW),
        turn(4, "claude", "error"),
        paused(5, "claude", NOW),
        turn(6, "openai", "ok"),  # another backend's good turn changes nothing
        paused(7, "openai", NOW),
    ]
    assert streak(log, "claude") == 2
    assert streak(log, "openai") == 1
    assert streak(log, "codex") == 0
