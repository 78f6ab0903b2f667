"""Resume is explicit: an interrupted run continues only under the arguments it started with.

A `goal` or `run` finds its loop's (or its goal's) last run unfinished and would continue it.
If the command now asks for something else — another maker, check, checker agent, base,
attempt budget or place to work — continuing would silently do work nobody asked for, so the
run refuses with one line naming the command that resumes the interrupted run as it was and
`--fresh`, which closes it and starts a new one. The arguments a run started with are recorded
in its `tick_started` event (`settings`, `command`); a run from a log written before they were
recorded is compared on what its event holds.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopctl.errors import ExitCode, LoopctlError
from loopctl.journal import history

# What a run's settings are called where the user gives them: `goal`'s options; a loop's
# settings come from its file.
GOAL_FLAGS = {
    "maker": "--agent",
    "judge": "--checker-agent",
    "checks": "--check",
    "base": "--base",
    "max_iterations": "--max-iterations",
    "in_place": "--in-place",
    "condition": "the goal",
}
LOOP_NAMES = {
    "maker": "[maker] agent",
    "judge": "[checker] agent",
    "checks": "the check commands",
    "base": "the base",
    "max_iterations": "[budget] max_iterations",
    "in_place": "in place",
    "condition": "goal",
}


class ResumeMismatch(LoopctlError):
    """An interrupted run would be resumed under other arguments than it started with."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What makes a run the run it is; compared before an interrupted one is resumed."""

    maker: str
    judge: str | None
    condition: str | None
    checks: tuple[tuple[str, ...], ...]  # every check command, in order
    base: str
    max_iterations: int
    in_place: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "maker": self.maker,
            "judge": self.judge,
            "condition": self.condition,
            "checks": [list(argv) for argv in self.checks],
            "base": self.base,
            "max_iterations": self.max_iterations,
            "in_place": self.in_place,
        }


def goal_command(
    condition: str,
    *,
    check: tuple[str, ...] | None = None,
    agent: str | None = None,
    checker_agent: str | None = None,
    max_iterations: int | None = None,
    in_place: bool = False,
    base: str = "HEAD",
) -> str:
    """The `loopctl goal` command line that gives these options (as a shell would take it)."""
    words = ["loopctl", "goal", condition]
    if check is not None:
        words += ["--check", shlex.join(check)]
    if agent is not None:
        words += ["--agent", agent]
    if checker_agent is not None:
        words += ["--checker-agent", checker_agent]
    if max_iterations is not None:
        words += ["--max-iterations", str(max_iterations)]
    if in_place:
        words.append("--in-place")
    if base != "HEAD":
        words += ["--base", base]
    return shlex.join(words)


def loop_command(name: str) -> str:
    return shlex.join(["loopctl", "run", name, "--once"])


def differences(
    recorded: Mapping[str, Any], current: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """(setting, then, now) for each setting the interrupted run recorded that differs now.

    `current` is `RunSettings.to_json()` as the log would hold it (redacted). A setting the run
    did not record (a log from an older loopctl) is not compared.
    """
    found = []
    for key, value in current.items():
        if key not in recorded:
            continue
        then = recorded[key]
        if _plain(then) != _plain(value):
            found.append((key, then, value))
    return found


def recorded_settings(run: history.RunView) -> dict[str, Any]:
    """The settings an unfinished run started with, as its `tick_started` event holds them."""
    settings = run.data.get("settings")
    if isinstance(settings, dict):
        return dict(settings)
    # Written before `settings`: the fields tick_started always had.
    return {k: run.data[k] for k in ("maker", "judge", "in_place") if k in run.data}


def refuse_other_arguments(
    run: history.RunView, now: Mapping[str, Any], *, goal: bool, this_command: str
) -> None:
    """Raise `ResumeMismatch` when `now` differs from what the unfinished `run` started with."""
    changed = differences(recorded_settings(run), now)
    if not changed:
        return
    names = GOAL_FLAGS if goal else LOOP_NAMES
    what = "; ".join(
        f"{names.get(key, key)} was {_shown(then)}, now {_shown(value)}"
        for key, then, value in changed
    )
    if goal:
        command = run.data.get("command")
        resume = command if isinstance(command, str) and command else this_command
        raise ResumeMismatch(
            f"goal run {run.run} was interrupted, and it started with other arguments: {what};"
            f" resume it with `{resume}`, or add --fresh to start afresh"
        )
    raise ResumeMismatch(
        f"loop {run.loop}'s tick {run.run} was interrupted, and its definition has changed"
        f" since: {what}; restore that to resume it with `{this_command}`, or add --fresh"
        f" (`{this_command} --fresh`) to start afresh"
    )


def _plain(value: Any) -> Any:
    """Tuples as lists, as the value reads back from the log's JSON."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        if not value:
            return "none"
        commands = " && ".join(shlex.join(str(w) for w in argv) for argv in value)
        return repr(commands)
    return repr(value) if isinstance(value, str) else str(value)
