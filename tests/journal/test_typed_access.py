"""Event data is written and read through the typed payloads (loopctl.journal.schema), so that
mypy sees every producer and consumer: a new `Recorder.emit(...)` or a new raw read of an
event's `data` (`event.data.get(...)`, `event.data[...]`, `d = event.data`) fails here.

The scan is by syntax, not by type: it counts every `.data` read and every `.emit(` call in
each module of loopctl/, and each module may have at most the reads the allow-list names. So
the allow-list holds both what is left to convert and the `.data` that is not an event's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from loopctl.journal.events import Event, EventType
from loopctl.journal.payload import Payload, data_of
from loopctl.journal.schema import (
    ActionFinished,
    ActionStarted,
    ApprovalRefused,
    DeliveryPlanned,
    InboxClosed,
    Note,
    TaskFinished,
    read,
)

PACKAGE = Path(__file__).resolve().parents[2] / "loopctl"

# module -> (how many `.data` reads it may have, why they are there)
NOT_EVENTS = "not an event's data"
LEFT = "event data not yet read through a payload class"
ALLOWED_DATA_READS: dict[str, tuple[int, str]] = {
    # The log itself and the one tolerant reader are where event data is raw by design.
    "journal/events.py": (2, "the log writes and reads the records themselves"),
    "journal/payload.py": (1, "the tolerant reader every payload class reads through"),
    "commands/state_sync.py": (1, "the whole record, serialised for a digest"),
    # Other objects with a `data` attribute.
    "definitions/agents.py": (1, NOT_EVENTS + ": a TOML document"),
    "definitions/config.py": (2, NOT_EVENTS + ": TOML tables"),
    "definitions/connectors.py": (2, NOT_EVENTS + ": TOML tables"),
    "definitions/fields.py": (5, NOT_EVENTS + ": the TOML table it wraps"),
    "definitions/sandbox.py": (1, NOT_EVENTS + ": a TOML table"),
    "definitions/skills.py": (3, NOT_EVENTS + ": TOML tables"),
    "egress_proxy.py": (2, NOT_EVENTS + ": selector keys"),
    "commands/inbox.py": (1, NOT_EVENTS + ": a task source's record"),
    # The run's tick_started data as journal.history keeps it.
    "commands/stop.py": (1, LEFT + ": history.RunView.data"),
    "commands/worktrees.py": (2, LEFT + ": history.RunView.data"),
    "journal/history.py": (2, LEFT),
    # Display templates formatted over whatever the record holds.
    "cli/live.py": (1, "plain-line templates format the raw record (any key of any type)"),
    # Fields the payload class carries only in `extra` (the first baseline run's).
    "commands/status.py": (1, "baseline_checked's exit_code and counts live in `extra`"),
    # Notes with no payload class of their own yet.
    "temporal/claims.py": (4, LEFT + ": the temporal_attempt_* notes"),
    "tasks/spec.py": (1, LEFT),
    "delivery/remotes.py": (2, LEFT),
    "engine/agents.py": (1, LEFT),
    "engine/commit.py": (1, LEFT),
    "engine/resume.py": (4, LEFT),
    "engine/setup.py": (1, LEFT),
    "engine/verdict.py": (1, LEFT + ": the recorded baseline, handed to checks.baseline_from"),
    # Another change is converting the UI's views.
    "ui/live.py": (4, LEFT),
}
# module -> how many `.emit(` calls it may make; every producer writes a payload now.
ALLOWED_EMITS: dict[str, int] = {}


def _scan(source: str) -> tuple[int, int]:
    """How many `.data` reads and `.emit(` calls `source` has."""
    reads = emits = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "data":
            reads += isinstance(node.ctx, ast.Load)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "emit"
        ):
            emits += 1
    return reads, emits


def _counts() -> tuple[dict[str, int], dict[str, int]]:
    reads: dict[str, int] = {}
    emits: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        reads[name], emits[name] = _scan(path.read_text(encoding="utf-8"))
    return reads, emits


def test_no_new_raw_reads_of_event_data() -> None:
    reads, _ = _counts()
    over = {
        name: (n, ALLOWED_DATA_READS.get(name, (0, ""))[0])
        for name, n in reads.items()
        if n > ALLOWED_DATA_READS.get(name, (0, ""))[0]
    }
    assert not over, (
        "read event data through its payload class (loopctl.journal.schema: `read(Cls, event)`,"
        f" `read_note`), or name the read in ALLOWED_DATA_READS and why; found, allowed: {over}"
    )


def test_no_new_untyped_writes() -> None:
    _, emits = _counts()
    over = {name: n for name, n in emits.items() if n > ALLOWED_EMITS.get(name, 0)}
    assert not over, f"write events with Recorder.record(payload, …), not emit: {over}"


def test_the_scan_sees_what_it_forbids() -> None:
    source = (
        "def f(event, rec):\n"
        "    rec.emit('x', run=None, loop=None)\n"
        "    d = event.data\n"
        "    return event.data.get('a'), event.data['b'], read(TaskFinished, event).reason\n"
    )
    assert _scan(source) == (3, 1)


# --- the converted producers write exactly what they wrote before --------------------------------


@pytest.mark.parametrize(
    ("payload", "keep", "before"),
    [
        (DeliveryPlanned(plan={"commit": "c"}), (), {"plan": {"commit": "c"}}),
        (
            ActionStarted(step=0, action="push", commit="c", gated=True, approval=None),
            (),
            {"step": 0, "action": "push", "commit": "c", "gated": True, "approval": None},
        ),
        (
            ActionFinished(step=1, action="pr", commit="c", ok=None, detail="", url=None),
            (),
            {"step": 1, "action": "pr", "commit": "c", "ok": None, "detail": "", "url": None},
        ),
        (
            InboxClosed(id="i1", resolution="superseded", reason="moved"),
            (),
            {"id": "i1", "resolution": "superseded", "reason": "moved"},
        ),
        (
            InboxClosed(id="i1", resolution="approved", outcome="failed"),
            (),
            {"id": "i1", "resolution": "approved", "outcome": "failed"},
        ),
        (InboxClosed(id="i1", resolution="approved"), (), {"id": "i1", "resolution": "approved"}),
        (
            InboxClosed(id="i1", resolution="superseded", by="r2"),
            (),
            {"id": "i1", "resolution": "superseded", "by": "r2"},
        ),
        (ApprovalRefused(id="i1", reason="moved"), (), {"id": "i1", "reason": "moved"}),
        (
            TaskFinished(status="stopped", reason="superseded", commit=None),
            ("commit",),
            {"status": "stopped", "reason": "superseded", "commit": None},
        ),
        (
            Note(
                what="temporal_attempt_finished",
                extra={"attempt": "a1", "run_id": "r", "status": "done", "reason": ""},
            ),
            (),
            {
                "what": "temporal_attempt_finished",
                "attempt": "a1",
                "run_id": "r",
                "status": "done",
                "reason": "",
            },
        ),
    ],
)
def test_converted_producers_write_the_same_data(
    payload: Payload, keep: tuple[str, ...], before: dict[str, object]
) -> None:
    data = data_of(payload, keep)
    assert data == before
    assert list(data) == list(before)  # and in the same order


def _finished(data: dict[str, object]) -> Event:
    return Event(1, "2026-12-01T00:00:00+00:00", EventType.ACTION_FINISHED, "r", "l", "t", data)


@pytest.mark.parametrize(
    ("written", "read_as"), [(True, True), (False, False), (None, None), ("yes", None)]
)
def test_an_unknown_delivery_outcome_reads_back_unknown(
    written: object, read_as: bool | None
) -> None:
    assert read(ActionFinished, _finished({"step": 0, "ok": written})).ok is read_as
    assert read(ActionFinished, _finished({"step": 0})).ok is None
