"""Where a tick's work comes from: one task, a command's JSON output, or GitHub issues and PRs.

`discover` picks the source; each source module imports only `tasks.spec`, never another
source, and is imported when a loop uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.tasks import command, github
from loopctl.tasks.spec import TaskSourceError, TaskSpec, single_task

if TYPE_CHECKING:
    from loopctl.definitions.loops import Loop
    from loopctl.journal.events import Event

__all__ = ["TaskSourceError", "TaskSpec", "discover"]


def discover(
    loop: Loop,
    repo: Path,
    *,
    timeout: float = 300.0,
    changed: Sequence[str] = (),
    events: Sequence[Event] = (),
) -> list[TaskSpec]:
    """The tasks of one tick: the loop's single prompt, its task command's items, or GitHub's.

    `changed` (from a watch trigger) is offered to prompt templates as `{changed}`; `events`
    (the log so far) tell a GitHub source which review comments are new.
    """
    if loop.tasks is None:
        return [single_task(loop, changed)]
    if loop.tasks.source == "github":
        return github.discover(loop, repo, events, changed)

    return command.discover(loop, repo, timeout=timeout, changed=changed)
