"""`loopctl stop NAME|RUN`: end one loop or one run gracefully, leaving every other one running.

Who runs the target decides how it is asked to stop:
- `loopctl up` runs many loops in one process, so it must not be signalled: a request file next
  to the loop's lock is written, which `up` picks up within seconds (`scheduling/daemon.py`),
  interrupting that loop's tick and scheduling it no more.
- `loopctl run NAME` (on a trigger or `--once`) and `loopctl goal` run one loop each: they get
  SIGTERM, which they take as Ctrl-C.
Either way the engine stops the agents, records `run_interrupted`, and the next `loopctl run`
(or `up`) resumes the run where it stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from loopctl.engine.context import goal_task_id
from loopctl.errors import LoopctlError, UsageError
from loopctl.journal import history
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.schema import SchedulerStarted, SchedulerStopped, read
from loopctl.lock import read_holder
from loopctl.paths import ProjectPaths
from loopctl.scheduling.daemon import stop_request_path, up_info

GOAL_LOOP = "goal"


class NothingToStop(LoopctlError):
    """The loop or run named is not running (exit 1)."""


@dataclass(frozen=True, slots=True)
class StopResult:
    """What was stopped, and how."""

    loop: str
    run: str | None  # the run that was under way, if one was
    pid: int
    via: str  # "up" (a request to the `up` process) or "signal" (SIGTERM to `run`/`goal`)

    def to_json(self) -> dict[str, Any]:
        return {"loop": self.loop, "run": self.run, "pid": self.pid, "via": self.via}


@dataclass(frozen=True, slots=True)
class _Target:
    loop: str
    lock: str  # the name of the lock its ticks hold
    run: str | None
    by_run: bool = False  # named by its run id, not its loop's name


def stop(
    paths: ProjectPaths,
    ref: str,
    loops: Sequence[str],
    *,
    timeout: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> StopResult:
    """Stop loop `ref` (a name in `loops`) or run `ref` (a run id or a unique prefix of one)."""
    events = EventLog(paths.events_file).read()
    target = _target(events, ref, loops)

    up = up_info(paths, events)
    if up is not None and up.loops is not None and target.loop in up.loops and up.pid:
        _same_host(up.host, up.pid)
        request = stop_request_path(paths, target.loop)
        request.write_text(json.dumps({"by": os.getpid(), "ref": ref}) + "\n")
        try:
            _wait(lambda: not request.exists(), timeout, sleep, f"loopctl up (pid {up.pid})")
            _wait(lambda: read_holder(paths.locks_dir, target.lock) is None, timeout, sleep, "")
        finally:
            with contextlib.suppress(FileNotFoundError):
                request.unlink()
        return StopResult(target.loop, target.run, up.pid, "up")
    holder = read_holder(paths.locks_dir, target.lock)
    pid = holder.get("pid") if holder else None
    host = holder.get("host") if holder else None
    if not isinstance(pid, int):
        pid, host = _foreground_runner(events, target.loop)
    if pid is None:
        what = f"run {target.run}" if target.by_run else f"loop {target.loop}"
        left = f"; its run {target.run} waits to be resumed" if target.run else ""
        raise NothingToStop(f"{what} is not running{left} (`loopctl status` shows what runs)")
    _same_host(host, pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    _wait(lambda: not _alive(pid), timeout, sleep, f"pid {pid}")
    return StopResult(target.loop, target.run, pid, "signal")


def _target(events: list[Event], ref: str, loops: Sequence[str]) -> _Target:

    runs = history.fold(events)
    if ref in loops:
        open_runs = [r for r in runs.values() if r.loop == ref and r.finished is None]
        return _Target(ref, ref, open_runs[-1].run if open_runs else None)
    if ref == GOAL_LOOP:  # goals have no schedule: `stop goal` is the latest unfinished one
        goals = [r.run for r in runs.values() if r.loop == ref and r.finished is None]
        if not goals:
            raise NothingToStop("no goal is running")
        ref = goals[-1]
    matches = [r for r in runs if r == ref or r.startswith(ref)]
    if len(matches) > 1:
        raise UsageError(f"run prefix {ref!r} is ambiguous: {', '.join(matches[:5])}")
    if not matches:
        close = get_close_matches(ref, list(loops), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        known = ", ".join(sorted(loops)) or "none"
        raise UsageError(f"no loop or run {ref!r} (loops: {known}){hint}")
    run = runs[matches[0]]
    if run.finished is not None:
        raise NothingToStop(f"run {run.run} already ended ({run.status})")
    lock = run.loop
    if run.loop == GOAL_LOOP:
        lock = f"goal-{goal_task_id(str(run.data.get('condition') or 'goal'))}"
    return _Target(run.loop, lock, run.run, by_run=True)


def _foreground_runner(events: list[Event], loop: str) -> tuple[int | None, str | None]:
    """The `loopctl run NAME` on a trigger that schedules `loop`, between its ticks."""
    stopped: set[int] = set()
    for event in reversed(events):
        if event.type == EventType.SCHEDULER_STOPPED:
            ended = read(SchedulerStopped, event)
            if ended.by == "run" and ended.pid is not None:
                stopped.add(ended.pid)
        elif event.type == EventType.SCHEDULER_STARTED:
            began = read(SchedulerStarted, event)
            pid = began.pid
            if began.by != "run" or pid is None or pid in stopped:
                continue
            # A recycled pid is another program: only a live loopctl process counts.
            if loop in began.loops and _is_loopctl(pid):
                return pid, None
    return None, None


def _is_loopctl(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(b"loopctl" in part for part in argv[:4]) and _alive(pid)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _same_host(host: object, pid: int) -> None:
    if isinstance(host, str) and host and host != socket.gethostname():
        raise LoopctlError(f"it runs on another host ({host}, pid {pid}); stop it there")


def _wait(
    done: Callable[[], bool], timeout: float, sleep: Callable[[float], None], who: str
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise LoopctlError(
                f"{who or 'the loop'} has not stopped {int(timeout)}s after the request;"
                " wait for its agent to end, or raise --timeout"
            )
        sleep(0.05)
