"""`make_sandbox`: the sandbox for one agent or check, from what this machine offers and the
paths loopctl chose; a private layer an agent could write into is refused."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from loopctl.egress import EgressPolicy
from loopctl.errors import ExitCode, LoopctlError, UsageError
from loopctl.limits import Limits
from loopctl.sandbox import cli_state, host
from loopctl.sandbox.git_admin import git_admin_paths
from loopctl.sandbox.places import expand, home_of, unique
from loopctl.sandbox.policy import Sandbox


class SandboxUnavailable(LoopctlError):
    """No sandbox can be set up here and `[sandbox] mode` requires one."""

    exit_code = ExitCode.NOT_MET


def make_sandbox(
    *,
    root: Path,
    worktree: Path,
    cli: str | None = None,
    writable: Sequence[str] = (),
    readable: Sequence[str] = (),
    egress: EgressPolicy | None = None,
    objects_layer: Path | None = None,
    cli_layer: Path | None = None,
    limits: Limits | None = None,
) -> Sandbox:
    """The sandbox for one agent or check in `worktree`; raises SandboxUnavailable.

    `cli_layer` (the private copy of `cli`'s state) must lie outside every place the agent may
    write, `[sandbox] write` included: else the agent could plant in the copies of other loops
    and roles, or in what loopctl refreshes unconfined (UsageError).

    `objects_layer` must lie outside every place the agent may write: loopctl, unconfined,
    makes and cleans its folders after the turn, and must not do so through a link the agent
    planted there. The worktree and its git admin folder are refused here; the state folder's
    layer lies beside it (`engine.containment.objects_layer`). A folder the agent file opens
    with `[sandbox] write` is the user's choice; the clean-up follows no link even then."""
    mechanism, program, why = host.probe()
    if mechanism is None or program is None:
        raise SandboxUnavailable(
            f'no sandbox for agents: {why}; or set `[sandbox] mode = "off"` in'
            " .loop/config.toml to run agents unconfined (not recommended)"
        )
    admin, pinned, objects = git_admin_paths(worktree) if worktree != root else ((), (), None)
    if worktree == root:
        # In place the agent works in the checkout, whose git folder is read-only to it: there
        # is no object store to overlay, so no layer (one under .loop/ would be refused below).
        objects_layer = None
    if objects_layer is not None:
        layer = Path(os.path.abspath(objects_layer))
        for place in (worktree, *admin):
            if layer.is_relative_to(os.path.abspath(place)):
                raise ValueError(f"the object layer {layer} is inside writable {place}")
    if cli_layer is not None:
        _refuse_writable_layer(Path(os.path.abspath(cli_layer)), (worktree, *admin), writable)
    return Sandbox(
        mechanism=mechanism,
        program=program,
        root=root,
        worktree=worktree,
        git_admin=admin,
        git_pinned=pinned,
        git_objects=objects,
        objects_layer=objects_layer,
        cli_layer=cli_layer,
        writable=tuple(writable),
        readable=tuple(readable),
        cli=cli,
        egress=egress if egress is not None else EgressPolicy(),
        limits=limits,
        nested_userns=cli_state.nests_sandbox(cli),
        disable_userns=mechanism == "bwrap" and host.knows_disable_userns(program),
        extra_visible=tuple(
            unique(
                [
                    Path(sys.prefix),
                    Path(sys.base_prefix),
                    Path(sys.executable).parent,
                    # loopctl itself (an editable install lives beside its checkout, not in
                    # the venv) and whatever else its interpreter imports from.
                    Path(__file__).resolve().parents[2],
                    *(Path(entry) for entry in sys.path if entry.startswith("/")),
                ]
            )
        ),
    )


def _refuse_writable_layer(layer: Path, places: Sequence[Path], declared: Sequence[str]) -> None:
    home = home_of(os.environ)
    for place in [*places, *(expand(p, os.environ, home) for p in declared)]:
        if layer.is_relative_to(os.path.abspath(place)):
            raise UsageError(
                f"the agent may write {place}, which holds {layer}, loopctl's private copy of"
                " its CLI's state: name a narrower folder in the agent's `[sandbox] write`"
            )
