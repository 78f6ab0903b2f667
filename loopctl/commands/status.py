"""Read-only views over the event log: status per loop, a run's timeline."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from loopctl.definitions import Loop, Project
from loopctl.journal import history, outcomes, overnight, pauses, proposals, schema
from loopctl.journal.drift import LoopDrift, latest_by_loop, of_event
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.inbox import InboxItem, open_items
from loopctl.journal.pauses import Pause
from loopctl.journal.review import Throughput, Waiting, throughput, waiting_loops
from loopctl.journal.schema import read, read_note
from loopctl.journal.warmth import time_saved
from loopctl.lock import read_holder
from loopctl.scheduling.daemon import up_info
from loopctl.scheduling.pauses import loop_backends
from loopctl.scheduling.timing import LoopTiming, Schedule, last_slots, next_fire, with_spreads
from loopctl.text import shorten, strip_controls


@dataclass(frozen=True, slots=True)
class LoopStatus:
    loop: str
    trigger: str
    last_run: str | None
    last_started: str | None
    last_status: str | None
    tokens: int
    cost_usd: float
    max_tokens: int | None
    max_usd: float | None
    open_items: int
    running_pid: int | None
    by_backend: dict[str, history.Spend] = field(default_factory=dict)
    by_task: dict[str, dict[str, history.Spend]] = field(default_factory=dict)
    next_tick: str | None = None  # ISO time, "on change" (watch), or None when nothing schedules it
    up_pid: int | None = None  # the `loopctl up` process scheduling this loop
    warm: dict[str, float | int] = field(default_factory=dict)  # journal.warmth.time_saved
    run_pid: int | None = None  # a `loopctl run NAME --every/--cron/--watch` scheduling it
    waiting_for_review: Waiting | None = None  # [review] max_open holds its next tick back
    # "rate-limited until 14:05 (claude)": a backend its agents use is paused (journal.pauses)
    paused: str | None = None
    paused_until: str | None = None  # ISO time the pause ends
    last_outcome: str | None = None  # the last run's Outcome (journal.outcomes); None: running
    drift: LoopDrift | None = None  # its latest measured attempt's drift (journal.drift)

    def to_json(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "trigger": self.trigger,
            "last_run": self.last_run,
            "last_started": self.last_started,
            "last_status": self.last_status,
            "spend": {
                "tokens": self.tokens,
                "usd": round(self.cost_usd, 6),
                "by_backend": {b: s.to_json() for b, s in sorted(self.by_backend.items())},
                "by_task": {
                    task: {b: s.to_json() for b, s in sorted(spends.items())}
                    for task, spends in self.by_task.items()
                },
            },
            "budget": {"max_tokens": self.max_tokens, "max_usd": self.max_usd},
            "open_items": self.open_items,
            "running_pid": self.running_pid,
            "next_tick": self.next_tick,
            "up_pid": self.up_pid,
            "warm_workspaces": self.warm,
            "run_pid": self.run_pid,
            "waiting_for_review": (
                self.waiting_for_review.to_json() if self.waiting_for_review else None
            ),
            "paused": self.paused,
            "paused_until": self.paused_until,
            "last_outcome": self.last_outcome,
            "drift": self.drift.to_json() if self.drift is not None else None,
        }

    @property
    def state(self) -> str:
        """What the STATE column says (the `up`-or-`run` scheduling aside)."""
        if self.running_pid:
            return f"running (pid {self.running_pid})"
        if self.waiting_for_review is not None:
            return self.waiting_for_review.describe()
        return self.last_status or "never run"


def loop_statuses(
    project: Project,
    events: list[Event] | None = None,
    *,
    runs: dict[str, history.RunView] | None = None,
    waiting: list[InboxItem] | None = None,
) -> list[LoopStatus]:
    """One row per loop. The dashboard passes what it already has of the same log: `events`,
    `runs` (`history.fold` of them) and `waiting` (their open inbox items)."""
    if events is None:
        events = EventLog(project.paths.events_file).read()
    if runs is None:
        runs = history.fold(events)
    items = open_items(events) if waiting is None else waiting
    names = sorted(set(project.loops) | {r.loop for r in runs.values()})
    scheduled = _scheduled(project, events)
    foreground = foreground_runs(events)
    # A wait recorded by a scheduler that died without a word (kill -9) is over.
    waits = {
        name: wait
        for name, wait in waiting_loops(events).items()
        if wait.pid is None or _alive(wait.pid)
    }
    held = pauses.holding(events, datetime.now(UTC))
    drifts = latest_by_loop(events)
    statuses = []
    for name in names:
        loop = project.loops.get(name)
        last = history.latest_run(runs, name)
        holder = read_holder(project.paths.locks_dir, name)
        if holder is None and name == "goal":
            # Goals lock per condition (goal-<condition>); any of them running counts.
            for lock in sorted(project.paths.locks_dir.glob("goal-*.lock")):
                holder = read_holder(project.paths.locks_dir, lock.stem) or holder
        pid = holder.get("pid") if holder else None
        pause = _pause_of(project, loop, held)
        next_tick = scheduled.get(name, (None, None))[0]
        if pause is not None and next_tick is not None and next_tick != "on change":
            next_tick = _not_before(next_tick, pause)  # no tick before the pause ends
        statuses.append(
            LoopStatus(
                loop=name,
                trigger=(
                    foreground[name][1]
                    if name in foreground  # what `run --every` was given overrides the loop's
                    else (loop.trigger.describe() if loop and loop.trigger else "manual")
                ),
                last_run=last.run if last else None,
                last_started=last.started if last else None,
                last_status=_last_status(last, pid),
                tokens=last.tokens if last else 0,
                cost_usd=last.cost_usd if last else 0.0,
                max_tokens=loop.budget.max_tokens if loop else None,
                max_usd=loop.budget.max_usd if loop else None,
                open_items=sum(1 for i in items if i.loop == name),
                running_pid=pid if isinstance(pid, int) else None,
                by_backend=last.by_backend if last else {},
                by_task={t.task: dict(t.by_backend) for t in last.tasks.values()} if last else {},
                next_tick=next_tick,
                up_pid=scheduled.get(name, (None, None))[1],
                warm=time_saved(e for e in events if e.loop == name),
                run_pid=foreground[name][0] if name in foreground else None,
                waiting_for_review=waits.get(name) if pid is None else None,
                paused=pause.describe() if pause else None,
                paused_until=pause.until_text() if pause else None,
                last_outcome=_outcome(last),
                drift=drifts.get(name),
            )
        )
    return statuses


def _outcome(run: history.RunView | None) -> str | None:
    named = outcomes.of_run(run) if run is not None else None
    return named.value if named is not None else None


def review_throughput(project: Project, events: Sequence[Event] | None = None) -> Throughput:
    """Decisions on items awaiting a human in the last 24 hours, from the log."""
    if events is None:
        events = EventLog(project.paths.events_file).read()
    return throughput(events, datetime.now(UTC))


def _not_before(next_tick: str, pause: Pause) -> str:
    try:
        at = datetime.fromisoformat(next_tick)
    except ValueError:
        return next_tick
    return pause.until_text() if at.tzinfo is None or at < pause.until else next_tick


def _pause_of(project: Project, loop: Loop | None, held: dict[str, Pause]) -> Pause | None:
    """The pause (ending last) of a backend `loop`'s agents use, if one holds."""
    if loop is None or not held:
        return None
    found = [held[b] for b in loop_backends(project, loop) if b in held]
    return max(found, key=lambda p: p.until) if found else None


def _scheduled(project: Project, events: list[Event]) -> dict[str, tuple[str | None, int | None]]:
    """Per loop `loopctl up` schedules: its next tick (from the log, as `up` decides) and pid."""

    info = up_info(project.paths, events)
    if info is None:
        return {}
    now = datetime.now(UTC)
    anchor = info.started or info.since
    try:
        started = datetime.fromisoformat(anchor.replace("Z", "+00:00")) if anchor else now
    except ValueError:
        started = now
    slots = last_slots(events)
    found: dict[str, tuple[str | None, int | None]] = {}
    schedules = {
        name: schedule
        for name, loop in project.loops.items()
        if (schedule := Schedule.of(loop)) is not None
        and (info.loops is None or name in info.loops)
    }
    # As `up` spreads loops that share a slot (its Scheduler.set_loops).
    for name, schedule in with_spreads(schedules, now).items():
        if not schedule.timed:
            found[name] = ("on change", info.pid)
            continue
        at = next_fire(name, schedule, LoopTiming(started, slots.get(name)), now)
        found[name] = (at.isoformat(timespec="seconds") if at else None, info.pid)
    return found


def foreground_runs(events: Sequence[Event]) -> dict[str, tuple[int, str]]:
    """Loops a live `loopctl run NAME` schedules in the foreground: loop -> (pid, trigger).

    Between ticks it holds no runner lock (that is taken per tick), so its own record says so:
    a `scheduler_started` by "run" with no `scheduler_stopped` of the same pid, from a process
    still alive (one killed outright writes no stop)."""
    found: dict[str, tuple[int, str]] = {}
    ended: set[int] = set()
    for event in reversed(events):
        if event.type == EventType.SCHEDULER_STOPPED:
            stopped = schema.read(schema.SchedulerStopped, event)
            if stopped.by == "run" and stopped.pid is not None:
                ended.add(stopped.pid)
        elif event.type == EventType.SCHEDULER_STARTED:
            started = schema.read(schema.SchedulerStarted, event)
            pid = started.pid
            if started.by != "run" or pid is None or pid in ended or not _alive(pid):
                continue
            ended.add(pid)  # an older start of the same pid is not a second scheduler
            for name, trigger in started.loops.items():
                found.setdefault(str(name), (pid, str(trigger)))
    return found


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def relative(when: str | None, now: datetime | None = None) -> str:
    """An ISO time as people read it in a narrow table: "3m ago", "in 2m", or "-"."""
    if not when:
        return "-"
    try:
        at = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError:
        return when  # "on change" and the like are already words
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    seconds = int(((now or datetime.now(UTC)) - at).total_seconds())
    span = _span(abs(seconds))
    if span == "now":
        return span
    return f"{span} ago" if seconds > 0 else f"in {span}"


def _span(seconds: int) -> str:
    if seconds < 5:
        return "now"
    if seconds < 90:
        return f"{seconds}s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)}m"
    if seconds < 36 * 3600:
        return f"{round(seconds / 3600)}h"
    return f"{round(seconds / 86400)}d"


def _last_status(run: history.RunView | None, pid: object) -> str | None:
    if run is None:
        return None
    if run.status == "running" and pid is None:
        return "interrupted"  # nobody holds the loop's lock: the runner died mid-run
    if run.status == "done" and any(t.status == "awaiting_approval" for t in run.tasks.values()):
        return "awaiting approval"  # the work passed; delivering it waits in the inbox
    return run.status


def describe(event: Event) -> str:
    """One readable line for an event, for `log` and `replay`."""
    # An event written before agent text was cleaned may still carry escape sequences.
    return strip_controls(_describe(event))


def _describe(event: Event) -> str:
    t = event.type
    who = f"[{event.task}] " if event.task else ""
    proposal = proposals.describe(event)
    if proposal is not None:
        return who + proposal
    if t == EventType.TICK_STARTED:
        tick = schema.tick_started(event)
        extra = f" condition {tick.condition!r}" if tick.condition else ""
        fired = tick.trigger
        if fired:
            extra += f" [{fired.get('fired')}, due {str(fired.get('due'))[:19]}]"
        return f"{tick.kind} started{extra} (maker {tick.maker})"
    if t == EventType.TICK_SKIPPED:
        return f"tick skipped: {read(schema.TickSkipped, event).reason or 'no reason recorded'}"
    if t == EventType.SCHEDULER_STARTED:
        up = read(schema.SchedulerStarted, event)
        return f"{up.by} started (pid {up.pid})"
    if t == EventType.SCHEDULER_STOPPED:
        down = read(schema.SchedulerStopped, event)
        return f"{down.by} stopped (pid {down.pid}){f': {down.reason}' if down.reason else ''}"
    if t == EventType.TASK_FOUND:
        return f"{who}found: {shorten(schema.task_found(event).prompt, 100)}"
    if t == EventType.WORKTREE_CREATED:
        tree = read(schema.WorktreeCreated, event)
        return f"{who}worktree {tree.path} on {tree.branch} from {str(tree.base_sha)[:12]}"
    if t == EventType.ATTEMPT_STARTED:
        return f"{who}attempt {schema.attempt_started(event).attempt} started"
    if t == EventType.AGENT_FINISHED:
        turn = schema.agent_finished(event)
        cost = f", ${turn.cost_usd:.4f}" if turn.cost_usd is not None else ""
        return (
            f"{who}{turn.role} {turn.agent} finished: {turn.status}"
            f" (exit {turn.exit_code}, {turn.duration_s}s, {turn.tokens} tokens{cost})"
        )
    if t == EventType.CHECK_FINISHED:
        check = schema.check_finished(event)
        fp = f" [{check.fingerprint}]" if check.fingerprint else ""
        return f"{who}check {'passed' if check.passed else 'failed'}{fp}: {check.reason}"
    if t == EventType.ATTEMPT_FINISHED:
        ended = schema.attempt_finished(event)
        return f"{who}attempt {ended.attempt} {ended.verdict}"
    if t == EventType.COMMIT_CREATED:
        made = read(schema.CommitCreated, event)
        return f"{who}committed {str(made.sha)[:12]} on {made.branch}"
    if t == EventType.TASK_FINISHED:
        task = schema.task_finished(event)
        return f"{who}task {task.status}: {task.reason}"
    if t == EventType.INBOX_OPENED:
        opened = schema.inbox_opened(event)
        return f"{who}inbox {opened.id} ({opened.kind}): {opened.summary}"
    if t == EventType.INBOX_CLOSED:
        closed = schema.inbox_closed(event)
        return f"{who}inbox {closed.id} closed: {closed.resolution}"
    if t == EventType.APPROVED:
        yes = read(schema.Approved, event)
        return f"{who}approved {yes.id} at {str(yes.sha)[:12]} ({yes.action})"
    if t == EventType.APPROVAL_REFUSED:
        no = read(schema.ApprovalRefused, event)
        return f"{who}approval of {no.id} refused: {no.reason}"
    if t == EventType.ACTION_STARTED:
        start = read(schema.ActionStarted, event)
        return f"{who}{start.action} started" + (" (approved)" if start.approval else "")
    if t == EventType.ACTION_FINISHED:
        end = read(schema.ActionFinished, event)
        verdict = {True: "done", False: "failed", None: "outcome unknown"}[end.ok]
        return f"{who}{end.action} {verdict}: {end.detail}"
    if t == EventType.TASK_REQUEUED:
        again = read(schema.TaskRequeued, event)
        return f"{who}re-queued by inbox {again.item} ({again.reason})"
    if t == EventType.TICK_FINISHED:
        tick_end = schema.tick_finished(event)
        return f"finished: {tick_end.status}" + (f" — {tick_end.reason}" if tick_end.reason else "")
    if t == EventType.BUDGET_STOPPED:
        return f"{who}budget stop: {read(schema.BudgetStopped, event).reason}"
    if t == EventType.BASELINE_CHECKED:
        # exit_code and counts are the first run's, which the class carries only as `extra`.
        d = event.data
        return (
            f"{who}baseline check on the base commit: exit {d.get('exit_code')},"
            f" counts {d.get('counts')}"
        )
    return _describe_more(event, who) or f"{who}{t}"


def _describe_more(event: Event, who: str) -> str | None:
    """The quieter events: what a run listed, started, was told and noted."""
    t = event.type
    if t == EventType.TASKS_LISTED:
        return f"{read(schema.TasksListed, event).count} task(s) listed"
    if t == EventType.AGENT_STARTED:
        turn = read(schema.AgentStarted, event)
        return f"{who}{turn.role} {turn.agent} started (attempt {turn.attempt})"
    if t == EventType.RUN_INTERRUPTED:
        why = read(schema.RunInterrupted, event).reason
        return f"run interrupted{f': {why}' if why else ''} (resume it with the same command)"
    if t == EventType.RUN_RESUMED:
        return "run resumed"
    if t == EventType.ACTION_DEFERRED:
        return f"{who}{read(schema.ActionDeferred, event).action} deferred"
    if t == EventType.WORKTREE_PREPARED:
        return f"{who}worktree prepared"
    if t == EventType.DELIVERY_PLANNED:
        steps = read(schema.DeliveryPlanned, event).plan.get("steps")
        names = [
            f"{s.get('name')}{' (gated)' if s.get('gated') else ''}"
            for s in (steps if isinstance(steps, list) else [])
            if isinstance(s, dict)
        ]
        return f"{who}delivery planned: {', '.join(names) or 'nothing'}"
    if t == EventType.NOTIFIED:
        sent = read(schema.Notified, event)
        return f"{who}inbox {sent.item} sent to {sent.channel}"
    if t == EventType.NOTIFY_FAILED:
        unsent = read(schema.NotifyFailed, event)
        return f"{who}inbox {unsent.item} not sent to {unsent.channel}: {unsent.error}"
    if t == EventType.DIGEST_SENT:
        return f"digest sent ({read(schema.DigestSent, event).waiting} waiting)"
    if t == EventType.ATTEMPT_FOOTPRINT:
        measured = of_event(event)
        return f"{who}attempt {measured.attempt} footprint: drift {measured.describe()}"
    return _describe_note(event, who) if t == EventType.NOTE else None


def _describe_note(event: Event, who: str) -> str:
    paused = read_note(overnight.BackendPaused, event)
    if paused is not None:
        return f"{who}backend {paused.backend} paused until {paused.until}: {paused.said}"
    resumed = read_note(overnight.BackendResumed, event)
    if resumed is not None:
        return f"backend {resumed.backend} resumed"
    ready = schema.workspace_ready(event)
    if ready is not None:
        setup = f", setup {ready.decision} ({ready.reason})" if ready.decision else ""
        return f"{who}workspace ready in {ready.took_s} s: pool {ready.pool}{setup}"
    refusal = schema.network_refused(event)
    if refusal is not None:
        return f"{who}{refusal.who}: network refused {', '.join(refusal.hosts)}"
    network = read_note(schema.NetworkOpen, event)
    if network is not None and network.mode == "open":
        whose = f"agent {network.agent}" if network.agent else "the checks"
        return f'note: {whose} on the host\'s network, unfiltered (network = "open")'
    sandbox = read_note(schema.SandboxNote, event)
    mode = (network.mode if network else None) or (sandbox.mode if sandbox else None)
    note = schema.note(event)
    said = note.reason or note.warning or mode or ""
    return f"{who}note: {(note.what or '').replace('_', ' ')}" + (f" ({said})" if said else "")
