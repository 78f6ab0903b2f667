"""What many commands share: the `--json` flag and loading the project of the current checkout."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from loopctl.definitions import Project

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def warn_skipped(project: Project) -> None:
    """One line on stderr per invalid loop, agent or skill file a command goes on without."""
    for line in project.skipped_warnings():
        print(line, file=sys.stderr)


def load_here(*, strict: bool = True) -> Project:
    """The project of the repository around the working directory.

    `strict` refuses a broken config (exit 2) and warns about each invalid file skipped;
    read-only views (status, log, inbox) load without it so they work while a file is broken.
    """
    from loopctl.definitions import load_project
    from loopctl.paths import find_repo_root

    project = load_project(find_repo_root())
    if strict:
        project.raise_for_errors()
        warn_skipped(project)
    return project
