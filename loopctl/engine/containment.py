"""Containment (docs/INVARIANTS.md, invariant 11): the sandbox each agent turn and check runs in."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl import git, sandbox
from loopctl.checks.runners import REPORTERS
from loopctl.definitions import Agent
from loopctl.definitions.loops import CheckerSpec
from loopctl.definitions.sandbox import SandboxMode
from loopctl.egress import EgressPolicy, NetworkMode
from loopctl.engine.context import RunContext
from loopctl.engine.egress_policy import agent_policy, check_policy
from loopctl.errors import GitError
from loopctl.journal.recorder import Recorder
from loopctl.journal.schema import NetworkOpen, NetworkRefused, SandboxNote
from loopctl.paths import cache_home, repo_slug
from loopctl.worktrees import Workspace

if TYPE_CHECKING:
    from loopctl.sandbox import Sandbox


def sandbox_preflight(rec: Recorder) -> None:
    """Refuse before any worktree exists when agents cannot be confined and must be."""

    sandbox.harden_self()
    if rec.project.config.sandbox is SandboxMode.REQUIRED:
        mechanism, _, why = sandbox.probe()
        if mechanism is None:
            raise sandbox.SandboxUnavailable(
                f'no sandbox for agents: {why}; or set `[sandbox] mode = "off"` in'
                " .loop/config.toml to run agents unconfined (not recommended)"
            )


def record_sandbox(
    rec: Recorder,
    run_id: str,
    loop: str,
    agents: Sequence[Agent | None] = (),
    checker: CheckerSpec | None = None,
) -> None:
    """Note what confines this run's agents (once a run, before its tasks are listed), and
    each of `agents` (and the checks) that opted out of the network namespace."""

    if rec.project.config.sandbox is SandboxMode.OFF:
        rec.record(SandboxNote(mode="off"), run=run_id, loop=loop)
        return
    opened = {a.name for a in agents if a is not None and a.sandbox.network is NetworkMode.OPEN}
    for name in sorted(opened):
        rec.record(NetworkOpen(mode="open", agent=name), run=run_id, loop=loop)
    if checker is not None and checker.network is NetworkMode.OPEN:
        rec.record(NetworkOpen(mode="open", check=True), run=run_id, loop=loop)
    mechanism, program, _ = sandbox.probe()
    confined = SandboxNote(mode="required", mechanism=mechanism, program=program)
    rec.record(confined, run=run_id, loop=loop, keep=("mechanism", "program"))


def sandbox_for(
    ctx: RunContext,
    workspace: Workspace,
    agent: Agent | None,
    state_dir: Path | None = None,
    role: str = "maker",
    env: Mapping[str, str] | None = None,
    *,
    setup: bool = False,
    report: Path | None = None,
) -> Sandbox | None:
    """The confinement for one agent turn (`agent`, as `role`, lent `env`), one check command
    (None), or (`setup`) one `[worktree] setup` command."""

    if ctx.project.config.sandbox is SandboxMode.OFF:
        return None
    rules = agent.sandbox if agent is not None else None
    backend = agent.backend.value if agent is not None else ""
    cli = backend if sandbox.cli_state.has_state(backend) else None
    return sandbox.make_sandbox(
        root=ctx.paths.root,
        worktree=workspace.path,
        cli=cli,
        # An armed check's report folder (checks.runners) is writable to it, and loopctl's
        # reporter programs readable wherever loopctl is installed (under /tmp too).
        writable=(
            *(rules.write if rules else ()),
            *([str(state_dir)] if state_dir else []),
            *([str(report)] if report else []),
        ),
        readable=(*(rules.read if rules else ()), *([str(REPORTERS)] if report else [])),
        objects_layer=objects_layer(state_dir) if state_dir else None,
        cli_layer=cli_layer(ctx, role) if cli else None,
        egress=egress_for(ctx, agent, env or {}, setup=setup),
        # A check runs the maker's code: it gets the maker's limits.
        limits=(agent or ctx.maker).sandbox.limits,
    )


def egress_for(
    ctx: RunContext, agent: Agent | None, env: Mapping[str, str], *, setup: bool = False
) -> EgressPolicy:
    """What an agent turn (lent `env`) or a check (`agent` None) may reach (issue 25).

    `[worktree] setup` keeps the host's network: it installs dependencies from the committed
    files, before any agent has run in the worktree."""

    if setup:
        return EgressPolicy(mode=NetworkMode.OPEN)
    if agent is None:
        return check_policy(ctx.loop.checker)
    return agent_policy(agent, env)


def record_refused(
    ctx: RunContext,
    task: str,
    box: Sandbox | None,
    *,
    attempt: int | None = None,
    role: str | None = None,
    agent: str | None = None,
    check: bool = False,
    command: Sequence[str] | None = None,
) -> None:
    """A `network_refused` note naming each host:port the proxy refused during one agent
    turn or check (with its attempt, role and agent, or check and command), when there was any."""
    refused = tuple(dict.fromkeys(box.refused)) if box is not None else ()
    if refused:
        where = NetworkRefused(
            hosts=refused,
            attempt=attempt,
            role=role,
            agent=agent,
            check=check,
            command=tuple(command) if command is not None else None,
        )
        ctx.record(task, where)


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
