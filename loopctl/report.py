"""Read-only views over the event log: status per loop, a run's timeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopctl import history
from loopctl.definitions import Project
from loopctl.events import Event, EventLog, EventType
from loopctl.inbox import open_items
from loopctl.lock import read_holder


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

    def to_json(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "trigger": self.trigger,
            "last_run": self.last_run,
            "last_started": self.last_started,
            "last_status": self.last_status,
            "spend": {"tokens": self.tokens, "usd": round(self.cost_usd, 6)},
            "budget": {"max_tokens": self.max_tokens, "max_usd": self.max_usd},
            "open_items": self.open_items,
            "running_pid": self.running_pid,
        }


def loop_statuses(project: Project) -> list[LoopStatus]:
    events = EventLog(project.paths.events_file).read()
    runs = history.fold(events)
    items = open_items(events)
    names = sorted(set(project.loops) | {r.loop for r in runs.values()})
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
                trigger=(loop.trigger.describe() if loop and loop.trigger else "manual"),
                last_run=last.run if last else None,
                last_started=last.started if last else None,
                last_status=_last_status(last, pid),
                tokens=last.tokens if last else 0,
                cost_usd=last.cost_usd if last else 0.0,
                max_tokens=loop.budget.max_tokens if loop else None,
                max_usd=loop.budget.max_usd if loop else None,
                open_items=sum(1 for i in items if i.loop == name),
                running_pid=pid if isinstance(pid, int) else None,
            )
        )
    return statuses


def _last_status(run: history.RunView | None, pid: object) -> str | None:
    if run is None:
        return None
    if run.status == "running" and pid is None:
        return "interrupted"  # nobody holds the loop's lock: the runner died mid-run
    return run.status


def find_run(events: list[Event], run_prefix: str) -> history.RunView:
    from loopctl.errors import UsageError

    runs = history.fold(events)
    matches = [r for r in runs if r == run_prefix or r.startswith(run_prefix)]
    if not matches:
        recent = ", ".join(list(runs)[-5:]) or "none"
        raise UsageError(f"no run {run_prefix!r} in the event log (recent runs: {recent})")
    if len(matches) > 1:
        raise UsageError(f"run prefix {run_prefix!r} is ambiguous: {', '.join(matches[:5])}")
    return runs[matches[0]]


def describe(event: Event) -> str:
    """One readable line for an event, for `log` and `replay`."""
    d = event.data
    t = event.type
    who = f"[{event.task}] " if event.task else ""
    if t == EventType.TICK_STARTED:
        extra = f" condition {d.get('condition')!r}" if d.get("condition") else ""
        return f"{d.get('kind', 'tick')} started{extra} (maker {d.get('maker')})"
    if t == EventType.TASK_FOUND:
        return f"{who}found: {str(d.get('prompt', ''))[:100]}"
    if t == EventType.WORKTREE_CREATED:
        return (
            f"{who}worktree {d.get('path')} on {d.get('branch')} from {str(d.get('base_sha'))[:12]}"
        )
    if t == EventType.ATTEMPT_STARTED:
        return f"{who}attempt {d.get('attempt')} started"
    if t == EventType.AGENT_FINISHED:
        tokens = int(d.get("input_tokens") or 0) + int(d.get("output_tokens") or 0)
        cost = f", ${d['cost_usd']:.4f}" if isinstance(d.get("cost_usd"), int | float) else ""
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
    if t == EventType.TICK_FINISHED:
        return f"finished: {d.get('status')}" + (f" — {d.get('reason')}" if d.get("reason") else "")
    if t == EventType.BUDGET_STOPPED:
        return f"{who}budget stop: {d.get('reason')}"
    if t == EventType.BASELINE_CHECKED:
        return (
            f"{who}baseline check on the base commit: exit {d.get('exit_code')},"
            f" counts {d.get('counts')}"
        )
    return f"{who}{t}"
