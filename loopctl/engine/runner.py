"""A tick or a goal: tasks → worktrees → attempts (maker, checks, judge) → delivery.

Every step is an event appended before it is reported; a killed run resumes from the log.
The engine never prints: it returns outcomes and tells an optional observer about each event.
"""

from __future__ import annotations

import contextlib
import secrets as pysecrets
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import git
from loopctl.checks import integrity
from loopctl.checks import verdicts as checks
from loopctl.checks.conditions import ResolvedCondition, resolve_condition, runner_protect
from loopctl.definitions import Agent, Loop, Project
from loopctl.definitions.config import KeepPolicy
from loopctl.definitions.loops import CheckerSpec, DeliverSpec, MakerSpec
from loopctl.definitions.sandbox import SandboxMode
from loopctl.engine.prompts import AttemptSummary, MakerContext, judge_prompt, maker_prompt
from loopctl.errors import GitError, LoopctlError, UsageError
from loopctl.journal import budgets, history
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import ItemKind, open_items
from loopctl.journal.recorder import Recorder
from loopctl.lock import RunnerLock
from loopctl.paths import ensure_loop_gitignore
from loopctl.tasks.spec import TaskSourceError, TaskSpec, discover
from loopctl.worktrees import (
    Workspace,
    branch_name,
    ensure_worktree,
    remove_worktree,
    sanitize_task_id,
    worktree_path,
)

if TYPE_CHECKING:
    from loopctl.engine.preview import Preview
    from loopctl.sandbox import Sandbox

GOAL_LOOP = "goal"


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    task: str
    status: str  # done | failed | stopped | skipped
    reason: str
    attempts: int
    commit: str | None = None
    branch: str | None = None
    worktree: str | None = None


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run: str
    loop: str
    status: str  # done | failed | stopped
    reason: str
    tasks: tuple[TaskOutcome, ...] = ()
    resumed: bool = False
    tokens: int = 0
    cost_usd: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "done"


@dataclass(frozen=True, slots=True)
class GoalOptions:
    condition: str
    check: tuple[str, ...] | None = None
    agent: str | None = None
    max_iterations: int | None = None
    in_place: bool = False
    base: str = "HEAD"
    checker_agent: str | None = None  # judges the goal; with --check it runs once the check passes


@dataclass(frozen=True, slots=True)
class _Tick:
    """What a scheduler tells the engine about a tick it fires (see `run_loop_once`)."""

    changed: tuple[str, ...] = ()
    trigger: dict[str, Any] | None = None
    stop: threading.Event | None = None
    requeued_only: bool = False  # work only the tasks `loopctl inbox retry/reply` queued


@dataclass(slots=True)
class _RunContext:
    project: Project
    loop: Loop
    run_id: str
    condition: ResolvedCondition | None
    maker: Agent
    judge: Agent | None
    in_place: bool
    base_ref: str
    protected: tuple[str, ...]
    stop: threading.Event = field(default_factory=threading.Event)


def goal_task_id(condition: str) -> str:
    """A readable task id for a goal: "tests green" -> "tests-green"."""
    slug = "-".join("".join(c if c.isalnum() else " " for c in condition.lower()).split())
    return sanitize_task_id(slug[:48] or "goal")


def new_run_id(now: datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%S") + "-" + pysecrets.token_hex(2)


def judge_name(loop: Loop, condition: ResolvedCondition | None, default: str | None) -> str | None:
    """The checker agent a run of `loop` asks: its own `[checker] agent`, else, for a prose goal
    (one no command checks), the default checker. A goal a command checks needs no LLM judge."""
    if loop.checker.agent is not None:
        return loop.checker.agent
    return default if condition is not None and condition.judged else None


def _from_github(loop: Loop) -> bool:
    return loop.tasks is not None and loop.tasks.source == "github"


def _author(text: str) -> tuple[str, str]:
    if "<" in text and text.rstrip().endswith(">"):
        name, _, email = text.partition("<")
        return name.strip() or "loopctl", email.rstrip(">").strip() or "loopctl@localhost"
    return text.strip() or "loopctl", "loopctl@localhost"


class Engine:
    """Runs loops and goals for one project, recording everything in its event log."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.project = rec.project
        self.paths = rec.paths
        self.clock = rec.clock
        self.log = rec.log

    def _event(self, ctx: _RunContext, task: str | None, type_: str, **data: Any) -> Event:
        """An event of the run in `ctx`, about `task`."""
        return self.rec.emit(type_, run=ctx.run_id, loop=ctx.loop.name, task=task, **data)

    # --- entry points --------------------------------------------------------------------------

    def run_loop_once(
        self,
        loop: Loop,
        *,
        changed: Sequence[str] = (),
        trigger: Mapping[str, Any] | None = None,
        stop: threading.Event | None = None,
        requeued_only: bool = False,
    ) -> RunOutcome:
        """One tick of `loop`, or the resumption of its interrupted last tick.

        `changed`: paths a watch trigger saw (prompt templates read them as `{changed}`);
        `trigger`: what fired the tick, recorded in its `tick_started` / `run_resumed` event;
        `stop`: set from another thread to interrupt the tick as Ctrl-C would.
        """
        tick = _Tick(tuple(changed), dict(trigger) if trigger else None, stop, requeued_only)
        condition, maker, judge = self._loop_setup(loop)
        return self._run(loop, condition, maker, judge, in_place=False, base_ref="HEAD", tick=tick)

    def _loop_setup(self, loop: Loop) -> tuple[ResolvedCondition | None, Agent, Agent | None]:
        maker = self._maker_agent(loop.maker.agent)
        condition = None
        if loop.goal:
            condition = resolve_condition(
                loop.goal,
                self.paths.root,
                check=None,
                configured=self.project.config.condition_map(),
            )
        return condition, maker, self._judge_agent(loop, condition)

    def run_goal(self, options: GoalOptions) -> RunOutcome:
        """Iterate maker and checker until `options.condition` holds or the budget is spent."""
        loop, condition, maker, judge = self._goal_setup(options)
        return self._run(
            loop, condition, maker, judge, in_place=options.in_place, base_ref=options.base
        )

    def preview_goal(self, options: GoalOptions) -> Preview:
        """What `run_goal(options)` would do first, without running an agent, creating a
        worktree or appending an event (`loopctl goal --dry-run`)."""
        loop, condition, maker, judge = self._goal_setup(options)
        return self._preview(loop, condition, maker, judge, options.in_place, options.base)

    def preview_loop(self, loop: Loop) -> Preview:
        """What a tick of `loop` would do first, without running an agent, creating a worktree
        or appending an event (`loopctl run NAME --dry-run`); its task source is listed."""
        condition, maker, judge = self._loop_setup(loop)
        return self._preview(loop, condition, maker, judge, False, "HEAD")

    def _goal_setup(
        self, options: GoalOptions
    ) -> tuple[Loop, ResolvedCondition, Agent, Agent | None]:
        config = self.project.config
        condition = resolve_condition(
            options.condition,
            self.paths.root,
            check=options.check,
            configured=config.condition_map(),
        )
        budget = config.budget
        if options.max_iterations is not None:
            budget = replace(budget, max_iterations=options.max_iterations)
        loop = Loop(
            name=GOAL_LOOP,
            path=self.paths.loop_dir / "goal",
            description=options.condition,
            goal=options.condition,
            prompt=f"Make this condition hold: {options.condition}",
            maker=MakerSpec(agent=options.agent or config.maker),
            checker=CheckerSpec(
                agent=options.checker_agent or (config.checker if condition.argv is None else None)
            ),
            budget=budget,
            deliver=DeliverSpec(),
        )
        maker = self._maker_agent(loop.maker.agent)
        judged = condition.argv is None or options.checker_agent is not None
        judge = self._judge_agent(loop, condition) if judged else None
        return loop, condition, maker, judge

    # --- set-up --------------------------------------------------------------------------------

    def _maker_agent(self, name: str | None) -> Agent:
        if name is None:
            agents = self.project.agents
            if len(agents) == 1:
                return next(iter(agents.values()))
            raise UsageError(
                "no maker agent: pass --agent NAME, or set [defaults] maker in .loop/config.toml"
                f" (agents found: {', '.join(sorted(agents)) or 'none'})"
            )
        return self.project.agent(name)

    def _judge_agent(self, loop: Loop, condition: ResolvedCondition | None) -> Agent | None:
        name = judge_name(loop, condition, self.project.config.checker)
        return self.project.agent(name) if name else None

    def _check_available(self, agents: Sequence[Agent]) -> None:
        from loopctl.backends import backend_for
        from loopctl.secrets import build_env

        for agent in agents:
            env = build_env(allow=(*agent.env_allow, *self.project.config.env_allow))
            backend_for(agent).check_available(agent, env)

    def _check_programs(self, loop: Loop, condition: ResolvedCondition | None) -> None:
        """Refuse before any worktree exists when a check program is missing."""
        commands = checks.check_commands(loop.checker, condition)
        path = self._check_env().get("PATH")
        for argv in commands:
            program = argv[0]
            if "/" in program:
                continue  # relative to the worktree, or absolute: checked when it runs
            if shutil.which(program, path=path) is None:
                raise LoopctlError(
                    f"check program {program!r} is not on PATH (install it, or fix the check"
                    f" command `{' '.join(argv)}`)"
                )

    def _protected(
        self, loop: Loop, condition: ResolvedCondition | None, maker: Agent, judge: Agent | None
    ) -> tuple[str, ...]:
        patterns: list[str] = list(loop.checker.protect)
        if condition is not None and condition.source == "builtin":
            patterns += condition.protect
        if loop.checker.runner_protect:
            # A checker command that runs a test runner is held to what the built-in is.
            for argv in loop.checker.commands:
                patterns += runner_protect(argv, self.paths.root)
        if not loop.maker.allow_self_edit:
            agent_paths = [a.path for a in (maker, judge) if a is not None]
            skill_folders = [
                self.project.skills[name].folder
                for name in loop.maker.skills
                if name in self.project.skills
            ]
            patterns += checks.self_edit_paths(self.paths.root, agent_paths, skill_folders)
        return tuple(dict.fromkeys(patterns))

    # --- the run -------------------------------------------------------------------------------

    def _run(
        self,
        loop: Loop,
        condition: ResolvedCondition | None,
        maker: Agent,
        judge: Agent | None,
        *,
        in_place: bool,
        base_ref: str,
        tick: _Tick | None = None,
    ) -> RunOutcome:
        root = self.paths.root
        if not in_place and not git.has_commits(root):
            raise LoopctlError("the repository has no commits yet; commit something first")
        if condition is not None and condition.argv is None and judge is None:
            raise UsageError(
                f"the goal {condition.text!r} is not a known check and no checker agent is set:"
                " pass --check CMD, add it to [conditions] in .loop/config.toml, or set"
                " [defaults] checker"
            )
        self._check_available([a for a in (maker, judge) if a is not None])
        self._check_programs(loop, condition)
        from loopctl.delivery import pipeline as delivery

        delivery.check_tools(self.project, loop)  # a `pr` without gh: refused before any work
        self._refuse_if_held()
        self._sandbox_preflight()
        if _from_github(loop):
            from loopctl.tasks import github as github_tasks

            github_tasks.preflight(root)  # gh missing or logged out: one line, no worktree
        lock_name = (
            loop.name
            if loop.name != GOAL_LOOP
            else f"goal-{goal_task_id(condition.text if condition else 'goal')}"
        )
        with RunnerLock(self.paths.locks_dir, lock_name):
            from loopctl.atomicfile import sweep_temp_files

            sweep_temp_files(self.paths.loop_dir)
            ensure_loop_gitignore(self.paths.loop_dir)
            self._deliver_approved(loop)
            outcome = self._run_locked(loop, condition, maker, judge, in_place, base_ref, tick)
            self._deliver_approved(loop)
            return outcome

    def _resumable(self, loop: Loop, goal: str | None) -> history.RunView | None:
        """The loop's last run if it never finished (for a goal: the last run of that goal)."""
        runs = history.fold(self.log.read())
        candidates = [r for r in runs.values() if r.loop == loop.name]
        if goal is not None:
            candidates = [r for r in candidates if r.data.get("condition") == goal]
        if not candidates:
            return None
        last = candidates[-1]
        return last if last.finished is None else None

    def _run_locked(
        self,
        loop: Loop,
        condition: ResolvedCondition | None,
        maker: Agent,
        judge: Agent | None,
        in_place: bool,
        base_ref: str,
        tick: _Tick | None = None,
    ) -> RunOutcome:
        tick = tick or _Tick()
        fired: dict[str, Any] = {"trigger": tick.trigger} if tick.trigger else {}
        goal_task = goal_task_id(condition.text) if loop.name == GOAL_LOOP and condition else None
        previous = self._resumable(loop, condition.text if goal_task and condition else None)
        resumed = previous is not None
        listed = previous is not None and any(
            e.type == EventType.TASKS_LISTED for e in previous.events
        )
        if previous is not None and listed:
            run_id = previous.run
            self.rec.emit(EventType.RUN_RESUMED, run=run_id, loop=loop.name, **fired)
            specs = [
                TaskSpec(t.task, t.task, t.prompt, t.title, t.base_ref, t.fields)
                for t in previous.tasks.values()
            ]
        else:
            if previous is not None:
                # Killed before its task list was complete: resume the run, list tasks again.
                run_id = previous.run
                self.rec.emit(EventType.RUN_RESUMED, run=run_id, loop=loop.name, **fired)
            else:
                from loopctl.delivery import remotes

                run_id = new_run_id(self.clock())
                self.rec.emit(
                    EventType.TICK_STARTED,
                    run=run_id,
                    loop=loop.name,
                    kind="goal"
                    if loop.name == GOAL_LOOP
                    else ("requeue" if tick.requeued_only else "tick"),
                    condition=condition.text if condition else None,
                    check=list(condition.argv) if condition and condition.argv else None,
                    maker=maker.name,
                    judge=judge.name if judge else None,
                    in_place=in_place,
                    # Where this run's pushes go, read before any agent can repoint it.
                    **remotes.tick_fields(self.paths.root, loop),
                    **fired,
                )
            try:
                specs = self._find_specs(loop, condition, base_ref, tick)
            except TaskSourceError as exc:
                return self._finish_run(
                    run_id, loop, [], "failed", str(exc), resumed, open_item=True
                )
            already = set(previous.tasks) if previous is not None else set()
            for spec in specs[: loop.budget.max_tasks]:
                if spec.id in already:
                    continue
                self.rec.emit(
                    EventType.TASK_FOUND,
                    run=run_id,
                    loop=loop.name,
                    task=spec.id,
                    prompt=spec.prompt,
                    title=spec.title,
                    base_ref=spec.base_ref,
                    raw_id=spec.raw_id,
                    fields=spec.fields,
                )
            specs = specs[: loop.budget.max_tasks]
            self.rec.emit(
                EventType.TASKS_LISTED,
                run=run_id,
                loop=loop.name,
                count=len(specs),
                found=len(specs) if len(specs) < loop.budget.max_tasks else None,
            )
        self.rec.refresh_projections()
        ctx = _RunContext(
            project=self.project,
            loop=loop,
            run_id=run_id,
            condition=condition,
            maker=maker,
            judge=judge,
            in_place=in_place,
            base_ref=base_ref,
            protected=self._protected(loop, condition, maker, judge),
            stop=tick.stop if tick.stop is not None else threading.Event(),
        )
        self._record_sandbox(ctx)
        try:
            outcomes = self._work_all(ctx, specs)
        except KeyboardInterrupt:
            ctx.stop.set()
            self.rec.emit(EventType.RUN_INTERRUPTED, run=run_id, loop=loop.name)
            self.rec.refresh_projections()
            raise
        statuses = {o.status for o in outcomes}
        if not outcomes or statuses <= {"done", "skipped", "awaiting_approval"}:
            status, reason = "done", ""
        elif statuses & {"stopped", "awaiting_reply", "paused"}:
            status = "stopped"
            reason = next(
                o.reason for o in outcomes if o.status in ("stopped", "awaiting_reply", "paused")
            )
        else:
            status = "failed"
            reason = next(o.reason for o in outcomes if o.status not in ("done", "skipped"))
        return self._finish_run(run_id, loop, outcomes, status, reason, resumed)

    def _find_specs(
        self, loop: Loop, condition: ResolvedCondition | None, base_ref: str, tick: _Tick
    ) -> list[TaskSpec]:
        """The tasks a new run of `loop` works, in order (max_tasks not yet applied)."""
        goal_task = goal_task_id(condition.text) if loop.name == GOAL_LOOP and condition else None
        if goal_task is not None:
            return [
                TaskSpec(
                    goal_task,
                    condition.text if condition else goal_task,
                    loop.prompt or "",
                    condition.text if condition else "",
                    base_ref,
                )
            ]
        # Task text is untrusted and may quote a secret: scrub it before anything (prompt,
        # commit message, log) sees it.
        found = (
            []
            if tick.requeued_only
            else [
                self._scrub(spec)
                for spec in discover(
                    loop,
                    self.paths.root,
                    changed=tick.changed,
                    # Only GitHub tasks look back (new review comments since).
                    events=self.log.read() if _from_github(loop) else (),
                )
            ]
        )
        # Tasks `loopctl inbox retry/reply` queued come first (max_tasks never cuts them);
        # their text was scrubbed when it was first found.
        from loopctl.tasks.spec import requeued_specs

        again = requeued_specs(self.log.read(), loop.name)
        ids = {spec.id for spec in again}
        return again + [spec for spec in found if spec.id not in ids]

    def _preview(
        self,
        loop: Loop,
        condition: ResolvedCondition | None,
        maker: Agent,
        judge: Agent | None,
        in_place: bool,
        base_ref: str,
    ) -> Preview:
        """The first maker turn of each task a run would work, built by the code that runs it
        (prompt, environment, sandbox, backend argv), with every side effect left out."""
        from loopctl.backends import AgentRequest, backend_for
        from loopctl.delivery import pipeline as delivery
        from loopctl.engine.preview import Preview, TaskPreview

        root = self.paths.root
        if not in_place and not git.has_commits(root):
            raise LoopctlError("the repository has no commits yet; commit something first")
        if condition is not None and condition.argv is None and judge is None:
            raise UsageError(
                f"the goal {condition.text!r} is not a known check and no checker agent is set:"
                " pass --check CMD, add it to [conditions] in .loop/config.toml, or set"
                " [defaults] checker"
            )
        problems: list[str] = []
        refusals: list[Callable[[], None]] = [
            lambda: self._check_available([a for a in (maker, judge) if a is not None]),
            lambda: self._check_programs(loop, condition),
            lambda: delivery.check_tools(self.project, loop),
        ]
        for refusal in refusals:
            try:
                refusal()
            except LoopctlError as exc:
                problems.append(str(exc))
        specs = self._find_specs(loop, condition, base_ref, _Tick())[: loop.budget.max_tasks]
        ctx = _RunContext(
            project=self.project,
            loop=loop,
            run_id=new_run_id(self.clock()),
            condition=condition,
            maker=maker,
            judge=judge,
            in_place=in_place,
            base_ref=base_ref,
            protected=self._protected(loop, condition, maker, judge),
        )
        worktree_root = self.project.config.worktree_root or self.paths.default_worktree_root()
        run_dir = self.paths.runs_dir / ctx.run_id
        fresh_dir = not run_dir.exists()
        tasks: list[TaskPreview] = []
        for spec in specs:
            try:
                base_sha = self._resolve_base(spec.base_ref or base_ref)
            except LoopctlError as exc:
                problems.append(f"task {spec.id}: {exc}")
                base_sha = ""
            if in_place:
                workspace = Workspace(root, git.current_branch(root) or "HEAD", base_sha, False)
            else:
                path = worktree_path(worktree_root, loop.name, spec.id)
                workspace = Workspace(path, branch_name(loop.name, spec.id), base_sha, False)
            prompt = maker_prompt(self._maker_context(ctx, spec, 1, [], ()))
            folder = run_dir / spec.id / "attempt-1"  # named, never made
            prompt_file = folder / "maker-prompt.md"
            env = self._agent_env(ctx, spec, workspace, 1, maker, "maker", prompt_file)
            sandbox: Sandbox | None = None
            try:
                sandbox = self._sandbox_for(ctx, workspace, maker, folder / "maker-state")
            except LoopctlError as exc:
                problems.append(str(exc))
            request = AgentRequest(
                agent=maker,
                role="maker",
                prompt=prompt,
                worktree=workspace.path,
                prompt_file=prompt_file,
                env=env,
                stdout_path=folder / "maker.out",
                stderr_path=folder / "maker.err",
                redactor=self.rec.redactor,
                loop=loop.name,
                task=spec.id,
                attempt=1,
                skills=tuple(self.project.skills.values()),
                sandbox=sandbox,
                state_dir=folder / "maker-state",
            )
            try:
                call = backend_for(maker).preview(request)
            finally:
                # A connector's launch files are staged beside the agent's logs: none stay.
                if fresh_dir:
                    shutil.rmtree(run_dir, ignore_errors=True)
            tasks.append(
                TaskPreview(
                    task=spec.id,
                    title=spec.title,
                    base_ref=spec.base_ref or base_ref,
                    base_sha=base_sha,
                    worktree=str(workspace.path),
                    branch=workspace.branch,
                    prompt=prompt,
                    argv=tuple(call.argv),
                    stdin=call.stdin is not None,
                    env_names=tuple(sorted(call.env)),
                    sandbox=sandbox.describe(call.env) if sandbox is not None else None,
                )
            )
        return Preview(
            loop=loop.name,
            condition=condition.text if condition else None,
            maker=maker.name,
            backend=maker.backend.value,
            judge=judge.name if judge else None,
            checks=self._check_commands(ctx),
            protected=ctx.protected,
            in_place=in_place,
            sandbox_mode=self.project.config.sandbox.value,
            tasks=tuple(tasks),
            problems=tuple(dict.fromkeys(problems)),
        )

    def _finish_run(
        self,
        run_id: str,
        loop: Loop,
        outcomes: list[TaskOutcome],
        status: str,
        reason: str,
        resumed: bool,
        *,
        open_item: bool = False,
    ) -> RunOutcome:
        if open_item:
            self._open_item(
                run_id,
                loop.name,
                None,
                ItemKind.FAILED,
                f"tick failed: {reason}",
                {"reason": reason},
            )
        counts: dict[str, int] = {}
        for outcome in outcomes:
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
        self.rec.emit(
            EventType.TICK_FINISHED,
            run=run_id,
            loop=loop.name,
            status=status,
            reason=reason,
            tasks=counts,
        )
        self.rec.refresh_projections()
        run = history.fold(self.log.read()).get(run_id)
        return RunOutcome(
            run=run_id,
            loop=loop.name,
            status=status,
            reason=reason,
            tasks=tuple(outcomes),
            resumed=resumed,
            tokens=run.tokens if run else 0,
            cost_usd=run.cost_usd if run else 0.0,
        )

    def _work_all(self, ctx: _RunContext, specs: list[TaskSpec]) -> list[TaskOutcome]:
        parallel = max(1, min(ctx.loop.budget.max_parallel, len(specs)))
        if parallel == 1:
            return [self._work_task(ctx, spec) for spec in specs]
        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="loopctl-task") as pool:
            futures = [pool.submit(self._work_task, ctx, spec) for spec in specs]
            try:
                return [f.result() for f in futures]
            except KeyboardInterrupt:
                # Worker threads never see Ctrl-C; the stop event cancels their programs.
                ctx.stop.set()
                raise

    # --- one task ------------------------------------------------------------------------------

    def _task_view(self, run_id: str, task_id: str) -> history.TaskView | None:
        run = history.fold(self.log.read()).get(run_id)
        return run.tasks.get(task_id) if run else None

    def _work_task(self, ctx: _RunContext, spec: TaskSpec) -> TaskOutcome:
        loop = ctx.loop
        view = self._task_view(ctx.run_id, spec.id)
        if view is not None and view.finished:
            return TaskOutcome(
                spec.id,
                view.status,
                view.reason,
                len(view.attempts),
                view.commit,
                view.branch,
                view.worktree,
            )
        fresh = view is None or (view.worktree is None and not view.attempts)
        waiting = self._waiting_item(loop, spec.id, ctx.run_id) if fresh else None
        if waiting is not None:
            # Reworking it would throw away the work the human is about to look at.
            return self._finish_task(
                ctx,
                spec,
                "skipped",
                f"waits for a human: inbox {waiting.kind} {waiting.id}",
                None,
                0,
                None,
            )
        if loop.tasks is not None and loop.tasks.dedupe == "base" and fresh:
            try:
                base_now = self._resolve_base(spec.base_ref or ctx.base_ref)
            except LoopctlError as exc:
                return self._finish_task(ctx, spec, "failed", str(exc), None, 0, None)
            if self._unchanged_since_success(loop.name, spec.id, base_now, ctx.run_id):
                return self._finish_task(
                    ctx,
                    spec,
                    "skipped",
                    f"base {base_now[:12]} unchanged since the task last succeeded",
                    None,
                    0,
                    None,
                )
        try:
            workspace = self._workspace(ctx, spec, view)
        except LoopctlError as exc:
            return self._finish_task(
                ctx, spec, "failed", f"cannot prepare the worktree: {exc}", None, 0, None
            )
        attempted = view is not None and bool(view.attempts)
        if attempted:
            self._stop_orphans(ctx, spec, workspace)
        baseline = self._baseline(ctx, spec, workspace)
        first = self._check_first(ctx, spec, workspace, baseline) if not attempted else None
        if first is not None:  # the goal already holds, or cannot be checked: no agent runs
            status = "done" if first.passed else ("stopped" if first.fatal else "failed")
            return self._finish_task(ctx, spec, status, first.reason, workspace, 0, None)
        while True:
            if ctx.stop.is_set():
                raise KeyboardInterrupt
            view = self._task_view(ctx.run_id, spec.id)
            attempts = view.attempts if view else []
            finished = [a for a in attempts if a.verdict is not None]
            fingerprints = [a.fingerprint if a.verdict == "failed" else None for a in finished]
            if finished and finished[-1].verdict == "passed":
                return self._deliver(ctx, spec, workspace, finished[-1].number)
            if finished and finished[-1].verdict == "escalated":
                return self._escalate(ctx, spec, workspace, finished[-1], len(attempts))
            if finished and finished[-1].verdict == "awaiting_approval":
                # Not "awaiting_approval" (a met goal whose delivery waits): the work isn't done.
                asked = next(
                    (
                        i.id
                        for i in reversed(open_items(self.log.read()))
                        if (i.run, i.task, i.kind) == (ctx.run_id, spec.id, ItemKind.APPROVAL)
                    ),
                    "ID",
                )
                return self._finish_task(
                    ctx,
                    spec,
                    "paused",
                    finished[-1].reason
                    + f" (approve it with `loopctl inbox approve {asked}`; then `loopctl inbox"
                    f" retry {asked}` runs the task again now)",
                    workspace,
                    len(attempts),
                    finished[-1],
                )
            if finished and finished[-1].fatal:
                return self._finish_task(
                    ctx,
                    spec,
                    "stopped",
                    finished[-1].reason,
                    workspace,
                    len(attempts),
                    finished[-1],
                )
            streak = budgets.identical_failure_streak(fingerprints)
            if streak >= loop.budget.stop_after_identical_failures:
                last = finished[-1]
                return self._finish_task(
                    ctx,
                    spec,
                    "stopped",
                    f"{streak} identical failures in a row"
                    f" (fingerprint {last.fingerprint}): {last.reason}",
                    workspace,
                    len(attempts),
                    last,
                )
            pending = next((a for a in attempts if a.verdict is None), None)
            if pending is not None and pending.starts >= 2:
                # Interrupted twice: redoing it once was the promise; record it as failed.
                self._event(
                    ctx,
                    spec.id,
                    EventType.ATTEMPT_FINISHED,
                    attempt=pending.number,
                    verdict="failed",
                    reason="interrupted twice",
                    fingerprint=None,
                )
                continue
            number = pending.number if pending is not None else len(attempts) + 1
            if pending is None and number > loop.budget.max_iterations:
                final = finished[-1] if finished else None
                return self._finish_task(
                    ctx,
                    spec,
                    "failed",
                    f"not met after {loop.budget.max_iterations} attempts:"
                    f" {final.reason if final else ''}",
                    workspace,
                    len(attempts),
                    final,
                )
            run_events = [e for e in self.log.read() if e.run == ctx.run_id]
            reason = budgets.stop_reason(loop.budget, run_events, self.clock())
            if reason is not None:
                self._event(ctx, spec.id, EventType.BUDGET_STOPPED, reason=reason)
                return self._finish_task(
                    ctx,
                    spec,
                    "stopped",
                    reason,
                    workspace,
                    len(attempts),
                    finished[-1] if finished else None,
                )
            held = integrity.held_by(self.log.read())
            if held:
                # Another task's turn changed a definition: no attempt starts until a human looks.
                return self._finish_task(
                    ctx, spec, "paused", integrity.held_reason(held), workspace, len(attempts), None
                )
            with integrity.turn():
                self._attempt(ctx, spec, workspace, number, attempts, baseline)

    def _check_first(
        self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace, baseline: Any
    ) -> checks.Verdict | None:
        """The goal's checks on the base, before any agent runs: a passing verdict (the goal
        already holds) or a fatal one (it cannot be checked) ends the task; None: work it.

        A goal is each task's success condition, for `loopctl goal` and for a loop's `goal`
        alike: a task whose goal holds on its base has nothing left to do, and a heartbeat loop
        would otherwise pay a maker turn on every green tick. Without a goal, checker commands
        only verify the maker's work, so the maker works the task; a judged goal is not checked
        first either, as deciding it would call an agent. Tasks from a `[tasks]` source (a PR
        with new review comments, an issue) carry work of their own beyond the goal, so they
        are always worked.
        """
        condition = ctx.condition
        if condition is None or condition.judged or ctx.judge is not None:
            return None
        if ctx.loop.tasks is not None:
            return None
        recorded = ctx_events(self.log.read(), ctx.run_id, spec.id, EventType.BASELINE_CHECKED)
        runs = recorded[0].data.get("commands") if recorded else None
        if isinstance(runs, list) and any(
            isinstance(run, dict) and run.get("exit_code") != 0 for run in runs
        ):
            return None  # a counted check already failed on the base: nothing to run again
        ran: list[dict[str, Any]] = []
        verdict = self._verdict(ctx, spec, workspace, 0, baseline, None, ran)
        if not verdict.passed:
            return verdict if verdict.fatal else None
        shown = " && ".join(" ".join(run["argv"]) for run in ran)
        reason = f"the goal already holds: `{shown}` passes on the base; no agent was called"
        self._event(
            ctx, spec.id, EventType.NOTE, what="goal_already_holds", reason=reason, commands=ran
        )
        return replace(verdict, reason=reason)

    def _unchanged_since_success(
        self, loop: str, task: str, base_sha: str, current_run: str
    ) -> bool:
        for run in history.fold(self.log.read()).values():
            if run.loop != loop or run.run == current_run:
                continue
            done = run.tasks.get(task)
            if done is not None and done.status == "done" and done.base_ref_sha == base_sha:
                return True
        return False

    def _workspace(
        self, ctx: _RunContext, spec: TaskSpec, view: history.TaskView | None
    ) -> Workspace:
        root = self.paths.root
        if ctx.in_place:
            head = git.head_sha(root)
            base = view.base_sha if view and view.base_sha else head
            if view is None or view.worktree is None:
                self._event(
                    ctx,
                    spec.id,
                    EventType.WORKTREE_CREATED,
                    path=str(root),
                    branch=git.current_branch(root),
                    base_sha=base,
                    in_place=True,
                    dirty_at_start=_file_hashes(root, git.changed_paths(root, base)),
                )
            return Workspace(root, git.current_branch(root) or "HEAD", base, False)
        worktree_root = self.project.config.worktree_root or self.paths.default_worktree_root()
        if view is not None and view.worktree is not None and view.base_sha:
            # Resuming this run: the same worktree, and the base the log recorded (the copy in
            # the worktree's git dir is writable by the agent, so it is never trusted).
            with self._worktree_lock():
                workspace = ensure_worktree(
                    root, worktree_root, ctx.loop.name, spec.id, view.base_sha
                )
            return replace(workspace, base_sha=view.base_sha)
        base_sha = self._resolve_base(spec.base_ref or ctx.base_ref)
        with self._worktree_lock():
            self._retire_previous(ctx, spec, worktree_root, base_sha)
            workspace = ensure_worktree(root, worktree_root, ctx.loop.name, spec.id, base_sha)
        workspace = replace(workspace, base_sha=base_sha)
        if workspace.created and git.head_sha(workspace.path) == base_sha:
            # Untouched by any agent yet: its index is a trustworthy stat cache of the base.
            with contextlib.suppress(LoopctlError, OSError):
                git.seed_snapshot_index(workspace.path, self._snapshot_seed(ctx, spec, workspace))
        self._event(
            ctx,
            spec.id,
            EventType.WORKTREE_CREATED,
            path=str(workspace.path),
            branch=workspace.branch,
            base_sha=base_sha,
            base_ref_sha=base_sha,
        )
        self._prepare_worktree(ctx, spec, workspace)
        placed = git.changed_paths(workspace.path, base_sha)
        if placed:
            self._event(
                ctx,
                spec.id,
                EventType.WORKTREE_PREPARED,
                files=_file_hashes(workspace.path, placed),
            )
        return workspace

    def _retire_previous(
        self, ctx: _RunContext, spec: TaskSpec, worktree_root: Path, base_sha: str
    ) -> None:
        """Clear the way for a fresh worktree at `base_sha` without losing earlier work.

        A task worked again in a new run starts from its base ref's current commit. Whatever an
        earlier run left (uncommitted changes, commits not in the base) is committed and kept on
        an archive branch `loop/<loop>/<task>-<sha>`.
        """
        root = self.paths.root
        branch = branch_name(ctx.loop.name, spec.id)
        head = git.branch_head(root, branch)
        path = worktree_path(worktree_root, ctx.loop.name, spec.id)
        registered = any(
            entry.branch == branch and entry.path.resolve() == path.resolve()
            for entry in git.worktree_list(root)
            if entry.path.exists()
        )
        if head is None:
            if registered:
                remove_worktree(root, path)
            return
        if registered:
            head = self._archive_leftovers(ctx, spec, path, branch) or head
            remove_worktree(root, path)
        if head == base_sha or git.is_ancestor(root, head, base_sha):
            git.delete_branch(root, branch)  # everything on it is already in the base
            return
        archive = f"{branch}-{head[:8]}"
        suffix = 1
        while git.branch_head(root, archive) is not None:
            suffix += 1
            archive = f"{branch}-{head[:8]}-{suffix}"
        git.rename_branch(root, branch, archive)
        self._event(
            ctx,
            spec.id,
            EventType.NOTE,
            what="branch_archived",
            branch=branch,
            archive=archive,
            head=head,
        )

    def _worktree_lock(self) -> contextlib.AbstractContextManager[None]:
        """git's worktree bookkeeping races under concurrent adds and removals: one at a time."""
        from loopctl.lock import short_lock

        return short_lock(self.paths.locks_dir, "worktrees")

    def _resolve_base(self, ref: str) -> str:
        root = self.paths.root
        if ref.startswith("-"):
            raise LoopctlError(f"refusing base ref {ref!r}: it looks like an option")
        try:
            return git.resolve_commit(root, ref)
        except LoopctlError:
            if ref != "HEAD":
                with contextlib.suppress(LoopctlError):
                    return git.resolve_commit(root, f"origin/{ref}")
            raise

    def _prepare_worktree(self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace) -> None:
        from loopctl import process
        from loopctl.globs import compile_glob

        spec_worktree = ctx.loop.worktree
        root = self.paths.root
        for pattern in spec_worktree.copy:
            regex = compile_glob(pattern)
            for source in sorted(root.rglob("*")):
                if ".git" in source.parts or not source.is_file():
                    continue
                relative = source.relative_to(root)
                if not regex.match(relative.as_posix()):
                    continue
                target = workspace.path / relative
                if target.resolve().is_relative_to(workspace.path.resolve()):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, target)
        run_dir = self._attempt_dir(ctx, spec.id, 0)
        for index, argv in enumerate(spec_worktree.setup, start=1):
            done = process.run(
                list(argv),
                cwd=workspace.path,
                env=self._check_env(),
                timeout=1800,
                stdout_path=run_dir / f"setup-{index}.out",
                stderr_path=run_dir / f"setup-{index}.err",
                redactor=self.rec.redactor,
                cancel=ctx.stop,
                sandbox=self._sandbox_for(ctx, workspace, None),
            )
            self._event(
                ctx,
                spec.id,
                EventType.NOTE,
                what="setup",
                argv=list(argv),
                exit_code=done.exit_code,
            )
            if not done.ok:
                raise LoopctlError(f"worktree setup `{' '.join(argv)}` exited {done.exit_code}")

    # --- containment (DESIGN §5 invariant 11) ---------------------------------------------------

    def _sandbox_preflight(self) -> None:
        """Refuse before any worktree exists when agents cannot be confined and must be."""
        from loopctl import sandbox

        sandbox.harden_self()
        if self.project.config.sandbox is SandboxMode.REQUIRED:
            mechanism, _, why = sandbox.probe()
            if mechanism is None:
                raise sandbox.SandboxUnavailable(
                    f'no sandbox for agents: {why}; or set `[sandbox] mode = "off"` in'
                    " .loop/config.toml to run agents unconfined (not recommended)"
                )

    def _record_sandbox(self, ctx: _RunContext) -> None:
        from loopctl import sandbox

        if self.project.config.sandbox is SandboxMode.OFF:
            self.rec.emit(
                EventType.NOTE, run=ctx.run_id, loop=ctx.loop.name, what="sandbox", mode="off"
            )
            return
        mechanism, program, _ = sandbox.probe()
        self.rec.emit(
            EventType.NOTE,
            run=ctx.run_id,
            loop=ctx.loop.name,
            what="sandbox",
            mode="required",
            mechanism=mechanism,
            program=program,
        )

    def _sandbox_for(
        self,
        ctx: _RunContext,
        workspace: Workspace,
        agent: Agent | None,
        state_dir: Path | None = None,
    ) -> Sandbox | None:
        """The confinement for one agent turn (`agent`) or one check command (None)."""
        from loopctl import sandbox

        if self.project.config.sandbox is SandboxMode.OFF:
            return None
        rules = agent.sandbox if agent is not None else None
        backend = agent.backend.value if agent is not None else ""
        cli = backend if backend in sandbox.CLI_STATE else None
        return sandbox.make_sandbox(
            root=self.paths.root,
            worktree=workspace.path,
            cli=cli,
            writable=(*(rules.write if rules else ()), *([str(state_dir)] if state_dir else [])),
            readable=rules.read if rules else (),
            objects_layer=state_dir / "git-objects" if state_dir else None,
            network=rules.network if rules else True,
        )

    def _forget_private_objects(self, workspace: Workspace) -> None:
        """Point the worktree's index back at objects the repository holds.

        What the agent staged went into its turn's private object layer, which loopctl's own
        git does not read; loopctl snapshots the files themselves, never that index.
        """
        head = git.branch_head(self.paths.root, workspace.branch) or workspace.base_sha
        with contextlib.suppress(GitError):
            git.reset_index(workspace.path, head)

    # --- environment ---------------------------------------------------------------------------

    def _agent_allow(self, agent: Agent) -> tuple[str, ...]:
        return (*agent.env_allow, *self.project.config.env_allow)

    def _scrub(self, spec: TaskSpec) -> TaskSpec:
        redact = self.rec.redactor.redact
        return replace(
            spec,
            prompt=redact(spec.prompt),
            title=redact(spec.title),
            raw_id=redact(spec.raw_id),
            base_ref=redact(spec.base_ref) if spec.base_ref else None,
            fields=self.rec.redact_values(spec.fields),
        )

    def _check_env(self) -> dict[str, str]:
        from loopctl.secrets import build_env

        # Bytecode written by one run can be older than the source the next attempt edits
        # within the same second; checks must always see the maker's latest code.
        return build_env(
            allow=self.project.config.env_allow, extra={"PYTHONDONTWRITEBYTECODE": "1"}
        )

    def _attempt_dir(self, ctx: _RunContext, task_id: str, attempt: int) -> Path:
        folder = (
            self.paths.runs_dir
            / ctx.run_id
            / task_id
            / (f"attempt-{attempt}" if attempt else "setup")
        )
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    # --- the wall budget inside an attempt (invariant 4) ---------------------------------------

    def _wall_cap(self, ctx: _RunContext, timeout: float) -> tuple[float, bool]:
        """`timeout`, cut to what is left of the run's `max_wall`; True when that is the limit."""
        run_events = [e for e in self.log.read() if e.run == ctx.run_id]
        left = budgets.wall_left(ctx.loop.budget, run_events, self.clock())
        if left is None or left >= timeout:
            return timeout, False
        return max(left, 0.1), True  # spent already: what starts now ends at once

    def _wall_capped(self, ctx: _RunContext, agent: Agent) -> Agent:
        timeout, capped = self._wall_cap(ctx, agent.timeout_s)
        return replace(agent, timeout_s=timeout) if capped else agent

    def _out_of_wall(self, ctx: _RunContext, spec: TaskSpec, what: str) -> str:
        """Record that `max_wall` ended `what` mid-attempt; the reason the attempt stops with."""
        from loopctl.definitions.fields import format_duration

        limit = format_duration(ctx.loop.budget.max_wall_s or 0)
        reason = f"time budget: max_wall ({limit}) ran out during {what}, which was ended"
        self._event(ctx, spec.id, EventType.BUDGET_STOPPED, reason=reason)
        return reason

    # --- checks --------------------------------------------------------------------------------

    def _check_commands(self, ctx: _RunContext) -> tuple[tuple[str, ...], ...]:
        return checks.check_commands(ctx.loop.checker, ctx.condition)

    def _baseline(self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace) -> Any:
        """What the task's checks are held to (a `checks.Baseline`), recorded before its first
        maker turn: test counts on the base commit, so a maker cannot pass by running fewer
        tests, and the protected files `git diff` does not show that already differ from the
        base (ignored files a setup step made, an in-place run's own), so only new ones fail."""
        from loopctl.checks.conditions import TestCounts, parse_test_counts, runner_of

        recorded = ctx_events(self.log.read(), ctx.run_id, spec.id, EventType.BASELINE_CHECKED)
        if recorded:
            return checks.baseline_from(recorded[0].data, ctx.condition)
        view = self._task_view(ctx.run_id, spec.id)
        if view is not None and view.attempts:
            return None  # attempts already ran against this worktree; the base is gone
        from loopctl import process

        folder = self._attempt_dir(ctx, spec.id, 0)
        runs: list[tuple[tuple[str, ...], int | None, TestCounts | None]] = []
        for index, argv in enumerate(checks.counted_commands(ctx.loop.checker, ctx.condition)):
            name = "baseline" if index == 0 else f"baseline-{index + 1}"
            done = process.run(
                list(argv),
                cwd=workspace.path,
                # No cached bytecode is read: only the sources are what was checked.
                env={**self._check_env(), "PYTHONPYCACHEPREFIX": str(folder / "pycache")},
                timeout=self._wall_cap(ctx, ctx.loop.checker.timeout_s)[0],
                stdout_path=folder / f"{name}.out",
                stderr_path=folder / f"{name}.err",
                redactor=self.rec.redactor,
                cancel=ctx.stop,
                sandbox=self._sandbox_for(ctx, workspace, None),
            )
            if done.interrupted:
                raise KeyboardInterrupt
            counts = parse_test_counts(runner_of(argv), done.output_tail(200_000))
            runs.append((argv, done.exit_code, counts))
        # After the base's own test run: what that run leaves behind is not the maker's doing.
        hidden = checks.hidden_changes(workspace.path, workspace.base_sha, ctx.protected)
        if not runs and not hidden:
            return None
        data = checks.baseline_data(runs, hidden)
        self._event(ctx, spec.id, EventType.BASELINE_CHECKED, **data)
        return checks.baseline_from(data, ctx.condition)

    def _verdict(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        workspace: Workspace,
        number: int,
        baseline: Any,
        maker_result: Any,
        ran: list[dict[str, Any]] | None = None,
        snapshot: integrity.Snapshot | None = None,
    ) -> checks.Verdict:
        """The attempt's verdict; each check command run is appended to `ran` (for traces)."""
        from loopctl import process
        from loopctl.checks.conditions import unproven_pass

        changed = git.changed_paths(workspace.path, workspace.base_sha)
        if ctx.in_place:
            changed = self._changed_in_place(ctx, spec, changed)
        placed = set(self._placed_unchanged(ctx, spec, workspace))
        changed = [path for path in changed if path not in placed]
        if snapshot is not None:  # what would be committed, whatever the worktree's index says
            changed += [path for path in snapshot.changed if path not in changed]
        # What git does not list (ignored files, edits an index entry hides) counts as well,
        # unless it was already so before the first maker turn.
        base = baseline if isinstance(baseline, checks.Baseline) else checks.Baseline()
        hidden = checks.hidden_changes(workspace.path, workspace.base_sha, ctx.protected)
        changed += [
            path
            for path, digest in hidden.items()
            if path not in changed and (path not in base.hidden or base.hidden[path] != digest)
        ]
        violations = checks.protected_violations(
            changed, protected=ctx.protected, scope=ctx.loop.maker.scope
        )
        if violations:
            return checks.protection_verdict(violations)
        folder = self._attempt_dir(ctx, spec.id, number)
        outputs: list[str] = []
        commands = self._check_commands(ctx)
        for index, argv in enumerate(commands, start=1):
            started = self.clock().astimezone(UTC).isoformat(timespec="microseconds")
            timeout, capped = self._wall_cap(ctx, ctx.loop.checker.timeout_s)
            try:
                done = process.run(
                    list(argv),
                    cwd=workspace.path,
                    # No cached bytecode is read: a planted .pyc would stand in for its source.
                    env={**self._check_env(), "PYTHONPYCACHEPREFIX": str(folder / "pycache")},
                    timeout=timeout,
                    stdout_path=folder / f"check-{index}.out",
                    stderr_path=folder / f"check-{index}.err",
                    redactor=self.rec.redactor,
                    cancel=ctx.stop,
                    sandbox=self._sandbox_for(ctx, workspace, None),
                )
            except LoopctlError as exc:  # the check itself cannot run: no attempt can fix that
                return checks.Verdict(
                    False,
                    f"the check cannot run: {exc}",
                    "check-cannot-run",
                    source="environment",
                    fatal=True,
                )
            if done.interrupted:
                raise KeyboardInterrupt
            if ran is not None:
                ran.append(
                    {
                        "argv": list(argv),
                        "started": started,
                        "duration_s": round(done.duration_s, 3),
                        "exit_code": done.exit_code,
                        "timed_out": done.timed_out,
                    }
                )
            output = done.output_tail(200_000)
            outputs.append(output)
            if done.timed_out and capped:
                why = self._out_of_wall(ctx, spec, f"the check `{' '.join(argv)}`")
                return checks.Verdict(False, why, None, None, output[-4000:], "budget", fatal=True)
            verdict = checks.command_verdict(argv, done.exit_code, done.timed_out, output)
            if not verdict.passed:
                return replace(verdict, output_tail=output[-4000:])
            # The code under test can force the exit status: a test run's counts decide too.
            unproven = unproven_pass(
                argv,
                output,
                base.counts.get(tuple(argv)),
                baselined=tuple(argv) in base.counts,
                repo=self.paths.root,
            )
            if unproven is not None:
                from loopctl.checks.fingerprint import fingerprint

                source, reason = unproven
                return checks.Verdict(
                    False,
                    reason,
                    fingerprint(1, reason).digest,
                    done.exit_code,
                    output[-4000:],
                    source,
                )
        if ctx.judge is not None:
            return self._judge(ctx, spec, workspace, number, "\n".join(outputs))
        if not commands:
            if maker_result.status != "ok":
                return checks.Verdict(
                    False,
                    f"the maker's turn ended with {maker_result.status} and no check is configured",
                    f"agent-{maker_result.status}",
                    maker_result.exit_code,
                    maker_result.output_tail,
                    "agent",
                )
            return checks.Verdict(
                True, "no check configured; the maker finished its turn", None, 0, "", "none"
            )
        return checks.Verdict(
            True, "every check passed", None, 0, outputs[-1][-4000:] if outputs else "", "command"
        )

    def _judge(
        self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace, number: int, check_output: str
    ) -> checks.Verdict:

        judge = ctx.judge
        assert judge is not None
        condition = ctx.condition.text if ctx.condition else (ctx.loop.goal or spec.prompt)
        diff = git.diff_text(workspace.path, workspace.base_sha, 40_000)
        prompt = judge_prompt(
            condition=condition,
            task_prompt=spec.prompt,
            instructions=judge.instructions,
            diff=diff,
            check_output=check_output,
        )
        limited = self._wall_capped(ctx, judge)
        result = self._run_agent(ctx, spec, workspace, number, limited, "checker", prompt, None)
        if result.status == "timeout" and limited.timeout_s < judge.timeout_s:
            why = self._out_of_wall(ctx, spec, f"the checker {judge.name!r}'s turn")
            return checks.Verdict(False, why, None, None, result.output_tail, "budget", fatal=True)
        from loopctl.backends.base import auth_failure

        refused = auth_failure(result)
        if refused is not None:
            # As for a maker: a refused credential fails every verdict alike, so no maker turn
            # is spent again; the task stops at once and a human is asked.
            return checks.Verdict(
                False,
                f"the checker {judge.name!r} could not authenticate: {refused}"
                " (fix its credentials, then `loopctl inbox retry`)",
                None,
                result.exit_code,
                result.output_tail,
                "judge",
                fatal=True,
            )
        answer = checks.parse_judge_answer(result.text) or checks.parse_judge_answer(
            result.output_tail
        )
        if answer is None:
            from loopctl.checks.fingerprint import fingerprint

            # An answer loopctl cannot read is never taken as "met".
            said = " ".join(result.text.split())[-160:]
            return checks.Verdict(
                False,
                f"not met: the checker agent {judge.name!r} gave no parsable verdict"
                f' ({result.status}); it must end with {{"met": true or false, "reason": …}}'
                + (f"; it said: {said!r}" if said else ""),
                fingerprint(result.exit_code, "no verdict").digest,
                result.exit_code,
                result.output_tail,
                "judge",
            )
        met, reason = answer
        if met:
            return checks.Verdict(
                True, reason or "the checker judged the condition met", None, 0, "", "judge"
            )
        from loopctl.checks.fingerprint import fingerprint

        return checks.Verdict(
            False,
            f"not met: {reason}",
            fingerprint(1, reason).digest,
            1,
            result.output_tail,
            "judge",
        )

    def _placed_unchanged(
        self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace
    ) -> list[str]:
        """Files loopctl put in the worktree (copy, setup) that nobody has changed since."""
        events = ctx_events(self.log.read(), ctx.run_id, spec.id, EventType.WORKTREE_PREPARED)
        if not events:
            return []
        placed = events[-1].data.get("files", {})
        now = _file_hashes(workspace.path, list(placed))
        return [path for path, digest in placed.items() if now.get(path) == digest]

    def _reattach(self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace) -> None:
        """Put the worktree back on the task's branch if the maker switched away or detached."""
        if ctx.in_place:
            return
        current = git.current_branch(workspace.path)
        if current == workspace.branch:
            return
        head = git.head_sha(workspace.path)
        git.point_branch(self.paths.root, workspace.branch, head)
        git.switch_branch(workspace.path, workspace.branch)
        self._event(
            ctx,
            spec.id,
            EventType.NOTE,
            what="reattached",
            left_on=current or "detached HEAD",
            head=head,
        )

    def _earlier_changes(self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace) -> list[str]:
        """What the worktree holds changed against the base when an attempt starts: attempts
        build on each other (nothing is reset), so the next maker is told. Files loopctl placed
        (copy, setup) and, in place, the human's own edits are not the attempts' doing."""
        changed = git.changed_paths(workspace.path, workspace.base_sha)
        if ctx.in_place:
            changed = self._changed_in_place(ctx, spec, changed)
        placed = set(self._placed_unchanged(ctx, spec, workspace))
        return [
            path
            if (workspace.path / path).exists() or (workspace.path / path).is_symlink()
            else f"{path} (deleted)"
            for path in changed
            if path not in placed
        ]

    def _changed_in_place(self, ctx: _RunContext, spec: TaskSpec, changed: list[str]) -> list[str]:
        """In place, only what changed since the run began is the maker's doing."""
        events = ctx_events(self.log.read(), ctx.run_id, spec.id, EventType.WORKTREE_CREATED)
        before = events[0].data.get("dirty_at_start", {}) if events else {}
        now = _file_hashes(self.paths.root, changed)
        own = {".loop/STATE.md", ".loop/INBOX.md", ".loop/.gitignore"}
        return [
            path
            for path in changed
            if path not in own and not (path in before and before[path] == now.get(path))
        ]

    # --- agents --------------------------------------------------------------------------------

    def _run_agent(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        workspace: Workspace,
        number: int,
        agent: Agent,
        role: str,
        prompt: str,
        session: str | None,
    ) -> Any:
        from loopctl.atomicfile import write_atomic
        from loopctl.backends import AgentRequest, backend_for

        folder = self._attempt_dir(ctx, spec.id, number)
        prompt_file = folder / f"{role}-prompt.md"
        write_atomic(prompt_file, prompt)
        # The one place outside the worktree a sandboxed agent may write for this attempt.
        state_dir = folder / f"{role}-state"
        state_dir.mkdir(exist_ok=True)
        env = self._agent_env(ctx, spec, workspace, number, agent, role, prompt_file)
        request = AgentRequest(
            agent=agent,
            role=role,
            prompt=prompt,
            worktree=workspace.path,
            prompt_file=prompt_file,
            env=env,
            stdout_path=folder / f"{role}.out",
            stderr_path=folder / f"{role}.err",
            redactor=self.rec.redactor,
            loop=ctx.loop.name,
            task=spec.id,
            attempt=number,
            session_id=session,
            cancel=ctx.stop,
            on_start=lambda pid: self._agent_started(ctx, spec, number, role, agent, pid),
            approved_commands=self._approved_commands(ctx.loop.name, spec.id)
            if role == "maker"
            else {},
            skills=tuple(self.project.skills.values()),
            sandbox=self._sandbox_for(ctx, workspace, agent, state_dir),
            state_dir=state_dir,
            request_approval=lambda summary, evidence: self._open_item(
                ctx.run_id,
                ctx.loop.name,
                spec.id,
                ItemKind.APPROVAL,
                summary,
                {**evidence, "agent": agent.name, "role": role, "attempt": number},
            ),
        )
        from loopctl.backends.base import checked
        from loopctl.backends.pricing import priced

        # Checked before pricing: a reported 10**400 tokens would overflow the price arithmetic.
        result = priced(
            checked(backend_for(agent).run(request)), agent, dict(self.project.config.prices)
        )
        if request.sandbox is not None and not ctx.in_place:
            self._forget_private_objects(workspace)
            request.sandbox.discard_scratch()
        if result.extra.get("usage_warning"):
            self._event(
                ctx,
                spec.id,
                EventType.NOTE,
                what="usage_clamped",
                attempt=number,
                role=role,
                agent=agent.name,
                warning=result.extra["usage_warning"],
            )
        self._event(
            ctx,
            spec.id,
            EventType.AGENT_FINISHED,
            attempt=number,
            role=role,
            agent=agent.name,
            backend=agent.backend.value,
            request_model=agent.model,  # what was asked for; `model` is what answered, if told
            **result.event_data(),
        )
        return result

    def _agent_env(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        workspace: Workspace,
        number: int,
        agent: Agent,
        role: str,
        prompt_file: Path,
    ) -> dict[str, str]:
        """The scrubbed environment of one agent turn, with the agent protocol's variables."""
        from loopctl.secrets import build_env

        return build_env(
            allow=self._agent_allow(agent),
            extra={
                "LOOPCTL_LOOP": ctx.loop.name,
                "LOOPCTL_TASK": spec.id,
                "LOOPCTL_ATTEMPT": str(number),
                "LOOPCTL_WORKTREE": str(workspace.path),
                "LOOPCTL_PROMPT_FILE": str(prompt_file),
                "LOOPCTL_ROLE": role,
                "LOOPCTL_RUN": ctx.run_id,
                "PYTHONDONTWRITEBYTECODE": "1",
            },
        )

    def _maker_context(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        number: int,
        summaries: Sequence[AttemptSummary],
        changed: Sequence[str],
    ) -> MakerContext:
        """Everything the maker's prompt is assembled from, for attempt `number` of `spec`."""
        loop = ctx.loop
        check = " && ".join(" ".join(c) for c in self._check_commands(ctx)) or None
        return MakerContext(
            task_id=spec.id,
            task_prompt=spec.prompt,
            goal=loop.goal,
            check=check,
            instructions=ctx.maker.instructions,
            rules=loop.rules,
            protected=ctx.protected,
            scope=loop.maker.scope,
            skills=list(self.project.skills.values()),
            full_skills=[
                self.project.skills[n] for n in loop.maker.skills if n in self.project.skills
            ],
            attempts=summaries,
            attempt_number=number,
            human=self._human_answer(ctx.run_id, spec.id),
            changed=changed,
        )

    def _attempt(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        workspace: Workspace,
        number: int,
        earlier: list[history.AttemptView],
        baseline: Any,
    ) -> None:
        loop = ctx.loop
        self.rec.emit(
            EventType.ATTEMPT_STARTED, run=ctx.run_id, loop=loop.name, task=spec.id, attempt=number
        )
        summaries = [
            AttemptSummary(
                a.number, a.verdict or "interrupted", a.reason, a.fingerprint, a.output_tail
            )
            for a in earlier
            if a.number < number
        ]
        changed = self._earlier_changes(ctx, spec, workspace) if earlier else ()
        prompt = maker_prompt(self._maker_context(ctx, spec, number, summaries, changed))
        session = None
        if ctx.maker.resume:
            session = next((s for s in reversed(self._sessions(ctx.run_id, spec.id))), None)
        before = self._integrity_baseline(ctx, spec, number)
        if before is None:
            return
        maker = self._wall_capped(ctx, ctx.maker)
        maker_result = self._run_agent(
            ctx, spec, workspace, number, maker, "maker", prompt, session
        )
        if maker_result.status == "interrupted" or ctx.stop.is_set():
            raise KeyboardInterrupt
        if self._tampered(ctx, spec, number, before):
            return
        if maker_result.status == "timeout" and maker.timeout_s < ctx.maker.timeout_s:
            # Cut short by max_wall, not by its own timeout: what it left is not checked.
            self._event(
                ctx,
                spec.id,
                EventType.ATTEMPT_FINISHED,
                attempt=number,
                verdict="failed",
                reason=self._out_of_wall(ctx, spec, f"the maker {ctx.maker.name!r}'s turn"),
                fingerprint=None,
                fatal=True,
            )
            self.rec.refresh_projections()
            return
        from loopctl.backends.base import auth_failure
        from loopctl.delivery.gates import asked_question

        question = asked_question(getattr(maker_result, "escalate", None), maker_result.text)
        if question:
            # The maker asked for a human: no check runs; the task waits for `inbox reply`.
            self.rec.emit(
                EventType.ATTEMPT_FINISHED,
                run=ctx.run_id,
                loop=loop.name,
                task=spec.id,
                attempt=number,
                verdict="escalated",
                reason=f"the maker asks: {question}",
                fingerprint=None,
                question=question,
            )
            self.rec.refresh_projections()
            return
        if maker_result.status == "approval":
            # The maker stopped before a command that needs a human (its inbox item is open):
            # nothing to check yet, and not a failure to count against the task.
            self._event(
                ctx,
                spec.id,
                EventType.ATTEMPT_FINISHED,
                attempt=number,
                verdict="awaiting_approval",
                reason=f"the maker waits for approval: {' '.join(maker_result.text.split())[:200]}",
                fingerprint=None,
            )
            self.rec.refresh_projections()
            return
        refused = auth_failure(maker_result)
        if refused is not None:
            # A refused credential fails every attempt the same way: stop, and ask a human.
            self._event(
                ctx,
                spec.id,
                EventType.ATTEMPT_FINISHED,
                attempt=number,
                verdict="failed",
                reason=f"the maker {ctx.maker.name!r} could not authenticate: {refused}"
                " (fix its credentials, then `loopctl inbox retry`)",
                fingerprint=None,
                fatal=True,
            )
            self.rec.refresh_projections()
            return
        self._reattach(ctx, spec, workspace)
        ran: list[dict[str, Any]] = []
        snapshot, verdict = self._checked(ctx, spec, workspace, number, baseline, maker_result, ran)
        if self._tampered(ctx, spec, number, before):
            return  # the checks and the checker agent ran after the maker: they are watched too
        self._event(
            ctx,
            spec.id,
            EventType.CHECK_FINISHED,
            attempt=number,
            passed=verdict.passed,
            reason=verdict.reason,
            fingerprint=verdict.fingerprint,
            exit_code=verdict.exit_code,
            source=verdict.source,
            failing_tests=list(verdict.failing_tests),
            output_tail=verdict.output_tail[-2000:],
            commands=ran,
        )
        self._event(
            ctx,
            spec.id,
            EventType.ATTEMPT_FINISHED,
            attempt=number,
            verdict="passed" if verdict.passed else "failed",
            reason=verdict.reason,
            fingerprint=verdict.fingerprint,
            output_tail=verdict.output_tail[-1500:],
            fatal=verdict.fatal,
            tree=snapshot.tree if snapshot is not None else None,  # what passing commits
        )
        self.rec.refresh_projections()

    def _approved_commands(self, loop: str, task: str) -> dict[str, tuple[str, ...]]:
        """Commands this task's maker asked to run and a human approved, not yet used."""
        from loopctl.journal.inbox import items

        events = self.log.read()
        used = {
            item
            for event in events
            if event.type == EventType.AGENT_FINISHED and event.loop == loop and event.task == task
            for item in event.data.get("approvals_used") or ()
        }
        approved: dict[str, tuple[str, ...]] = {}
        for item in items(events):
            argv = item.evidence.get("argv")
            if (
                item.kind == ItemKind.APPROVAL
                and (item.loop, item.task) == (loop, task)
                and item.approved
                and item.id not in used
                and isinstance(argv, list)
                and all(isinstance(arg, str) for arg in argv)
            ):
                approved[item.id] = tuple(argv)
        return approved

    def _agent_started(
        self, ctx: _RunContext, spec: TaskSpec, number: int, role: str, agent: Agent, pid: int
    ) -> None:
        self._event(
            ctx,
            spec.id,
            EventType.AGENT_STARTED,
            attempt=number,
            role=role,
            agent=agent.name,
            pid=pid,
        )

    def _stop_orphans(self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace) -> None:
        """Kill agents a killed runner left behind in this task's worktree."""
        from loopctl.process import kill_leftover_group

        events = self.log.read()
        started = ctx_events(events, ctx.run_id, spec.id, EventType.AGENT_STARTED)
        finished = {
            (e.data.get("attempt"), e.data.get("role"))
            for e in ctx_events(events, ctx.run_id, spec.id, EventType.AGENT_FINISHED)
        }
        for event in started:
            if (event.data.get("attempt"), event.data.get("role")) in finished:
                continue
            pid = event.data.get("pid")
            if isinstance(pid, int) and kill_leftover_group(pid, workspace.path):
                self._event(ctx, spec.id, EventType.NOTE, what="orphan_killed", pid=pid)

    def _sessions(self, run_id: str, task_id: str) -> list[str]:
        return [
            str(e.data["session_id"])
            for e in self.log.read()
            if e.run == run_id
            and e.task == task_id
            and e.type == EventType.AGENT_FINISHED
            and e.data.get("role") == "maker"
            and e.data.get("session_id")
        ]

    # --- delivery and endings ------------------------------------------------------------------

    def _deliver(
        self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace, attempt: int
    ) -> TaskOutcome:
        loop = ctx.loop
        commit: str | None = None
        if ctx.in_place:
            return self._finish_task(
                ctx,
                spec,
                "done",
                "condition met (changes left in the working tree)",
                workspace,
                attempt,
                None,
            )
        view = self._task_view(ctx.run_id, spec.id)
        commit = view.commit if view else None
        if commit is None and any(a.name == "commit" for a in loop.deliver.actions):
            name, email = _author(loop.deliver.author or self.project.config.author)
            message = (
                f"loopctl: {loop.name}/{spec.id} (attempt {attempt})\n\n"
                f"{_printable(spec.prompt.strip()[:500])}\n\n"
                f"Loop: {loop.name}\nTask: {spec.id}\nAttempt: {attempt}\nRun: {ctx.run_id}\n"
            )
            try:
                self._reattach(ctx, spec, workspace)
                commit = self._commit_checked(ctx, spec, workspace, attempt, message, name, email)
            except LoopctlError as exc:  # one task's delivery failing must not end the tick
                return self._finish_task(
                    ctx, spec, "failed", f"commit failed: {exc}", workspace, attempt, None
                )
        elif commit is None:
            try:
                commit = self._makers_commit(ctx, spec, workspace, attempt)
            except LoopctlError as exc:
                return self._finish_task(ctx, spec, "failed", str(exc), workspace, attempt, None)
        # Push, PR, merge and custom actions: gated ones wait in the inbox (loopctl.delivery).
        from loopctl.delivery import pipeline as delivery
        from loopctl.tasks.github import push_branch

        result = delivery.deliver_task(
            self.rec,
            loop,
            ctx.run_id,
            spec.id,
            commit=commit,
            branch=workspace.branch,
            base_sha=workspace.base_sha,
            base_ref=spec.base_ref or ctx.base_ref,
            worktree=str(workspace.path),
            push_branch=push_branch(loop, spec.fields),
        )
        return self._finish_task(
            ctx,
            spec,
            str(result.status),
            result.reason or ("condition met" if loop.goal else "checks passed"),
            workspace,
            attempt,
            None,
            commit=commit,
        )

    def _finish_task(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        status: str,
        reason: str,
        workspace: Workspace | None,
        attempts: int,
        last: history.AttemptView | None,
        *,
        commit: str | None = None,
    ) -> TaskOutcome:
        loop = ctx.loop
        if status in ("failed", "stopped"):
            self._open_item(
                ctx.run_id,
                loop.name,
                spec.id,
                ItemKind.FAILED,
                f"{spec.id}: {reason}",
                {
                    "reason": reason,
                    "branch": workspace.branch if workspace else None,
                    "worktree": str(workspace.path) if workspace else None,
                    "fingerprint": last.fingerprint if last else None,
                    "attempts": attempts,
                    "check_tail": (last.output_tail[-1500:] if last else ""),
                },
            )
        self._event(
            ctx,
            spec.id,
            EventType.TASK_FINISHED,
            status=status,
            reason=reason,
            commit=commit,
            attempts=attempts,
        )
        if status == "done":
            from loopctl.delivery.pipeline import close_stale_failures

            close_stale_failures(self.rec, ctx.run_id, loop.name, spec.id)  # its old failures
        if workspace is not None and not ctx.in_place:
            keep = loop.worktree.keep
            remove = keep is KeepPolicy.NEVER or (
                keep is KeepPolicy.ON_FAILURE and status in ("done", "skipped")
            )
            if remove:
                with self._worktree_lock(), contextlib.suppress(LoopctlError):
                    remove_worktree(self.paths.root, workspace.path)
        self.rec.refresh_projections()
        return TaskOutcome(
            spec.id,
            status,
            reason,
            attempts,
            commit,
            workspace.branch if workspace else None,
            str(workspace.path) if workspace else None,
        )

    def _open_item(
        self,
        run_id: str,
        loop: str,
        task: str | None,
        kind: ItemKind,
        summary: str,
        evidence: dict[str, Any],
    ) -> str:
        item_id = self.rec.open_item(kind, summary, evidence, run=run_id, loop=loop, task=task)
        assert item_id is not None  # an item without a fixed id always opens
        return item_id

    def _escalate(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        workspace: Workspace,
        last: history.AttemptView,
        attempts: int,
    ) -> TaskOutcome:
        """The maker asked a question: open an escalation item and pause the task."""
        asked = ctx_events(self.log.read(), ctx.run_id, spec.id, EventType.ATTEMPT_FINISHED)
        question = next(
            (str(e.data["question"]) for e in reversed(asked) if e.data.get("question")),
            last.reason,
        )
        item = self._open_item(
            ctx.run_id,
            ctx.loop.name,
            spec.id,
            ItemKind.ESCALATION,
            f"{spec.id} asks: {' '.join(question.split())[:200]}",
            {
                "question": question,
                "branch": workspace.branch,
                "worktree": str(workspace.path),
                "attempts": attempts,
            },
        )
        return self._finish_task(
            ctx,
            spec,
            "awaiting_reply",
            f'waiting for a human\'s answer: loopctl inbox reply {item} "…"',
            workspace,
            attempts,
            last,
        )

    def _waiting_item(self, loop: Loop, task_id: str, run_id: str) -> Any:
        """An open approval or question from an earlier run of this loop's task, if any."""
        if loop.name == GOAL_LOOP:
            return None  # `loopctl goal` is asked for by hand: run it
        for item in open_items(self.log.read()):
            if (
                item.loop == loop.name
                and item.task == task_id
                and item.run != run_id
                and item.kind in (ItemKind.APPROVAL, ItemKind.ESCALATION)
            ):
                return item
        return None

    def _human_answer(self, run_id: str, task_id: str) -> tuple[str, str] | None:
        """The answer `loopctl inbox reply` gave to this task's question, for this run."""
        from loopctl.journal.history import human_answers

        return human_answers(self.log.read()).get((run_id, task_id))

    def _deliver_approved(self, loop: Loop) -> None:
        """Approvals given while this loop held its lock (or before a crash) are delivered now."""
        if loop.name == GOAL_LOOP:
            return
        from loopctl.delivery import pipeline as delivery

        delivery.deliver_approved(self.rec, loop.name)

    # --- invariant 12: commit what was checked; a turn leaves refs and definitions alone -------

    def _refuse_if_held(self) -> None:
        held = integrity.held_by(self.log.read())
        if held:
            raise LoopctlError(integrity.held_reason(held))

    def _integrity_baseline(
        self, ctx: _RunContext, spec: TaskSpec, number: int
    ) -> integrity.Baseline | None:
        """What the attempt's turns must leave as they found; a redone attempt keeps its first.

        None: the attempt was killed after it reported tampering; it is now finished as such.
        """
        listing = self._attempt_dir(ctx, spec.id, number) / "integrity-before.json"
        events = self.log.read()
        for opened in ctx_events(events, ctx.run_id, spec.id, EventType.INBOX_OPENED):
            evidence = opened.data.get("evidence")
            if not isinstance(evidence, dict):
                continue
            if evidence.get("tampering") and evidence.get("attempt") == number:
                what = str(evidence.get("reason"))
                self._finish_tampered(ctx, spec, number, what, opened.data.get("id"), evidence)
                return None
        notes = ctx_events(events, ctx.run_id, spec.id, EventType.NOTE)
        recorded = next(
            (
                str(e.data.get("digest"))
                for e in reversed(notes)
                if e.data.get("what") == "integrity_baseline" and e.data.get("attempt") == number
            ),
            None,
        )
        fresh = integrity.take(self.paths.root, self.log.last_seq())
        if recorded is not None:
            # Interrupted, maybe by its own agent killing loopctl: what changed since the first
            # start is held to the state before it, not taken as the new normal.
            earlier = integrity.load(listing, recorded)
            if earlier is not None:
                return earlier
            if fresh.digest() != recorded:
                # The listing is gone or altered and the state differs: report the listing.
                lost = listing.relative_to(self.paths.root).as_posix()
                return replace(fresh, files={**fresh.files, lost: "the state before the turn"})
            return fresh
        integrity.save(fresh, listing)
        self._event(
            ctx,
            spec.id,
            EventType.NOTE,
            what="integrity_baseline",
            attempt=number,
            digest=fresh.digest(),
        )
        return fresh

    def _tampered(
        self, ctx: _RunContext, spec: TaskSpec, number: int, before: integrity.Baseline
    ) -> bool:
        """On any change since `before`, fail the attempt as tampering and ask a human."""
        after = integrity.take(self.paths.root, before.seq)
        explained = integrity.explained_commits(self.log.read(), before.seq)
        findings = integrity.compare(before, after, explained)
        if not findings:
            return False
        what = findings.describe()
        evidence = {**findings.evidence(), "attempt": number}
        item = self._open_item(
            ctx.run_id,
            ctx.loop.name,
            spec.id,
            ItemKind.APPROVAL,
            f"tampering: an agent turn of {ctx.loop.name}/{spec.id} changed {what}",
            evidence,
        )
        held = "; no run starts until then" if findings.files else ""
        self._finish_tampered(ctx, spec, number, what, item, evidence, held)
        return True

    def _finish_tampered(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        number: int,
        what: str,
        item: object,
        evidence: dict[str, Any],
        held: str = "",
    ) -> None:
        """Record the attempt as failed by tampering, naming the item a human must look at."""
        self._event(
            ctx,
            spec.id,
            EventType.ATTEMPT_FINISHED,
            attempt=number,
            verdict="failed",
            reason=f"tampering: the agent's turn changed {what} (look, then `loopctl inbox"
            f" approve {item}`{held})",
            fingerprint=None,
            fatal=True,
            tampering=evidence,
        )
        self.rec.refresh_projections()

    def _placed(self, ctx: _RunContext, spec: TaskSpec) -> dict[str, str | None]:
        """Files loopctl put in this run's worktree (copy, setup), with their digests then."""
        prepared = ctx_events(self.log.read(), ctx.run_id, spec.id, EventType.WORKTREE_PREPARED)
        files = prepared[-1].data.get("files") if prepared else None
        return dict(files) if isinstance(files, dict) else {}

    def _snapshot(
        self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace
    ) -> integrity.Snapshot:
        placed = self._placed(ctx, spec)
        return integrity.take_snapshot(
            workspace.path,
            parent=workspace.base_sha,
            base=workspace.base_sha,
            placed_then=placed,
            placed_now=_file_hashes(workspace.path, list(placed)),
            seed=self._snapshot_seed(ctx, spec, workspace),
        )

    def _snapshot_seed(self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace) -> Path:
        """Where the index of this task's freshly created worktree is kept (see snapshot_tree)."""
        folder = self.paths.runs_dir / ctx.run_id / spec.id
        return folder / f"snapshot-seed-{workspace.base_sha}.index"

    def _checked(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        workspace: Workspace,
        number: int,
        baseline: Any,
        maker_result: Any,
        ran: list[dict[str, Any]],
    ) -> tuple[integrity.Snapshot | None, checks.Verdict]:
        """The verdict on one snapshot of the worktree, taken once the maker's tree has ended.

        The checks run in the worktree itself (tools expect their caches and installed
        dependencies there). A passing verdict stands only if the worktree is still that snapshot
        afterwards: a process the agent left behind may have changed it meanwhile, and then the
        verdict is about something else. Failing the attempt says so plainly, where checking out a
        clean copy would hide the process still at work.
        """
        if ctx.in_place:  # nothing is committed in place: the checkout is the human's
            return None, self._verdict(ctx, spec, workspace, number, baseline, maker_result, ran)
        from loopctl.checks.fingerprint import fingerprint

        try:
            snapshot = self._snapshot(ctx, spec, workspace)
        except LoopctlError as exc:
            why = f"cannot snapshot the worktree: {exc}"
            return None, checks.Verdict(False, why, fingerprint(1, why).digest, source="snapshot")
        verdict = self._verdict(
            ctx, spec, workspace, number, baseline, maker_result, ran, snapshot=snapshot
        )
        if not verdict.passed:
            return snapshot, verdict
        try:
            moved = integrity.snapshot_changes(
                workspace.path, snapshot, self._snapshot(ctx, spec, workspace)
            )
        except LoopctlError as exc:
            moved = [f"(it cannot be read again: {exc})"]
        if not moved:
            return snapshot, verdict
        shown = ", ".join(moved[:10]) + (f" and {len(moved) - 10} more" if len(moved) > 10 else "")
        why = (
            f"the worktree changed while it was being checked ({shown}): the verdict is not about"
            " what would be committed, so nothing is (a process the agent started may still be"
            " running; if the check itself writes these files, add them to .gitignore)"
        )
        return snapshot, checks.Verdict(
            False, why, fingerprint(1, why).digest, verdict.exit_code, "", "snapshot"
        )

    def _checked_tree(
        self, ctx: _RunContext, spec: TaskSpec, attempt: int
    ) -> tuple[str | None, Event | None]:
        """The tree the passing attempt checked (None in logs from before snapshots)."""
        found = [
            e
            for e in ctx_events(self.log.read(), ctx.run_id, spec.id, EventType.ATTEMPT_FINISHED)
            if e.data.get("attempt") == attempt and e.data.get("verdict") == "passed"
        ]
        passed = found[-1] if found else None
        tree = passed.data.get("tree") if passed else None
        return (tree if isinstance(tree, str) else None), passed

    def _commit_checked(
        self,
        ctx: _RunContext,
        spec: TaskSpec,
        workspace: Workspace,
        attempt: int,
        message: str,
        name: str,
        email: str,
    ) -> str | None:
        """Commit exactly the tree the passing attempt checked, on the base; None: no change.

        Commits the agent made on the task branch are folded in: the tree already holds their
        content, the parent stays the base, and the log names them.
        """
        root = self.paths.root
        tree, passed = self._checked_tree(ctx, spec, attempt)
        if tree is None:  # a verdict recorded by an older loopctl: the worktree as it is now
            tree = self._snapshot(ctx, spec, workspace).tree
        parent = workspace.base_sha
        if tree == git.tree_of_commit(root, parent):
            return None
        current = git.branch_head(root, workspace.branch)
        date = _git_date(passed.ts if passed is not None else self.clock().isoformat())
        sha = git.commit_snapshot(
            root,
            workspace.branch,
            tree,
            parent,
            message,
            author_name=name,
            author_email=email,
            date=date,
            expect=current,
        )
        folded = [] if current is None else git.commits_between(root, parent, current)
        git.reset_index(workspace.path, sha)
        self._event(
            ctx,
            spec.id,
            EventType.COMMIT_CREATED,
            sha=sha,
            branch=workspace.branch,
            tree=tree,
            parent=parent,
            folded=[c for c in folded if c != sha],
        )
        return sha

    def _makers_commit(
        self, ctx: _RunContext, spec: TaskSpec, workspace: Workspace, attempt: int
    ) -> str | None:
        """Without a `commit` action: the maker's own commit, if it is exactly what was checked."""
        root = self.paths.root
        head = git.branch_head(root, workspace.branch)
        if head is None or head == workspace.base_sha:
            return None
        tree, _ = self._checked_tree(ctx, spec, attempt)
        if tree is not None and git.tree_of_commit(root, head) == tree:
            return head
        raise LoopctlError(
            f"the maker's own commits on {workspace.branch} are not what was checked (the"
            ' worktree held other changes): nothing is delivered; add "commit" to [deliver]'
            " actions to deliver the checked work"
        )

    def _archive_leftovers(
        self, ctx: _RunContext, spec: TaskSpec, path: Path, branch: str
    ) -> str | None:
        """Commit what an earlier run left in the task's worktree; copied and set-up files stay out.

        Returns the archive commit, or None when the worktree holds nothing uncommitted.
        """
        root = self.paths.root
        head = git.head_sha(path)
        prepared = [
            e
            for e in self.log.read()
            if e.type == EventType.WORKTREE_PREPARED
            and e.loop == ctx.loop.name
            and e.task == spec.id
        ]
        files = prepared[-1].data.get("files") if prepared else None
        placed = sorted(files) if isinstance(files, dict) else []
        tree = git.snapshot_tree(path, head, exclude=placed)
        if tree == git.tree_of_commit(root, head):
            return None
        name, email = _author(self.project.config.author)
        return git.commit_snapshot(
            root,
            branch,
            tree,
            head,
            f"loopctl: work left in {branch} by an earlier run\n",
            author_name=name,
            author_email=email,
            date=_git_date(self.clock().isoformat()),
            expect=git.branch_head(root, branch),
        )


def _printable(text: str) -> str:
    """Task text for a commit message: git refuses NUL, and control characters help nobody."""
    return "".join(c if c.isprintable() or c in "\n\t" else " " for c in text)


def _file_hashes(root: Path, paths: Sequence[str]) -> dict[str, str | None]:
    """Content hashes of repository files (None: deleted), to tell later edits apart."""
    import hashlib

    hashes: dict[str, str | None] = {}
    for relative in paths:
        target = root / relative
        try:
            hashes[relative] = hashlib.sha256(target.read_bytes()).hexdigest()[:16]
        except OSError:
            hashes[relative] = None
    return hashes


def ctx_events(events: Sequence[Event], run_id: str, task: str, type_: str) -> list[Event]:
    return [e for e in events if e.run == run_id and e.task == task and e.type == type_]


def _git_date(iso: str) -> str:
    """An event's ISO time as git's "<unix seconds> +0000" (a redone commit is the same object)."""
    return f"{int(datetime.fromisoformat(iso).timestamp())} +0000"
