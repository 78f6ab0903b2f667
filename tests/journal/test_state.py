"""STATE.md and INBOX.md are projections of the event log; a human's notes survive rewrites."""

from __future__ import annotations

from pathlib import Path

from loopctl.journal import history
from loopctl.journal.events import EventLog, EventType
from loopctl.journal.inbox import items, new_item_id, open_items, render_inbox_md
from loopctl.journal.state import write_state


def record_run(log: EventLog, attempts: int) -> None:
    log.append(EventType.TICK_STARTED, run="r1", loop="babysit", data={"kind": "tick"})
    log.append(EventType.TASK_FOUND, run="r1", loop="babysit", task="pr-1", data={"prompt": "p"})
    for n in range(1, attempts + 1):
        log.append(
            EventType.ATTEMPT_STARTED, run="r1", loop="babysit", task="pr-1", data={"attempt": n}
        )
        log.append(
            EventType.ATTEMPT_FINISHED,
            run="r1",
            loop="babysit",
            task="pr-1",
            data={"attempt": n, "verdict": "failed", "reason": f"boom {n}", "fingerprint": "abc"},
        )
    log.append(
        EventType.TASK_FINISHED,
        run="r1",
        loop="babysit",
        task="pr-1",
        data={"status": "failed", "reason": "not met"},
    )
    log.append(EventType.TICK_FINISHED, run="r1", loop="babysit", data={"status": "failed"})


def test_state_renders_tasks_and_compacts_old_attempts(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    record_run(log, 12)
    state = tmp_path / "STATE.md"
    write_state(state, history.fold(log.read()).values())
    text = state.read_text()
    assert "## Loop `babysit`" in text
    assert "| `pr-1` | failed | 12 |" in text
    assert "attempts 1–7 (compacted): 7 failed; fingerprints abc×7" in text
    assert "- attempt 12: failed `abc`: boom 12" in text
    assert "- attempt 3:" not in text


def test_notes_written_by_a_human_are_kept_verbatim(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    state = tmp_path / "STATE.md"
    record_run(log, 1)
    write_state(state, history.fold(log.read()).values())
    notes = (
        "## Notes\n\nDon't touch the *payments* module.\n  - keep this indent\n\n```\ncode\n```\n"
    )
    text = state.read_text()
    state.write_text(text.split("## Notes")[0] + notes)
    record_run(log, 2)
    write_state(state, history.fold(log.read()).values())
    rewritten = state.read_text()
    assert rewritten.endswith(notes)
    assert rewritten.count("## Notes") == 1
    # Everything above the notes is the projection of the new log, not the old file kept.
    fresh = tmp_path / "fresh.md"
    write_state(fresh, history.fold(log.read()).values())
    generated = fresh.read_text().split("## Notes")[0]
    assert rewritten == generated + notes
    assert generated != text.split("## Notes")[0]


def test_inbox_items_open_and_close_by_events(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    first, second = new_item_id("r1", "a"), new_item_id("r1", "b")
    assert first != second
    assert len(first) == 6
    for item in (first, second):
        log.append(
            EventType.INBOX_OPENED,
            run="r1",
            loop="l",
            task="t",
            data={
                "id": item,
                "kind": "failed",
                "summary": f"s {item}",
                "evidence": {"branch": "b"},
            },
        )
    log.append(
        EventType.INBOX_CLOSED, run="r1", loop="l", data={"id": first, "resolution": "dismissed"}
    )
    assert [i.id for i in open_items(log.read())] == [second]
    closed = next(i for i in items(log.read()) if i.id == first)
    assert closed.resolution == "dismissed"
    assert not closed.is_open
    md = render_inbox_md(open_items(log.read()))
    assert f"## {second} · failed · l/t" in md
    assert first not in md
