"""What a person sees while `loopctl run NAME` (on a trigger) or `loopctl up` works.

On a terminal: a live panel with each loop's next fire time, the running tick's tasks and spend,
and the last ticks' outcomes. Otherwise (a pipe, a log file): one plain line per event.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TextIO

from loopctl.cli.live import failure_lines, needs_you_lines, plain_line
from loopctl.cli.phases import PhaseClock
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import (
    DefinitionsReloaded,
    SchedulerStarted,
    SchedulerStopped,
    TickSkipped,
    agent_finished,
    attempt_started,
    check_finished,
    read,
    read_note,
    task_finished,
)
from loopctl.scheduling.scheduler import TickResult
from loopctl.text import shorten, strip_controls

_LAST_TICKS = 5
NO_REASON = "no reason recorded (see `loopctl log`)"  # a log written before reasons were kept


def _clock(when: datetime | str | None) -> str:
    if when is None:
        return "-"
    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when)
        except ValueError:
            return str(when)
    return when.astimezone().strftime("%H:%M:%S %Z").strip()


def _extra_line(event: Event) -> str | None:
    """Plain lines for the scheduler's own events (the engine's are in cli.live)."""
    if event.type == EventType.TICK_SKIPPED:
        skipped = read(TickSkipped, event)
        trigger = skipped.trigger if isinstance(skipped.trigger, dict) else {}
        due = _clock(trigger.get("due")) if trigger else "-"
        return f"tick due {due} skipped: {skipped.reason or NO_REASON}"
    if event.type == EventType.SCHEDULER_STARTED:
        up = read(SchedulerStarted, event)
        shown = ", ".join(f"{n} ({t})" for n, t in up.loops.items()) or "no loop with a trigger yet"
        return f"{up.by} started (pid {up.pid}): {shown}"
    if event.type == EventType.SCHEDULER_STOPPED:
        down = read(SchedulerStopped, event)
        why = f": {down.reason}" if down.reason else ""
        return f"{down.by} stopped after {down.ticks} tick(s){why}"
    reloaded = read_note(DefinitionsReloaded, event)
    if reloaded is not None:
        lists = {
            "added": reloaded.added,
            "changed": reloaded.changed,
            "removed": reloaded.removed,
            "kept": reloaded.kept,
        }
        parts = [f"{key} {', '.join(names)}" for key, names in lists.items() if names]
        return "definitions reloaded" + (": " + "; ".join(parts) if parts else "")
    return None


def _triggers_of(event: Event) -> dict[str, Any] | None:
    """Each loop's trigger, described, when `event` lists them (the scheduler started, or
    reloaded the definitions)."""
    if event.type == EventType.SCHEDULER_STARTED:
        return read(SchedulerStarted, event).loops
    reloaded = read_note(DefinitionsReloaded, event)
    return reloaded.loops if reloaded is not None else None


class ScheduleView:
    """Observer for the engine and listener for the scheduler; use as a context manager."""

    def __init__(
        self,
        loops: dict[str, str],
        *,
        live: bool | None = None,
        stream: TextIO | None = None,
        prefix_loop: bool = False,
        quiet: bool = False,
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet  # -q: nothing but the outcome, which the caller prints
        self.live = (self.stream.isatty() if live is None else live) and not quiet
        self.prefix_loop = prefix_loop
        self._lock = threading.Lock()
        self._triggers = dict(loops)  # loop -> trigger description
        self._next: dict[str, datetime | None] = {}
        self._current: dict[str, str] = {}  # loop -> run id of its running tick
        self._tasks: dict[tuple[str, str], dict[str, str]] = {}
        self._spend: dict[str, list[float]] = {}
        self._last: deque[tuple[str, str, str, str]] = deque(maxlen=_LAST_TICKS)
        self._live: Any = None
        self._phases = PhaseClock()

    # --- context -------------------------------------------------------------------------

    def __enter__(self) -> ScheduleView:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                console=Console(file=self.stream),
                get_renderable=self._render,
                refresh_per_second=2,
                transient=False,
            )
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)

    # --- what happens --------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        with self._lock:
            loops = _triggers_of(event)
            if loops is not None:
                self._triggers = {str(k): str(v) for k, v in loops.items()}
            if self.quiet:
                return
            who = f"{event.loop}: " if self.prefix_loop and event.loop else ""
            phases = [f"{event.ts[11:19]} {who}{p}" for p in self._phases.lines(event)]
            if self.live:
                self._track(event)
        if self.live:
            # Outside the lock: printing above the panel renders it, and _render takes the lock.
            self._above([*failure_lines(event), *needs_you_lines(event), *phases])
            return
        with self._lock:
            line = _extra_line(event)
            if line is None:
                plain = plain_line(event)
                line = plain[9:] if plain else None
            shown = [f"{event.ts[11:19]} {who}{line}"] if line is not None else []
            if line is not None:
                shown += [*failure_lines(event), *needs_you_lines(event)]
            for text in [*shown, *phases]:
                print(text, file=self.stream, flush=True)

    def agent_line(self, text: str) -> None:
        """A line of an agent's output (-v): above the live panel, or a plain line."""
        if self.live:
            self._above([text])  # not under the lock: printing above the panel renders it
            return
        with self._lock:
            if not self.quiet:
                print(text, file=self.stream, flush=True)

    def _above(self, lines: list[str]) -> None:
        if not lines or self._live is None:
            return
        from rich.text import Text

        for line in lines:
            self._live.console.print(Text(line))  # Text: agent output is never Rich markup

    def planned(self, loop: str, at: datetime | None) -> None:
        with self._lock:
            self._next[loop] = at
            if self.live or self.quiet or at is None:
                return
            who = f"{loop}: " if self.prefix_loop else ""
            now = datetime.now(UTC).strftime("%H:%M:%S")
            print(f"{now} {who}next tick at {_clock(at)}", file=self.stream, flush=True)

    def finished(self, result: TickResult) -> None:
        with self._lock:
            status: str
            if result.outcome is not None:
                outcome = result.outcome
                status, reason = outcome.status, outcome.reason
                # A tick whose every task was skipped says why, not an empty reason.
                skipped = [t.reason for t in outcome.tasks if t.status == "skipped" and t.reason]
                reason = reason or "; ".join(skipped)
                run = outcome.run
            else:
                status = "interrupted" if result.interrupted else "skipped"
                reason, run = result.skipped or NO_REASON, "-"
            self._last.append((result.loop, run, status, reason))
            self._current.pop(result.loop, None)

    # --- the live panel ------------------------------------------------------------------

    def _track(self, event: Event) -> None:
        loop = event.loop or ""
        if event.type in (EventType.TICK_STARTED, EventType.RUN_RESUMED):
            self._current[loop] = event.run or ""
            self._tasks = {k: v for k, v in self._tasks.items() if k[0] != loop}
            self._spend[loop] = [0, 0.0]
        if event.task is None:
            return
        row = self._tasks.setdefault(
            (loop, event.task), {"status": "found", "attempt": "-", "last": ""}
        )
        if event.type == EventType.ATTEMPT_STARTED:
            row["attempt"] = str(attempt_started(event).attempt)
            row["status"] = "maker working"
        elif event.type == EventType.AGENT_FINISHED:
            turn = agent_finished(event)
            row["status"] = "checking"
            spend = self._spend.setdefault(loop, [0, 0.0])
            spend[0] += turn.tokens
            spend[1] += turn.cost_usd or 0.0
        elif event.type == EventType.CHECK_FINISHED:
            row["last"] = shorten(check_finished(event).reason, 80)
        elif event.type == EventType.TASK_FINISHED:
            ended = task_finished(event)
            row["status"] = str(ended.status)
            if ended.status == "skipped" and ended.reason:
                row["last"] = shorten(ended.reason, 80)  # why it did not run

    def _render(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            now = datetime.now(UTC)
            loops = Table(title="loopctl", show_edge=False, title_justify="left")
            for column in ("loop", "trigger", "next tick", "now"):
                loops.add_column(column)
            for name, trigger in self._triggers.items():
                at = self._next.get(name)
                if at is None:
                    when = "on change" if trigger.startswith("watch") else "-"
                else:
                    when = f"{_clock(at)} (in {_until(now, at)})"
                running = self._current.get(name)
                spend = self._spend.get(name, [0, 0.0])
                state = (
                    f"tick {running} · {int(spend[0])} tokens, ${spend[1]:.2f}"
                    if running
                    else "idle"
                )
                loops.add_row(name, trigger, when, state)
            parts: list[Any] = [loops]
            if self._tasks:
                tasks = Table(show_edge=False)
                for column in ("task", "status", "attempt", "last verdict"):
                    tasks.add_column(column, overflow="fold")
                for (loop, task), row in self._tasks.items():
                    # Text, not str: check output is shown, never read as Rich markup.
                    cells = (f"{loop}/{task}", row["status"], row["attempt"], row["last"])
                    tasks.add_row(*(Text(strip_controls(str(cell))) for cell in cells))
                parts.append(tasks)
            if self._last:
                last = Table(title="last ticks", show_edge=False, title_justify="left")
                for column in ("loop", "run", "outcome", "reason"):
                    last.add_column(column, overflow="fold")
                for tick in self._last:
                    last.add_row(*(Text(strip_controls(str(cell))) for cell in tick))
                parts.append(last)
            return Group(*parts)


def _until(now: datetime, at: datetime) -> str:
    seconds = max(0, int((at - now).total_seconds() + 0.999))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
