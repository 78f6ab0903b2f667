"""The worktree a task is worked in: `prepare` (create, resume or work in place), archiving what
an earlier run left, setup steps, and what changed in it outside the agent's turn.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from dataclasses import replace
from pathlib import Path

from loopctl import git, lock, process
from loopctl.engine import warming
from loopctl.engine.containment import sandbox_for
from loopctl.engine.context import (
    RunContext,
    attempt_dir,
    check_env,
    ctx_events,
    file_hashes,
)
from loopctl.engine.snapshot import archive_leftovers, snapshot_seed
from loopctl.errors import ForeignWorkTree, LoopctlError, swallowed
from loopctl.globs import compile_glob
from loopctl.journal import history
from loopctl.journal.events import EventType
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import (
    AgentFinished,
    AgentStarted,
    Note,
    WorktreeCreated,
    WorktreePrepared,
    read,
)
from loopctl.process import kill_leftover_group
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import (
    Known,
    Workspace,
    branch_name,
    ensure_worktree,
    remove_worktree,
    worktree_path,
)

logger = logging.getLogger(__name__)


def prepare(ctx: RunContext, spec: TaskSpec, view: history.TaskView | None) -> Workspace:
    """The workspace `spec` is worked in, ready for its first (or next) attempt.

    In place: the repository itself. Resumed (`view` recorded a worktree): the same worktree at
    the base the log recorded. Otherwise a fresh worktree at the task's base ref (a pooled one
    made fresh, or a new one: `warming.take`), after whatever an earlier run left there is
    archived; files copied, and setup run, skipped or seeded by its inputs (`warming.setup`).
    Every step is recorded (`worktree_created`, `worktree_prepared`).
    """
    root = ctx.paths.root
    if ctx.in_place:
        head = git.head_sha(root)
        base = view.base_sha if view and view.base_sha else head
        if view is None or view.worktree is None:
            ctx.record(
                spec.id,
                WorktreeCreated(
                    path=str(root),
                    branch=git.current_branch(root),
                    base_sha=base,
                    in_place=True,
                    dirty_at_start=file_hashes(root, git.changed_paths(root, base)),
                ),
                keep=("dirty_at_start",),
            )
        return Workspace(root, git.current_branch(root) or "HEAD", base, False)
    worktree_root = ctx.project.config.worktree_root or ctx.paths.default_worktree_root()
    if view is not None and view.worktree is not None and view.base_sha:
        # Resuming this run: the same worktree, and the base the log recorded (the copy in
        # the worktree's git dir is writable by the agent, so it is never trusted).
        with worktree_lock(ctx.rec):
            workspace = ensure_worktree(root, worktree_root, ctx.loop.name, spec.id, view.base_sha)
        workspace = replace(workspace, base_sha=view.base_sha)
        warming.link_node_modules(ctx, spec, workspace)  # a run killed before it was built
        return workspace
    base_sha = resolve_base(ctx.rec, spec.base_ref or ctx.base_ref)
    with worktree_lock(ctx.rec):
        known = retire_previous(ctx, spec, worktree_root, base_sha)
        taken = warming.take(ctx, spec, worktree_root, base_sha, known)  # pooled, or fresh
    workspace = replace(taken.workspace, base_sha=base_sha)
    if workspace.created and (workspace.at_base or git.head_sha(workspace.path) == base_sha):
        # Untouched by any agent yet: its index is a trustworthy stat cache of the base.
        with swallowed(logger, "seeding the snapshot index", LoopctlError, OSError):
            git.seed_snapshot_index(
                workspace.path,
                snapshot_seed(ctx, spec, workspace),
                git_dir=git.new_worktree_git_dir(workspace.path),
            )
    ctx.record(
        spec.id,
        WorktreeCreated(
            path=str(workspace.path),
            branch=workspace.branch,
            base_sha=base_sha,
            base_ref_sha=base_sha,
        ),
        keep=("base_ref_sha",),
    )
    prepare_worktree(ctx, spec, workspace, taken)
    placed = git.changed_paths(workspace.path, base_sha)
    if placed:
        ctx.record(spec.id, WorktreePrepared(files=file_hashes(workspace.path, placed)))
    return workspace


def retire_previous(
    ctx: RunContext, spec: TaskSpec, worktree_root: Path, base_sha: str
) -> Known | None:
    """Clear the way for a fresh worktree at `base_sha` without losing earlier work.

    A task worked again in a new run starts from its base ref's current commit. Whatever an
    earlier run left (uncommitted changes, commits not in the base) is committed and kept on
    an archive branch `loop/<loop>/<task>-<sha>`. Returns what git said when nothing had to be
    cleared (the common case: a task's first run), so getting the worktree need not ask again.
    """
    root = ctx.paths.root
    branch = branch_name(ctx.loop.name, spec.id)
    head = git.branch_head(root, branch)
    path = worktree_path(worktree_root, ctx.loop.name, spec.id)
    entries = git.worktree_list(root)
    registered = any(
        entry.branch == branch and entry.path.resolve() == path.resolve()
        for entry in entries
        if entry.path.exists()
    )
    if head is None:
        if registered:
            remove_worktree(root, path)
            return None
        return Known(ctx.repo_top(), entries, branch_is_new=True, common=ctx.repo_common())
    if registered:
        head = archive_leftovers(ctx, spec, path, branch) or head
        remove_worktree(root, path)
    if head == base_sha or git.is_ancestor(root, head, base_sha):
        git.delete_branch(root, branch)  # everything on it is already in the base
        return None
    archive = f"{branch}-{head[:8]}"
    suffix = 1
    while git.branch_head(root, archive) is not None:
        suffix += 1
        archive = f"{branch}-{head[:8]}-{suffix}"
    git.rename_branch(root, branch, archive)
    archived = {"branch": branch, "archive": archive, "head": head}
    ctx.record(spec.id, Note(what="branch_archived", extra=archived))
    return None


def worktree_lock(rec: Recorder) -> contextlib.AbstractContextManager[None]:
    """git's worktree bookkeeping races under concurrent adds and removals: one at a time."""

    return lock.worktree_lock(rec.paths.locks_dir)


def resolve_base(rec: Recorder, ref: str) -> str:
    root = rec.paths.root
    if ref.startswith("-"):
        raise LoopctlError(f"refusing base ref {ref!r}: it looks like an option")
    try:
        return git.resolve_commit(root, ref)
    except LoopctlError:
        if ref != "HEAD":
            with contextlib.suppress(LoopctlError):
                return git.resolve_commit(root, f"origin/{ref}")
        raise


def prepare_worktree(
    ctx: RunContext, spec: TaskSpec, workspace: Workspace, taken: warming.Taken
) -> None:

    spec_worktree = ctx.loop.worktree
    root = ctx.paths.root
    for pattern in spec_worktree.copy:
        regex = compile_glob(pattern)
        for source in sorted(root.rglob("*")):
            if ".git" in source.parts or not source.is_file():
                continue
            relative = source.relative_to(root)
            if not regex.match(relative.as_posix()):
                continue
            target = workspace.path / relative
            if target.resolve().is_relative_to(workspace.path.resolve()):
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    run_dir = attempt_dir(ctx, spec.id, 0)

    def run_setup() -> None:
        for index, argv in enumerate(spec_worktree.setup, start=1):
            done = process.run(
                list(argv),
                cwd=workspace.path,
                env=check_env(ctx.rec),
                timeout=1800,
                stdout_path=run_dir / f"setup-{index}.out",
                stderr_path=run_dir / f"setup-{index}.err",
                redactor=ctx.rec.redactor,
                cancel=ctx.stop,
                sandbox=sandbox_for(ctx, workspace, None, setup=True),
            )
            ran = {"argv": list(argv), "exit_code": done.exit_code}
            ctx.record(spec.id, Note(what="setup", extra=ran))
            if not done.ok:
                raise LoopctlError(f"worktree setup `{' '.join(argv)}` exited {done.exit_code}")

    # Setup runs only when its inputs changed; else the pool or a seed supplies its folders.
    warming.setup(ctx, spec, workspace, taken, run_setup)


def placed_unchanged(ctx: RunContext, spec: TaskSpec, workspace: Workspace) -> list[str]:
    """Files loopctl put in the worktree (copy, setup) that nobody has changed since."""
    events = ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.WORKTREE_PREPARED)
    if not events:
        return []
    placed = read(WorktreePrepared, events[-1]).files
    now = file_hashes(workspace.path, list(placed))
    return [path for path, digest in placed.items() if now.get(path) == digest]


def reattach(ctx: RunContext, spec: TaskSpec, workspace: Workspace) -> None:
    """Put the worktree back on the task's branch if the maker switched away or detached."""
    if ctx.in_place:
        return
    current = git.current_branch(workspace.path)
    if current == workspace.branch:
        return
    try:
        git.require_work_tree(workspace.path, "reattach")
    except ForeignWorkTree:
        return  # that HEAD is another tree's, not the task's to move; its snapshot is refused
    head = git.head_sha(workspace.path)
    git.point_branch(ctx.paths.root, workspace.branch, head)
    git.switch_branch(workspace.path, workspace.branch)
    left = {"left_on": current or "detached HEAD", "head": head}
    ctx.record(spec.id, Note(what="reattached", extra=left))


def earlier_changes(ctx: RunContext, spec: TaskSpec, workspace: Workspace) -> list[str]:
    """What the worktree holds changed against the base when an attempt starts: attempts
    build on each other (nothing is reset), so the next maker is told. Files loopctl placed
    (copy, setup) and, in place, the human's own edits are not the attempts' doing."""
    changed = git.changed_paths(workspace.path, workspace.base_sha)
    if ctx.in_place:
        changed = changed_in_place(ctx, spec, changed)
    placed = set(placed_unchanged(ctx, spec, workspace))
    return [
        path
        if (workspace.path / path).exists() or (workspace.path / path).is_symlink()
        else f"{path} (deleted)"
        for path in changed
        if path not in placed
    ]


def changed_in_place(ctx: RunContext, spec: TaskSpec, changed: list[str]) -> list[str]:
    """In place, only what changed since the run began is the maker's doing."""
    events = ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.WORKTREE_CREATED)
    before = read(WorktreeCreated, events[0]).dirty_at_start if events else {}
    now = file_hashes(ctx.paths.root, changed)
    own = {".loop/STATE.md", ".loop/INBOX.md", ".loop/.gitignore"}
    return [
        path
        for path in changed
        if path not in own and not (path in before and before[path] == now.get(path))
    ]


def stop_orphans(ctx: RunContext, spec: TaskSpec, workspace: Workspace) -> None:
    """Kill agents a killed runner left behind in this task's worktree."""

    # A turn is finished by an `agent_finished` of its attempt and role *after* it: a turn lost
    # with loopctl gets one when its session is resumed (engine.sessions), and the resumed turn
    # of the same attempt may be lost in its turn.
    unfinished: dict[tuple[int | None, str | None], AgentStarted] = {}
    for event in ctx.log.read():
        if event.run != ctx.run_id or event.task != spec.id:
            continue
        if event.type == EventType.AGENT_STARTED:
            turn = read(AgentStarted, event)
            unfinished[(turn.attempt, turn.role)] = turn
        elif event.type == EventType.AGENT_FINISHED:
            done = read(AgentFinished, event)
            unfinished.pop((done.attempt, done.role), None)
    for turn in unfinished.values():
        pid = turn.pid
        if pid is not None and kill_leftover_group(pid, workspace.path):
            ctx.record(spec.id, Note(what="orphan_killed", extra={"pid": pid}))
