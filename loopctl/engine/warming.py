"""Warm workspaces in the engine: take a task's worktree from the loop's pool, decide its setup
and record it ready (`delivery.ending` parks it again when the task lets it go).

The mechanism is in foundation modules (`worktree_pool`, `seeds`, `warm`); this module only
wires it to a run: which loop settings apply, what the log records (`workspace_ready` and
`setup_decision` notes, with the time each saved), and where the engine's own steps run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopctl import node_links, warm, worktree_pool
from loopctl.engine.context import RunContext
from loopctl.journal.schema import Note, WorkspaceReady
from loopctl.seeds import SeedStore
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import (
    Known,
    Workspace,
    branch_name,
    ensure_worktree,
    worktree_path,
)


@dataclass(frozen=True, slots=True)
class Taken:
    """A task's new worktree and how it came: recycled from the pool, or made fresh."""

    workspace: Workspace
    recycled: worktree_pool.Recycled | None
    preserve: tuple[str, ...]  # what the pool kept, and what setup is decided for
    fresh_s: float  # what a fresh worktree costs here (measured now, or when it was new)
    worktree_s: float  # what getting this one took
    started: float  # time.monotonic() when the task began to get its worktree


def seed_store(ctx: RunContext) -> SeedStore:
    """The repository's seeds, under loopctl's cache folder (no agent can write there)."""
    return SeedStore(ctx.paths.seeds_dir)


def take(
    ctx: RunContext, spec: TaskSpec, worktree_root: Path, base_sha: str, known: Known | None
) -> Taken:
    """The task's new worktree: a pooled one made fresh at `base_sha`, else `git worktree add`.
    The caller holds the worktree lock; `known` is what it has just asked git."""
    root = ctx.paths.root
    loop = ctx.loop
    started = time.monotonic()
    recycled = None
    # Detected from the main checkout: the pool must know what to keep before the tree is there.
    _, preserve = warm.resolve(root, loop.worktree.setup_inputs, loop.worktree.preserve)
    if loop.worktree.pool and worktree_pool.has_idle(worktree_root, loop.name):
        path = worktree_path(worktree_root, loop.name, spec.id)
        branch = branch_name(loop.name, spec.id)
        recycled = worktree_pool.acquire(
            root, worktree_root, loop.name, path, branch, base_sha, preserve, known
        )
        known = None  # trying a parked worktree may have discarded it: git is asked afresh
    if recycled is not None:
        workspace = recycled.workspace
    else:
        workspace = ensure_worktree(root, worktree_root, loop.name, spec.id, base_sha, known=known)
    took = time.monotonic() - started
    fresh_s = took if recycled is None else recycled.fresh_s
    return Taken(workspace, recycled, preserve, fresh_s, took, started)


def setup(
    ctx: RunContext,
    spec: TaskSpec,
    workspace: Workspace,
    taken: Taken,
    run_setup: Callable[[], None],
) -> None:
    """Run, skip or seed the loop's setup in `workspace`, then record the workspace ready."""
    loop = ctx.loop
    recycled, preserve = taken.recycled, taken.preserve
    inputs, _ = warm.resolve(workspace.path, loop.worktree.setup_inputs, ())
    outcome = warm.prepare(
        workspace.path,
        setup=loop.worktree.setup,
        inputs=inputs,
        preserve=preserve,
        store=seed_store(ctx),
        last_hash=recycled.inputs_hash if recycled is not None else None,
        intact=recycled is not None and not recycled.discarded,
        last_setup_s=recycled.setup_s if recycled is not None else 0.0,
        run_setup=run_setup,
    )
    # After setup (a node_modules it made is kept) and before the pool records the preserved
    # folders as ready (so a linked node_modules counts as intact, not as touched).
    linked = link_node_modules(ctx, spec, workspace)
    setup_s = outcome.setup_s if outcome.decision == warm.Decision.RAN else outcome.saved_s
    worktree_pool.mark_ready(
        ctx.paths.root,
        workspace.path.parent.parent,
        loop.name,
        workspace.path,
        preserve=preserve,
        inputs_hash=outcome.inputs_hash if outcome.reusable else None,
        setup_s=setup_s,
        fresh_s=taken.fresh_s,
        # What `acquire` measured still holds when nothing has run or been copied since.
        digests=recycled.digests
        if recycled is not None
        and not loop.worktree.copy
        and not linked
        and outcome.decision in (warm.Decision.SKIPPED, warm.Decision.NONE)
        else None,
    )
    # One note per task, once it is ready for its agent: how it came, what setup did, and the
    # time from the start of getting the worktree to here (what `bench/workspace_ready.py` reads).
    pool_saved = max(0.0, recycled.fresh_s - taken.worktree_s) if recycled is not None else 0.0
    setup_note: dict[str, Any] = {}
    if outcome.decision != warm.Decision.NONE:
        setup_note = {
            "decision": outcome.decision,
            "reason": outcome.reason,
            "inputs_hash": outcome.inputs_hash,
            "inputs": list(outcome.inputs),
            "preserve": list(outcome.preserve),
            "method": outcome.method,
            "published": outcome.published,
            "setup_s": round(outcome.setup_s, 4),
        }
    ctx.record(
        spec.id,
        WorkspaceReady(
            pool="hit" if recycled is not None else "miss",
            discarded=list(recycled.discarded) if recycled is not None else [],
            worktree_s=round(taken.worktree_s, 4),
            took_s=round(time.monotonic() - taken.started, 4),
            saved_s=round(pool_saved + outcome.saved_s, 4),
            extra=setup_note,
        ),
    )


def link_node_modules(ctx: RunContext, spec: TaskSpec, workspace: Workspace) -> bool:
    """Give the worktree its own `node_modules` linked to the checkout's, with its workspace
    packages its own (`loopctl.node_links`); noted when one was built."""
    try:
        built = node_links.link_node_modules(ctx.paths.root, workspace.path)
    except OSError as exc:  # a check then finds no packages, and says so; the run goes on
        ctx.record(spec.id, Note(what="node_modules_not_linked", reason=str(exc)), keep=("reason",))
        return False
    if built:
        links = sorted({f"{f.relative}/{link.name}" for f in built for link in f.workspace})
        folders = [folder.relative for folder in built]
        ctx.record(
            spec.id,
            Note(
                what="node_modules_linked",
                extra={"folders": folders, "workspace_links": links},
            ),
        )
    return bool(built)
