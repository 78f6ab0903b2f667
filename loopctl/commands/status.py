"""Read-only views over the event log: status per loop, a run's timeline."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from loopctl.definitions import Project
from loopctl.journal import history, schema
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.inbox import InboxItem, open_items
from loopctl.journal.warmth import time_saved
from loopctl.lock import read_holder
from loopctl.scheduling.daemon import up_info
from loopctl.scheduling.timing import LoopTiming, Schedule, last_slots, next_fire
from loopctl.text import shorten, strip_controls
from loopctl.usage import clamp_usd, tokens_of


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
        }


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
                next_tick=scheduled.get(name, (None, None))[0],
                up_pid=scheduled.get(name, (None, None))[1],
                warm=time_saved(e for e in events if e.loop == name),
                run_pid=foreground[name][0] if name in foreground else None,
            )
        )
    return statuses


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
    for name, loop in project.loops.items():
        schedule = Schedule.of(loop)
        if schedule is None or (info.loops is not None and name not in info.loops):
            continue
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
    d = event.data
    t = event.type
    who = f"[{event.task}] " if event.task else ""
    if t == EventType.TICK_STARTED:
        extra = f" condition {d.get('condition')!r}" if d.get("condition") else ""
        fired = d.get("trigger") if isinstance(d.get("trigger"), dict) else {}
        if fired:
            extra += f" [{fired.get('fired')}, due {str(fired.get('due'))[:19]}]"
        return f"{d.get('kind', 'tick')} started{extra} (maker {d.get('maker')})"
    if t == EventType.TICK_SKIPPED:
        return f"tick skipped: {d.get('reason') or 'no reason recorded'}"
    if t in (EventType.SCHEDULER_STARTED, EventType.SCHEDULER_STOPPED):
        verb = "started" if t == EventType.SCHEDULER_STARTED else "stopped"
        return f"{d.get('by')} {verb} (pid {d.get('pid')})"
    if t == EventType.TASK_FOUND:
        return f"{who}found: {shorten(str(d.get('prompt', '')), 100)}"
    if t == EventType.WORKTREE_CREATED:
        return (
            f"{who}worktree {d.get('path')} on {d.get('branch')} from {str(d.get('base_sha'))[:12]}"
        )
    if t == EventType.ATTEMPT_STARTED:
        return f"{who}attempt {d.get('attempt')} started"
    if t == EventType.AGENT_FINISHED:
        tokens = tokens_of(d.get("input_tokens")) + tokens_of(d.get("output_tokens"))
        usd = clamp_usd(d.get("cost_usd"))
        cost = f", ${usd:.4f}" if usd is not None else ""
        return (
            f"{who}{d.get('role')} {d.get('agent')} finished: {d.get('status')}"
            f" (exit {d.get('exit_code')}, {d.get('duration_s')}s, {tokens} tokens{cost})"
        )
    if t == EventType.CHECK_FINISHED:
        fp = f" [{d.get('fingerprint')}]" if d.get("fingerprint") else ""
        return f"{who}check {'passed' if d.get('passed') else 'failed'}{fp}: {d.get('reason')}"
    if t == EventType.ATTEMPT_FINISHED:
        return f"{who}attempt {d.get('attempt')} {d.get('verdict')}"
    if t == EventType.COMMIT_CREATED:
        return f"{who}committed {str(d.get('sha'))[:12]} on {d.get('branch')}"
    if t == EventType.TASK_FINISHED:
        return f"{who}task {d.get('status')}: {d.get('reason')}"
    if t == EventType.INBOX_OPENED:
        return f"{who}inbox {d.get('id')} ({d.get('kind')}): {d.get('summary')}"
    if t == EventType.INBOX_CLOSED:
        return f"{who}inbox {d.get('id')} closed: {d.get('resolution')}"
    if t == EventType.APPROVED:
        return f"{who}approved {d.get('id')} at {str(d.get('sha'))[:12]} ({d.get('action')})"
    if t == EventType.APPROVAL_REFUSED:
        return f"{who}approval of {d.get('id')} refused: {d.get('reason')}"
    if t == EventType.ACTION_STARTED:
        return f"{who}{d.get('action')} started" + (" (approved)" if d.get("approval") else "")
    if t == EventType.ACTION_FINISHED:
        verdict = {True: "done", False: "failed", None: "outcome unknown"}.get(d.get("ok"), "?")
        return f"{who}{d.get('action')} {verdict}: {d.get('detail')}"
    if t == EventType.TASK_REQUEUED:
        return f"{who}re-queued by inbox {d.get('item')} ({d.get('reason')})"
    if t == EventType.TICK_FINISHED:
        return f"finished: {d.get('status')}" + (f" — {d.get('reason')}" if d.get("reason") else "")
    if t == EventType.BUDGET_STOPPED:
        return f"{who}budget stop: {d.get('reason')}"
    if t == EventType.BASELINE_CHECKED:
        return (
            f"{who}baseline check on the base commit: exit {d.get('exit_code')},"
            f" counts {d.get('counts')}"
        )
    return _describe_more(event, who) or f"{who}{t}"


def _describe_more(event: Event, who: str) -> str | None:
    """The quieter events: what a run listed, started, was told and noted."""
    d = event.data
    t = event.type
    if t == EventType.TASKS_LISTED:
        return f"{d.get('count', d.get('found'))} task(s) listed"
    if t == EventType.AGENT_STARTED:
        return f"{who}{d.get('role')} {d.get('agent')} started (attempt {d.get('attempt')})"
    if t == EventType.RUN_INTERRUPTED:
        return "run interrupted (resume it with the same command)"
    if t == EventType.RUN_RESUMED:
        return "run resumed"
    if t == EventType.ACTION_DEFERRED:
        return f"{who}{d.get('action')} deferred"
    if t == EventType.WORKTREE_PREPARED:
        return f"{who}worktree prepared"
    if t == EventType.DELIVERY_PLANNED:
        plan = d.get("plan")
        steps = plan.get("steps") if isinstance(plan, dict) else None
        names = [
            f"{s.get('name')}{' (gated)' if s.get('gated') else ''}"
            for s in (steps if isinstance(steps, list) else [])
            if isinstance(s, dict)
        ]
        return f"{who}delivery planned: {', '.join(names) or 'nothing'}"
    if t == EventType.NOTIFIED:
        return f"{who}inbox {d.get('item')} sent to {d.get('channel')}"
    if t == EventType.NOTIFY_FAILED:
        return f"{who}inbox {d.get('item')} not sent to {d.get('channel')}: {d.get('error')}"
    if t == EventType.DIGEST_SENT:
        return f"digest sent ({d.get('waiting')} waiting)"
    if t == EventType.NOTE and d.get("what") == "workspace_ready":
        setup = f", setup {d['decision']} ({d.get('reason')})" if d.get("decision") else ""
        return f"{who}workspace ready in {d.get('took_s')} s: pool {d.get('pool')}{setup}"
    refusal = schema.network_refused(event)
    if refusal is not None:
        return f"{who}{refusal.who}: network refused {', '.join(refusal.hosts)}"
    if t == EventType.NOTE and d.get("what") == "network" and d.get("mode") == "open":
        whose = f"agent {d.get('agent')}" if d.get("agent") else "the checks"
        return f'note: {whose} on the host\'s network, unfiltered (network = "open")'
    if t == EventType.NOTE:
        said = d.get("reason") or d.get("warning") or d.get("mode") or ""
        return f"{who}note: {str(d.get('what', '')).replace('_', ' ')}" + (
            f" ({said})" if said else ""
        )
    return None
