"""The runtime behind `loopctl run NAME` (on a trigger) and `loopctl up`: timers, watches, ticks.

One thread decides (`timing.decide`, a pure function) and then sleeps until the next due time
or a wake-up (a tick ended, files changed, stop): no polling while idle. Each tick runs in its own
thread, so ticks of different loops may overlap in time while one loop never overlaps itself.
Every decision is recorded in the event log (`tick_started` carries its slot, `tick_skipped` its
reason), which is what a restarted scheduler reads back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from loopctl.definitions import Loop, Project
from loopctl.engine.context import StopSignal
from loopctl.engine.runner import Engine, RunOutcome
from loopctl.errors import LockHeld, LoopctlError, swallowed
from loopctl.journal import fuse
from loopctl.journal.inbox import ItemKind, new_item_id
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import TickSkipped
from loopctl.journal.statuses import Outcome
from loopctl.lock import read_holder
from loopctl.scheduling.mandate import Watch
from loopctl.scheduling.pauses import BackendPauses
from loopctl.scheduling.review_wait import RECHECK_S, ReviewWait
from loopctl.scheduling.timing import (
    Action,
    Decision,
    Fired,
    JitterFn,
    LoopTiming,
    Schedule,
    decide,
    delay_s,
    last_slots,
    stable_jitter,
    with_spreads,
    zone,
)
from loopctl.scheduling.watch import RepoWatcher, changed_for

logger = logging.getLogger(__name__)

# Sleep at most this long between looks: a suspended laptop's monotonic clock stops, the wall
# clock (which slots are in) does not.
MAX_SLEEP_S = 60.0
MAX_CHANGED = 200  # paths recorded per tick; the rest are counted
KEEP_RESULTS = 100


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Scheduled:
    """One loop as a scheduler runs it: its definition and its (possibly overridden) timing."""

    loop: Loop
    schedule: Schedule


@dataclass(frozen=True, slots=True)
class TickResult:
    """How one fired tick ended."""

    loop: str
    slot: datetime
    fired: str
    outcome: RunOutcome | None = None
    skipped: str | None = None  # the tick could not run: why
    interrupted: bool = False
    error: BaseException | None = None  # an unexpected failure (a bug), for a crash log

    @property
    def ok(self) -> bool:
        return self.outcome is not None and self.outcome.ok


class Listener(Protocol):
    """What a view hears from the scheduler besides the engine's events."""

    def planned(self, loop: str, at: datetime | None) -> None: ...

    def finished(self, result: TickResult) -> None: ...


@dataclass(frozen=True, slots=True)
class Options:
    mode: str = "run"  # run | up: recorded with every tick
    fire_on_start: bool = False  # `run`: the first tick at once
    from_log: bool = True  # each timed loop continues from its last recorded tick
    max_ticks: int | None = None
    fail_fast: bool = False  # `run`: an error that keeps a tick from starting ends the run
    grace_s: float = 30.0  # how long a stop waits for running ticks to checkpoint
    debounce_ms: int = 1600


@dataclass(slots=True)
class _Entry:
    item: Scheduled
    last_slot: datetime | None
    thread: threading.Thread | None = None
    queued: datetime | None = None
    changes: list[str] = field(default_factory=list)
    planned: datetime | None = None
    reported: bool = False
    # Set to end this loop's running tick: by the scheduler's stop, or by `stop_loop` alone.
    stop: StopSignal = field(default_factory=StopSignal)


class Scheduler:
    """Runs a set of loops on their triggers until stopped (or until `max_ticks` ticks ran)."""

    def __init__(
        self,
        rec: Recorder,
        loops: Mapping[str, Scheduled],
        options: Options,
        *,
        listener: Listener | None = None,
        jitter: JitterFn = stable_jitter,
        on_ready: Callable[[], None] | None = None,
        maintenance: Callable[[], None] | None = None,
        maintenance_every_s: float = 2.0,
        mandate: Watch | None = None,
    ) -> None:
        self.options = options
        # `up --until/--max-usd`: once it ends, no tick starts and the running ones are
        # interrupted with its reason (`stop_reason`); `checkpointed` counts them.
        self.mandate = mandate
        self.stop_reason = ""
        self.checkpointed = 0
        self.listener = listener
        self.clock = rec.clock
        self.jitter = jitter
        self.on_ready = on_ready
        self.maintenance = maintenance
        self.maintenance_every_s = maintenance_every_s
        self.project = rec.project
        self.started = self.clock()
        # Every result when the run is bounded (--max-ticks); the latest ones for a daemon.
        self.results: deque[TickResult] = deque(
            maxlen=None if options.max_ticks is not None else KEEP_RESULTS
        )
        self.ticks = 0
        self.failed = 0
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._entries: dict[str, _Entry] = {}
        self._stopped_loops: set[str] = set()  # `loopctl stop NAME`: not scheduled again here
        self._fired = 0
        self._fatal: BaseException | None = None
        self._watcher: RepoWatcher | None = None
        self._threads: list[threading.Thread] = []
        self._tick_stops: dict[threading.Thread, StopSignal] = {}  # of running ticks
        self._recorder = rec
        self._pending_loops: Mapping[str, Scheduled] | None = loops
        self._review = ReviewWait()  # [review] max_open: loops waiting for their reviewer
        # Loops whose owed tick waits for another process working them (see `_apply`).
        self._held_elsewhere: set[str] = set()
        self._pauses = BackendPauses()  # backends paused by a rate limit (scheduling.pauses)

    # --- configuration -------------------------------------------------------------------

    def set_loops(self, project: Project, loops: Mapping[str, Scheduled]) -> None:
        """Replace the loops (a definitions reload); a running tick finishes as it began."""
        events = self._recorder.log.read()
        last = last_slots(events) if self.options.from_log else {}
        # Loops that share a slot are spread over part of their period (timing.default_spreads).
        spread = with_spreads({name: item.schedule for name, item in loops.items()}, self.clock())
        loops = {name: Scheduled(item.loop, spread[name]) for name, item in loops.items()}
        with self._lock:
            self._pauses.refresh(events)
            self.project = project
            self._recorder = self._recorder.for_project(project)
            # A pause a killed process recorded but never told anyone of is told now (once).
            self._pauses.tell_unheard(self._recorder, datetime.now(UTC))
            for name in list(self._entries):
                if name not in loops:
                    del self._entries[name]
            for name, item in loops.items():
                if name in self._stopped_loops:
                    continue
                entry = self._entries.get(name)
                if entry is None:
                    # A watch has no slots to catch up: `run` on a watch still ticks at once.
                    self._entries[name] = _Entry(
                        item, last.get(name) if item.schedule.timed else None
                    )
                else:
                    if entry.item.schedule != item.schedule:
                        entry.queued = None
                        entry.changes.clear()
                    entry.item = item
        self._ensure_watcher()
        self._wake.set()

    @property
    def loops(self) -> dict[str, Scheduled]:
        with self._lock:
            return {name: entry.item for name, entry in self._entries.items()}

    # --- the loop ------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> list[TickResult]:
        """Schedule until `stop` is set, `max_ticks` ticks ran, or Ctrl-C (re-raised)."""
        self._stop = stop or threading.Event()
        if stop is not None:
            # Setting an outside stop must wake the loop from its sleep; _shutdown sets it too,
            # so this relay always ends with the run.
            threading.Thread(
                target=self._relay_stop, args=(stop,), name="loopctl-stop-relay", daemon=True
            ).start()
        interrupted = False
        try:
            if self._pending_loops is not None:
                loops, self._pending_loops = self._pending_loops, None
                self.set_loops(self.project, loops)
            self.started = self.clock()
            if self.on_ready is not None:
                self.on_ready()
            self._loop()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self._shutdown()
        if self._fatal is not None and not interrupted:
            raise self._fatal
        if interrupted:
            raise KeyboardInterrupt
        return list(self.results)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def stop_loop(self, name: str) -> bool:
        """End one loop: its running tick is interrupted (checkpointed) and no tick follows.

        The other loops go on. False when this scheduler does not run `name`.
        """
        with self._lock:
            entry = self._entries.pop(name, None)
            if entry is None:
                return False
            self._stopped_loops.add(name)
            entry.stop.set()
        self._wake.set()
        return True

    def _relay_stop(self, stop: threading.Event) -> None:
        stop.wait()
        self._wake.set()

    def _loop(self) -> None:
        next_maintenance = time.monotonic() + self.maintenance_every_s
        woken = True  # by something that may change a decision: plan again
        wake_at: datetime | None = None
        while not self._stop.is_set():
            self._wake.clear()
            if self._fatal is not None:
                return
            watcher = self._watcher
            if watcher is not None and watcher.error is not None:
                raise LoopctlError(f"the file watcher stopped: {watcher.error}")
            now = self.clock()
            if self.mandate is not None:
                self.stop_reason = self.mandate.ended(now) or ""
                if self.stop_reason:
                    return
            with self._lock:
                if woken or (wake_at is not None and now >= wake_at):
                    # Otherwise only the maintenance timer woke us: every decision stands, and
                    # a thousand idle loops are not decided again every two seconds.
                    wake_at = self._plan(now)
                busy = any(e.thread is not None for e in self._entries.values())
                finished = self._limit_reached() and not busy
            if finished:
                return
            timeout = MAX_SLEEP_S
            if wake_at is not None:
                timeout = min(timeout, max(0.0, (wake_at - self.clock()).total_seconds()))
            if self.maintenance is not None:
                timeout = min(timeout, max(0.0, next_maintenance - time.monotonic()))
            if self.mandate is not None and self.mandate.until is not None:
                timeout = min(timeout, max(0.0, (self.mandate.until - now).total_seconds()))
            woken = self._wake.wait(timeout) if timeout > 0 else self._wake.is_set()
            if self.maintenance is not None and time.monotonic() >= next_maintenance:
                self.maintenance()
                next_maintenance = time.monotonic() + self.maintenance_every_s

    def _shutdown(self) -> None:
        self._stop.set()
        with self._lock:
            by = "up" if self.options.mode == "up" else "run"
            why = f"`loopctl {by}` stopped: {self.stop_reason}" if self.stop_reason else ""
            for stop in self._tick_stops.values():
                stop.halt(why)
        if self._watcher is not None:
            self._watcher.stop()
        deadline = time.monotonic() + self.options.grace_s
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _record_result(self, result: TickResult) -> None:
        with self._lock:
            self.results.append(result)
            self.ticks += 1
            self.failed += 0 if result.ok else 1
            if result.interrupted and self._stop.is_set():
                self.checkpointed += 1

    def _limit_reached(self) -> bool:
        limit = self.options.max_ticks
        return limit is not None and self._fired >= limit

    # --- deciding ------------------------------------------------------------------------

    def _timing(self, entry: _Entry) -> LoopTiming:
        return LoopTiming(
            started=self.started,
            last_slot=entry.last_slot,
            fire_on_start=self.options.fire_on_start,
            running=entry.thread is not None,
            queued=entry.queued,
            changes=tuple(entry.changes),
        )

    def _plan(self, now: datetime) -> datetime | None:
        """Act on every loop's decision at `now`; return the earliest time to look again."""
        earliest: datetime | None = None
        # Which owed ticks wait for another process is found again below, loop by loop: a loop
        # removed or paused meanwhile is not looked at every second for nothing.
        self._held_elsewhere.clear()
        self._pauses.look(self._recorder.log.read)
        self._pauses.resume_due(self._recorder, now)
        for name, entry in list(self._entries.items()):
            paused = self._pauses.holding(self.project, entry.item.loop, now)
            if paused is not None:
                # Its backend is paused: no tick before the pause ends, then one by itself.
                earliest = paused.until if earliest is None else min(earliest, paused.until)
                self._tell_planned(name, entry, paused.until)
                continue
            decision = Decision(Action.WAIT)
            # Past --max-ticks nothing is decided (nor skipped): the run only waits to end.
            for _ in range(0 if self._limit_reached() else 4):
                # Each action changes the timing; ask until there is nothing more to do.
                decision = decide(
                    name, entry.item.schedule, self._timing(entry), now, jitter=self.jitter
                )
                if decision.action is Action.WAIT or not self._apply(name, entry, decision, now):
                    break
            wake = decision.wake if decision.action is Action.WAIT else None
            if self._limit_reached():
                wake = None
            if wake is not None and (earliest is None or wake < earliest):
                earliest = wake
            self._tell_planned(name, entry, wake)
        recheck = None if self._limit_reached() else self._review.wake(now, self._entries)
        if recheck is None and self._held_elsewhere and not self._limit_reached():
            recheck = now + timedelta(seconds=RECHECK_S)
        if recheck is not None and (earliest is None or recheck < earliest):
            earliest = recheck
        return earliest

    def _worked_elsewhere(self, loop: Loop) -> bool:
        return read_holder(self._recorder.paths.locks_dir, loop.name) is not None

    def _tell_planned(self, name: str, entry: _Entry, wake: datetime | None) -> None:
        if not entry.reported or entry.planned != wake:
            entry.planned, entry.reported = wake, True
            if self.listener is not None:
                # A broken view must never stop us.
                with swallowed(logger, "the view's planned()"):
                    self.listener.planned(name, wake)

    def _apply(self, name: str, entry: _Entry, decision: Decision, now: datetime) -> bool:
        """Carry out one decision; False when it must wait (the tick limit is reached)."""
        slot = decision.slot or now
        if decision.action is Action.QUEUE:
            entry.queued = slot
            entry.last_slot = slot
            return True
        if decision.action is Action.SKIP:
            self._record_skip(name, entry, decision, decision.reason)
            entry.last_slot = max(slot, entry.last_slot) if entry.last_slot else slot
            entry.changes.clear()
            return True
        if self._limit_reached():
            return False
        if decision.fired is Fired.QUEUED and self._worked_elsewhere(entry.item.loop):
            # An owed tick (queue-one, or a reviewer's wait) waits for whoever works the loop
            # now, as for a tick of its own: a human's `inbox approve` delivering in another
            # process must not make it a skipped tick, owed until the next slot (an hour later
            # for `every = "1h"`). Looked at again in RECHECK_S.
            self._held_elsewhere.add(name)
            return False
        blown = self._fuse_blown(name, now)
        if blown is None and not self._review.may_start(self._recorder, entry.item.loop):
            # It waits for its reviewer: its slot is owed (queued), not skipped.
            if entry.item.schedule.timed and entry.queued is None:
                entry.queued = entry.last_slot = slot
            return False
        if entry.queued is not None and decision.fired is Fired.QUEUED:
            entry.queued = None
        else:
            entry.last_slot = max(slot, entry.last_slot) if entry.last_slot else slot
        entry.changes.clear()
        self._fired += 1
        if blown is not None:
            # A tick that came due and was refused: it counts (for --max-ticks) and failed.
            self._record_skip(name, entry, decision, blown)
            result = TickResult(name, slot, (decision.fired or Fired.SCHEDULE).value, skipped=blown)
            self._record_result(result)
            if self.listener is not None:
                with swallowed(logger, "the view's finished()"):
                    self.listener.finished(result)
            return True
        thread = threading.Thread(
            target=self._tick,
            args=(name, entry.item, slot, decision, self.project, entry.stop),
            name=f"loopctl-tick-{name}",
            daemon=True,
        )
        entry.thread = thread
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        self._tick_stops = {t: e for t, e in self._tick_stops.items() if t.is_alive()}
        self._tick_stops[thread] = entry.stop
        thread.start()
        return True

    # --- recording -----------------------------------------------------------------------

    def _trigger_data(self, item: Scheduled, slot: datetime, decision: Decision) -> dict[str, Any]:
        data: dict[str, Any] = {
            "due": slot.astimezone(UTC).isoformat(timespec="microseconds"),
            "fired": (decision.fired or Fired.SCHEDULE).value,
            "by": self.options.mode,
            "schedule": item.schedule.describe(),
        }
        if item.schedule.timed and decision.fired is not Fired.START:
            # Its jitter or spread: the tick is due this long after its slot.
            delay = delay_s(item.loop.name, item.schedule, slot, self.jitter)
            if delay > 0:
                data["delay"] = round(delay, 3)
        if decision.missed:
            data["missed"] = decision.missed
        if decision.changed:
            data["changed"] = list(decision.changed[:MAX_CHANGED])
            if len(decision.changed) > MAX_CHANGED:
                data["changed_total"] = len(decision.changed)
        return data

    def _record_skip(self, name: str, entry: _Entry, decision: Decision, reason: str) -> None:
        trigger = self._trigger_data(entry.item, decision.slot or self.clock(), decision)
        if decision.action is Action.SKIP:
            trigger.pop("fired", None)
        self._recorder.record(TickSkipped(reason=reason, trigger=trigger), run=None, loop=name)

    def _fuse_blown(self, name: str, now: datetime) -> str | None:
        config = self.project.config
        if not fuse.configured(config):
            return None
        spent = fuse.day_spend(self._recorder.log.read(), now, zone(None))
        reason = fuse.fuse_reason(config, spent)
        if reason is None:
            return None
        fuse.open_fuse_item(self._recorder, reason, spent, name)
        return reason

    def _open_item_once(self, name: str, summary: str, reason: str) -> None:
        self._recorder.open_item(
            ItemKind.UNHANDLED,
            summary,
            {"reason": reason},
            run=None,
            loop=name,
            item_id=new_item_id("tick-error", name, reason),
        )

    # --- one tick ------------------------------------------------------------------------

    def _tick(
        self,
        name: str,
        item: Scheduled,
        slot: datetime,
        decision: Decision,
        project: Project,
        stop: threading.Event,
    ) -> None:
        trigger = self._trigger_data(item, slot, decision)
        fired = trigger["fired"]
        result = TickResult(name, slot, fired)
        try:
            # A recorder of its own: the tick's project is the one it began with.
            engine = Engine(self._recorder.for_project(project))
            outcome = engine.run_loop_once(
                item.loop, changed=decision.changed, trigger=trigger, stop=stop
            )
            result = TickResult(name, slot, fired, outcome=outcome)
            if any(task.outcome is Outcome.RATE_LIMITED for task in outcome.tasks):
                with self._lock:
                    self._pauses.look(self._recorder.log.read, now_too=True)
        except KeyboardInterrupt:
            result = TickResult(name, slot, fired, interrupted=True)
        except LockHeld as exc:
            # Someone else (a `run --once`, another scheduler) is working the loop right now.
            self._emit_skip(name, trigger, str(exc))
            result = TickResult(name, slot, fired, skipped=str(exc))
        except LoopctlError as exc:
            if self.options.fail_fast:
                self._fatal = exc
            else:
                reason = f"could not start: {exc}"
                self._emit_skip(name, trigger, reason)
                # The log itself failing is reported by the next tick.
                with swallowed(logger, f"opening the inbox item of loop {name}"):
                    self._open_item_once(name, f"loop {name} cannot tick: {exc}", reason)
            result = TickResult(name, slot, fired, skipped=str(exc))
        except Exception as exc:  # a bug in one tick must not take the other loops down
            if self.options.fail_fast:
                self._fatal = exc
            else:
                reason = f"unexpected error: {type(exc).__name__}: {exc}"
                self._emit_skip(name, trigger, reason)
            result = TickResult(name, slot, fired, skipped=str(exc), error=exc)
        finally:
            self._review.tick_ended(self._recorder, name)
            with self._lock:
                entry = self._entries.get(name)
                if entry is not None and entry.thread is threading.current_thread():
                    entry.thread = None
                self._record_result(result)
            if self.listener is not None:
                # A broken view must never stop us.
                with swallowed(logger, "the view's finished()"):
                    self.listener.finished(result)
            self._wake.set()

    def _emit_skip(self, name: str, trigger: dict[str, Any], reason: str) -> None:
        # A failing log is reported by the next tick.
        with swallowed(logger, f"recording a skipped tick of loop {name}"):
            skipped = TickSkipped(reason=reason, trigger=trigger)
            self._recorder.record(skipped, run=None, loop=name)

    # --- file watches --------------------------------------------------------------------

    def _watch_patterns(self) -> tuple[str, ...]:
        with self._lock:
            patterns = {
                p
                for entry in self._entries.values()
                if not entry.item.schedule.timed
                for p in entry.item.schedule.watch
            }
        return tuple(sorted(patterns))

    def _ensure_watcher(self) -> None:
        patterns = self._watch_patterns()
        current = self._watcher
        if current is not None and current.patterns == patterns and current.error is None:
            return
        if current is not None:
            current.stop()
            self._watcher = None
        if not patterns:
            return
        paths = self.project.paths
        worktrees = self.project.config.worktree_root or paths.default_worktree_root()
        watcher = RepoWatcher(
            paths.root,
            patterns,
            self._on_change,
            ignore=[worktrees],
            probe_dir=paths.loop_dir / "cache",
            debounce_ms=self.options.debounce_ms,
        )
        watcher.start()
        self._watcher = watcher

    def _on_change(self, paths: Sequence[str]) -> None:
        with self._lock:
            for entry in self._entries.values():
                schedule = entry.item.schedule
                if schedule.timed:
                    continue
                for path in changed_for(schedule.watch, paths):
                    if path not in entry.changes:
                        entry.changes.append(path)
        self._wake.set()
