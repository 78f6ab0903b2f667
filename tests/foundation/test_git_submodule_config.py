"""The submodules' own config read as git's child reads it (invariant 8: no driver a submodule's
own config names runs in loopctl's git).

`git add -A` runs `git status` inside each populated submodule, with GIT_DIR=.git and the user's
environment, and that child reads the submodule's own config (agent-writable). loopctl lists that
config first, to blank the drivers it names (git.neutralise._submodule_config_keys): listed in
any other way (another working tree, no HOME, git's discovery and its ownership check), it misses
keys the child then obeys. Each test plants a filter where only a faithful listing finds it, and
checks that the filter never ran and that the trap is live for plain git.

Each test names the mutants of loopctl/git/neutralise.py it kills (bench/mutation.py,
git-submodules). Repositories live under /tmp and outside it (`place`).
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import repos
from support.accounts import give_to
from support.outside_tmp import Place

from loopctl import git as lgit
from loopctl.git import neutralise

# git for the test's own set-up, as a user runs it (planted traps live).
plain = functools.partial(repos.git, plain=True)

_OLD_NS = 1_600_000_000_000_000_000  # an mtime long before any index: git must read the file


@dataclass(frozen=True)
class Scene:
    repo: Path
    home: Path
    marker: Path

    def filter_program(self) -> str:
        """A clean filter that passes content through and records that it ran."""
        path = self.repo.parent / "clean-filter"
        path.write_text(f"#!/bin/sh\necho ran >> '{self.marker}'\nexec cat\n")
        path.chmod(0o755)
        return str(path)

    def ran(self) -> bool:
        return self.marker.exists()


@pytest.fixture
def scene(place: Place) -> Scene:
    repo = repos.make_repo(place.base / "repo")
    return Scene(repo, place.home, place.base / "ran.txt")


def nested_library(path: Path) -> str:
    """A repository at `path` whose .txt files go through filter `evil`; returns its HEAD."""
    repos.make_repo(path)
    (path / ".gitattributes").write_text("*.txt filter=evil\n")
    (path / "data.txt").write_text("data\n")
    repos.commit_all(path, "data")
    return plain(path, "rev-parse", "HEAD").strip()


def looks_modified(path: Path, step: int = 0) -> None:
    os.utime(path, ns=(_OLD_NS + step * 10**9, _OLD_NS + step * 10**9))


def commit_the_work(scene: Scene, worktree: Path, call: str = "commit_all") -> list[str]:
    """README.md changed beside a submodule `lib` that looks modified: loopctl commits it
    (`commit_all`) or snapshots it (`snapshot_tree`, in a private index); the paths changed."""
    base = plain(worktree, "rev-parse", "HEAD").strip()
    looks_modified(worktree / "lib" / "data.txt")
    (worktree / "README.md").write_text("changed\n")
    if call == "snapshot_tree":
        return lgit.tree_changes(worktree, base, lgit.snapshot_tree(worktree, base))
    made = lgit.commit_all(worktree, "work", author_name="Bot", author_email="b@x")
    assert made is not None
    return lgit.tree_changes(worktree, base, made)


calls = pytest.mark.parametrize("call", ["commit_all", "snapshot_tree"])


def the_trap_is_live(scene: Scene, worktree: Path) -> None:
    """Plain git's `add -A` asks the submodule, which runs the planted filter."""
    assert not scene.ran()
    looks_modified(worktree / "lib" / "data.txt", step=1)
    subprocess.run(["git", "add", "-A"], cwd=worktree, capture_output=True, check=False)
    assert scene.ran()


@calls
def test_a_filter_a_submodules_config_includes_from_the_home_never_runs(
    scene: Scene, call: str
) -> None:
    """The submodule's config, and the superproject's, include a file from the user's home
    (`include.path = ~/...`, as users share settings), and the submodule's names the filter:
    git's child reads it with the user's HOME, and so must loopctl's listing. Kills
    `_base_env()` dropped from the submodule's environment (`child_env`) or from the
    superproject's in git.neutralise._submodule_config_keys (git cannot expand `~` without
    HOME and fails)."""
    lib = scene.repo / "lib"
    nested_library(lib)
    repos.commit_all(scene.repo, "the library")
    (scene.home / "shared.gitconfig").write_text(
        f'[filter "evil"]\n\tclean = {scene.filter_program()}\n'
    )
    (scene.home / "user.gitconfig").write_text("[core]\n\tautocrlf = false\n")
    plain(lib, "config", "include.path", "~/shared.gitconfig")
    plain(scene.repo, "config", "include.path", "~/user.gitconfig")
    changed = commit_the_work(scene, scene.repo, call)
    assert changed == ["README.md"]
    the_trap_is_live(scene, scene.repo)


@calls
def test_a_submodule_the_agents_account_owns_is_read_for_its_drivers(
    scene: Scene, call: str
) -> None:
    """The nested repository is the agent's, owned by its account (here `nobody`). git runs
    its status there with GIT_DIR=.git, which skips the ownership check (safe.directory); a
    listing left to git's discovery would see no repository there, find no key, and blank
    nothing. Kills `"GIT_DIR": ".git"` dropped, renamed or emptied in
    git.neutralise._submodule_config_keys."""
    if os.geteuid() != 0:
        pytest.skip("needs root: another account must own the submodule")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("needs the account `nobody`")
    lib = scene.repo / "lib"
    nested_library(lib)
    repos.commit_all(scene.repo, "the library")
    plain(lib, "config", "filter.evil.clean", scene.filter_program())
    give_to("nobody", lib)
    # git's discovery refuses the folder: no repository, so no key of its own.
    assert "filter.evil" not in plain(lib, "config", "--list")
    changed = commit_the_work(scene, scene.repo, call)
    assert changed == ["README.md"]
    the_trap_is_live(scene, scene.repo)


@calls
def test_a_linked_worktree_pointed_elsewhere_still_has_its_own_submodules_read(
    scene: Scene, place: Place, call: str
) -> None:
    """The agent turned on worktree config and pointed its linked worktree's core.worktree at
    the main checkout, whose `lib` is clean: gitlinks looked up there would miss the worktree's
    own `lib`, whose config names the filter, and which loopctl's `git add` (run in the
    worktree itself) asks. Kills `_work_tree_env(cwd)` dropped from the superproject's
    environment in git.neutralise._submodule_config_keys."""
    lib_head = nested_library(scene.repo / "lib")
    repos.commit_all(scene.repo, "the library")
    worktree = place.base / "wt"
    plain(scene.repo, "worktree", "add", "-q", "-b", "loop/l/t", str(worktree))
    # The worktree's own copy of the library, at the same commit, with the filter.
    plain(worktree, "clone", "-q", str(scene.repo / "lib"), "lib")
    assert plain(worktree / "lib", "rev-parse", "HEAD").strip() == lib_head
    plain(worktree / "lib", "config", "filter.evil.clean", scene.filter_program())
    plain(scene.repo, "config", "extensions.worktreeConfig", "true")
    plain(worktree, "config", "--worktree", "core.worktree", str(scene.repo))
    # The trap is set: plain git in the worktree takes the main checkout as its files.
    assert Path(plain(worktree, "rev-parse", "--show-toplevel").strip()) == scene.repo
    changed = commit_the_work(scene, worktree, call)
    assert changed == ["README.md"]
    assert (scene.repo / "README.md").read_text() == "hello\n"
    # The trap is live for git run on the worktree's own files.
    assert not scene.ran()
    looks_modified(worktree / "lib" / "data.txt", step=1)
    env = {**os.environ, "GIT_WORK_TREE": str(worktree)}
    subprocess.run(["git", "add", "-A"], cwd=worktree, env=env, capture_output=True, check=False)
    assert scene.ran()


@calls
def test_a_submodule_the_agent_replaced_by_a_file_is_committed_as_that_file(
    scene: Scene, call: str
) -> None:
    """The agent removed the submodule and wrote a file of the same name: the gitlink is still
    in the index, its "folder" is a file with no `.git` inside, and git asks it nothing. Kills
    the `.git` of the presence check emptied (`folder / ""`: the path itself, which exists) in
    git.neutralise._submodule_config_keys (git cannot run in a file)."""
    nested_library(scene.repo / "lib")
    repos.commit_all(scene.repo, "the library")
    base = plain(scene.repo, "rev-parse", "HEAD").strip()
    shutil.rmtree(scene.repo / "lib")
    (scene.repo / "lib").write_text("a plain file now\n")
    if call == "snapshot_tree":
        made = lgit.snapshot_tree(scene.repo, base)
    else:
        committed = lgit.commit_all(scene.repo, "work", author_name="Bot", author_email="b@x")
        assert committed is not None
        made = committed
    assert lgit.tree_changes(scene.repo, base, made) == ["lib"]
    assert plain(scene.repo, "cat-file", "-p", f"{made}:lib") == "a plain file now\n"


def test_git_runs_where_there_is_no_working_tree(scene: Scene) -> None:
    """A bare repository (a mirror, a remote on disk) and a folder outside any repository
    (where a clone is made) have no working tree, so no gitlink git could ask: loopctl's
    content commands run there as in a checkout. Nor does a repository's own git dir, whose
    index git lists there although it holds gitlinks. Kills the failed `ls-files` or
    `rev-parse --show-toplevel` check turned off, or either's "no working tree" case, in
    git.neutralise._gitlink_folders (the GitError fails the clone, the git dir's diff and the
    bare repository's reads)."""
    nested_library(scene.repo / "lib")
    repos.commit_all(scene.repo, "the library")
    base = plain(scene.repo, "rev-parse", "HEAD~1").strip()
    head = plain(scene.repo, "rev-parse", "HEAD").strip()
    outside = scene.repo.parent / "clones"
    outside.mkdir()
    assert not repos.git_succeeds(outside, "rev-parse", "--git-dir")  # no repository here
    lgit.git(["clone", "-q", "--bare", "--", str(scene.repo), "mirror.git"], cwd=outside)
    bare = outside / "mirror.git"
    assert lgit.tree_changes(bare, base, head) == ["lib"]
    assert "160000" in plain(scene.repo / ".git", "ls-files", "--stage")
    assert lgit.tree_changes(scene.repo / ".git", base, head) == ["lib"]
    blob = lgit.write_blob(bare, "kept\n")
    assert plain(bare, "cat-file", "blob", blob) == "kept\n"


def test_a_submodule_that_links_back_to_its_superproject_is_read_once(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent gave the submodule a gitlink `up` of its own and made that folder a link to
    the superproject: following gitlinks from `lib` leads back to the repository itself, a
    cycle. loopctl's walk reads each repository once and the work is committed. Kills
    `seen.add(folder)` dropped in git.neutralise._submodule_config_keys: the walk would go
    round the cycle for ever (here a walk longer than the cycle fails the test at once)."""
    lib = scene.repo / "lib"
    lib_head = nested_library(lib)
    repos.commit_all(scene.repo, "the library")
    plain(lib, "update-index", "--add", "--cacheinfo", f"160000,{lib_head},up")
    (lib / "up").symlink_to("..")
    walks: list[list[str]] = []
    walk, listed = neutralise._submodule_config_keys, neutralise._gitlink_folders

    def walked(cwd: Path, index: str | None) -> set[str]:
        walks.append([])
        return walk(cwd, index)

    def counted(cwd: Path, env: dict[str, str], index: str | None) -> list[Path]:
        walks[-1].append(os.path.realpath(cwd))
        assert len(walks[-1]) <= 3, f"the submodules' walk went round: {walks[-1]}"
        return listed(cwd, env, index)

    monkeypatch.setattr(neutralise, "_submodule_config_keys", walked)
    monkeypatch.setattr(neutralise, "_gitlink_folders", counted)
    changed = commit_the_work(scene, scene.repo)
    assert changed == ["README.md"]
    # The superproject's gitlinks, then lib's, then the superproject's again as `up`: there the
    # walk finds `lib` already read and ends.
    here, sub = os.path.realpath(scene.repo), os.path.realpath(lib)
    assert walks
    assert all(one == [here, sub, here] for one in walks), walks
