"""loopctl's git works on the task's worktree whatever its admin files say (issue 24, item 4).

A linked worktree's `config.worktree`, in its agent-writable admin folder, is read once the
repository has `extensions.worktreeConfig`; a `core.worktree` there (or in the shared config)
points git at another tree. Each test first shows with plain git that the planted setting is
live, then that loopctl's own calls name the worktree itself, and that a call which would still
land on another tree (no `.git` file, so git finds the repository around the worktree) is
refused before it reads or changes anything.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
from support import repos

from loopctl import git, sandbox
from loopctl.errors import ForeignWorkTree

run_git = functools.partial(repos.git, plain=True)
NOTES = "API_KEY=sk-fake-0451\n"


@pytest.fixture
def main(tmp_path: Path) -> Path:
    """A repository with worktree config on, an unchecked edit and an untracked secret."""
    path = tmp_path / "main"
    path.mkdir()
    run_git(path, "init", "-q", "-b", "main")
    run_git(path, "config", "extensions.worktreeConfig", "true")
    (path / "calc.py").write_text("ok\n")
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "init")
    (path / "calc.py").write_text("broken\n")
    (path / "notes.txt").write_text(NOTES)
    return path


def linked(main: Path, tmp_path: Path, where: Path | None = None) -> Path:
    worktree = where or tmp_path / "wt"
    run_git(main, "worktree", "add", "-q", "-b", "loop/x/t", str(worktree))
    (worktree / "calc.py").write_text("fixed\n")
    return worktree


def plant(main: Path, worktree: Path, place: str, value: str) -> None:
    """core.worktree = value, where an agent (or an unconfined one) could write it."""
    admin = Path(run_git(worktree, "rev-parse", "--absolute-git-dir").strip())
    if place == "config.worktree":
        (admin / "config.worktree").write_text(f"[core]\n\tworktree = {value}\n")
    else:
        run_git(main, "config", "core.worktree", value)


@pytest.mark.parametrize("place", ["config.worktree", "common config"])
@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_loopctls_git_takes_the_worktree_itself(
    main: Path, tmp_path: Path, place: str, form: str
) -> None:
    worktree = linked(main, tmp_path)
    admin = Path(run_git(worktree, "rev-parse", "--absolute-git-dir").strip())
    value = str(main) if form == "absolute" else os.path.relpath(main, admin)
    plant(main, worktree, place, value)
    # The canary: plain git in the worktree works on the main checkout.
    assert Path(run_git(worktree, "rev-parse", "--show-toplevel").strip()) == main
    assert "notes.txt" in run_git(worktree, "status", "--porcelain")

    assert git.toplevel(worktree) == worktree
    base = git.head_sha(worktree)
    tree = git.snapshot_tree(worktree, base)
    assert run_git(main, "ls-tree", "--full-tree", "--name-only", tree).split() == ["calc.py"]
    assert run_git(main, "cat-file", "blob", f"{tree}:calc.py") == "fixed\n"
    assert git.changed_paths(worktree, base) == ["calc.py"]
    git.clean_worktree(worktree, [])
    git.reset_index(worktree, base)
    assert (main / "notes.txt").read_text() == NOTES
    assert (main / "calc.py").read_text() == "broken\n"


def test_a_tree_git_does_not_take_as_the_worktree_is_refused(main: Path, tmp_path: Path) -> None:
    """The worktree lies under a home kept in git; without its `.git` file, git run there
    works on the home's repository: nothing is snapshotted, cleaned, reset or switched."""
    home = tmp_path / "home"
    home.mkdir()
    run_git(home, "init", "-q", "-b", "dotfiles")
    (home / ".profile").write_text("x\n")
    run_git(home, "add", "-A")
    run_git(home, "commit", "-q", "-m", "dotfiles")
    (home / "notes.txt").write_text(NOTES)
    worktree = linked(main, tmp_path, home / "cache" / "wt")
    base = git.head_sha(worktree)
    (worktree / ".git").unlink()
    assert Path(run_git(worktree, "rev-parse", "--show-toplevel").strip()) == home

    for call in (
        lambda: git.snapshot_tree(worktree, base),
        lambda: git.clean_worktree(worktree, []),
        lambda: git.reset_index(worktree, base),
        lambda: git.switch_branch(worktree, "loop/x/t"),
        lambda: git.recycle_checkout(worktree, "loop/x/t", base, branch_is_new=False),
    ):
        with pytest.raises(ForeignWorkTree, match=f"git's working tree there is {home}"):
            call()
    assert (home / "notes.txt").read_text() == NOTES
    assert run_git(home, "symbolic-ref", "HEAD").strip() == "refs/heads/dotfiles"
    assert run_git(home, "status", "--porcelain").splitlines() == ["?? cache/", "?? notes.txt"]


def test_a_repository_inside_a_worktree_is_still_its_own(main: Path, tmp_path: Path) -> None:
    """Only the nearest `.git` file decides: a bare repository or a nested checkout inside a
    linked worktree keeps its own git dir and working tree, and loopctl can make one there."""
    worktree = linked(main, tmp_path)
    bare = worktree / "vendor.git"
    run_git(worktree, "init", "-q", "--bare", str(bare))
    nested = worktree / "vendor"
    nested.mkdir()
    git.git(["init", "-q", "-b", "main"], cwd=nested)
    assert git.git(["rev-parse", "--is-bare-repository"], cwd=bare).stdout.strip() == "true"
    assert git.toplevel(nested) == nested
    assert git.toplevel(worktree / "vendor") == nested


@pytest.mark.skipif(sandbox.probe()[0] != "bwrap", reason="no bwrap sandbox here")
def test_an_absent_config_worktree_is_pinned_as_an_empty_file(main: Path, tmp_path: Path) -> None:
    worktree = linked(main, tmp_path)
    admin = Path(run_git(worktree, "rev-parse", "--absolute-git-dir").strip())
    assert not (admin / "config.worktree").exists()
    box = sandbox.make_sandbox(root=main, worktree=worktree)
    args = box.bwrap_args(worktree, {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, "/bin/sh")
    pinned = str(admin / "config.worktree")
    assert (admin / "config.worktree").read_text() == ""
    assert any(args[i : i + 3] == ["--ro-bind", pinned, pinned] for i in range(len(args)))


@pytest.mark.skipif(sandbox.probe()[0] != "bwrap", reason="no bwrap sandbox here")
def test_a_planted_link_is_not_followed_to_make_the_stand_in(main: Path, tmp_path: Path) -> None:
    worktree = linked(main, tmp_path)
    admin = Path(run_git(worktree, "rev-parse", "--absolute-git-dir").strip())
    target = tmp_path / "elsewhere" / "made-through-a-link"
    target.parent.mkdir()
    (admin / "config.worktree").symlink_to(target)
    box = sandbox.make_sandbox(root=main, worktree=worktree)
    box.bwrap_args(worktree, {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, "/bin/sh")
    assert not target.exists()
    assert (admin / "config.worktree").is_symlink()
