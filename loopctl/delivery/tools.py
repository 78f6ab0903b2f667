"""The programs delivery steps run, looked up on the PATH they run with, before anything runs.

A run refuses when a step's program is missing, so a `push` never goes out ahead of a `pr` that
cannot; `validate` and `--dry-run` show the same as warnings (the machine that runs the loop may
differ from the one that validates it). Each step says what it needs: DeliveryStep.tools.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Iterable
from pathlib import Path

from loopctl.definitions import Loop, Project
from loopctl.definitions.environment import environment_problems
from loopctl.definitions.loops import Action
from loopctl.definitions.source import Problems, parse_toml
from loopctl.delivery.steps import step_for
from loopctl.errors import Problem
from loopctl.secrets import build_env


def missing_tools(
    actions: Iterable[Action],
    path: str | None,
    where: Path | None = None,
    *,
    among: Collection[str] | None = None,
) -> list[str]:
    """One message per delivery step whose program is not on `path`, in step order.

    `among`: the names of every step of the delivery, when `actions` are only those left to run
    (a `merge` after a pull request needs `gh` even when `pr` itself already ran); by default,
    the names of `actions`. `where`: the loop's file, named in the fix a message suggests.
    """
    listed = list(actions)
    names = [a.name for a in listed] if among is None else among
    found: list[str] = []
    for action in listed:
        for tool in step_for(action).tools(action, names, where):
            if shutil.which(tool.program, path=path) is None:
                found.append(tool.missing)
    return list(dict.fromkeys(found))


def delivery_path(project: Project) -> str | None:
    """The PATH delivery steps run with (the scrubbed environment keeps it)."""
    return build_env(allow=project.config.env_allow).get("PATH")


def tool_problems(project: Project) -> list[Problem]:
    """`validate`: each loop's delivery steps whose program this machine does not have."""
    path = delivery_path(project)
    problems: list[Problem] = []
    for loop in sorted(project.loops.values(), key=lambda lp: lp.name):
        for message in missing_tools(loop.deliver.actions, path):
            problems.append(Problem(loop.path, _deliver_line(loop), message, "warning"))
    return problems


def machine_problems(project: Project) -> list[Problem]:
    """Everything `validate` warns about that depends on this machine or on the commit: the
    delivery tools it lacks, then the agent scripts the commit lacks."""
    return [*tool_problems(project), *environment_problems(project)]


def _deliver_line(loop: Loop) -> int | None:
    doc = parse_toml(loop.path, Problems())
    return doc.locate(("deliver", "actions")) if doc is not None else None
