"""`log` and `replay` say every event in words, however little its record carries."""

from __future__ import annotations

import pytest

from loopctl.commands.status import describe
from loopctl.journal.events import Event, EventType


def _event(type_: str, **data: object) -> Event:
    return Event(1, "2026-12-01T00:00:00+00:00", type_, "r1", "babysit", "t1", data)


@pytest.mark.parametrize("type_", [t.value for t in EventType])
def test_every_event_type_reads_as_words_not_its_name(type_: str) -> None:
    assert describe(_event(type_)) != f"[t1] {type_}"


def test_the_quieter_events_say_what_happened() -> None:
    planned = _event(
        EventType.DELIVERY_PLANNED,
        plan={"steps": [{"name": "push", "gated": True}, {"name": "pr", "gated": False}]},
    )
    assert describe(planned) == "[t1] delivery planned: push (gated), pr"
    note = _event(EventType.NOTE, what="loop_stopped", reason="loopctl stop")
    assert describe(note) == "[t1] note: loop stopped (loopctl stop)"
    sent = _event(EventType.NOTIFY_FAILED, item="i-1", channel="webhook", error="HTTP 500")
    assert describe(sent) == "[t1] inbox i-1 not sent to webhook: HTTP 500"
    assert describe(_event("from_a_newer_version")) == "[t1] from_a_newer_version"
