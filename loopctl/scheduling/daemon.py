"""Long-running scheduling: `loopctl run NAME` on a trigger, and `loopctl up` / `down`.

`up` runs every loop that has a trigger in one process. A lock (freed by the kernel when the
process dies) keeps it single; it re-reads definitions when their files change, keeping a loop's
last valid version when a new one does not parse. `down` signals it and waits for it to go.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loopctl.checks import integrity
from loopctl.definitions import Project, Trigger, load_project
from loopctl.definitions.config import load_config
from loopctl.definitions.project import AGENT_SOURCES, SKILL_SOURCES, DefinitionKind
from loopctl.definitions.source import Problems
from loopctl.errors import LockHeld, LoopctlError, UsageError, swallowed
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.inbox import ItemKind, current_items, new_item_id
from loopctl.journal.notify import (
    MandateStop,
    interrupted_after,
    send_digest_if_due,
    send_mandate_stop,
    send_report_on_stop,
)
from loopctl.journal.recorder import Observer, Recorder
from loopctl.journal.schema import (
    DefinitionsReloaded,
    LoopStopped,
    SchedulerStarted,
    SchedulerStopped,
    read,
    read_note,
)
from loopctl.lock import RunnerLock, lock_path, read_holder
from loopctl.paths import ProjectPaths
from loopctl.process import spawn_detached
from loopctl.scheduling.mandate import Mandate, Session, Watch, of_session
from loopctl.scheduling.scheduler import Listener, Options, Scheduled, Scheduler, TickResult
from loopctl.scheduling.timing import Schedule

logger = logging.getLogger(__name__)

# The lock `up` holds: a leading "_" is not allowed in a loop name, so no loop's lock collides.
UP_LOCK = "_up"
UP_LOG = "up.log"
RELOAD_EVERY_S = 2.0
PROJECTION_INTERVAL_S = 5.0  # `up` renders STATE.md and INBOX.md at most this often


class UpRunning(LockHeld):
    """Another `loopctl up` already runs for this repository."""


@dataclass(frozen=True, slots=True)
class UpInfo:
    """The `up` process of a repository, as its lock and its last start event tell."""

    pid: int | None
    host: str | None
    since: str | None
    loops: tuple[str, ...] | None  # the loops it schedules; None when unknown
    started: str | None = None  # when its scheduler began (the anchor of never-run loops)
    session: Session | None = None  # its mandate (`--until`, `--max-usd`) when it has one

    @property
    def mandate(self) -> str | None:
        """Its mandate in words, "up until 07:30, $3.20 of $20"; None when it has none."""
        return self.session.describe() if self.session is not None else None

    def to_json(self) -> dict[str, Any]:
        """What `status --json` says of `up` (its `up` key)."""
        return {
            "pid": self.pid,
            "host": self.host,
            "since": self.since,
            "started": self.started,
            "loops": list(self.loops) if self.loops is not None else None,
            "mandate": self.session.to_json() if self.session is not None else None,
        }


def up_info(paths: ProjectPaths, events: Sequence[Event] | None = None) -> UpInfo | None:
    """Who runs `up` here, or None when nobody does."""
    holder = read_holder(paths.locks_dir, UP_LOCK)
    if holder is None:
        return None
    pid = holder.get("pid")
    loops: tuple[str, ...] | None = None
    started: str | None = None
    session: Session | None = None
    if events is None:
        events = EventLog(paths.events_file).read()
    stopped: set[str] = set()  # by `loopctl stop NAME` since it started
    for event in reversed(events):
        halted = read_note(LoopStopped, event)
        if halted is not None and halted.pid == pid and event.loop:
            stopped.add(event.loop)
        started_by = (
            read(SchedulerStarted, event) if event.type == EventType.SCHEDULER_STARTED else None
        )
        if started_by is not None and started_by.by == "up":
            if started_by.pid == pid:
                loops = tuple(sorted(n for n in started_by.loops if n not in stopped))
                started = event.ts
                session = of_session(events, started_by, event.seq)
            break
    return UpInfo(pid, holder.get("host"), holder.get("since"), loops, started, session)


def _held_message(info: UpInfo | None) -> str:
    who = f"pid {info.pid}" if info and info.pid is not None else "another process"
    if info and info.since:
        who += f" since {info.since}"
    return f"loopctl up is already running here ({who}); stop it with `loopctl down`"


def stop_request_path(paths: ProjectPaths, name: str) -> Path:
    """The file `loopctl stop NAME` writes for the `up` that runs loop `name` to pick up."""

    return lock_path(paths.locks_dir, name).with_suffix(".stop")


# --- which loops ------------------------------------------------------------------------------


def select_loops(
    project: Project, only: Sequence[str] = (), *, strict: bool = True
) -> dict[str, Scheduled]:
    """The loops `up` runs: every loop with a trigger, or the `only` ones (each must have one)."""
    chosen: dict[str, Scheduled] = {}
    for name in only:
        if name not in project.loops and strict:
            project.loop(name)  # raises: the loop's file is invalid, or there is no such loop
    for name, loop in sorted(project.loops.items()):
        if only and name not in only:
            continue
        schedule = Schedule.of(loop)
        if schedule is None:
            if strict and only:
                raise UsageError(
                    f"loop {name!r} has no trigger (every, cron or watch); add one to"
                    f" {loop.path.name}, or run it with `loopctl run {name} --once`"
                )
            continue
        chosen[name] = Scheduled(loop, schedule)
    return chosen


# --- `loopctl run NAME` on a trigger ----------------------------------------------------------


def run_foreground(
    project: Project,
    name: str,
    trigger: Trigger | None,
    *,
    max_ticks: int | None = None,
    start: bool = True,
    observer: Observer | None = None,
    listener: Listener | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    stop: threading.Event | None = None,
) -> list[TickResult]:
    """Run loop `name` on its trigger (or `trigger`) until Ctrl-C, `stop` or `max_ticks` ticks.

    Like `up`, it continues from the loop's last recorded slot: slots missed while nothing ran
    the loop are caught up (one tick) or recorded as skipped, by the loop's `catch_up`; only a
    loop that never ticked fires at once (`start`).
    """
    return run_bounded(
        project,
        name,
        trigger,
        max_ticks=max_ticks,
        start=start,
        observer=observer,
        listener=listener,
        clock=clock,
        stop=stop,
    ).results


def run_bounded(
    project: Project,
    name: str,
    trigger: Trigger | None,
    *,
    max_ticks: int | None = None,
    start: bool = True,
    observer: Observer | None = None,
    listener: Listener | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    stop: threading.Event | None = None,
    mandate: Mandate | None = None,
) -> UpEnded:
    """`run_foreground`, also until its `mandate` (`run --until/--max-usd`) ends the session,
    as `up`'s does: no tick starts, the running one is checkpointed, `[notify]` is told once."""
    loop = project.loop(name)
    schedule = Schedule.of(loop, trigger)
    if schedule is None:
        raise UsageError(
            f"loop {name!r} has no trigger: give --every D, --cron EXPR or --watch GLOB,"
            f" or run one tick with `loopctl run {name} --once`"
        )
    info = up_info(project.paths)
    if info is not None and (info.loops is None or name in info.loops):
        raise LockHeld(
            f"loop {name!r} is scheduled by `loopctl up` (pid {info.pid}); stop it with"
            f" `loopctl down`, or run one tick now with `loopctl run {name} --once`"
        )
    recorder = Recorder(project, observer=observer, clock=clock)
    first = recorder.log.last_seq()
    watch = Watch(mandate, recorder.log, first) if mandate is not None and mandate.bounded else None
    scheduler = Scheduler(
        recorder,
        {name: Scheduled(loop, schedule)},
        Options(
            mode="run", fire_on_start=start, from_log=True, max_ticks=max_ticks, fail_fast=True
        ),
        listener=listener,
        on_ready=lambda: _started(recorder, "run", {name: schedule}, (), mandate),
        mandate=watch,
    )
    results: list[TickResult] = []
    try:
        results = scheduler.run(stop)
    finally:
        _stopped(recorder, "run", scheduler)
        with swallowed(logger, "telling [notify] the mandate stopped the run"):
            ended = _mandate_stop(recorder, f"run {name}", scheduler, watch, first)
            if ended is not None:
                send_mandate_stop(recorder, load_config(project.paths.config, Problems()), ended)
    at = watch.ended_at if watch is not None else None
    return UpEnded(results, scheduler.stop_reason, scheduler.checkpointed, at)


def _started(
    recorder: Recorder,
    by: str,
    schedules: Mapping[str, Schedule],
    only: Sequence[str],
    mandate: Mandate | None = None,
) -> None:
    until = mandate.until if mandate is not None else None
    started = SchedulerStarted(
        by=by,
        pid=os.getpid(),
        only=tuple(only) or None,
        loops={name: schedule.describe() for name, schedule in sorted(schedules.items())},
        until=until.astimezone(UTC).isoformat(timespec="seconds") if until else None,
        max_usd=mandate.max_usd if mandate is not None else None,
    )
    recorder.record(started, run=None, loop=None)


def _mandate_stop(
    recorder: Recorder, by: str, scheduler: Scheduler, watch: Watch | None, after_seq: int
) -> MandateStop | None:
    """What the notification of a mandate's stop says; None when the mandate did not stop it."""
    if watch is None or not scheduler.stop_reason:
        return None
    reason = scheduler.stop_reason
    return MandateStop(
        by=by,
        reason=reason,
        bound=watch.bound or "",
        at=watch.ended_at or datetime.now(UTC),
        checkpointed=tuple(interrupted_after(recorder.log.read(), after_seq, reason)),
    )


def _stopped(recorder: Recorder, by: str, scheduler: Scheduler) -> None:
    # Stopping must not fail because the log cannot take one more line.
    with swallowed(logger, "recording that the scheduler stopped"):
        stopped = SchedulerStopped(
            by=by,
            pid=os.getpid(),
            ticks=scheduler.ticks,
            failed=scheduler.failed,
            reason=scheduler.stop_reason,
            checkpointed=scheduler.checkpointed,
        )
        recorder.record(stopped, run=None, loop=None)


# --- `loopctl up` -----------------------------------------------------------------------------


def definitions_fingerprint(root: Path) -> tuple[tuple[str, int, int, int], ...]:
    """What changes when a definition file is edited, added or removed (stat only, cheap)."""

    paths = ProjectPaths(root)
    found: list[tuple[str, int, int, int]] = []
    with contextlib.suppress(OSError):
        st = paths.config.stat()
        found.append((str(paths.config), st.st_mtime_ns, st.st_size, st.st_ino))
    # `up` asks every two seconds: a thousand loop files are read with one scandir, not globbed.
    found += _stats(paths.loops_dir, ".toml")
    files: list[Path] = []
    for folder, pattern, _backend, _markdown in AGENT_SOURCES:
        files += (root / folder).glob(pattern)
    for folder in SKILL_SOURCES:
        files += (root / folder).glob("*/SKILL.md")
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        found.append((str(path), st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(sorted(found))


def _stats(folder: Path, suffix: str) -> list[tuple[str, int, int, int]]:
    """(path, mtime, size, inode) of the files in `folder` whose names end with `suffix`."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.name.endswith(suffix):
                    continue
                with contextlib.suppress(OSError):
                    st = entry.stat()
                    found.append((entry.path, st.st_mtime_ns, st.st_size, st.st_ino))
    except OSError:
        pass
    return found


class _Reloader:
    """Re-reads definitions when their files change; bad new versions do not replace good ones."""

    def __init__(
        self, scheduler: Scheduler, project: Project, only: Sequence[str], recorder: Recorder
    ) -> None:
        self.scheduler = scheduler
        self.project = project
        self.only = tuple(only)
        self.recorder = recorder
        self.root = project.root
        self.fingerprint = definitions_fingerprint(self.root)

    def __call__(self) -> None:
        self._take_stop_requests()
        self._send_digest()
        fingerprint = definitions_fingerprint(self.root)
        if fingerprint == self.fingerprint:
            return

        if integrity.turns_open() or integrity.held_among(current_items(self.recorder.log)):
            # Invariant 12: a change made while an attempt runs may be the agent's; once the
            # attempt is checked it is either clean or held until a human approves it. Either
            # way, the fingerprint is kept, so the reload happens then.
            return
        self.fingerprint = fingerprint
        try:
            self._reload()
        except Exception as exc:  # a reload that fails must not stop the loops already running
            self._item(None, f"`loopctl up` could not re-read the definitions: {exc}")

    def _take_stop_requests(self) -> None:
        """`loopctl stop NAME` for a loop this process runs: that loop alone ends."""
        try:
            # One listing of the locks folder, not one stat per loop every two seconds.
            with os.scandir(self.project.paths.locks_dir) as entries:
                names = {entry.name for entry in entries if entry.name.endswith(".stop")}
        except OSError:
            return
        if not names:
            return
        for name in list(self.scheduler.loops):
            request = stop_request_path(self.project.paths, name)
            if request.name not in names:
                continue
            with contextlib.suppress(FileNotFoundError):
                request.unlink()
            if self.scheduler.stop_loop(name):
                self.recorder.record(LoopStopped(pid=os.getpid()), run=None, loop=name)

    def _send_digest(self) -> None:
        """The daily `[notify] digest`, sent by whichever `up` is running when it falls due."""

        try:
            send_digest_if_due(self.recorder, datetime.now(UTC))
        except Exception as exc:  # a digest that fails must not stop the loops
            self._item(None, f"the daily digest could not be sent: {exc}")

    def _reload(self) -> None:
        fresh = load_project(self.root)
        loop_files = {str(loop.path) for loop in (*self.project.loops.values(),)}
        loop_files |= {str(p) for p in fresh.paths.loops_dir.glob("*.toml")}
        errors = fresh.errors
        shared = [e for e in errors if e.path is None or str(e.path) not in loop_files]
        if shared:
            # A broken config, agent or skill can affect every loop: keep everything as it was.
            text = shared[0].render(self.root)
            self._item(
                None, f"definitions are invalid, `loopctl up` keeps the last valid ones: {text}"
            )
            return
        bad_files: dict[str, str] = {}
        for problem in errors:
            bad_files.setdefault(str(problem.path), problem.render(self.root))
        merged = {n: loop for n, loop in fresh.loops.items() if str(loop.path) not in bad_files}
        kept: list[str] = []
        for path, text in bad_files.items():
            name = Path(path).stem
            old = self.project.loops.get(name)
            if old is not None:
                merged[name] = old
                kept.append(name)
                self._item(
                    name,
                    f"loop {name}: its new definition is invalid, `loopctl up` keeps running the"
                    f" last valid one: {text}",
                )
            else:
                self.skipped_loop(name, text)
        project = replace(fresh, loops=merged, problems=())
        before = set(self.scheduler.loops)
        selected = select_loops(project, self.only, strict=False)
        previous = self.project
        self.project = project
        self.recorder = self.recorder.for_project(project)
        self.scheduler.set_loops(project, selected)
        changed = sorted(
            n for n in set(selected) & before if previous.loops.get(n) != project.loops.get(n)
        )
        reloaded = DefinitionsReloaded(
            added=tuple(sorted(set(selected) - before)),
            removed=tuple(sorted(before - set(selected))),
            changed=tuple(changed),
            kept=tuple(kept),
            loops={name: item.schedule.describe() for name, item in sorted(selected.items())},
        )
        self.recorder.record(reloaded, run=None, loop=None)

    def skipped_loop(self, name: str, first_error: str) -> None:
        self._item(name, f"loop {name} is invalid and not scheduled: {first_error}")

    def _item(self, loop: str | None, summary: str) -> None:
        self.recorder.open_item(
            ItemKind.UNHANDLED,
            summary,
            {"reason": summary},
            run=None,
            loop=loop,
            item_id=new_item_id("definition-invalid", loop or "", summary),
        )


@dataclass(frozen=True, slots=True)
class UpEnded:
    """How a foreground `up` (or `run`) ended of itself: its mandate's reason, the ticks it
    interrupted."""

    results: list[TickResult]
    reason: str = ""  # empty unless the mandate ended it
    checkpointed: int = 0
    at: datetime | None = None  # when the mandate ended it (its ticks were checkpointed after)


def serve(
    root: Path,
    only: Sequence[str] = (),
    *,
    observer: Observer | None = None,
    listener: Listener | None = None,
    reload_every_s: float = RELOAD_EVERY_S,
    mandate: Mandate | None = None,
) -> UpEnded:
    """`loopctl up` in the foreground: schedule every loop with a trigger until stopped, or
    until its `mandate` (a deadline, a spend cap) ends the session."""
    project = load_project(root)
    project.raise_for_errors()
    selected = select_loops(project, only)
    lock = RunnerLock(project.paths.locks_dir, UP_LOCK)
    try:
        lock.acquire()
    except LockHeld:
        raise UpRunning(_held_message(up_info(project.paths))) from None
    try:
        # A hundred loops ticking re-render STATE.md and INBOX.md at most every few seconds,
        # not per event; `up` ends with both current (flush_projections below).
        recorder = Recorder(project, observer=observer, pace_s=PROJECTION_INTERVAL_S)
        watch = None
        if mandate is not None and mandate.bounded:
            # The session's spend: what is recorded after this point.
            watch = Watch(mandate, recorder.log, recorder.log.last_seq())
        scheduler = Scheduler(
            recorder,
            selected,
            Options(mode="up", from_log=True),
            listener=listener,
            maintenance_every_s=reload_every_s,
            mandate=watch,
        )
        scheduler.on_ready = lambda: _started(
            recorder, "up", {n: s.schedule for n, s in scheduler.loops.items()}, only, mandate
        )
        reloader = _Reloader(scheduler, project, only, recorder)
        scheduler.maintenance = reloader
        for bad in project.invalid:
            if bad.kind is DefinitionKind.LOOP and (not only or bad.name in only):
                # The other loops run; the broken one waits, in the inbox, for its fix.
                reloader.skipped_loop(bad.name, bad.first(root))
        started = datetime.now(UTC)
        first = recorder.log.last_seq()
        try:
            results = scheduler.run()
        finally:
            _stopped(recorder, "up", scheduler)
            with swallowed(logger, "rendering STATE.md and INBOX.md as `up` ends"):
                recorder.flush_projections()
            # The night's report goes out as `up` ends; a channel that fails must not.
            with swallowed(logger, "sending the report of the session"):
                stop = _mandate_stop(recorder, "up", scheduler, watch, first)
                send_report_on_stop(recorder, started, datetime.now(UTC), stop)
        at = watch.ended_at if watch is not None else None
        return UpEnded(results, scheduler.stop_reason, scheduler.checkpointed, at)
    finally:
        lock.release()


@dataclass(frozen=True, slots=True)
class Detached:
    pid: int
    log: Path


def start_detached(
    root: Path,
    only: Sequence[str] = (),
    *,
    timeout: float = 30.0,
    mandate: Mandate | None = None,
) -> Detached:
    """Start `loopctl up` in the background; return once it schedules (or say why it did not).

    Its `mandate` is passed resolved (an absolute --until), so both processes mean one instant.
    """

    paths = ProjectPaths(root)
    info = up_info(paths)
    if info is not None:
        raise UpRunning(_held_message(info))
    log = paths.log_dir / UP_LOG
    before = EventLog(paths.events_file).last_seq()
    argv = [sys.executable, "-m", "loopctl", "up"]
    for name in only:
        argv += ["--only", name]
    if mandate is not None:
        # "none" too: a `--until none` that overrode [budget] up_until must hold in the child.
        if mandate.until is not None:
            argv += ["--resolved-until", mandate.until.isoformat()]
        else:
            argv += ["--until", "none"]
    if mandate is not None and mandate.max_usd is not None:
        argv += ["--max-usd", repr(mandate.max_usd)]
    child = spawn_detached(argv, cwd=root, env=os.environ, log_path=log)
    deadline = time.monotonic() + timeout
    events = EventLog(paths.events_file)
    while True:
        code = child.poll()
        if code is not None:
            raise LoopctlError(
                f"loopctl up exited with code {code} at start: {_last_line(log)} (see {log})"
            )
        for event in events.iter_from(before):
            if (
                event.type == EventType.SCHEDULER_STARTED
                and read(SchedulerStarted, event).pid == child.pid
            ):
                return Detached(child.pid, log)
        if time.monotonic() > deadline:
            return Detached(child.pid, log)  # still starting (a slow watch); it is running
        time.sleep(0.05)


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"


@dataclass(frozen=True, slots=True)
class Stopped:
    pid: int | None
    was_running: bool


def stop_up(
    paths: ProjectPaths, *, timeout: float = 60.0, sleep: Callable[[float], None] = time.sleep
) -> Stopped:
    """`loopctl down`: SIGTERM the `up` process and wait (bounded) until its lock is free."""
    info = up_info(paths)
    if info is None:
        return Stopped(None, False)
    if info.pid is None:
        raise LoopctlError("loopctl up holds its lock but did not record its pid; stop it by hand")
    if info.host and info.host != socket.gethostname():
        raise LoopctlError(
            f"loopctl up runs on another host ({info.host}, pid {info.pid}); stop it there"
        )
    try:
        os.kill(info.pid, signal.SIGTERM)
    except ProcessLookupError:
        return Stopped(info.pid, False)
    deadline = time.monotonic() + timeout
    while read_holder(paths.locks_dir, UP_LOCK) is not None:
        if time.monotonic() > deadline:
            raise LoopctlError(
                f"loopctl up (pid {info.pid}) is still running {int(timeout)}s after SIGTERM;"
                f" wait for its tick to stop, or `kill -9 {info.pid}` (the next start resumes)"
            )
        sleep(0.05)
    return Stopped(info.pid, True)
