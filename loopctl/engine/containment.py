"""Containment (DESIGN §5 invariant 11): the sandbox each agent turn and check runs in."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl import git
from loopctl.definitions import Agent
from loopctl.definitions.sandbox import SandboxMode
from loopctl.engine.context import RunContext
from loopctl.errors import GitError
from loopctl.journal.events import EventType
from loopctl.journal.recorder import Recorder
from loopctl.paths import cache_home, repo_slug
from loopctl.worktrees import Workspace

if TYPE_CHECKING:
    from loopctl.sandbox import Sandbox


def sandbox_preflight(rec: Recorder) -> None:
    """Refuse before any worktree exists when agents cannot be confined and must be."""
    from loopctl import sandbox

    sandbox.harden_self()
    if rec.project.config.sandbox is SandboxMode.REQUIRED:
        mechanism, _, why = sandbox.probe()
        if mechanism is None:
            raise sandbox.SandboxUnavailable(
                f'no sandbox for agents: {why}; or set `[sandbox] mode = "off"` in'
                " .loop/config.toml to run agents unconfined (not recommended)"
            )


def record_sandbox(rec: Recorder, run_id: str, loop: str) -> None:
    """Note what confines this run's agents (once a run, before its tasks are listed)."""
    from loopctl import sandbox

    if rec.project.config.sandbox is SandboxMode.OFF:
        rec.emit(EventType.NOTE, run=run_id, loop=loop, what="sandbox", mode="off")
        return
    mechanism, program, _ = sandbox.probe()
    rec.emit(
        EventType.NOTE,
        run=run_id,
        loop=loop,
        what="sandbox",
        mode="required",
        mechanism=mechanism,
        program=program,
    )


def sandbox_for(
    ctx: RunContext,
    workspace: Workspace,
    agent: Agent | None,
    state_dir: Path | None = None,
    role: str = "maker",
) -> Sandbox | None:
    """The confinement for one agent turn (`agent`, as `role`) or one check command (None)."""
    from loopctl import sandbox

    if ctx.project.config.sandbox is SandboxMode.OFF:
        return None
    rules = agent.sandbox if agent is not None else None
    backend = agent.backend.value if agent is not None else ""
    cli = backend if backend in sandbox.CLI_STATE else None
    return sandbox.make_sandbox(
        root=ctx.paths.root,
        worktree=workspace.path,
        cli=cli,
        writable=(*(rules.write if rules else ()), *([str(state_dir)] if state_dir else [])),
        readable=rules.read if rules else (),
        objects_layer=objects_layer(state_dir) if state_dir else None,
        cli_layer=cli_layer(ctx, role) if cli else None,
        network=rules.network if rules else True,
        # A check runs the maker's code: it gets the maker's limits.
        limits=(agent or ctx.maker).sandbox.limits,
    )


def cli_layer(ctx: RunContext, role: str) -> Path:
    """Where this loop keeps `role`'s private copy of its CLI's state, across attempts and runs
    (the sessions it resumes are there): in loopctl's cache, outside the checkout, the worktrees
    and every other loop's and role's copy (invariant 11)."""
    return cache_home() / "cli-state" / repo_slug(ctx.paths.root) / ctx.loop.name / role


def objects_layer(state_dir: Path) -> Path:
    """The turn's private object layer: beside its state folder, never inside it. The agent
    writes its state folder; loopctl makes and cleans the layer's folders unconfined after the
    turn, which must not happen through a link the agent left there (invariant 11)."""
    return state_dir.with_name(f"{state_dir.name}.git-objects")


def forget_private_objects(rec: Recorder, workspace: Workspace) -> None:
    """Point the worktree's index back at objects the repository holds.

    What the agent staged went into its turn's private object layer, which loopctl's own
    git does not read; loopctl snapshots the files themselves, never that index.
    """
    head = git.branch_head(rec.paths.root, workspace.branch) or workspace.base_sha
    with contextlib.suppress(GitError):
        git.reset_index(workspace.path, head)
