"""Out-of-scope work waits for a human before anything of it is committed (issue 31, item 1).

A passing attempt whose footprint (engine.footprint) has a step outside the task's scope is not
committed: the task pauses (`paused`, outcome `needs-approval`) with an approval item that
names each step (the path, link, command, host, tool or size overrun) and holds what approving
needs — the checked snapshot's tree, the base, the branch and the commit message. Approving it
commits exactly that tree on the task's branch and delivers it as the loop's `[deliver]` says
(its own gates still wait); rejecting it ends the task `rejected` with nothing committed. Until
then the task rests: the loop's next tick finds its open item (engine.finish.waiting_item).
The held tree is reachable from no commit, so a ref (git.hold_object) keeps it from git's gc
until the item is approved or rejected.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from loopctl import git
from loopctl.checks.footprint import Excursion, summary
from loopctl.delivery import pipeline as delivery
from loopctl.delivery.ending import Ending, end_task
from loopctl.engine.commit import commit_message, delivered_outcome
from loopctl.engine.context import RunContext, author, ctx_events, git_date, open_item
from loopctl.engine.finish import finish_task
from loopctl.engine.footprint import recorded
from loopctl.engine.outcomes import TaskOutcome
from loopctl.engine.snapshot import checked_tree
from loopctl.errors import LoopctlError
from loopctl.journal import history
from loopctl.journal.events import EventType
from loopctl.journal.inbox import InboxItem, ItemKind
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import (
    ApprovalRefused,
    Approved,
    CommitCreated,
    InboxClosed,
    read,
)
from loopctl.journal.statuses import Outcome, TaskStatus
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace

ACTION = "commit work outside the task's scope"
logger = logging.getLogger(__name__)


def held(ctx: RunContext, spec: TaskSpec, number: int) -> tuple[Excursion, ...]:
    """The out-of-scope steps of passing attempt `number` (none: it is delivered as usual)."""
    found = recorded(ctx.log.read(), ctx.run_id, spec.id, number)
    if found is None:
        return ()
    return tuple(Excursion.from_json(e) for e in found.outside if isinstance(e, dict))


def pause(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    number: int,
    found: tuple[Excursion, ...],
    last: history.AttemptView | None,
    attempts: int,
) -> TaskOutcome:
    """Open the approval item naming `found` and pause the task; nothing is committed. In
    place there is no commit to hold back: the task fails, naming them, its changes left in
    the working tree for a person to look at."""
    named = summary(found)
    if ctx.in_place:
        why = f"out of scope: {named} (left in the working tree for you to look at)"
        return finish_task(
            ctx, spec, TaskStatus.FAILED, why, workspace, attempts, last, outcome=Outcome.FAILED
        )
    tree, _ = checked_tree(ctx, spec, number)
    name, email = author(ctx.loop.deliver.author or ctx.project.config.author)
    footprint = recorded(ctx.log.read(), ctx.run_id, spec.id, number)
    evidence: dict[str, Any] = {
        "drift": [e.to_json() for e in found],
        "score": footprint.drift.get("score") if footprint is not None else None,
        "action": ACTION,
        "attempt": number,
        "tree": tree,
        "base_sha": workspace.base_sha,
        "base_ref": spec.base_ref or ctx.base_ref,
        "branch": workspace.branch,
        "worktree": str(workspace.path),
        "message": commit_message(ctx, spec, number),
        "author": [name, email],
    }
    item = open_item(
        ctx.rec,
        ctx.run_id,
        ctx.loop.name,
        spec.id,
        ItemKind.APPROVAL,
        f"{spec.id}: out of scope: {named}"[:300],
        evidence,
    )
    if tree is not None:
        _hold(ctx.paths.root, item, tree)
    reason = (
        f"out of scope: {named}; nothing was committed (`loopctl inbox approve {item}` commits"
        f" it, `loopctl inbox reject {item}` discards it)"
    )
    return finish_task(
        ctx,
        spec,
        TaskStatus.PAUSED,
        reason,
        workspace,
        attempts,
        last,
        outcome=Outcome.NEEDS_APPROVAL,
    )


def is_drift(item: InboxItem) -> bool:
    return item.kind == ItemKind.APPROVAL and isinstance(item.evidence.get("drift"), list)


def approve(rec: Recorder, item: InboxItem, note: str | None) -> tuple[bool, str]:
    """Commit the held tree on the task's branch and deliver it; (ok, what happened)."""
    ev = item.evidence
    run, loop_name, task = item.run or "", item.loop or "", item.task or ""
    loop = rec.project.loops.get(loop_name)
    tree, base, branch = ev.get("tree"), ev.get("base_sha"), ev.get("branch")
    root = rec.paths.root
    problem = None
    if loop is None:
        problem = f"loop {loop_name!r} is no longer defined"
    elif not (isinstance(tree, str) and isinstance(base, str) and isinstance(branch, str)):
        problem = "the item holds no checked snapshot to commit"
    else:
        head = git.branch_head(root, branch)
        if head not in (None, base) and not _made_here(root, head, tree, base):
            problem = f"branch {branch} moved to {head[:12]} since; the held work is not on it"
    if problem is not None:
        rec.record(ApprovalRefused(id=item.id, reason=problem), run=run, loop=loop_name, task=task)
        rec.refresh_projections()
        return False, f"approval refused: {problem}"
    assert loop is not None
    assert isinstance(tree, str)
    assert isinstance(base, str)
    assert isinstance(branch, str)
    if item.approved is None:  # approved before a crash: the approval stands, once
        rec.record(
            Approved(id=item.id, sha=None, action=ACTION, note=note),
            run=run,
            loop=loop_name,
            task=task,
        )
    given = ev.get("author")
    who: list[Any] = given if isinstance(given, list) and len(given) == 2 else ["loopctl", ""]
    try:
        sha = git.commit_snapshot(
            root,
            branch,
            tree,
            base,
            str(ev.get("message") or f"loopctl: {loop_name}/{task}"),
            author_name=str(who[0]),
            author_email=str(who[1]) or "loopctl@localhost",
            date=git_date(item.opened),  # the same commit object if approved again after a crash
            expect=git.branch_head(root, branch),
        )
    except LoopctlError as exc:
        rec.record(
            ApprovalRefused(id=item.id, reason=f"commit failed: {exc}"),
            run=run,
            loop=loop_name,
            task=task,
        )
        rec.refresh_projections()
        return False, f"approved {item.id}, but the commit failed: {exc}"
    committed = ctx_events(rec.log.read(), run, task, EventType.COMMIT_CREATED)
    if not any(read(CommitCreated, e).sha == sha for e in committed):
        rec.record(
            CommitCreated(sha=sha, branch=branch, tree=tree, parent=base),
            run=run,
            loop=loop_name,
            task=task,
        )
    rec.record(
        InboxClosed(id=item.id, resolution="approved", reason=note),
        run=run,
        loop=loop_name,
        task=task,
        keep=("reason",),
    )
    _release(root, item.id)  # the branch holds the tree now
    result = delivery.deliver_task(
        rec,
        loop,
        run,
        task,
        commit=sha,
        branch=branch,
        base_sha=base,
        base_ref=ev.get("base_ref") if isinstance(ev.get("base_ref"), str) else None,
        worktree=None,
    )
    status = result.status
    reason = result.reason or f"approved out of scope; committed {sha[:12]} on {branch}"
    end_task(
        rec,
        Ending(run, loop_name, task, status, reason, sha, outcome=delivered_outcome(status)),
        None,
    )
    return True, f"approved {item.id}: committed {sha[:12]} on {branch}; {reason}"


def _made_here(root: Path, head: str, tree: str, base: str) -> bool:
    """Whether `head` is this item's own commit, made by an approval a crash interrupted: the
    held tree, straight on the base (the commit is the same object when made again)."""
    try:
        return git.tree_of_commit(root, head) == tree and git.commits_between(root, base, head) == [
            head
        ]
    except LoopctlError:
        return False


def reject(rec: Recorder, item: InboxItem, reason: str | None) -> str:
    """Close the item and end the task `rejected`: the held work is never committed."""
    run, loop_name, task = item.run or "", item.loop or "", item.task or ""
    why = reason or "no reason given"
    rec.record(
        InboxClosed(id=item.id, resolution="rejected", reason=why),
        run=run,
        loop=loop_name,
        task=task,
        keep=("reason",),
    )
    _release(rec.paths.root, item.id)
    end_task(
        rec,
        Ending(
            run,
            loop_name,
            task,
            TaskStatus.REJECTED,
            f"rejected: {why} (the out-of-scope work was discarded)",
            outcome=Outcome.REJECTED,
        ),
        None,
    )
    return f"rejected {item.id}: nothing was committed"


def _hold(root: Path, item: str, tree: str) -> None:
    """Keep the held tree from git's gc while the item is open: approving may come weeks later."""
    try:
        git.hold_object(root, item, tree)
    except LoopctlError as exc:  # the item stands; only a gc weeks from now could take the tree
        logger.warning("could not keep the held snapshot %s of item %s: %s", tree[:12], item, exc)


def _release(root: Path, item: str) -> None:
    try:
        git.release_object(root, item)
    except LoopctlError as exc:  # a leftover ref keeps one tree; nothing else depends on it
        logger.warning("could not release the held snapshot of item %s: %s", item, exc)
