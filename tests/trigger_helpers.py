"""Shared set-up for the trigger and `loopctl up` tests: long-lived CLI processes and log waits."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from engine_helpers import events, loopctl_argv, wait_for

from loopctl.journal.events import Event


class Proc:
    """A loopctl subprocess whose output goes to files (a pipe nobody reads could block it)."""

    def __init__(self, repo: Path, out_dir: Path, *args: str) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = out_dir / "stdout"
        self.stderr_path = out_dir / "stderr"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.popen = subprocess.Popen(
                loopctl_argv(*args), cwd=repo, stdout=out, stderr=err, stdin=subprocess.DEVNULL
            )
        self.pid = self.popen.pid

    @property
    def output(self) -> str:
        return self.stdout_path.read_text() + self.stderr_path.read_text()

    def signal(self, signum: int, timeout: float = 30) -> int:
        self.popen.send_signal(signum)
        return self.popen.wait(timeout)

    def wait(self, timeout: float = 30) -> int:
        return self.popen.wait(timeout)


def running_procs() -> Iterator[list[Proc]]:
    """For a fixture: the processes a test starts; any still running at the end are killed."""
    started: list[Proc] = []
    yield started
    for proc in started:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.popen.send_signal(signal.SIGKILL)
            proc.popen.wait(30)


def spawn(procs: list[Proc], repo: Path, tmp_path: Path, *args: str) -> Proc:
    proc = Proc(repo, tmp_path / f"proc-{len(procs)}", *args)
    procs.append(proc)
    return proc


def wait_event(
    repo: Path,
    type_: str,
    *,
    after: int = 0,
    count: int = 1,
    what: str = "",
    timeout: float = 30,
    **match: Any,
) -> list[Event]:
    """Wait until the log holds `count` events of `type_` after seq `after` matching `match`."""

    def found() -> list[Event] | None:
        hits = [
            e
            for e in events(repo, type_)
            if e.seq > after and all(_get(e, k) == v for k, v in match.items())
        ]
        return hits if len(hits) >= count else None

    return wait_for(found, what or f"{count} {type_} event(s) {match}", timeout=timeout)


def _get(event: Event, key: str) -> Any:
    if key == "loop":
        return event.loop
    if key.startswith("trigger."):
        trigger = event.data.get("trigger") or {}
        return trigger.get(key.split(".", 1)[1])
    return event.data.get(key)


def last_seq(repo: Path) -> int:
    found = events(repo)
    return found[-1].seq if found else 0


def due(event: Event) -> datetime:
    return datetime.fromisoformat(event.data["trigger"]["due"])
