"""What a run needs before it starts: its agents, preflight refusals, protected paths, its tasks."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import replace

from loopctl.backends import backend_for
from loopctl.checks import verdicts as checks
from loopctl.checks.conditions import ResolvedCondition, resolve_condition
from loopctl.checks.runner_detection import runner_protect
from loopctl.definitions import Agent, Loop
from loopctl.definitions.loops import CheckerSpec, DeliverSpec, MakerSpec
from loopctl.definitions.proposals import DEFINITION_GLOBS
from loopctl.engine.context import (
    GOAL_LOOP,
    Tick,
    check_env,
    from_github,
    goal_task_id,
    judge_name,
    scrub,
)
from loopctl.engine.outcomes import GoalOptions
from loopctl.errors import LoopctlError, UsageError
from loopctl.journal import history
from loopctl.journal.recorder import Recorder
from loopctl.secrets import build_env
from loopctl.tasks import TaskSpec, discover
from loopctl.tasks.spec import requeued_specs


def loop_setup(rec: Recorder, loop: Loop) -> tuple[ResolvedCondition | None, Agent, Agent | None]:
    maker = maker_agent(rec, loop.maker.agent)
    condition = None
    if loop.goal:
        condition = resolve_condition(
            loop.goal,
            rec.paths.root,
            check=None,
            configured=rec.project.config.condition_map(),
        )
    return condition, maker, judge_agent(rec, loop, condition)


def goal_setup(
    rec: Recorder, options: GoalOptions
) -> tuple[Loop, ResolvedCondition, Agent, Agent | None]:
    config = rec.project.config
    condition = resolve_condition(
        options.condition,
        rec.paths.root,
        check=options.check,
        configured=config.condition_map(),
    )
    budget = config.budget
    if options.max_iterations is not None:
        budget = replace(budget, max_iterations=options.max_iterations)
    loop = Loop(
        name=GOAL_LOOP,
        path=rec.paths.loop_dir / "goal",
        description=options.condition,
        goal=options.condition,
        prompt=f"Make this condition hold: {options.condition}",
        maker=MakerSpec(agent=options.agent or config.maker),
        checker=CheckerSpec(
            agent=options.checker_agent or (config.checker if condition.argv is None else None),
            network=config.check_network,
            hosts=config.check_hosts,
        ),
        budget=budget,
        deliver=DeliverSpec(),
    )
    maker = maker_agent(rec, loop.maker.agent)
    judged = condition.argv is None or options.checker_agent is not None
    judge = judge_agent(rec, loop, condition) if judged else None
    return loop, condition, maker, judge


def maker_agent(rec: Recorder, name: str | None) -> Agent:
    if name is None:
        agents = rec.project.agents
        if len(agents) == 1:
            return next(iter(agents.values()))
        raise UsageError(
            "no maker agent: pass --agent NAME, or set [defaults] maker in .loop/config.toml"
            f" (agents found: {', '.join(sorted(agents)) or 'none'})"
        )
    return rec.project.agent(name)


def judge_agent(rec: Recorder, loop: Loop, condition: ResolvedCondition | None) -> Agent | None:
    name = judge_name(loop, condition, rec.project.config.checker)
    return rec.project.agent(name) if name else None


def check_available(rec: Recorder, agents: Sequence[Agent]) -> None:

    for agent in agents:
        env = build_env(allow=(*agent.env_allow, *rec.project.config.env_allow))
        backend_for(agent).check_available(agent, env)


def check_programs(rec: Recorder, loop: Loop, condition: ResolvedCondition | None) -> None:
    """Refuse before any worktree exists when a check program is missing."""
    commands = checks.check_commands(loop.checker, condition)
    path = check_env(rec).get("PATH")
    for argv in commands:
        program = argv[0]
        if "/" in program:
            continue  # relative to the worktree, or absolute: checked when it runs
        if shutil.which(program, path=path) is None:
            raise LoopctlError(
                f"check program {program!r} is not on PATH (install it, or fix the check"
                f" command `{' '.join(argv)}`)"
            )


def protected_paths(
    rec: Recorder,
    loop: Loop,
    condition: ResolvedCondition | None,
    maker: Agent,
    judge: Agent | None,
) -> tuple[str, ...]:
    patterns: list[str] = list(loop.checker.protect)
    if condition is not None and condition.source == "builtin":
        patterns += condition.protect
    elif condition is not None and condition.argv is not None and loop.checker.runner_protect:
        # A goal checked by `--check` or `[conditions]` that runs a known test runner is held
        # to what the built-in is: its tests and the runner's configuration.
        patterns += runner_protect(condition.argv, rec.paths.root)
    if loop.checker.runner_protect:
        # A checker command that runs a test runner is held to what the built-in is.
        for argv in loop.checker.commands:
            patterns += runner_protect(argv, rec.paths.root)
    if not loop.maker.allow_self_edit:
        agent_paths = [a.path for a in (maker, judge) if a is not None]
        skill_folders = [
            rec.project.skills[name].folder
            for name in loop.maker.skills
            if name in rec.project.skills
        ]
        patterns += checks.self_edit_paths(rec.paths.root, agent_paths, skill_folders)
        # Every definition file: an edit engine.proposals could not take out fails the attempt.
        patterns += DEFINITION_GLOBS
    return tuple(dict.fromkeys(patterns))


def resumable(rec: Recorder, loop: Loop, goal: str | None) -> history.RunView | None:
    """The loop's last run if it never finished (for a goal: the last run of that goal)."""
    with history.runs_of(rec.log) as runs:
        candidates = [r for r in runs.values() if r.loop == loop.name]
        if goal is not None:
            candidates = [r for r in candidates if r.data.get("condition") == goal]
        if not candidates or candidates[-1].finished is not None:
            return None
        last = candidates[-1]
        # A copy: the fold goes on in other ticks' threads while this run is resumed.
        return replace(last, tasks=dict(last.tasks), events=list(last.events))


def find_specs(
    rec: Recorder, loop: Loop, condition: ResolvedCondition | None, base_ref: str, tick: Tick
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
            scrub(rec, spec)
            for spec in discover(
                loop,
                rec.paths.root,
                changed=tick.changed,
                # Only GitHub tasks look back (new review comments since).
                events=rec.log.read() if from_github(loop) else (),
            )
        ]
    )
    # Tasks `loopctl inbox retry/reply` queued come first (max_tasks never cuts them);
    # their text was scrubbed when it was first found.

    again = requeued_specs(rec.log.read(), loop.name)
    ids = {spec.id for spec in again}
    return again + [spec for spec in found if spec.id not in ids]
