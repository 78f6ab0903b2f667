"""What definitions need from this machine and this repository: tools on PATH, files in HEAD.

Kept apart from parsing because the answers depend on PATH and on what is committed, not on the
definition files alone. `validate` reports them as warnings (the machine that runs the loop may
differ from the one that validates it). The tools delivery steps need are checked by
loopctl.delivery.tools, which asks each step (definitions sit below delivery).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl import git
from loopctl.definitions.agents import Backend, argv_files
from loopctl.errors import Problem

if TYPE_CHECKING:
    from loopctl.definitions.project import Project


def agent_file_problems(project: Project) -> list[Problem]:
    """`validate`: command agents whose argv names a file the repository's HEAD does not hold.

    An agent runs in the task's worktree, checked out from a commit: a script that exists only
    in this checkout (untracked, or not committed yet) is not there, nor on another machine.
    """

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
    """The checks of definitions that depend on the commit, for `validate` (the delivery
    tools this machine lacks are loopctl.delivery.tools', which asks each step)."""
    return agent_file_problems(project)
