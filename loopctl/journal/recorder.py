"""The one writer of a project's event log: redact, append, tell the listeners, re-project.

Every component that records something (the engine, the scheduler, `up`, the inbox commands,
delivery) is handed a `Recorder`; nothing else calls `EventLog.append` (`state pull` rewrites a
merged log wholesale, which is not an append). So every event is redacted the same way, every
observer and the live traces see every event, and every inbox item is opened in one place —
which is what makes every item notify (`[notify]`), whoever opened it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from loopctl.atomicfile import write_atomic
from loopctl.errors import swallowed
from loopctl.journal import history, notify
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.inbox import (
    ItemKind,
    current_items,
    items,
    render_inbox_md,
    unique_item_id,
)
from loopctl.journal.otel import live_traces
from loopctl.journal.payload import Payload, data_of, read
from loopctl.journal.schema import InboxOpened, Notified, NotifyFailed
from loopctl.journal.state import write_state
from loopctl.secrets import Redactor, withheld_values
from loopctl.text import clean_data, strip_controls

if TYPE_CHECKING:
    from loopctl.definitions import Project
    from loopctl.paths import ProjectPaths

logger = logging.getLogger(__name__)

Observer = Callable[[Event], None]
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Recorder:
    """Records the events of one project (thread-safe: ticks of several loops share a log)."""

    def __init__(
        self,
        project: Project,
        *,
        observer: Observer | None = None,
        clock: Clock = utc_now,
        pace_s: float | None = None,
        _shared: Recorder | None = None,
    ) -> None:
        self.project = project
        self.paths: ProjectPaths = project.paths
        self.clock = clock
        self.observer = observer
        # Recorders of one process and one repository share their log (what it parsed and
        # folded) and their projections: `up` makes one per tick.
        self.log: EventLog
        self._projections: _Projections
        self._items_lock: threading.Lock
        if _shared is not None and _shared.paths.events_file == self.paths.events_file:
            self.log = _shared.log
            self._projections = _shared._projections
            self._items_lock = _shared._items_lock
        else:
            self.log = EventLog(self.paths.events_file, clock=clock)
            self._projections = _Projections(self._render_now, pace_s)
            self._items_lock = threading.Lock()
        self._redactor: Redactor | None = None

        # None unless [traces] or OTEL_TRACES_EXPORTER turns tracing on: then every event feeds it.
        self.traces = live_traces(project, self.log)

    def for_project(self, project: Project) -> Recorder:
        """A recorder of `project` (reloaded definitions) with the same observer and clock,
        sharing this one's log and projections."""
        return Recorder(project, observer=self.observer, clock=self.clock, _shared=self)

    # --- redaction -----------------------------------------------------------------------------

    @property
    def redactor(self) -> Redactor:
        # Every secret-looking value is redacted from captured output, allowed or not:
        # an agent may be given a key, but it must never land in a log.
        if self._redactor is None:
            self._redactor = Redactor(withheld_values(allow=()))
        return self._redactor

    def redact(self, text: str) -> str:
        return self.redactor.redact(text)

    def redact_values(self, value: Any) -> Any:
        """`value` with every string in it (however deeply nested) redacted."""
        return _redact_values(value, self.redactor)

    # --- events --------------------------------------------------------------------------------

    def emit(
        self,
        type_: EventType | str,
        *,
        run: str | None,
        loop: str | None,
        task: str | None = None,
        **data: Any,
    ) -> Event:
        """Append one event of untyped `data` (producers not yet typed; prefer `record`)."""
        return self._append(type_, run=run, loop=loop, task=task, data=data)

    def record(
        self,
        payload: Payload,
        *,
        run: str | None,
        loop: str | None,
        task: str | None = None,
        keep: Collection[str] = (),
    ) -> Event:
        """Append `payload` as its event (its fields as `data`, in the log's unchanged format;
        `keep`: see `data_of`) and tell the observer and the live traces about it."""
        data = data_of(payload, keep)
        return self._append(payload.TYPE, run=run, loop=loop, task=task, data=data)

    def _append(
        self,
        type_: EventType | str,
        *,
        run: str | None,
        loop: str | None,
        task: str | None,
        data: Mapping[str, Any],
    ) -> Event:
        # Task text, agent output and check output can all carry a secret: scrub before writing.
        clean = _redact_values(data, self.redactor)
        event = self.log.append(type_, run=run, loop=loop, task=task, data=clean)
        if self.observer is not None:
            # A broken view must never stop the work.
            with swallowed(logger, f"the observer of event {event.seq}"):
                self.observer(event)
        if self.traces is not None:
            with swallowed(logger, f"tracing event {event.seq}"):  # nor may telemetry
                self.traces(event)
        return event

    def refresh_projections(self) -> None:
        """Re-render STATE.md and INBOX.md from the log (atomic writes); with a pace
        (`up`), at most once per `pace_s`: a render asked for sooner happens then."""
        self._projections.refresh()

    def refresh_projections_soon(self) -> None:
        """Re-render STATE.md and INBOX.md on a background thread, for a caller with work to
        start that need not wait for them (a task's worktree). The next `refresh_projections`
        waits for it, so a run still ends with both files complete and current."""
        self._projections.refresh_soon()

    def flush_projections(self) -> None:
        """Render now what a pace held back (`up` ending): the files end current."""
        self._projections.flush()

    def _render_now(self) -> None:
        with history.runs_of(self.log) as runs:
            write_state(self.paths.state_md, runs.values())
            claims = history.last_claims(runs.values())
        open_now = [item for item in current_items(self.log) if item.is_open]
        write_atomic(self.paths.inbox_md, render_inbox_md(open_now, claims))

    # --- inbox items ---------------------------------------------------------------------------

    def open_item(
        self,
        kind: ItemKind,
        summary: str,
        evidence: Mapping[str, Any],
        *,
        run: str | None,
        loop: str | None,
        task: str | None = None,
        item_id: str | None = None,
        again_once_closed: bool = True,
    ) -> str | None:
        """Open an inbox item, tell `[notify]`, re-project INBOX.md; return its id.

        Without `item_id` the item gets a collision-free short id and always opens. A fixed
        `item_id` opens at most once: not while an item of that id is open, and, unless
        `again_once_closed`, never again once it was opened (a fuse blown today). Returns None
        when nothing was opened.
        """

        # Summaries and evidence carry agent text (questions, check output) to a human's terminal.
        summary = strip_controls(summary)
        clean = clean_data(dict(evidence))
        with self._items_lock:
            events = self.log.read()
            if item_id is None:
                item_id = unique_item_id(
                    events, run or "", loop or "", task or "", kind.value, summary
                )
            elif any(
                item.id == item_id and (item.is_open or not again_once_closed)
                for item in items(events)
            ):
                return None
            event = self.record(
                InboxOpened(id=item_id, kind=kind.value, summary=summary, evidence=clean),
                run=run,
                loop=loop,
                task=task,
            )
        self._notify(event)
        self.refresh_projections()
        return item_id

    def _notify(self, event: Event) -> None:
        """Send the item `event` opened to `[notify]`, and record how each channel took it."""

        config = self.project.config
        item = read(InboxOpened, event).id
        for result in notify.item_opened(config.notify, self.paths.root, config.env_allow, event):
            kind = Notified if result.ok else NotifyFailed
            told = kind(
                item=item,
                channel=result.channel,
                attempts=result.attempts,
                error=result.error or None,
            )
            self.record(told, run=event.run, loop=event.loop, task=event.task)


def _redact_values(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, dict):
        return {key: _redact_values(item, redactor) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_values(item, redactor) for item in value]
    return value


class _Projections:
    """When STATE.md and INBOX.md are rendered, for every recorder sharing a log.

    Without a pace every refresh renders (a `run` or a `goal` ends with current files). With
    one (`loopctl up`, PROJECTION_INTERVAL_S), a hundred loops ticking do not re-render per
    event: a refresh within `pace_s` of the last render only marks the files stale, and one
    timer renders them when the pace allows; `flush` renders at once what is stale.
    """

    def __init__(self, render: Callable[[], None], pace_s: float | None) -> None:
        self._render = render
        self.pace_s = pace_s
        self.lock = threading.Lock()  # one render at a time: the last one shows it all
        self._state = threading.Lock()  # guards the fields below
        self.pending: threading.Thread | None = None  # the render `refresh_soon` started
        self._timer: threading.Timer | None = None
        self._last = -math.inf  # time.monotonic() of the last render's start
        self._stale = False

    def refresh(self) -> None:
        pending = self.pending
        if pending is not None:
            pending.join()
        if self.pace_s is None:
            self._run()
            return
        with self._state:
            self._stale = True
            wait = self._last + self.pace_s - time.monotonic()
            if wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._on_timer)
                    self._timer.name = "loopctl-projections-paced"
                    self._timer.daemon = True
                    self._timer.start()
                return
        self._run()

    def refresh_soon(self) -> None:
        if self.pace_s is not None:
            self.refresh()  # paced: never waits on a render anyway
            return

        def render() -> None:
            # A view: the next foreground render reports what is wrong.
            with swallowed(logger, "rendering STATE.md and INBOX.md in the background"):
                self._run()

        thread = threading.Thread(target=render, name="loopctl-projections", daemon=True)
        self.pending = thread
        thread.start()

    def flush(self) -> None:
        with self._state:
            timer, self._timer = self._timer, None
            stale = self._stale
        if timer is not None:
            timer.cancel()
        if stale:
            self._run()

    def _on_timer(self) -> None:
        with self._state:
            self._timer = None
        # A view: a render that fails here is retried by the next refresh or the flush.
        with swallowed(logger, "rendering STATE.md and INBOX.md (paced)"):
            self._run()

    def _run(self) -> None:
        with self.lock:
            with self._state:
                self._stale = False
                self._last = time.monotonic()
            try:
                self._render()
            except BaseException:
                with self._state:
                    self._stale = True
                raise
