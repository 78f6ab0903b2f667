"""`-v`: the agent's output as it comes, rendered as readable lines, without touching the engine.

The engine writes each agent's stdout and stderr to its attempt folder as the agent prints
(redacted on the way in) and records `agent_started` / `agent_finished`. This observer wraps the
view's: when an agent starts it follows those two files as they grow, renders each complete line
with the backend's stream renderer (`backends.streams`) and hands it to `say`; when the agent
finishes it reads what is left before the view sees `agent_finished`, so the lines come first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import AgentStarted, agent_finished, read

POLL_S = 0.1
_Key = tuple[str, str, str, str]  # run, task, attempt, role


class _Follower:
    """Follows one agent's two capture files on a thread until told to finish."""

    def __init__(
        self, files: list[Path], backend: str, prefix: str, say: Callable[[str], None]
    ) -> None:
        self.files = files
        self.backend = backend
        self.prefix = prefix
        self.say = say
        self.offsets = [0] * len(files)
        self.partial = [b""] * len(files)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="loopctl-agent-stream", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def finish(self, timeout: float = 5.0) -> None:
        self.done.set()
        self.thread.join(timeout)

    def _run(self) -> None:
        while not self.done.wait(POLL_S):
            self._read(final=False)
        self._read(final=True)

    def _read(self, *, final: bool) -> None:
        from loopctl.backends.streams import render

        for index, path in enumerate(self.files):
            try:
                with path.open("rb") as handle:
                    size = handle.seek(0, 2)
                    if size < self.offsets[index]:  # the capture file was compacted: go on
                        self.offsets[index], self.partial[index] = size, b""
                    handle.seek(self.offsets[index])
                    data = handle.read()
            except OSError:
                continue
            self.offsets[index] += len(data)
            data = self.partial[index] + data
            lines = data.split(b"\n")
            self.partial[index] = b"" if final else lines.pop()
            for raw in lines:
                shown = render(self.backend, raw.decode("utf-8", "replace"))
                if shown:
                    self.say(f"{self.prefix}{shown}")


class AgentStream:
    """An observer: follows running agents' output for `say`, then passes each event on."""

    def __init__(
        self,
        inner: Callable[[Event], None] | None,
        runs_dir: Path,
        backend_of: Callable[[str], str],
        say: Callable[[str], None],
        *,
        with_loop: bool = False,
    ) -> None:
        self.inner = inner
        self.runs_dir = runs_dir
        self.backend_of = backend_of
        self.say = say
        self.with_loop = with_loop
        self._lock = threading.Lock()
        self._followers: dict[_Key, _Follower] = {}

    def __call__(self, event: Event) -> None:
        if event.type in (EventType.AGENT_STARTED, EventType.AGENT_FINISHED) and event.run:
            turn = (
                read(AgentStarted, event)
                if event.type == EventType.AGENT_STARTED
                else agent_finished(event)
            )
            key = (str(event.run), str(event.task), str(turn.attempt), str(turn.role))
            if event.type == EventType.AGENT_STARTED:
                self._start(key, event, str(turn.agent))
            else:
                with self._lock:
                    follower = self._followers.pop(key, None)
                if follower is not None:
                    follower.finish()
        if self.inner is not None:
            self.inner(event)

    def close(self) -> None:
        """Stop following (the run ended or was interrupted)."""
        with self._lock:
            followers, self._followers = list(self._followers.values()), {}
        for follower in followers:
            follower.finish()

    def _start(self, key: _Key, event: Event, agent: str) -> None:
        run, task, attempt, role = key
        folder = self.runs_dir / run / task / f"attempt-{attempt}"
        files = [folder / f"{role}.out", folder / f"{role}.err"]
        where = f"{event.loop}/{task}" if self.with_loop else task
        follower = _Follower(files, self.backend_of(agent), f"  {where} {role}| ", self.say)
        with self._lock:
            old = self._followers.pop(key, None)
            self._followers[key] = follower
        if old is not None:
            old.finish()
        follower.start()
