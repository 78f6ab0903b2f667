"""The dashboard's actions in flight: started on a worker thread, answered at once, watched.

An inbox action runs `loopctl.commands.inbox` — the functions `loopctl inbox approve/…` call —
on a worker thread, so a delivery or a re-run task never holds the page: the POST answers with
the job's id, and the page asks `state` (a long poll) until the job is done. While a reply or
a retry runs its task, the state names the run it started and that run's latest event, so the
page shows progress, with a link to the run's live page.
"""

from __future__ import annotations

import secrets
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from loopctl.commands import deliver
from loopctl.commands import inbox as commands
from loopctl.commands.status import describe
from loopctl.errors import LoopctlError
from loopctl.journal.events import Event, EventType

ACTIONS = ("approve", "reject", "retry", "reply", "dismiss", "changes")
# Jobs remembered at most; the oldest finished ones go first (a human starts a handful).
MAX_JOBS = 256


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    item: str  # as the page named it
    action: str
    loop: str | None  # the item's loop, to find the run a reply or retry starts
    after_seq: int  # the log's last seq when it started: its runs come after
    future: Future[Any]


@dataclass(frozen=True, slots=True)
class JobState:
    """What the page shows of a job: running (with the run it started, if any), or its end."""

    job: str
    item: str
    action: str
    done: bool
    ok: bool
    message: str
    run: str | None = None  # the run a reply or a retry started
    progress: str = ""  # that run's latest event, as `replay` words it

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "item": self.item,
            "action": self.action,
            "done": self.done,
            "ok": self.ok,
            "message": self.message,
            "run": self.run,
            "progress": self.progress,
        }


def runner(
    project: Callable[[], Any], ref: str, action: str, form: dict[str, str]
) -> Callable[[], Any]:
    """The function `loopctl inbox ACTION` calls, with the form's fields as its arguments."""

    def run() -> Any:
        loaded = project()
        if action == "approve":
            return commands.approve(loaded, ref, form.get("note") or None)
        if action == "reject":
            return commands.reject(loaded, ref, form.get("reason") or None)
        if action == "changes":
            return commands.request_changes(loaded, ref, form.get("note", ""))
        if action == "retry":
            return commands.retry(loaded, ref)
        if action == "reply":
            return commands.reply(loaded, ref, form.get("answer", ""))
        return commands.dismiss(loaded, ref)

    return run


def deliver_runner(
    project: Callable[[], Any], run: str, action: str, form: dict[str, str]
) -> Callable[[], Any]:
    """The function a finished goal's delivery buttons run (`loopctl.commands.deliver`), bound
    to the commit and the remote URL the page showed."""

    def work() -> Any:
        return deliver.deliver(
            project(), run, action, form.get("sha", ""), form.get("remote_url") or None
        )

    return work


@dataclass(slots=True)
class Jobs:
    """The actions this server started, by id (in memory: they end with the server)."""

    workers: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=2, thread_name_prefix="ui-action")
    )
    _jobs: dict[str, Job] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(
        self, ref: str, action: str, loop: str | None, after_seq: int, work: Callable[[], Any]
    ) -> Job:
        job = Job(secrets.token_hex(8), ref, action, loop, after_seq, self.workers.submit(work))
        with self._lock:
            self._jobs[job.id] = job
            finished = [j for j in self._jobs.values() if j.future.done()]
            for old in finished[: max(0, len(self._jobs) - MAX_JOBS)]:
                del self._jobs[old.id]
        return job

    def get(self, job: str | None) -> Job | None:
        with self._lock:
            return self._jobs.get(job or "")

    def shutdown(self) -> None:
        self.workers.shutdown(wait=False, cancel_futures=True)


def state(job: Job, events: Sequence[Event]) -> JobState:
    """Where `job` is: still running (and the run it started, if any) or what it ended with."""
    future = job.future
    if not future.done():
        run, progress = _progress(job, events)
        return JobState(
            job.id, job.item, job.action, False, True, f"{job.action} is running", run, progress
        )
    error = future.exception()
    if isinstance(error, LoopctlError):
        return JobState(job.id, job.item, job.action, True, False, str(error))
    if error is not None:
        failed = f"{job.action} failed unexpectedly: {error!r}"
        print(f"loopctl ui: {job.item}: {failed}", file=sys.stderr)
        return JobState(job.id, job.item, job.action, True, False, failed)
    result = future.result()
    outcome = getattr(result, "run", None)
    return JobState(
        job.id,
        job.item,
        job.action,
        True,
        bool(result.ok),
        str(result.message),
        run=getattr(outcome, "run", None),
    )


def _progress(job: Job, events: Sequence[Event]) -> tuple[str | None, str]:
    """The newest run of the job's loop started since the job began, and its latest event."""
    if job.loop is None:
        return None, ""

    run: str | None = None
    latest: Event | None = None
    for event in events:
        if event.seq <= job.after_seq:
            continue
        if event.type == EventType.TICK_STARTED and event.loop == job.loop:
            run = event.run
        if run is not None and event.run == run:
            latest = event
    return run, describe(latest) if latest is not None else ""
