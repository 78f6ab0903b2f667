"""A running run's page, live: its events and its agents' own output, as server-sent events.

The output is what `-v` shows (`cli/agent_stream.py`, which the dashboard may not import): the
engine writes each agent's stdout and stderr to its attempt folder as the agent prints
(redacted on the way in); from `agent_started` to `agent_finished` those two files are followed
as they grow, and each complete line is rendered by the backend's stream renderer
(`backends.streams`). Each output message carries its file and the byte offset its line ends
at, so a page that reconnects (the stream is re-sent from the start of a running agent's file)
drops what it already shows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from loopctl.backends.streams import render
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.ui import views

# How often the log and the capture files are looked at: a printed line shows within this.
POLL_S = 0.1


@dataclass(slots=True)
class _Capture:
    """One capture file of one running agent, read as it grows."""

    path: Path
    key: str  # TASK/attempt-N/ROLE.out, as the page tells files apart
    backend: str
    prefix: str
    offset: int = 0
    partial: bytes = b""

    def lines(self, *, final: bool) -> list[tuple[int, str]]:
        """The complete lines written since the last look: (offset after the line, text)."""

        try:
            with self.path.open("rb") as handle:
                size = handle.seek(0, 2)
                if size < self.offset:  # compacted: go on from its end
                    self.offset, self.partial = size, b""
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return []
        start = self.offset - len(self.partial)
        self.offset += len(data)
        parts = (self.partial + data).split(b"\n")
        self.partial = b"" if final else parts.pop()
        shown = []
        for raw in parts:
            start += len(raw) + 1
            text = render(self.backend, raw.decode("utf-8", "replace"))
            if text:
                shown.append((start, f"{self.prefix}{text}"))
        return shown


@dataclass(slots=True)
class AgentOutput:
    """The capture files of a run's agents that are running."""

    run_dir: Path
    backend_of: Callable[[str], str]
    _running: dict[tuple[str, str, str], list[_Capture]] = field(default_factory=dict)

    def started(self, event: Event) -> None:
        task, attempt, role = _key(event)
        folder = self.run_dir / task / f"attempt-{attempt}"
        backend = self.backend_of(str(event.data.get("agent")))
        self._running[(task, attempt, role)] = [
            _Capture(folder / name, f"{task}/attempt-{attempt}/{name}", backend, f"{task} {role}| ")
            for name in (f"{role}.out", f"{role}.err")
        ]

    def finished(self, event: Event, *, flush: bool) -> list[tuple[_Capture, int, str]]:
        """Stop following the agent `event` ended; with `flush`, what it printed last."""
        captures = self._running.pop(_key(event), [])
        if not flush:
            return []
        return [(c, end, text) for c in captures for end, text in c.lines(final=True)]

    def poll(self) -> list[tuple[_Capture, int, str]]:
        return [
            (c, end, text)
            for captures in self._running.values()
            for c in captures
            for end, text in c.lines(final=False)
        ]


def _key(event: Event) -> tuple[str, str, str]:
    return str(event.task), str(event.data.get("attempt")), str(event.data.get("role"))


def follow(
    events_file: Path,
    run: str,
    start: str,
    after: int,
    output: AgentOutput,
    stop: Callable[[], bool],
) -> Iterator[str]:
    """Server-sent events: each new event of `run` as a timeline line, and each line its
    running agents print, until it finishes or `stop()`."""
    log = EventLog(events_file)
    yield "retry: 1000\n\n"
    seen = 0  # events of the log already looked at
    stamp: tuple[int, ...] | None = None
    while True:
        # The log is read again only when it changed: reading copies every event.
        now = _stamp(events_file)
        events = log.read() if now != stamp else []
        stamp = now
        if events and len(events) < seen:  # the log was rewritten: look again from its start
            seen = 0
        for event in events[seen:]:
            if event.run != run:
                continue
            live = event.seq > after
            if event.type == EventType.AGENT_STARTED:
                output.started(event)
            elif event.type == EventType.AGENT_FINISHED:
                # Its last lines come before the event that says it finished, as in `-v`.
                for capture, end, text in output.finished(event, flush=live):
                    yield _output(capture, end, text)
            if not live:
                continue
            line = views.timeline_line(event, start)
            finished = event.type == EventType.TICK_FINISHED
            payload = {
                "kind": "event",
                "seq": line.seq,
                "offset": line.offset_s,
                "text": line.text,
                "finished": finished,
                "status": str(event.data.get("status") or "") if finished else "",
            }
            yield f"id: {event.seq}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"
            if finished:
                return
        seen = len(events) if events else seen
        for capture, end, text in output.poll():
            yield _output(capture, end, text)
        if stop():
            return
        time.sleep(POLL_S)


def _stamp(path: Path) -> tuple[int, ...] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _output(capture: _Capture, end: int, text: str) -> str:
    payload = {"kind": "output", "file": capture.key, "end": end, "text": text}
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
