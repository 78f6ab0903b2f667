"""What a person sees while a run works: a live table on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Any

from loopctl.cli.phases import PhaseClock
from loopctl.journal.events import Event, EventType
from loopctl.journal.schema import (
    agent_finished,
    attempt_started,
    check_finished,
    inbox_opened,
    network_refused,
    task_finished,
)
from loopctl.text import shorten, strip_controls

_PLAIN = {
    EventType.TICK_STARTED: "run {run} started",
    EventType.RUN_RESUMED: "run {run} resumed",
    EventType.TASK_FOUND: "task {task} found",
    EventType.WORKTREE_CREATED: "task {task} worktree {path} on {branch}",
    EventType.ATTEMPT_STARTED: "task {task} attempt {attempt} started",
    EventType.AGENT_FINISHED: "task {task} {role} {agent} finished: {status} in {duration_s}s",
    EventType.CHECK_FINISHED: "task {task} check: {reason}",
    EventType.COMMIT_CREATED: "task {task} committed {sha:.12} on {branch}",
    EventType.TASK_FINISHED: "task {task} {status}: {reason}",
    EventType.INBOX_OPENED: "inbox {id} opened ({kind}): {summary}",
    EventType.BUDGET_STOPPED: "task {task} stopped by budget: {reason}",
    EventType.TICK_FINISHED: "run {run} {status}",
    EventType.RUN_INTERRUPTED: "run {run} interrupted",
}


class _Default(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def plain_line(event: Event) -> str | None:
    refused = refused_line(event)
    if refused is not None:
        return f"{event.ts[11:19]} {refused}"
    template = _PLAIN.get(event.type)  # type: ignore[call-overload]
    if template is None:
        return None
    values = _Default({**event.data, "run": event.run, "task": event.task, "loop": event.loop})
    if values.get("sha") is None:
        values["sha"] = ""
    try:
        text = template.format_map(values)
    except (ValueError, TypeError):
        text = f"{event.type} {event.task or ''}"
    # An event written before agent text was cleaned may still carry escape sequences.
    return f"{event.ts[11:19]} {strip_controls(text)}"


def refused_line(event: Event) -> str | None:
    """What the egress proxy refused during an agent turn or a check (issue 25), or None."""
    refusal = network_refused(event)
    if refusal is None or not refusal.hosts:
        return None
    hosts = ", ".join(refusal.hosts)
    return strip_controls(f"task {event.task} {refusal.who}: network refused {hosts}")


def needs_you_lines(event: Event) -> list[str]:
    """The command that shows an inbox item this event opened: what the person does next."""
    if event.type != EventType.INBOX_OPENED:
        return []
    item = inbox_opened(event).id
    return [strip_controls(f"  needs you: loopctl inbox show {item}")] if item else []


def failure_lines(event: Event) -> list[str]:
    """Why an agent's turn did not end well: its last lines and where the rest is kept."""
    if event.type != EventType.AGENT_FINISHED:
        return []
    turn = agent_finished(event)
    if turn.status in (None, "ok"):
        return []
    from loopctl.paths import attempt_folder

    tail = strip_controls(turn.output_tail).splitlines()[-8:]
    attempt = "?" if turn.attempt is None else str(turn.attempt)
    folder = attempt_folder(str(event.run), str(event.task), attempt)
    return [*(f"  | {line}" for line in tail), f"  output: {folder}"]


class RunView:
    """Observer for the engine: renders each event as it is appended."""

    def __init__(self, *, live: bool | None = None, quiet: bool = False) -> None:
        self.quiet = quiet  # -q: nothing while the run works; the caller prints the outcome
        self.live = (sys.stderr.isatty() if live is None else live) and not quiet
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, str]] = {}
        self._header = ""
        self._spend = [0, 0.0]
        self._live: Any = None
        self._phases = PhaseClock()

    def __enter__(self) -> RunView:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                self._render(), console=Console(stderr=True), refresh_per_second=4, transient=False
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
            self._live.update(self._render())
            self._live.__exit__(exc_type, exc, tb)

    def __call__(self, event: Event) -> None:
        if self.quiet:
            return
        with self._lock:
            phases = [f"{event.ts[11:19]} {p}" for p in self._phases.lines(event)]
            if not self.live:
                line = plain_line(event)
                extras = [*failure_lines(event), *needs_you_lines(event)] if line else []
                for text in [*([line] if line else []), *extras, *phases]:
                    print(text, file=sys.stderr, flush=True)
                return
            refused = refused_line(event)
            self._above(
                [*failure_lines(event), *([refused] if refused else []), *needs_you_lines(event)]
            )
            self._above(phases)
            self._track(event)
            self._live.update(self._render())

    def agent_line(self, text: str) -> None:
        """A line of an agent's output (-v): above the live table, or a plain line."""
        with self._lock:
            if self.live:
                self._above([text])
            elif not self.quiet:
                print(text, file=sys.stderr, flush=True)

    def _above(self, lines: list[str]) -> None:
        """Lines printed above the live table, kept in the scrollback when it ends."""
        if not lines or self._live is None:
            return
        from rich.text import Text

        for line in lines:
            self._live.console.print(Text(line))  # Text: agent output is never Rich markup

    def _track(self, event: Event) -> None:
        if event.type in (EventType.TICK_STARTED, EventType.RUN_RESUMED):
            self._header = f"{event.loop} · run {event.run}"
        if event.task is None:
            return
        row = self._rows.setdefault(event.task, {"status": "found", "attempt": "-", "last": ""})
        if event.type == EventType.ATTEMPT_STARTED:
            row["attempt"] = str(attempt_started(event).attempt)
            row["status"] = "maker working"
        elif event.type == EventType.AGENT_FINISHED:
            turn = agent_finished(event)
            row["status"] = "checking"
            if turn.status not in (None, "ok"):
                tail = turn.output_tail.strip().splitlines()
                row["last"] = f"{turn.role or 'agent'} {turn.status}: " + (
                    shorten(tail[-1], 80) if tail else ""
                )
            self._spend[0] += turn.tokens
            self._spend[1] += turn.cost_usd or 0.0
        elif event.type == EventType.CHECK_FINISHED:
            row["last"] = shorten(check_finished(event).reason, 80)
        elif event.type == EventType.TASK_FINISHED:
            ended = task_finished(event)
            row["status"] = str(ended.status)
            if ended.status == "skipped" and ended.reason:
                row["last"] = shorten(ended.reason, 80)  # why it did not run

    def _render(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=self._header or "loopctl", show_edge=False, title_justify="left")
        for column in ("task", "status", "attempt", "last verdict"):
            table.add_column(column, overflow="fold")
        for task, row in self._rows.items():
            # Text, not str: a check's output ("[bold]…") is shown, never read as Rich markup.
            cells = (task, row["status"], row["attempt"], row["last"])
            table.add_row(*(Text(strip_controls(str(cell))) for cell in cells))
        table.caption = f"spend: {self._spend[0]} tokens, ${self._spend[1]:.2f}"
        return table
