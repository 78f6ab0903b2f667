"""`loopctl export`: a loop as a GitHub Actions workflow or a Kubernetes CronJob.

Both run `loopctl run NAME --once` on someone else's scheduler and keep the loop's state between
runs on the `loopctl-state` branch (`loopctl.commands.state_sync`); a CronJob can keep it on a
PersistentVolumeClaim instead. Every value that comes from a definition is written as a quoted
scalar (JSON strings are valid YAML) and, in shell lines, quoted with shlex.

This module holds what both targets share: the schedule, the agents, secrets and installs a loop
needs, and writing the file. Each target is a module of its own (`export_github`, `export_k8s`);
both install exactly the loopctl that wrote them (`export_pin`).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path

from apscheduler.triggers.cron import CronTrigger

from loopctl.atomicfile import write_atomic
from loopctl.backends import backend_for
from loopctl.checks.conditions import resolve_condition
from loopctl.definitions.agents import Agent
from loopctl.definitions.fields import format_duration, validate_cron
from loopctl.definitions.loops import Loop, TriggerKind
from loopctl.definitions.project import Project
from loopctl.engine.context import judge_name
from loopctl.errors import ExitCode, LoopctlError, UsageError

# loopctl's distribution name; `loopctl` on the package index is an unrelated project.
DIST_NAME = "loopctl-runtime"
# Loop names go into file names, YAML, shell lines and Kubernetes names.
_EXPORTABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MINUTE_STEPS = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)  # divide an hour evenly
_HOUR_STEPS = (1, 2, 3, 4, 6, 8, 12)  # divide a day evenly


class Target(StrEnum):
    GITHUB_ACTIONS = "github-actions"
    K8S = "k8s"


class StateStore(StrEnum):
    BRANCH = "branch"  # `loopctl state pull` / `push` around each run
    PVC = "pvc"  # .loop/log on a PersistentVolumeClaim


class ExportError(LoopctlError):
    """The loop cannot be exported as asked (the message says what to change)."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True, slots=True)
class Schedule:
    cron: str
    period_s: float  # the shortest gap between two runs
    note: str  # what it came from, for a comment


@dataclass(frozen=True, slots=True)
class Exported:
    """A generated file: its text, where it goes by default, and what the user should know."""

    target: Target
    loop: str
    text: str
    default_path: Path  # relative to the repository root
    cron: str
    secrets: tuple[str, ...]
    installs: tuple[str, ...]
    warnings: tuple[str, ...]


# --- schedules -----------------------------------------------------------------------------------


def every_to_cron(seconds: float, *, minimum_minutes: int = 1) -> tuple[str, float, list[str]]:
    """A cron expression for "every D": (cron, its period in seconds, warnings when rounded).

    Cron repeats evenly only on steps that divide an hour (minutes) or a day (hours), daily or
    weekly, so other periods round to the nearest of those, never below `minimum_minutes`.
    """
    warnings: list[str] = []
    wanted = format_duration(seconds)
    minutes = seconds / 60
    if minutes < minimum_minutes:
        warnings.append(
            f"every {wanted} is more often than this scheduler runs anything: rounded up to"
            f" every {minimum_minutes}m"
        )
        minutes = float(minimum_minutes)
    candidates = [
        *((s, "* * * * *" if s == 1 else f"*/{s} * * * *") for s in _MINUTE_STEPS),
        *((60 * h, "0 * * * *" if h == 1 else f"0 */{h} * * *") for h in _HOUR_STEPS),
        (24 * 60, "0 0 * * *"),
        (7 * 24 * 60, "0 0 * * 0"),
    ]
    allowed = [(m, cron) for m, cron in candidates if m >= minimum_minutes]
    # Nearest by ratio; a tie goes to the longer step (less often than asked, never more).
    best, cron = min(allowed, key=lambda c: (abs(math.log(c[0] / minutes)), -c[0]))
    if not warnings and abs(best - minutes) * 60 > 0.5:
        warnings.append(
            f"every {wanted} is not an even step of an hour, a day or a week: rounded to every"
            f" {format_duration(best * 60)} ({cron})"
        )
    return cron, best * 60.0, warnings


def cron_period(cron: str, tz: str | None = None) -> float:
    """The shortest gap, in seconds, between the next few times `cron` fires."""
    trigger = CronTrigger.from_crontab(cron, timezone=tz or "UTC")
    now = datetime.now(UTC)
    times: list[datetime] = []
    previous = None
    for _ in range(12):
        fire = trigger.get_next_fire_time(previous, now)
        if fire is None:
            break
        times.append(fire)
        previous, now = fire, fire + timedelta(seconds=1)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    return min(gaps) if gaps else 86400.0


def loop_schedule(
    loop: Loop, *, cron: str | None, minimum_minutes: int
) -> tuple[Schedule, list[str]]:
    """The cron schedule a loop runs on elsewhere: `cron` if given, else its own trigger."""
    if cron is not None:
        problem = validate_cron(cron)
        if problem:
            raise UsageError(f"--cron: {problem}")
        return Schedule(cron, cron_period(cron, loop.tz), "--cron"), []
    trigger = loop.trigger
    if trigger is None:
        raise ExportError(
            f'loop {loop.name!r} has no trigger to schedule: add `every = "15m"` or `cron = ...`'
            f" to {loop.path}, or pass --cron EXPR"
        )
    if trigger.kind is TriggerKind.WATCH:
        raise ExportError(
            f"loop {loop.name!r} runs on file changes (watch), which a remote scheduler cannot"
            " see: give it `every` or `cron` in a copy of the loop, or pass --cron EXPR"
        )
    if trigger.kind is TriggerKind.EVERY and trigger.every_s is not None:
        expr, period, warnings = every_to_cron(trigger.every_s, minimum_minutes=minimum_minutes)
        return Schedule(expr, period, f"every {format_duration(trigger.every_s)}"), warnings
    assert trigger.cron is not None
    return Schedule(trigger.cron, cron_period(trigger.cron, loop.tz), "cron"), []


# --- what a loop needs ---------------------------------------------------------------------------


def loop_agents(project: Project, loop: Loop) -> list[Agent]:
    """The agents a tick of `loop` may run: its maker and its judge, as the engine picks them."""
    names: list[str] = []
    maker = loop.maker.agent
    if maker is None and len(project.agents) == 1:
        maker = next(iter(project.agents))
    if maker is None:
        raise ExportError(
            f"loop {loop.name!r} names no maker agent: set [maker] agent in {loop.path}"
            " or [defaults] maker in .loop/config.toml"
        )
    names.append(maker)
    condition = None
    if loop.goal:
        configured = project.config.condition_map()
        condition = resolve_condition(loop.goal, project.paths.root, configured=configured)
    judge = judge_name(loop, condition, project.config.checker)
    if judge is not None and judge not in names:
        names.append(judge)
    return [project.agent(name) for name in names]


def secret_names(project: Project, agents: Sequence[Agent]) -> tuple[list[str], list[str]]:
    """The variables the loop's processes may receive (env.allow): (names, warnings)."""
    names: list[str] = []
    warnings: list[str] = []
    for name in [n for agent in agents for n in agent.env_allow] + list(project.config.env_allow):
        if name in names:
            continue
        if name.endswith("*") or not _SECRET_NAME.fullmatch(name):
            warnings.append(
                f"env.allow entry {name!r} is not one variable name: list each variable the"
                " agent needs to have it passed from a secret"
            )
            continue
        names.append(name)
    return names, warnings


def install_commands(agents: Sequence[Agent]) -> list[str]:
    """How to install each agent CLI the loop uses (the backends' own install lines)."""
    commands: list[str] = []
    for agent in agents:
        line = str(getattr(backend_for(agent), "install", "") or "")
        if line and line not in commands:
            commands.append(line)
    return commands


# --- writing -------------------------------------------------------------------------------------


def write_export(exported: Exported, root: Path, output: Path | None, *, force: bool) -> Path:
    """Write the file (default place unless `output`); refuse to replace one without `force`."""
    target = output if output is not None else root / exported.default_path
    if target.exists() and not force:
        raise LoopctlError(f"{target} exists: pass --force to replace it, or --output PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, exported.text)
    return target


# --- helpers -------------------------------------------------------------------------------------


def exportable_loop(project: Project, name: str) -> Loop:
    loop = project.loop(name)
    if not _EXPORTABLE_NAME.fullmatch(name):
        raise ExportError(
            f"loop name {name!r} cannot go into a workflow or a Kubernetes name: rename"
            f" {loop.path.name} to letters, digits, '-', '_' and '.'"
        )
    return loop


def quote_yaml(text: str) -> str:
    """A YAML double-quoted scalar (a JSON string is one)."""
    return json.dumps(text, ensure_ascii=False)
