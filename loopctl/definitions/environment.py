"""What definitions need from this machine and this repository: tools on PATH, files in HEAD.

Kept apart from parsing because the answers depend on PATH and on what is committed, not on the
definition files alone. `validate` reports them as warnings (the machine that runs the loop may
differ from the one that validates it); a run refuses before anything happens when a delivery
step's tool is missing, so a `push` never goes out ahead of a `pr` that cannot.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.definitions.agents import Backend, argv_files
from loopctl.definitions.loops import Action, Loop
from loopctl.errors import Problem

if TYPE_CHECKING:
    from loopctl.definitions.project import Project

GH_HINT = "install it (https://cli.github.com), then `gh auth login`"


def missing_delivery_tools(
    actions: Iterable[Action],
    path: str | None,
    where: Path | None = None,
    *,
    pull_request: bool | None = None,
) -> list[str]:
    """One message per delivery step whose program is not on `path`, in step order.

    `pr` (and `merge` when the delivery has a pull request; `pull_request` says so when `pr`
    is not among `actions`) run `gh`; a custom action runs its own argv[0]. A program named by
    a path runs from the task's worktree and is not looked up here.
    """
    listed = [a for a in actions if a.name != "commit"]
    has_pr = any(a.name == "pr" for a in listed) if pull_request is None else pull_request
    found: list[str] = []
    for action in listed:
        if action.name == "pr" or (action.name == "merge" and has_pr):
            if shutil.which("gh", path=path) is None:
                what = "`pr`" if action.name == "pr" else "`merge` of the pull request"
                found.append(f"{what} needs the GitHub CLI `gh`, which is not on PATH: {GH_HINT}")
        elif action.argv:
            program = action.argv[0]
            if "/" not in program and shutil.which(program, path=path) is None:
                fix = f" in {where}" if where is not None else ""
                found.append(
                    f"`{action.name}` runs {program!r}, which is not on PATH (install it, or"
                    f" fix [deliver] actions{fix})"
                )
    return list(dict.fromkeys(found))


def delivery_path(project: Project) -> str | None:
    """The PATH delivery steps run with (the scrubbed environment keeps it)."""
    from loopctl.secrets import build_env

    return build_env(allow=project.config.env_allow).get("PATH")


def delivery_problems(project: Project) -> list[Problem]:
    """`validate`: each loop's delivery steps whose program this machine does not have."""
    path = delivery_path(project)
    problems: list[Problem] = []
    for loop in sorted(project.loops.values(), key=lambda lp: lp.name):
        for message in missing_delivery_tools(loop.deliver.actions, path):
            problems.append(Problem(loop.path, _deliver_line(loop), message, "warning"))
    return problems


def _deliver_line(loop: Loop) -> int | None:
    from loopctl.definitions.source import Problems, parse_toml

    doc = parse_toml(loop.path, Problems())
    return doc.locate(("deliver", "actions")) if doc is not None else None


def agent_file_problems(project: Project) -> list[Problem]:
    """`validate`: command agents whose argv names a file the repository's HEAD does not hold.

    An agent runs in the task's worktree, checked out from a commit: a script that exists only
    in this checkout (untracked, or not committed yet) is not there, nor on another machine.
    """
    from loopctl import git

    named: dict[str, list[str]] = {}
    for agent in project.agents.values():
        if agent.backend is Backend.COMMAND and agent.argv:
            files = inside_repository(project.root, argv_files((*agent.argv, *agent.args)))
            if files:
                named[agent.name] = files
    if not named:
        return []
    wanted = sorted({f for files in named.values() for f in files})
    try:
        committed = git.paths_in_commit(project.root, "HEAD", wanted)
    except Exception:  # no commit yet, or git cannot tell: nothing is committed then
        committed = set()
    problems: list[Problem] = []
    for name, files in sorted(named.items()):
        agent = project.agents[name]
        for file in files:
            if file in committed:
                continue
            state = (
                "is not committed"
                if (project.root / file).exists()
                else "does not exist in the repository"
            )
            problems.append(
                Problem(
                    agent.path,
                    None,
                    f"argv names {file}, which {state} (not in HEAD): it will not be in the"
                    " task's worktree, nor on another machine; commit it",
                    "warning",
                )
            )
    return problems


def inside_repository(root: Path, files: Sequence[str]) -> list[str]:
    """The repository-relative form of each file argument that points inside `root`."""
    found: list[str] = []
    resolved_root = root.resolve()
    for file in files:
        candidate = Path(file)
        full = candidate if candidate.is_absolute() else resolved_root / candidate
        relative = Path(os.path.normpath(full))
        if not relative.is_relative_to(resolved_root):
            continue
        text = relative.relative_to(resolved_root).as_posix()
        if text and text != "." and text not in found:
            found.append(text)
    return found


def environment_problems(project: Project) -> list[Problem]:
    """Every check that depends on this machine or on the commit, for `validate`."""
    return [*delivery_problems(project), *agent_file_problems(project)]
