"""Fold the event log into runs, tasks and attempts: the model every projection renders."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from loopctl.errors import UsageError
from loopctl.journal import claimed, drift, schema
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.statuses import RunStatus, TaskStatus


@dataclass(slots=True)
class Spend:
    """What the agent calls of one backend cost: tokens, USD, and calls nobody priced."""

    tokens: int = 0
    usd: float = 0.0
    calls: int = 0
    unpriced: int = 0  # calls whose cost is unknown (no cost reported, no [prices] entry)

    def add(self, other: Spend) -> None:
        self.tokens += other.tokens
        self.usd += other.usd
        self.calls += other.calls
        self.unpriced += other.unpriced

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "usd": round(self.usd, 6),
            "calls": self.calls,
            "unpriced_calls": self.unpriced,
        }


@dataclass(slots=True)
class AttemptView:
    number: int
    started: str
    finished: str | None = None
    verdict: str | None = None  # a Verdict; None while running or interrupted
    reason: str = ""
    fingerprint: str | None = None
    output_tail: str = ""
    tokens: int = 0
    cost_usd: float | None = None
    starts: int = 1  # >1 when an interrupted attempt was redone
    fatal: bool = False  # the verdict says no further attempt can help
    agent_tail: str = ""  # the last readable lines the attempt's last agent printed
    agent_status: str | None = None  # how that agent's turn ended (ok, failed, timeout, …)
    claims: claimed.ClaimedView | None = None  # what the maker said beside what was measured
    drift: str | None = None  # its drift score and steps out of scope, under a declared scope


@dataclass(slots=True)
class TaskView:
    run: str
    loop: str
    task: str
    prompt: str = ""
    title: str = ""
    base_ref: str | None = None
    status: str = TaskStatus.OPEN  # a TaskStatus; a plain string if this version does not know it
    reason: str = ""
    commit: str | None = None
    branch: str | None = None
    worktree: str | None = None
    base_sha: str | None = None
    base_ref_sha: str | None = None  # what the task's base ref pointed at when it was set up
    attempts: list[AttemptView] = field(default_factory=list)
    tokens: int = 0
    cost_usd: float = 0.0
    fields: dict[str, Any] = field(default_factory=dict)
    by_backend: dict[str, Spend] = field(default_factory=dict)
    # host:port the egress proxy refused this task's agents and checks, first refusal first
    refused: list[str] = field(default_factory=list)
    outcome: str | None = None  # as recorded; journal.outcomes.of_task reads older logs too

    @property
    def finished(self) -> bool:
        return self.status != TaskStatus.OPEN

    def attempt(self, number: int) -> AttemptView | None:
        for attempt in self.attempts:
            if attempt.number == number:
                return attempt
        return None


@dataclass(slots=True)
class RunView:
    run: str
    loop: str
    kind: str  # tick | goal
    started: str
    data: dict[str, Any] = field(default_factory=dict)
    finished: str | None = None
    status: str = RunStatus.RUNNING  # a RunStatus (a plain string: see TaskView.status)
    reason: str = ""
    tasks: dict[str, TaskView] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    outcome: str | None = None  # as recorded; journal.outcomes.of_run reads older logs too

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.tasks.values())

    @property
    def cost_usd(self) -> float:
        return sum(t.cost_usd for t in self.tasks.values())

    @property
    def by_backend(self) -> dict[str, Spend]:
        total: dict[str, Spend] = {}
        for task in self.tasks.values():
            for backend, spend in task.by_backend.items():
                total.setdefault(backend, Spend()).add(spend)
        return total


def fold(events: Iterable[Event], runs: dict[str, RunView] | None = None) -> dict[str, RunView]:
    """Rebuild every run from its events, in log order (continuing `runs`, folded before)."""
    runs = {} if runs is None else runs
    for event in events:
        if event.run is None:
            continue
        run = runs.get(event.run)
        if event.type == EventType.TICK_STARTED:
            run = RunView(
                run=event.run,
                loop=event.loop or "",
                kind=schema.tick_started(event).kind,
                started=event.ts,
                data=dict(event.data),
            )
            runs[event.run] = run
        if run is None:
            continue
        run.events.append(event)
        _apply(run, event)
    return runs


def runs_of(log: EventLog) -> AbstractContextManager[dict[str, RunView]]:
    """The log's runs, folding only what was appended since the last call
    (`EventLog.folding`); they are read inside the block, and copied to be kept."""
    return log.folding("history.runs", _fold_more, dict)


def _fold_more(runs: dict[str, RunView], events: Sequence[Event]) -> dict[str, RunView]:
    return fold(events, runs)


def find_run(events: list[Event], run_prefix: str) -> RunView:
    """The one run whose id is or starts with `run_prefix`; a UsageError naming recent runs."""
    runs = fold(events)
    matches = [r for r in runs if r == run_prefix or r.startswith(run_prefix)]
    if not matches:
        recent = ", ".join(list(runs)[-5:]) or "none"
        raise UsageError(f"no run {run_prefix!r} in the event log (recent runs: {recent})")
    if len(matches) > 1:
        raise UsageError(f"run prefix {run_prefix!r} is ambiguous: {', '.join(matches[:5])}")
    return runs[matches[0]]


def _task(run: RunView, event: Event) -> TaskView:
    name = event.task or ""
    task = run.tasks.get(name)
    if task is None:
        task = TaskView(run=run.run, loop=run.loop, task=name)
        run.tasks[name] = task
    return task


def _apply(run: RunView, event: Event) -> None:
    data = event.data
    kind = event.type
    if kind == EventType.RUN_RESUMED:
        run.status = RunStatus.RUNNING
        run.outcome = None
    elif kind == EventType.TICK_FINISHED:
        tick = schema.tick_finished(event)
        run.finished = event.ts
        run.status = tick.status or RunStatus.DONE
        run.reason = tick.reason
        run.outcome = tick.outcome
    elif kind == EventType.RUN_INTERRUPTED:
        interrupted = schema.read(schema.RunInterrupted, event)
        run.status = RunStatus.INTERRUPTED
        run.reason = interrupted.reason
        run.outcome = interrupted.outcome
    elif kind == EventType.TASK_FOUND:
        task = _task(run, event)
        found = schema.task_found(event)
        task.prompt = found.prompt
        task.title = found.title
        task.base_ref = found.base_ref
        task.fields = found.fields
    elif kind == EventType.WORKTREE_CREATED:
        task = _task(run, event)
        created = schema.read(schema.WorktreeCreated, event)
        task.worktree = created.path
        task.branch = created.branch
        task.base_sha = created.base_sha
        task.base_ref_sha = created.base_ref_sha or created.base_sha
    elif kind == EventType.ATTEMPT_STARTED:
        task = _task(run, event)
        number = schema.attempt_started(event).attempt or len(task.attempts) + 1
        existing = task.attempt(number)
        if existing is None:
            task.attempts.append(AttemptView(number=number, started=event.ts))
        else:
            existing.starts += 1
    elif kind == EventType.AGENT_FINISHED:
        task = _task(run, event)
        turn = schema.agent_finished(event)  # counts and costs clamped on reading
        tokens, cost = turn.tokens, turn.cost_usd
        task.tokens += tokens
        task.cost_usd += cost or 0.0
        task.by_backend.setdefault(turn.backend or "unknown", Spend()).add(
            Spend(tokens, cost or 0.0, 1, 1 if cost is None else 0)
        )
        attempt = task.attempt(turn.attempt or 0)
        if attempt is not None:
            attempt.agent_tail = turn.output_tail
            attempt.agent_status = turn.status
            attempt.tokens += tokens
            if cost is not None:
                attempt.cost_usd = (attempt.cost_usd or 0.0) + cost
    elif kind == EventType.ATTEMPT_FINISHED:
        task = _task(run, event)
        ended = schema.attempt_finished(event)
        attempt = task.attempt(ended.attempt or 0)
        if attempt is not None:
            attempt.finished = event.ts
            attempt.verdict = ended.verdict or "failed"
            attempt.reason = ended.reason
            attempt.fingerprint = ended.fingerprint
            attempt.output_tail = ended.output_tail
            attempt.fatal = ended.fatal
            attempt.claims = claimed.read(data.get("claims"))
    elif kind == EventType.ATTEMPT_FOOTPRINT:
        task = _task(run, event)
        measured = drift.of_event(event)
        attempt = task.attempt(measured.attempt or 0)
        if attempt is not None and (measured.scoped or measured.alarm):
            attempt.drift = measured.describe()
    elif kind == EventType.COMMIT_CREATED:
        task = _task(run, event)
        task.commit = schema.read(schema.CommitCreated, event).sha
    elif kind == EventType.NOTE and (refusal := schema.network_refused(event)) is not None:
        task = _task(run, event)
        task.refused += [host for host in refusal.hosts if host not in task.refused]
    elif kind == EventType.TASK_FINISHED:
        task = _task(run, event)
        outcome = schema.task_finished(event)
        task.status = outcome.status or TaskStatus.DONE
        task.reason = outcome.reason
        task.outcome = outcome.outcome
        if outcome.commit:
            task.commit = outcome.commit


def latest_run(runs: dict[str, RunView], loop: str) -> RunView | None:
    """The most recently started run of `loop`."""
    found = None
    for run in runs.values():
        if run.loop == loop:
            found = run
    return found


def requeued_tasks(events: Iterable[Event], loop: str) -> list[Event]:
    """`task_requeued` events of `loop` that no run has picked up yet (oldest first)."""
    pending: dict[str, Event] = {}
    for event in events:
        if event.loop != loop or event.task is None:
            continue
        if event.type == EventType.TASK_REQUEUED:
            pending[event.task] = event
        elif event.type == EventType.TASK_FOUND:
            pending.pop(event.task, None)
    return list(pending.values())


def human_answers(events: Iterable[Event]) -> dict[tuple[str, str], tuple[str, str]]:
    """(run, task) -> (question, answer): a reply goes to the first run that finds the task."""
    waiting: dict[tuple[str, str], tuple[str, str]] = {}
    given: dict[tuple[str, str], tuple[str, str]] = {}
    for event in events:
        if event.task is None or event.loop is None:
            continue
        key = (event.loop, event.task)
        requeued = (
            schema.read(schema.TaskRequeued, event)
            if event.type == EventType.TASK_REQUEUED
            else None
        )
        if requeued is not None and requeued.answer is not None:
            waiting[key] = (requeued.question or "", requeued.answer)
        elif event.type == EventType.TASK_FOUND and event.run is not None and key in waiting:
            given[(event.run, event.task)] = waiting.pop(key)
    return given


def last_claims(runs: Iterable[RunView]) -> dict[tuple[str, str], claimed.ClaimedView]:
    """Each task's latest claimed-vs-measured comparison, by (run, task)."""
    found: dict[tuple[str, str], claimed.ClaimedView] = {}
    for run in runs:
        for task in run.tasks.values():
            view = next((a.claims for a in reversed(task.attempts) if a.claims), None)
            if view is not None:
                found[(run.run, task.task)] = view
    return found
