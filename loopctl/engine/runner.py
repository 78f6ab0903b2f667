"""A tick or a goal: tasks → worktrees → attempts (maker, checks, judge) → delivery.

Every step is an event appended before it is reported; a killed run resumes from the log.
The engine never prints: it returns outcomes and tells an optional observer about each event.
`Engine` holds the entry points and the run (preflight, lock, resume-or-start, outcome); each
task is worked by `engine.task`, which the other modules of this package serve.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from loopctl import git
from loopctl.atomicfile import sweep_temp_files
from loopctl.checks.conditions import ResolvedCondition
from loopctl.checks.verdicts import check_commands
from loopctl.definitions import Agent, Loop
from loopctl.delivery import pipeline as delivery
from loopctl.delivery import remotes
from loopctl.engine import review_gate
from loopctl.engine.commit import deliver_approved
from loopctl.engine.containment import record_sandbox, sandbox_preflight
from loopctl.engine.context import (
    GOAL_LOOP,
    RunContext,
    StopSignal,
    Tick,
    from_github,
    goal_task_id,
    new_run_id,
    open_item,
)
from loopctl.engine.outcomes import (
    GoalOptions,
    RunOutcome,
    TaskOutcome,
    run_outcome,
    run_status,
)
from loopctl.engine.preview import Preview, build_preview
from loopctl.engine.resume import RunSettings, goal_command, loop_command, refuse_other_arguments
from loopctl.engine.setup import (
    check_available,
    check_programs,
    find_specs,
    goal_setup,
    loop_setup,
    protected_paths,
    resumable,
)
from loopctl.engine.snapshot import refuse_if_held
from loopctl.engine.task import work_task
from loopctl.errors import LoopctlError, UsageError
from loopctl.journal import history
from loopctl.journal.events import EventType
from loopctl.journal.inbox import ItemKind
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import (
    RunInterrupted,
    RunResumed,
    TaskFinished,
    TaskFound,
    TasksListed,
    TickFinished,
    TickStarted,
)
from loopctl.journal.statuses import Outcome, RunStatus, TaskStatus
from loopctl.lock import RunnerLock
from loopctl.paths import ensure_loop_gitignore
from loopctl.tasks import github as github_tasks
from loopctl.tasks.spec import TaskSourceError, TaskSpec

__all__ = ["GOAL_LOOP", "Engine", "GoalOptions", "RunOutcome", "TaskOutcome"]

# Repositories seen with a commit: asked once a process, not once a tick (`up` ticks a hundred
# loops), since a repository does not lose its history between two ticks.
_WITH_COMMITS: set[Path] = set()


class Engine:
    """Runs loops and goals for one project, recording everything through its `Recorder`."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.project = rec.project
        self.paths = rec.paths
        self.clock = rec.clock
        self.log = rec.log

    def run_loop_once(
        self,
        loop: Loop,
        *,
        changed: Sequence[str] = (),
        trigger: Mapping[str, Any] | None = None,
        stop: threading.Event | None = None,
        requeued_only: bool = False,
        fresh: bool = False,
    ) -> RunOutcome:
        """One tick of `loop`, or the resumption of its interrupted last tick.

        `changed`: paths a watch trigger saw (prompt templates read them as `{changed}`);
        `trigger`: what fired the tick, recorded in its `tick_started` / `run_resumed` event;
        `stop`: set from another thread to interrupt the tick as Ctrl-C would;
        `fresh`: close an interrupted last tick instead of resuming it.
        """
        tick = Tick(tuple(changed), dict(trigger) if trigger else None, stop, requeued_only)
        condition, maker, judge = loop_setup(self.rec, loop)
        return self._run(
            loop,
            condition,
            maker,
            judge,
            in_place=False,
            base_ref="HEAD",
            tick=tick,
            fresh=fresh,
            command=loop_command(loop.name),
        )

    def run_goal(self, options: GoalOptions) -> RunOutcome:
        """Iterate maker and checker until `options.condition` holds or the budget is spent."""
        loop, condition, maker, judge = goal_setup(self.rec, options)
        command = goal_command(
            options.condition,
            check=options.check,
            agent=options.agent,
            checker_agent=options.checker_agent,
            max_iterations=options.max_iterations,
            in_place=options.in_place,
            base=options.base,
        )
        return self._run(
            loop,
            condition,
            maker,
            judge,
            in_place=options.in_place,
            base_ref=options.base,
            fresh=options.fresh,
            command=command,
        )

    def close_interrupted(self, loop: Loop) -> str | None:
        """Finish `loop`'s interrupted last tick as stopped, so that its next tick starts afresh
        (`loopctl run NAME --fresh` on a trigger); the run closed, or None."""
        with RunnerLock(self.paths.locks_dir, loop.name):
            previous = resumable(self.rec, loop, None)
            if previous is None:
                return None
            self._close_unfinished(previous)
            self.rec.refresh_projections()
            return previous.run

    def preview_goal(self, options: GoalOptions) -> Preview:
        """What `run_goal(options)` would do first, without running an agent, creating a
        worktree or appending an event (`loopctl goal --dry-run`)."""
        loop, condition, maker, judge = goal_setup(self.rec, options)
        return build_preview(
            self.rec, loop, condition, maker, judge, options.in_place, options.base
        )

    def preview_loop(self, loop: Loop) -> Preview:
        """What a tick of `loop` would do first, without running an agent, creating a worktree
        or appending an event (`loopctl run NAME --dry-run`); its task source is listed."""
        condition, maker, judge = loop_setup(self.rec, loop)
        return build_preview(self.rec, loop, condition, maker, judge, False, "HEAD")

    def _run(
        self,
        loop: Loop,
        condition: ResolvedCondition | None,
        maker: Agent,
        judge: Agent | None,
        *,
        in_place: bool,
        base_ref: str,
        tick: Tick | None = None,
        fresh: bool = False,
        command: str = "",
    ) -> RunOutcome:
        root = self.paths.root
        if not in_place and root not in _WITH_COMMITS:
            if not git.has_commits(root):
                raise LoopctlError("the repository has no commits yet; commit something first")
            _WITH_COMMITS.add(root)
        if condition is not None and condition.argv is None and judge is None:
            raise UsageError(
                f"the goal {condition.text!r} is not a known check and no checker agent is set:"
                " pass --check CMD, add it to [conditions] in .loop/config.toml, or set"
                " [defaults] checker"
            )
        check_available(self.rec, [a for a in (maker, judge) if a is not None])
        check_programs(self.rec, loop, condition)

        delivery.check_tools(self.project, loop)  # a `pr` without gh: refused before any work
        refuse_if_held(self.rec)
        sandbox_preflight(self.rec)
        if from_github(loop):
            github_tasks.preflight(root)  # gh missing or logged out: one line, no worktree
        lock_name = (
            loop.name
            if loop.name != GOAL_LOOP
            else f"goal-{goal_task_id(condition.text if condition else 'goal')}"
        )
        with RunnerLock(self.paths.locks_dir, lock_name):
            sweep_temp_files(self.paths.loop_dir)
            ensure_loop_gitignore(self.paths.loop_dir)
            deliver_approved(self.rec, loop)
            outcome = self._run_locked(
                loop, condition, maker, judge, in_place, base_ref, tick, fresh, command
            )
            deliver_approved(self.rec, loop)
            return outcome

    def _run_locked(
        self,
        loop: Loop,
        condition: ResolvedCondition | None,
        maker: Agent,
        judge: Agent | None,
        in_place: bool,
        base_ref: str,
        tick: Tick | None = None,
        fresh: bool = False,
        command: str = "",
    ) -> RunOutcome:
        tick = tick or Tick()
        fired: dict[str, Any] = dict(tick.trigger) if tick.trigger else {}
        goal_task = goal_task_id(condition.text) if loop.name == GOAL_LOOP and condition else None
        previous = resumable(self.rec, loop, condition.text if goal_task and condition else None)
        settings = RunSettings(
            maker=maker.name,
            judge=judge.name if judge else None,
            condition=condition.text if condition else None,
            checks=check_commands(loop.checker, condition),
            base=base_ref,
            max_iterations=loop.budget.max_iterations,
            in_place=in_place,
        )
        if previous is not None and fresh:
            self._close_unfinished(previous)
            previous = None
        elif previous is not None:
            # Resume is explicit: other arguments than the run started with are refused.
            # A secret in a check's argv is recorded redacted: compare like with like.
            refuse_other_arguments(
                previous,
                self.rec.redact_values(settings.to_json()),
                goal=goal_task is not None,
                this_command=command,
            )
        resumed = previous is not None
        listed = previous is not None and any(
            e.type == EventType.TASKS_LISTED for e in previous.events
        )
        if previous is not None and listed:
            run_id = previous.run
            self.rec.record(RunResumed(trigger=fired), run=run_id, loop=loop.name)
            record_sandbox(self.rec, run_id, loop.name, (maker, judge), loop.checker)
            specs = [
                TaskSpec(t.task, t.task, t.prompt, t.title, t.base_ref, t.fields)
                for t in previous.tasks.values()
            ]
        else:
            if previous is not None:
                # Killed before its task list was complete: resume the run, list tasks again.
                run_id = previous.run
                self.rec.record(RunResumed(trigger=fired), run=run_id, loop=loop.name)
            else:
                run_id = new_run_id(self.clock())
                started = TickStarted(
                    kind="goal"
                    if loop.name == GOAL_LOOP
                    else ("requeue" if tick.requeued_only else "tick"),
                    condition=condition.text if condition else None,
                    check=tuple(condition.argv) if condition and condition.argv else None,
                    maker=maker.name,
                    judge=judge.name if judge else None,
                    in_place=in_place,
                    settings=settings.to_json(),
                    command=command or None,
                    trigger=fired,
                    # Where this run's pushes go, read before any agent can repoint it.
                    extra=remotes.tick_fields(self.paths.root, loop),
                )
                self.rec.record(started, run=run_id, loop=loop.name)
            record_sandbox(self.rec, run_id, loop.name, (maker, judge), loop.checker)
            try:
                specs = self._list_tasks(run_id, loop, condition, base_ref, tick, previous)
            except TaskSourceError as exc:
                return self._finish_run(
                    run_id,
                    loop,
                    [],
                    RunStatus.FAILED,
                    str(exc),
                    resumed,
                    outcome=Outcome.FAILED,
                    with_item=True,
                )
        if not specs:
            # Nothing to do (issue 30): a tick that found no task asks git nothing, makes no
            # worktree and renders the projections once, as it ends.
            return self._finish_run(
                run_id, loop, [], RunStatus.DONE, "", resumed, outcome=Outcome.NOTHING_TO_DO
            )
        # Asked once a run, before the first task: a task's wait for its worktree is mostly
        # git calls, and these two are the same for every task.
        top = None if in_place else git.toplevel(self.paths.root)
        common = None if top is None else git.common_dir(top).resolve()
        # The tasks show in STATE.md while the first worktrees are made, not before: no task
        # waits for a projection (every later step re-projects in the foreground).
        self.rec.refresh_projections_soon()
        ctx = RunContext(
            rec=self.rec,
            project=self.project,
            loop=loop,
            run_id=run_id,
            condition=condition,
            maker=maker,
            judge=judge,
            in_place=in_place,
            base_ref=base_ref,
            protected=protected_paths(self.rec, loop, condition, maker, judge),
            stop=tick.stop if tick.stop is not None else threading.Event(),
            top=top,
            common=common,
        )
        try:
            outcomes = self._work_all(ctx, specs)
        except KeyboardInterrupt:
            ctx.stop.set()
            why = ctx.stop.reason if isinstance(ctx.stop, StopSignal) else ""
            interrupted = RunInterrupted(reason=why, outcome=Outcome.INTERRUPTED)
            self.rec.record(interrupted, run=run_id, loop=loop.name)
            self.rec.refresh_projections()
            raise
        status, reason = run_status(outcomes)
        ended = run_outcome(outcomes, status, reason)
        return self._finish_run(run_id, loop, outcomes, status, reason, resumed, outcome=ended)

    def _close_unfinished(self, previous: history.RunView) -> None:
        """`--fresh`: the interrupted run is finished as stopped; it will not be resumed.

        Its open tasks end with it, each with the run's outcome: `interrupted` when it was
        stopped (Ctrl-C, `stop`, `down`), `crashed-recovered` when loopctl died under it."""
        reason = "closed unfinished: --fresh started a new run"
        stopped = previous.status == RunStatus.INTERRUPTED
        ended = Outcome.INTERRUPTED if stopped else Outcome.CRASHED_RECOVERED
        for task in previous.tasks.values():
            if not task.finished:
                left = TaskFinished(status=TaskStatus.STOPPED, reason=reason, outcome=ended)
                self.rec.record(left, run=previous.run, loop=previous.loop, task=task.task)
        closed = TickFinished(status=RunStatus.STOPPED, reason=reason, outcome=ended)
        self.rec.record(closed, run=previous.run, loop=previous.loop)

    def _list_tasks(
        self,
        run_id: str,
        loop: Loop,
        condition: ResolvedCondition | None,
        base_ref: str,
        tick: Tick,
        previous: history.RunView | None,
    ) -> list[TaskSpec]:
        """Find the run's tasks and record them (`task_found`, then `tasks_listed`); a run
        resumed before its list was complete records only the tasks it had not yet found."""
        specs = find_specs(self.rec, loop, condition, base_ref, tick)[: loop.budget.max_tasks]
        already = set(previous.tasks) if previous is not None else set()
        for spec in specs:
            if spec.id in already:
                continue
            found = TaskFound(
                prompt=spec.prompt,
                title=spec.title,
                base_ref=spec.base_ref,
                raw_id=spec.raw_id,
                fields=spec.fields,
            )
            self.rec.record(found, run=run_id, loop=loop.name, task=spec.id)
        listed = TasksListed(
            count=len(specs), found=len(specs) if len(specs) < loop.budget.max_tasks else None
        )
        self.rec.record(listed, run=run_id, loop=loop.name)
        return specs

    def _finish_run(
        self,
        run_id: str,
        loop: Loop,
        outcomes: list[TaskOutcome],
        status: RunStatus,
        reason: str,
        resumed: bool,
        *,
        outcome: Outcome,
        with_item: bool = False,
    ) -> RunOutcome:
        if with_item:
            open_item(
                self.rec,
                run_id,
                loop.name,
                None,
                ItemKind.FAILED,
                f"tick failed: {reason}",
                {"reason": reason, "outcome": outcome.value},
            )
        counts: dict[str, int] = {}
        for task in outcomes:
            counts[task.status] = counts.get(task.status, 0) + 1
        finished = TickFinished(status=status, reason=reason, tasks=counts, outcome=outcome)
        self.rec.record(finished, run=run_id, loop=loop.name)
        self.rec.refresh_projections()
        with history.runs_of(self.log) as runs:
            run = runs.get(run_id)
            tokens, cost = (run.tokens, run.cost_usd) if run else (0, 0.0)
        return RunOutcome(
            run=run_id,
            loop=loop.name,
            status=status,
            reason=reason,
            tasks=tuple(outcomes),
            resumed=resumed,
            tokens=tokens,
            cost_usd=cost,
            outcome=outcome,
        )

    def _work_all(self, ctx: RunContext, specs: list[TaskSpec]) -> list[TaskOutcome]:
        parallel = max(1, min(ctx.loop.budget.max_parallel, len(specs)))
        if parallel == 1:
            return [_work_counted(ctx, spec) for spec in specs]
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="loopctl-task") as pool:
            futures = [pool.submit(_work_counted, ctx, spec) for spec in specs]
            try:
                return [f.result() for f in futures]
            except KeyboardInterrupt:
                # Worker threads never see Ctrl-C; the stop event cancels their programs.
                ctx.stop.set()
                raise


def _work_counted(ctx: RunContext, spec: TaskSpec) -> TaskOutcome:
    """`work_task`, no longer counted against `[review] max_open` once it ended (any item it
    opened is in the log by then)."""
    try:
        return work_task(ctx, spec)
    finally:
        review_gate.release(ctx, spec)
