"""`loopctl worktrees`: loopctl's worktrees joined with their task's state, the loops' pooled
worktrees and the dependency seeds with their sizes, and pruning them."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from loopctl.definitions import Project
from loopctl.definitions.config import KeepPolicy
from loopctl.engine.context import goal_task_id
from loopctl.journal import history
from loopctl.journal.events import EventLog
from loopctl.lock import WORKTREES_LOCK, read_holder, short_lock
from loopctl.seeds import Seed, SeedStore
from loopctl.worktree_pool import list_pool, prune_pool
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
    kind: str = "task"  # task | pooled (a parked worktree) | seed (dependency folders)
    bytes: int | None = None  # on disk; measured for pooled worktrees and seeds
    files: int | None = None  # in a seed
    detail: str = ""  # a seed's folders and inputs hash, a pooled worktree's preserved folders

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "loop": self.loop,
            "task": self.task,
            "branch": self.branch,
            "path": self.path,
            "task_status": self.task_status,
            "dirty": self.dirty,
            "registered": self.registered,
            "resume": self.resume,
            "bytes": self.bytes,
            "files": self.files,
            "detail": self.detail,
        }


def _task_states(project: Project) -> dict[tuple[str, str], str]:
    return {key: status for key, (status, _) in _task_resumes(project).items()}


def _task_resumes(project: Project) -> dict[tuple[str, str], tuple[str, str | None]]:
    """Each task's state, and for an interrupted one the command that resumes it."""

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
                    recorded = run.data.get("command")  # the run's own arguments
                    resume = (
                        recorded
                        if isinstance(recorded, str) and recorded
                        else f"loopctl goal {shlex.quote(condition)}"
                        if run.loop == "goal"
                        else f"loopctl run {run.loop} --once"
                    )
            states[(run.loop, task.task)] = (status, resume)
    return states


def _goal_id(condition: str) -> str:

    return goal_task_id(condition or "goal")


def _root(project: Project) -> Any:
    return project.config.worktree_root or project.paths.default_worktree_root()


def worktree_report(project: Project) -> list[WorktreeRow]:
    states = _task_resumes(project)
    rows = []
    for info in list_worktrees(project.root, _root(project)):
        status, resume = states.get((info.loop, info.task_id), ("unknown", None))
        rows.append(_row(info, status, resume))
    return rows + warm_report(project)


def warm_report(project: Project) -> list[WorktreeRow]:
    """The loops' pooled worktrees and the repository's dependency seeds, with their sizes."""
    rows = [
        WorktreeRow(
            pooled.loop,
            "",
            "",
            str(pooled.path),
            "pooled",
            False,
            True,
            kind="pooled",
            bytes=pooled.bytes,
            detail=", ".join(pooled.preserved),
        )
        for pooled in list_pool(_root(project))
    ]
    rows += [_seed_row(seed, "seed") for seed in SeedStore(project.paths.seeds_dir).seeds()]
    return rows


def _seed_row(seed: Seed, status: str) -> WorktreeRow:
    return WorktreeRow(
        "",
        "",
        "",
        str(seed.path),
        status,
        False,
        False,
        kind="seed",
        bytes=seed.bytes,
        files=seed.files,
        detail=f"{', '.join(seed.folders)} for inputs {seed.inputs_hash[:12]}",
    )


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
    removed += _prune_warm(project, dry_run=dry_run)
    return removed


def _prune_warm(project: Project, *, dry_run: bool) -> list[WorktreeRow]:
    """Seeds beyond `[worktree] max_seed_age`/`max_seed_size`, and the pooled worktrees of loops
    that no longer pool (or no longer exist)."""
    removed: list[WorktreeRow] = []
    pooling = {name for name, loop in project.loops.items() if loop.worktree.pool}
    stale = [p for p in list_pool(_root(project)) if p.loop not in pooling]
    for pooled in stale:
        removed.append(
            WorktreeRow(pooled.loop, "", "", str(pooled.path), "pooled", False, True,
                        kind="pooled", bytes=pooled.bytes)
        )  # fmt: skip
    if not dry_run and stale:
        gone = {
            str(p) for p in prune_pool(project.root, _root(project), only=[p.loop for p in stale])
        }
        removed = [r for r in removed if r.path in gone]
    store = SeedStore(project.paths.seeds_dir)
    config = project.config
    if dry_run:
        dropped = store.prune(
            max_age_s=config.max_seed_age_s, max_bytes=config.max_seed_size, dry_run=True
        )
    else:
        dropped = store.prune(max_age_s=config.max_seed_age_s, max_bytes=config.max_seed_size)
    return removed + [_seed_row(seed, "seed") for seed in dropped]
