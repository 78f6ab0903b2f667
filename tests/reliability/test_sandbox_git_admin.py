"""A linked worktree's `.git` pointer opens only the admin folder it names as `gitdir:`
(loopctl/sandbox/git_admin.py), shown by attacks from a real confined process (issue 27).

Each test runs tests/programs/tries_paths.py in the sandbox loopctl builds
(tests/programs/confined_run.py, a process of the account under test), with the checkout and
HOME under /tmp and outside it (support.outside_tmp); every verdict is read on the host. Each
test names the one-line mutants of git_admin.py it kills.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.accounts import give_to
from support.confined import tries
from support.outside_tmp import Place
from support.repos import git, make_repo

from loopctl import process, sandbox

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def project(base: Path) -> tuple[Path, Path, Path]:
    """A checkout under `base`, a linked worktree of it as loopctl makes them, and its admin
    folder."""
    checkout = make_repo(base / "checkout")
    worktree = base / "worktrees" / "t-1"
    git(checkout, "worktree", "add", "-q", "-b", "loop/t/1", str(worktree))
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    return checkout, worktree, admin


def shape(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_git_file_that_is_no_gitdir_pointer_opens_nothing(place: Place) -> None:
    """Kills the `gitdir:` check turned off (or its prefix emptied) and an element dropped from
    the empty answer it gives: a worktree's `.git` file that names the checkout's own git
    folder without the `gitdir:` git writes would make that folder writable as the worktree's
    admin folder (its config, its hooks); it must open nothing."""
    checkout, worktree, _admin = project(place.base)
    (worktree / ".git").write_text(f"{checkout / '.git'}\n")
    dot_git = checkout / ".git"
    before = shape(dot_git)

    seen = tries(
        None, checkout, worktree, place.home,
        write=[dot_git / "config", dot_git / "hooks" / "post-checkout", worktree / "ok"],
    )  # fmt: skip

    assert seen["write"][str(worktree / "ok")] == "written"  # the probe does write
    assert seen["write"][str(dot_git / "config")] != "written"
    assert seen["write"][str(dot_git / "hooks" / "post-checkout")] != "written"
    assert shape(dot_git) == before  # nothing written, nothing made (no stand-in either)


def test_a_git_file_loopctl_cannot_read_still_gives_a_sandbox_that_opens_nothing(
    place: Place,
) -> None:
    """Kills an element dropped from the empty answer for a `.git` file that cannot be read:
    as an account that cannot read its worktree's pointer (a file left root's, 0600) loopctl
    still starts the agent, and opens no admin folder for it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to hand the worktree to `nobody`")
    checkout, worktree, admin = project(place.base)
    give_to("nobody", place.base)
    os.chown(worktree / ".git", 0, 0)
    (worktree / ".git").chmod(0o600)

    seen = tries("nobody", checkout, worktree, place.home, write=[admin / "index", worktree / "ok"])

    assert seen["write"][str(worktree / "ok")] == "written"
    assert seen["write"][str(admin / "index")] != "written"


def test_what_the_agent_stages_lands_in_its_worktrees_own_index(place: Place) -> None:
    """Kills the object store's path emptied (`common / ""`): the overlay then covers the
    whole git folder, the worktree's admin folder included, and what the agent stages with
    `git add` never reaches its worktree's index on the host (only the object it wrote stays
    private, in the turn's layer)."""
    checkout, worktree, _admin = project(place.base)
    layer = place.base / "layer"
    box = sandbox.make_sandbox(root=checkout, worktree=worktree, objects_layer=layer)
    (worktree / "new.txt").write_text("the agent's work\n")

    env = {"HOME": str(place.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    done = process.run(["git", "add", "new.txt"], cwd=worktree, env=env, timeout=120, sandbox=box)

    assert done.ok, done.output_tail()
    assert git(worktree, "ls-files", "--cached", "new.txt").split() == ["new.txt"]
    box.discard_scratch()
