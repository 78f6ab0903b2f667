"""Invariant 12: commit exactly what was checked; an agent turn leaves refs and definitions alone.

The snapshot of a worktree is taken into a private index, checked, and committed on the task
branch by loopctl; a turn that changed git config, hooks or definitions is recorded as tampering.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from loopctl import git
from loopctl.checks import integrity
from loopctl.definitions.sandbox import SandboxMode
from loopctl.engine.context import (
    RunContext,
    attempt_dir,
    author,
    ctx_events,
    file_hashes,
    git_date,
    open_item,
)
from loopctl.errors import LoopctlError
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import ItemKind, current_items
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import (
    AttemptFinished,
    CommitCreated,
    InboxOpened,
    IntegrityBaseline,
    Note,
    WorktreePrepared,
    read,
    read_note,
)
from loopctl.journal.statuses import Outcome, Verdict
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace


def refuse_if_held(rec: Recorder) -> None:
    held = integrity.held_among(current_items(rec.log))
    if held:
        raise LoopctlError(integrity.held_reason(held))


def integrity_baseline(ctx: RunContext, spec: TaskSpec, number: int) -> integrity.Baseline | None:
    """What the attempt's turns must leave as they found.

    A resumed attempt takes a fresh one when nothing since its first start can be its agent's:
    the run was interrupted cleanly (its turn was compared as it stopped, see `turn_stopped`),
    or its agents ran confined (they could neither write refs nor stop loopctl). What the user
    did meanwhile is then never tampering. Only an unconfined attempt whose loopctl died
    mid-turn (kill -9, maybe by its own agent) is held to the state before its first start.

    None: the attempt was killed after it reported tampering; it is now finished as such.
    """
    listing = attempt_dir(ctx, spec.id, number) / "integrity-before.json"
    events = ctx.log.read()
    for opened in ctx_events(events, ctx.run_id, spec.id, EventType.INBOX_OPENED):
        item = read(InboxOpened, opened)
        evidence = item.evidence
        if evidence.get("tampering") and evidence.get("attempt") == number:
            what = str(evidence.get("reason"))
            finish_tampered(ctx, spec, number, what, item.id or None, evidence)
            return None
    notes = ctx_events(events, ctx.run_id, spec.id, EventType.NOTE)
    recorded = next(
        (
            str(note.digest)
            for e in reversed(notes)
            if (note := read_note(IntegrityBaseline, e)) is not None and note.attempt == number
        ),
        None,
    )
    fresh = integrity.take(ctx.paths.root, ctx.log.last_seq())
    if recorded is not None and _held_to_first(ctx, events, notes, number):
        # Interrupted, maybe by its own agent killing loopctl: what changed since the first
        # start is held to the state before it, not taken as the new normal.
        earlier = integrity.load(listing, recorded)
        if earlier is not None:
            return earlier
        if fresh.digest() != recorded:
            # The listing is gone or altered and the state differs: report the listing.
            lost = listing.relative_to(ctx.paths.root).as_posix()
            return replace(fresh, files={**fresh.files, lost: "the state before the turn"})
        return fresh
    integrity.save(fresh, listing)
    ctx.record(spec.id, IntegrityBaseline(attempt=number, digest=fresh.digest()))
    return fresh


def _held_to_first(ctx: RunContext, events: list[Event], notes: list[Event], number: int) -> bool:
    """True when a resumed attempt must keep the baseline it took before (see above)."""
    if confined(ctx):
        return False
    # The baseline in force is the latest one taken; a clean stop after it was compared then.
    taken = max(
        (
            e.seq
            for e in notes
            if (note := read_note(IntegrityBaseline, e)) is not None and note.attempt == number
        ),
        default=0,
    )
    stopped = any(
        e.type == EventType.RUN_INTERRUPTED and e.run == ctx.run_id and e.seq > taken
        for e in events
    )
    return not stopped


def confined(ctx: RunContext) -> bool:
    """True when the run's agents and checks run in the sandbox: they cannot write refs."""

    return ctx.project.config.sandbox is not SandboxMode.OFF


def tampered(ctx: RunContext, spec: TaskSpec, number: int, before: integrity.Baseline) -> bool:
    """On any change since `before`, fail the attempt as tampering and ask a human.

    A user's commits on a branch no task owns are not tampering while the agent could not
    have made them (it ran confined); they are noted in the log. Unconfined, they cannot be
    told from the agent's, and the item says how to tell.
    """
    root = ctx.paths.root
    after = integrity.take(root, before.seq)
    explained = integrity.explained_commits(ctx.log.read(), before.seq)
    users = integrity.user_branch_moves(root, before, after) if confined(ctx) else {}
    findings = integrity.compare(before, after, explained, users)
    if users:
        refs = [f"{name} {how}" for name, how in sorted(users.items())]
        ctx.record(spec.id, Note(what="user_commits", attempt=number, extra={"refs": refs}))
    if not findings:
        return False
    what = findings.describe()
    evidence = {**findings.evidence(), "attempt": number, "outcome": Outcome.TAMPERED.value}
    item = open_item(
        ctx.rec,
        ctx.run_id,
        ctx.loop.name,
        spec.id,
        ItemKind.APPROVAL,
        f"tampering: during an agent turn of {ctx.loop.name}/{spec.id}, {what}; if you made"
        " this change yourself, approve this item",
        evidence,
    )
    held = "; no run starts until then" if findings.files else ""
    finish_tampered(ctx, spec, number, what, item, evidence, held)
    return True


@contextlib.contextmanager
def watched_turn(
    ctx: RunContext, spec: TaskSpec, number: int, before: integrity.Baseline
) -> Iterator[None]:
    """An attempt interrupted (Ctrl-C, SIGTERM, `loopctl stop`) is compared as it stops: its
    resumption takes a fresh baseline, so what its agent did must be caught now."""
    try:
        yield
    except KeyboardInterrupt:
        finished = ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.ATTEMPT_FINISHED)
        if not any(read(AttemptFinished, e).attempt == number for e in finished):
            tampered(ctx, spec, number, before)
        raise


def finish_tampered(
    ctx: RunContext,
    spec: TaskSpec,
    number: int,
    what: str,
    item: object,
    evidence: dict[str, Any],
    held: str = "",
) -> None:
    """Record the attempt as failed by tampering, naming the item a human must look at."""
    ctx.record(
        spec.id,
        AttemptFinished(
            attempt=number,
            verdict=Verdict.FAILED,
            reason=f"tampering: during the agent's turn, {what} (not you? then it was the agent;"
            f" if it was you, `loopctl inbox approve {item}`{held})",
            fingerprint=None,
            fatal=True,
            tampering=evidence,
        ),
        keep=("tampering",),
    )
    ctx.rec.refresh_projections()


def placed_files(ctx: RunContext, spec: TaskSpec) -> dict[str, str | None]:
    """Files loopctl put in this run's worktree (copy, setup), with their digests then."""
    prepared = ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.WORKTREE_PREPARED)
    return dict(read(WorktreePrepared, prepared[-1]).files) if prepared else {}


def take_snapshot(ctx: RunContext, spec: TaskSpec, workspace: Workspace) -> integrity.Snapshot:
    placed = placed_files(ctx, spec)
    return integrity.take_snapshot(
        workspace.path,
        parent=workspace.base_sha,
        base=workspace.base_sha,
        placed_then=placed,
        placed_now=file_hashes(workspace.path, list(placed)),
        seed=snapshot_seed(ctx, spec, workspace),
    )


def snapshot_seed(ctx: RunContext, spec: TaskSpec, workspace: Workspace) -> Path:
    """Where the index of this task's freshly created worktree is kept (see snapshot_tree)."""
    folder = ctx.paths.runs_dir / ctx.run_id / spec.id
    return folder / f"snapshot-seed-{workspace.base_sha}.index"


def checked_tree(ctx: RunContext, spec: TaskSpec, attempt: int) -> tuple[str | None, Event | None]:
    """The tree the passing attempt checked (None in logs from before snapshots)."""
    found = [
        e
        for e in ctx_events(ctx.log.read(), ctx.run_id, spec.id, EventType.ATTEMPT_FINISHED)
        if (finished := read(AttemptFinished, e)).attempt == attempt
        and finished.verdict == Verdict.PASSED
    ]
    passed = found[-1] if found else None
    return (read(AttemptFinished, passed).tree if passed else None), passed


def commit_checked(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    attempt: int,
    message: str,
    name: str,
    email: str,
) -> str | None:
    """Commit exactly the tree the passing attempt checked, on the base; None: no change.

    Commits the agent made on the task branch are folded in: the tree already holds their
    content, the parent stays the base, and the log names them.
    """
    root = ctx.paths.root
    tree, passed = checked_tree(ctx, spec, attempt)
    if tree is None:  # a verdict recorded by an older loopctl: the worktree as it is now
        tree = take_snapshot(ctx, spec, workspace).tree
    parent = workspace.base_sha
    if tree == git.tree_of_commit(root, parent):
        return None
    current = git.branch_head(root, workspace.branch)
    date = git_date(passed.ts if passed is not None else ctx.clock().isoformat())
    sha = git.commit_snapshot(
        root,
        workspace.branch,
        tree,
        parent,
        message,
        author_name=name,
        author_email=email,
        date=date,
        expect=current,
    )
    folded = [] if current is None else git.commits_between(root, parent, current)
    git.reset_index(workspace.path, sha)
    ctx.record(
        spec.id,
        CommitCreated(
            sha=sha,
            branch=workspace.branch,
            tree=tree,
            parent=parent,
            folded=tuple(c for c in folded if c != sha),
        ),
    )
    return sha


def makers_commit(
    ctx: RunContext, spec: TaskSpec, workspace: Workspace, attempt: int
) -> str | None:
    """Without a `commit` action: the maker's own commit, if it is exactly what was checked."""
    root = ctx.paths.root
    head = git.branch_head(root, workspace.branch)
    if head is None or head == workspace.base_sha:
        return None
    tree, _ = checked_tree(ctx, spec, attempt)
    if tree is not None and git.tree_of_commit(root, head) == tree:
        return head
    raise LoopctlError(
        f"the maker's own commits on {workspace.branch} are not what was checked (the"
        ' worktree held other changes): nothing is delivered; add "commit" to [deliver]'
        " actions to deliver the checked work"
    )


def archive_leftovers(ctx: RunContext, spec: TaskSpec, path: Path, branch: str) -> str | None:
    """Commit what an earlier run left in the task's worktree; copied and set-up files stay out.

    Returns the archive commit, or None when the worktree holds nothing uncommitted.
    """
    root = ctx.paths.root
    head = git.head_sha(path)
    prepared = [
        e
        for e in ctx.log.read()
        if e.type == EventType.WORKTREE_PREPARED and e.loop == ctx.loop.name and e.task == spec.id
    ]
    placed = sorted(read(WorktreePrepared, prepared[-1]).files) if prepared else []
    tree = git.snapshot_tree(path, head, exclude=placed)
    if tree == git.tree_of_commit(root, head):
        return None
    name, email = author(ctx.project.config.author)
    return git.commit_snapshot(
        root,
        branch,
        tree,
        head,
        f"loopctl: work left in {branch} by an earlier run\n",
        author_name=name,
        author_email=email,
        date=git_date(ctx.clock().isoformat()),
        expect=git.branch_head(root, branch),
    )
