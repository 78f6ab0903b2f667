"""A private copy of a CLI's state (`cli_layer`) that the agent could write into is refused.

loopctl refreshes that copy unconfined after each turn and binds it into other loops' and
roles' sandboxes: a copy inside the worktree, the worktree's git admin folder or a folder the
agent file opens with `[sandbox] write` would let the agent plant hooks or settings there.
Kills, in loopctl/sandbox/build.py (bench/mutation.py, sandbox-build): the refusal turned off
or dropped, and the worktree, the admin folder or the declared folders dropped from what it
checks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.outside_tmp import Place
from support.repos import git, make_repo

from loopctl import sandbox
from loopctl.errors import UsageError


@pytest.fixture
def linked(place: Place) -> tuple[Path, Path, Path]:
    """A checkout, a linked worktree of it, and the worktree's git admin folder."""
    root = make_repo(place.base / "repo")
    worktree = place.base / "work"
    git(root, "worktree", "add", "-q", "-b", "loop/l/t", str(worktree))
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    return root, worktree, admin


def make(root: Path, worktree: Path, layer: Path, write: tuple[str, ...] = ()) -> sandbox.Sandbox:
    return sandbox.make_sandbox(
        root=root, worktree=worktree, cli="claude", cli_layer=layer, writable=write
    )


@pytest.mark.parametrize("inside", ["worktree", "admin"])
def test_a_layer_inside_what_the_agent_writes_is_refused(
    linked: tuple[Path, Path, Path], inside: str
) -> None:
    root, worktree, admin = linked
    folder = worktree if inside == "worktree" else admin
    with pytest.raises(UsageError, match="private copy of its CLI's state"):
        make(root, worktree, folder / "layer" / "claude")


def test_a_layer_inside_a_declared_write_folder_is_refused(
    linked: tuple[Path, Path, Path], place: Place
) -> None:
    root, worktree, _ = linked
    shared = place.base / "shared"
    shared.mkdir()
    with pytest.raises(UsageError, match=f"the agent may write {shared}"):
        make(root, worktree, shared / "layer", write=(str(shared),))


def test_a_layer_beside_them_is_taken(linked: tuple[Path, Path, Path], place: Place) -> None:
    """The canary: the same layer outside every writable place makes a sandbox."""
    root, worktree, _ = linked
    shared = place.base / "shared"
    shared.mkdir()
    box = make(root, worktree, place.base / "layers" / "claude", write=(str(shared),))
    assert box.cli_layer == place.base / "layers" / "claude"
