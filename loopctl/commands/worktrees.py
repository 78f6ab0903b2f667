"""`loopctl worktrees`: loopctl's worktrees joined with their task's state, and pruning them."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from loopctl.definitions import Project
from loopctl.definitions.config import KeepPolicy
from loopctl.journal import history
from loopctl.journal.events import EventLog
from loopctl.worktrees import WorktreeInfo, list_worktrees, prune_worktrees, remove_worktree

FINISHED = ("done", "skipped", "failed", "stopped")


@dataclass(frozen=True, slots=True)
class WorktreeRow:
    loop: str
    task: str
    branch: str
    path: str
    task_status: str  # done | failed | stopped | skipped | running | interrupted | unknown
    dirty: bool
    registered: bool
    resume: str | None = None  # the command that resumes an interrupted task

    def to_json(self) -> dict[str, Any]:
        return {
            "loop": self.loop,
            "task": self.task,
            "branch": self.branch,
            "path": self.path,
            "task_status": self.task_status,
            "dirty": self.dirty,
            "registered": self.registered,
            "resume": self.resume,
        }


def _task_states(project: Project) -> dict[tuple[str, str], str]:
    return {key: status for key, (status, _) in _task_resumes(project).items()}


def _task_resumes(project: Project) -> dict[tuple[str, str], tuple[str, str | None]]:
    """Each task's state, and for an interrupted one the command that resumes it."""
    from loopctl.lock import read_holder

    runs = history.fold(EventLog(project.paths.events_file).read())
    states: dict[tuple[str, str], tuple[str, str | None]] = {}
    for run in runs.values():
        for task in run.tasks.values():
            status, resume = task.status, None
            if status == "open" and run.finished is not None:
                status = "unknown"
            elif status == "open":
                # Unfinished: running while its runner holds the loop's lock; otherwise it was
                # interrupted (Ctrl-C, `loopctl stop`, a crash) and waits to be resumed.
                condition = str(run.data.get("condition") or "")
                lock = run.loop if run.loop != "goal" else f"goal-{_goal_id(condition)}"
                if read_holder(project.paths.locks_dir, lock) is not None:
                    status = "running"
                else:
                    status = "interrupted"
                    resume = (
                        f"loopctl goal {shlex.quote(condition)}"
                        if run.loop == "goal"
                        else f"loopctl run {run.loop} --once"
                    )
            states[(run.loop, task.task)] = (status, resume)
    return states


def _goal_id(condition: str) -> str:
    from loopctl.engine.context import goal_task_id

    return goal_task_id(condition or "goal")


def _root(project: Project) -> Any:
    return project.config.worktree_root or project.paths.default_worktree_root()


def worktree_report(project: Project) -> list[WorktreeRow]:
    states = _task_resumes(project)
    rows = []
    for info in list_worktrees(project.root, _root(project)):
        status, resume = states.get((info.loop, info.task_id), ("unknown", None))
        rows.append(_row(info, status, resume))
    return rows


def _row(info: WorktreeInfo, status: str, resume: str | None = None) -> WorktreeRow:
    return WorktreeRow(
        info.loop,
        info.task_id,
        info.branch,
        str(info.path),
        status,
        info.dirty,
        info.registered,
        resume,
    )


def _keep(project: Project, loop: str) -> KeepPolicy:
    found = project.loops.get(loop)
    return found.worktree.keep if found else project.config.keep


def prune(project: Project, *, dry_run: bool = False) -> list[WorktreeRow]:
    """Remove worktrees of finished tasks that their loop's `keep` policy does not keep.

    Branches stay: the commits on them are the work. A task still running is never touched.
    """
    from loopctl.lock import WORKTREES_LOCK, short_lock

    with short_lock(project.paths.locks_dir, WORKTREES_LOCK):
        return _prune(project, dry_run=dry_run)


def _prune(project: Project, *, dry_run: bool) -> list[WorktreeRow]:
    states = _task_states(project)
    removed: list[WorktreeRow] = []
    for info in list_worktrees(project.root, _root(project)):
        status = states.get((info.loop, info.task_id), "unknown")
        keep = _keep(project, info.loop)
        if status not in FINISHED or keep is KeepPolicy.ALWAYS:
            continue
        if keep is KeepPolicy.ON_FAILURE and status in ("failed", "stopped"):
            continue
        if not info.registered:
            continue  # leftover folders are swept below
        removed.append(_row(info, status))
        if not dry_run:
            remove_worktree(project.root, info.path)
    if not dry_run:
        for path in prune_worktrees(project.root, _root(project)):
            removed.append(
                WorktreeRow(path.parent.name, path.name, "", str(path), "leftover", False, False)
            )
    return removed
