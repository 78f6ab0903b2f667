"""The recorder's promises, each shown on what lands on disk (issue 27's one-line mutants).

`Recorder` is the one writer of the log: whatever field of an event carries a secret (however
deeply nested, in a list, a tuple or a mapping) never reaches `events.jsonl`, STATE.md or
INBOX.md; an opened item is in INBOX.md when `open_item` returns and reaches `[notify]` with
its id; a fixed item id opens at most once; the same item opened again keeps its id; every
event reaches the observer and the live traces, and neither can stop the work.
"""

from __future__ import annotations

import base64
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.repos import PY, toml_value, write_config

from loopctl.definitions import load_project
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.inbox import ItemKind
from loopctl.journal.recorder import Recorder

SECRET = "sk-live-9a8b7c6d5e4f3a2b1c0d"


def _secret_forms() -> list[bytes]:
    raw = SECRET.encode()
    return [raw, base64.b64encode(raw), raw.hex().encode()]


def _written(recorder: Recorder) -> dict[str, bytes]:
    """Every file the recorder writes, as bytes (the raw log, not the parsed events)."""
    paths = recorder.paths
    found = {"events.jsonl": paths.events_file.read_bytes()}
    for name, path in (("STATE.md", paths.state_md), ("INBOX.md", paths.inbox_md)):
        if path.exists():
            found[name] = path.read_bytes()
    return found


def _assert_no_secret(recorder: Recorder) -> None:
    for name, raw in _written(recorder).items():
        for form in _secret_forms():
            assert form not in raw, f"{name} holds the secret ({form!r})"


@pytest.fixture
def recorder(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Recorder:
    monkeypatch.setenv("DEPLOY_TOKEN", SECRET)  # withheld from agents: never in a log
    write_config(repo, "version = 1\n")
    return Recorder(load_project(repo))


# --- redaction of every value, however nested ------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(f"token {SECRET} in plain text", id="text"),
        pytest.param({"deep": {"deeper": f"Bearer {SECRET}"}}, id="mapping-in-mapping"),
        pytest.param(["first", f"--token={SECRET}"], id="list"),
        pytest.param(("first", f"--token={SECRET}"), id="tuple"),
        pytest.param([{"argv": ["deploy", ("x", SECRET)]}], id="tuple-in-list-in-mapping"),
        pytest.param({"steps": [[f"https://x:{SECRET}@example.invalid/r.git"]]}, id="lists"),
    ],
)
def test_a_secret_anywhere_in_an_event_field_never_reaches_the_log(
    recorder: Recorder, value: Any
) -> None:
    event = recorder.emit(EventType.NOTE, run="r1", loop="ship", what="delivery", detail=value)

    raw = recorder.paths.events_file.read_bytes()
    assert b'"delivery"' in raw  # the event itself is there
    _assert_no_secret(recorder)
    assert SECRET not in json.dumps(event.data)
    assert "[REDACTED]" in json.dumps(event.data)


def test_a_secret_in_an_item_summary_or_evidence_never_reaches_the_log_nor_the_projections(
    recorder: Recorder,
) -> None:
    recorder.emit(EventType.TICK_STARTED, run="r1", loop="ship", kind="tick")
    recorder.emit(
        EventType.TASK_FOUND, run="r1", loop="ship", task="t1", prompt="p",
        title=f"rotate the key {SECRET}",
    )  # fmt: skip
    item = recorder.open_item(
        ItemKind.ESCALATION,
        f"the agent asks: may I print {SECRET}?",
        {
            "question": f"is {SECRET} the deploy key?",
            "reason": ["nested", {"why": SECRET}],
            "check_tail": f"FAILED test_x - AssertionError: {SECRET}",
        },
        run="r1",
        loop="ship",
        task="t1",
    )

    assert item is not None
    written = _written(recorder)
    assert item.encode() in written["INBOX.md"]  # the item is shown, with its evidence
    assert b"[REDACTED]" in written["INBOX.md"]
    assert b"rotate the key \\[REDACTED" in written["STATE.md"]  # the title is shown (escaped)
    _assert_no_secret(recorder)


# --- projections -------------------------------------------------------------------------------


def test_an_opened_item_is_in_inbox_md_when_open_item_returns(recorder: Recorder) -> None:
    recorder.emit(EventType.TICK_STARTED, run="r1", loop="ship", kind="tick")
    recorder.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="t1", prompt="p")
    recorder.refresh_projections()
    assert "Nothing needs you." in recorder.paths.inbox_md.read_text(encoding="utf-8")

    item = recorder.open_item(
        ItemKind.FAILED,
        "checks still red",
        {"reason": "3 failed"},
        run="r1",
        loop="ship",
        task="t1",
    )

    assert item is not None
    inbox = recorder.paths.inbox_md.read_text(encoding="utf-8")
    assert "1 open item(s)." in inbox
    assert item in inbox
    assert "checks still red" in inbox
    assert "3 failed" in inbox


def test_state_md_shows_what_the_log_holds_after_a_foreground_render(recorder: Recorder) -> None:
    recorder.emit(EventType.TICK_STARTED, run="r1", loop="ship", kind="tick")
    recorder.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="first-task", prompt="p")
    recorder.refresh_projections()
    assert "first-task" in recorder.paths.state_md.read_text(encoding="utf-8")
    assert recorder.paths.inbox_md.exists()

    recorder.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="second-task", prompt="p")
    recorder.refresh_projections()
    assert "second-task" in recorder.paths.state_md.read_text(encoding="utf-8")


def test_a_background_render_writes_the_projections_without_a_foreground_one(
    recorder: Recorder,
) -> None:
    recorder.emit(EventType.TICK_STARTED, run="r1", loop="ship", kind="tick")
    recorder.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="quiet-task", prompt="p")
    recorder.emit(
        EventType.INBOX_OPENED, run="r1", loop="ship", task="quiet-task", id="abc123",
        kind="failed", summary="needs a look", evidence={},
    )  # fmt: skip

    recorder.refresh_projections_soon()
    render = recorder._projections.pending
    assert render is not None
    render.join(300)  # a safety net only: the render takes milliseconds

    assert "quiet-task" in recorder.paths.state_md.read_text(encoding="utf-8")
    assert "abc123" in recorder.paths.inbox_md.read_text(encoding="utf-8")


class _GatedLock:
    """The projection lock, with a gate: the background render waits at it until released,
    and the order in which threads got the lock (that is, rendered) is kept."""

    def __init__(self, caller: threading.Thread) -> None:
        self._real = threading.Lock()
        self._caller = caller
        self.background_waiting = threading.Event()
        self.release_background = threading.Event()
        self.background_name = ""
        self.order: list[str] = []

    def __enter__(self) -> None:
        me = threading.current_thread()
        if me is not self._caller:
            self.background_name = me.name
            self.background_waiting.set()
            self.release_background.wait(300)  # a safety net: released at once below
        self._real.acquire()
        self.order.append("caller" if me is self._caller else "background")

    def __exit__(self, *exc: object) -> None:
        self._real.release()


class _SignalledJoin:
    """The pending render thread: joining it first lets the gated render through."""

    def __init__(self, thread: threading.Thread, gate: _GatedLock) -> None:
        self._thread = thread
        self._gate = gate

    def join(self, timeout: float | None = None) -> None:
        self._gate.release_background.set()
        self._thread.join(timeout)


def test_a_foreground_render_waits_for_the_background_one_it_follows(
    recorder: Recorder,
) -> None:
    """Not only current files: once `refresh_projections` returns, no render is in flight (a
    process that exits then leaves no half-written temporary file, nothing writes later)."""
    recorder.emit(EventType.TICK_STARTED, run="r1", loop="ship", kind="tick")
    recorder.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="t1", prompt="p")
    gate = _GatedLock(threading.current_thread())
    recorder._projections.lock = gate  # type: ignore[assignment]

    recorder.refresh_projections_soon()
    pending = recorder._projections.pending
    assert pending is not None
    try:
        assert gate.background_waiting.wait(300), "the background render never started"
        assert gate.background_name == "loopctl-projections"  # what `ps -L` and py-spy show
        recorder._projections.pending = _SignalledJoin(pending, gate)  # type: ignore[assignment]

        recorder.refresh_projections()

        assert gate.order == ["background", "caller"]
        assert not pending.is_alive()
    finally:
        gate.release_background.set()
        pending.join(300)
    assert "t1" in recorder.paths.state_md.read_text(encoding="utf-8")


# --- inbox items: ids, at most once, notify ------------------------------------------------------


def test_an_item_without_an_id_always_opens_with_a_short_id_and_keeps_it_when_opened_again(
    recorder: Recorder,
) -> None:
    # No run, loop or task: opened by `up` or the scheduler, then again after a restart.
    first = recorder.open_item(ItemKind.UNHANDLED, "loop x does not parse", {}, run=None, loop=None)
    again = recorder.open_item(ItemKind.UNHANDLED, "loop x does not parse", {}, run=None, loop=None)
    other = recorder.open_item(ItemKind.UNHANDLED, "loop y does not parse", {}, run=None, loop=None)

    assert first is not None
    assert again is not None
    assert other is not None
    assert len(first) == 6
    assert again == first
    assert other != first
    opened = [e for e in recorder.log.read() if e.type == EventType.INBOX_OPENED]
    assert [e.data["id"] for e in opened] == [first, first, other]
    inbox = recorder.paths.inbox_md.read_text(encoding="utf-8")
    assert "2 open item(s)." in inbox


def test_a_fixed_item_id_opens_at_most_once(recorder: Recorder) -> None:
    def open_fuse(again_once_closed: bool = True) -> str | None:
        return recorder.open_item(
            ItemKind.UNHANDLED, "fuse blown", {}, run=None, loop="ship",
            item_id="fuse-ship-day", again_once_closed=again_once_closed,
        )  # fmt: skip

    assert open_fuse() == "fuse-ship-day"
    assert open_fuse() is None  # still open: not twice
    recorder.emit(EventType.INBOX_CLOSED, run=None, loop="ship", id="fuse-ship-day")
    assert open_fuse(again_once_closed=False) is None  # once closed, never again
    opened = [e for e in recorder.log.read() if e.type == EventType.INBOX_OPENED]
    assert [e.data["id"] for e in opened] == ["fuse-ship-day"]
    assert open_fuse() == "fuse-ship-day"  # closed, and allowed again: it opens
    opened = [e for e in recorder.log.read() if e.type == EventType.INBOX_OPENED]
    assert len(opened) == 2


def test_an_opened_item_reaches_the_notify_command_and_the_log_names_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    received = tmp_path / "received.jsonl"
    script = (
        "import json, sys; item = json.load(sys.stdin)['item'];"
        f" open({str(received)!r}, 'a').write(json.dumps([sys.argv[1], item['id']]) + '\\n')"
    )
    command = toml_value([PY, "-c", script, "{id}"])
    write_config(repo, f"version = 1\n\n[notify]\ncommand = {command}\n")
    recorder = Recorder(load_project(repo))

    item = recorder.open_item(ItemKind.FAILED, "red", {}, run="r1", loop="ship", task="t1")

    assert item is not None
    got = [json.loads(line) for line in received.read_text().splitlines()]
    assert got == [[item, item]]
    notified = [e for e in recorder.log.read() if e.type == EventType.NOTIFIED]
    assert [(e.data["item"], e.data["channel"], e.task) for e in notified] == [
        (item, "command", "t1")
    ]


# --- observer and live traces ------------------------------------------------------------------


def test_the_observer_sees_every_event_and_one_that_fails_stops_nothing(repo: Path) -> None:
    write_config(repo, "version = 1\n")
    seen: list[Event] = []
    recorder = Recorder(load_project(repo), observer=seen.append)
    recorder.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="t1", prompt="p")
    recorder.open_item(ItemKind.FAILED, "red", {}, run="r1", loop="ship", task="t1")
    assert [(e.seq, e.type) for e in seen] == [(e.seq, e.type) for e in recorder.log.read()]
    assert len(seen) == 2

    def broken(event: Event) -> None:
        raise RuntimeError("the live view crashed")

    failing = Recorder(load_project(repo), observer=broken)
    event = failing.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="t2", prompt="p")
    assert recorder.log.read()[-1].seq == event.seq


def test_every_event_feeds_the_live_traces(repo: Path) -> None:
    write_config(repo, 'version = 1\n\n[traces]\nexporter = "file"\nfile = "traces.jsonl"\n')
    recorder = Recorder(load_project(repo))
    assert recorder.traces is not None
    recorder.emit(EventType.TICK_STARTED, run="r1", loop="ship", kind="tick")
    recorder.emit(EventType.TICK_FINISHED, run="r1", loop="ship", status="done")
    recorder.traces.close()  # type: ignore[attr-defined]  # sends what is queued, then stops

    text = (repo / "traces.jsonl").read_text(encoding="utf-8")
    assert "invoke_workflow ship" in text
    assert '"loopctl.tick.status"' in text


def test_a_recorder_of_a_reloaded_project_keeps_the_clock_the_observer_and_the_pace(
    repo: Path,
) -> None:
    """`up` reloads the definitions every tick and records through `for_project`: its events
    carry the same clock, reach the same live view, and a burst of ticks renders STATE.md once
    per pace, not once per tick."""
    write_config(repo, "version = 1\n")
    when = datetime(2031, 2, 3, 4, 5, 6, tzinfo=UTC)
    seen: list[Event] = []
    first = Recorder(load_project(repo), observer=seen.append, clock=lambda: when, pace_s=3600.0)
    first.emit(EventType.TICK_STARTED, run="r1", loop="ship", kind="tick")
    first.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="t1", prompt="p")
    first.refresh_projections()  # the first render is at once; the next waits an hour
    assert "t1" in first.paths.state_md.read_text(encoding="utf-8")

    reloaded = first.for_project(load_project(repo))
    reloaded.emit(EventType.TASK_FOUND, run="r1", loop="ship", task="t2", prompt="p")
    reloaded.refresh_projections()

    assert [e.task for e in seen] == [None, "t1", "t2"]
    stamps = {e.ts for e in EventLog(first.paths.events_file).read()}
    assert stamps == {when.isoformat(timespec="microseconds")}
    assert reloaded.clock() == when  # what the tick's engine times its budgets and run ids by
    assert "t2" not in first.paths.state_md.read_text(encoding="utf-8")  # paced, not rendered
    reloaded.flush_projections()
    assert "t2" in first.paths.state_md.read_text(encoding="utf-8")
