"""The one writer of a project's event log: redact, append, tell the listeners, re-project.

Every component that records something (the engine, the scheduler, `up`, the inbox commands,
delivery) is handed a `Recorder`; nothing else calls `EventLog.append` (`state pull` rewrites a
merged log wholesale, which is not an append). So every event is redacted the same way, every
observer and the live traces see every event, and every inbox item is opened in one place —
which is what makes every item notify (`[notify]`), whoever opened it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from loopctl.atomicfile import write_atomic
from loopctl.errors import swallowed
from loopctl.journal import history, notify
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.inbox import ItemKind, items, open_items, render_inbox_md, unique_item_id
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
        self, project: Project, *, observer: Observer | None = None, clock: Clock = utc_now
    ) -> None:
        self.project = project
        self.paths: ProjectPaths = project.paths
        self.clock = clock
        self.observer = observer
        self.log = EventLog(self.paths.events_file, clock=clock)
        self._projection_lock = threading.Lock()
        self._items_lock = threading.Lock()
        self._pending_render: threading.Thread | None = None
        self._redactor: Redactor | None = None

        # None unless [traces] or OTEL_TRACES_EXPORTER turns tracing on: then every event feeds it.
        self.traces = live_traces(project, self.log)

    def for_project(self, project: Project) -> Recorder:
        """A recorder of `project` (reloaded definitions) with the same observer and clock."""
        return Recorder(project, observer=self.observer, clock=self.clock)

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
        """Re-render STATE.md and INBOX.md from the log (atomic writes), after any render
        `refresh_projections_soon` started has ended."""
        pending = self._pending_render
        if pending is not None:
            pending.join()
        self._render_projections()

    def refresh_projections_soon(self) -> None:
        """Re-render STATE.md and INBOX.md on a background thread, for a caller with work to
        start that need not wait for them (a task's worktree). The next `refresh_projections`
        waits for it, so a run still ends with both files complete and current."""

        def render() -> None:
            # A view: the next foreground render reports what is wrong.
            with swallowed(logger, "rendering STATE.md and INBOX.md in the background"):
                self._render_projections()

        thread = threading.Thread(target=render, name="loopctl-projections", daemon=True)
        self._pending_render = thread
        thread.start()

    def _render_projections(self) -> None:

        with self._projection_lock:
            # Each render reads the log inside the lock, so whichever runs last shows it all.
            events = self.log.read()
            runs = history.fold(events).values()
            write_state(self.paths.state_md, runs)
            inbox = render_inbox_md(open_items(events), history.last_claims(runs))
            write_atomic(self.paths.inbox_md, inbox)

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
