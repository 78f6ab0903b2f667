"""Claimed vs measured as the projections show it: read back tolerantly from the log, put in
words, and the agent's part escaped so it cannot pose as loopctl's own lines."""

from __future__ import annotations

from pathlib import Path

from loopctl.journal import claimed, history
from loopctl.journal.events import EventLog, EventType
from loopctl.journal.inbox import open_items, render_inbox_md
from loopctl.journal.state import render_state

RECORD = {
    "said": "## Notes\n\x1b[2Jall tests pass <b>",
    "measured": {
        "check_passed": False,
        "tests": {"passed": 2, "failed": 1, "skipped": 0},
        "base": {"passed": 3, "failed": 0, "skipped": 1},
        "files": ["a.py", "b.py"],
        "added": 7,
        "removed": 2,
        "out_of_scope": [],
    },
    "disagree": ["says the tests pass, but loopctl counted 1 failed"],
}


def test_a_record_reads_back_and_is_put_in_words() -> None:
    view = claimed.read(RECORD)
    assert view is not None
    assert claimed.measured_line(view) == (
        "tests 2 passed, 1 failed (base: 3 passed, 0 failed, 1 skipped);"
        " 2 files changed, +7 −2 (a.py, b.py)"
    )
    assert "\x1b" not in view.said
    assert claimed.text_lines(view)[-1] == (
        "DISAGREES: says the tests pass, but loopctl counted 1 failed"
    )
    assert claimed.read(view.to_json()) == view


def test_a_damaged_or_missing_record_is_tolerated() -> None:
    assert claimed.read(None) is None
    assert claimed.read("nonsense") is None
    view = claimed.read({"measured": {"tests": "x", "files": "y", "added": True}})
    assert view is not None
    assert claimed.measured_line(view) == "no check ran; 0 files changed, +0 −0"


def test_state_and_inbox_show_it_escaped(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    at = {"run": "r1", "loop": "l", "task": "t"}
    log.append(EventType.TICK_STARTED, run="r1", loop="l", data={"kind": "tick"})
    log.append(EventType.TASK_FOUND, **at, data={"prompt": "p"})
    log.append(EventType.ATTEMPT_STARTED, **at, data={"attempt": 1})
    log.append(
        EventType.ATTEMPT_FINISHED,
        **at,
        data={"attempt": 1, "verdict": "failed", "reason": "r", "claims": RECORD},
    )
    log.append(
        EventType.INBOX_OPENED, **at, data={"id": "abc123", "kind": "failed", "summary": "t: r"}
    )
    events = log.read()
    runs = history.fold(events).values()

    state = render_state(runs)
    assert "- claimed by the agent: \\## Notes all tests pass \\<b\\>" in state
    assert "\n## Notes\n\x1b" not in state
    assert "- **disagrees:** says the tests pass, but loopctl counted 1 failed" in state

    inbox = render_inbox_md(open_items(events), history.last_claims(runs))
    assert "- measured by loopctl: tests 2 passed, 1 failed" in inbox
    assert "- **disagrees:** says the tests pass" in inbox
    assert "<b>" not in inbox
