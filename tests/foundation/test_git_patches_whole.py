"""loopctl.git.patches against the configs and objects a real repository holds: a proposal's
patch is the same plain unified diff whatever the user's or the repository's git config says,
it is made from the two trees and nothing else, and applying it touches no index or file of
the repository (issue 27: every element of the patch options dropped in turn)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from support.accounts import as_user, give_to, runtime
from support.outside_tmp import under_tmp
from support.repos import commit_all, git

from loopctl import git as lgit
from loopctl.errors import ForeignWorkTree
from loopctl.git import runner as git_runner


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / ".loop" / "loops").mkdir(parents=True)
    (repo / ".loop" / "config.toml").write_text("version = 1\n")
    (repo / ".loop" / "loops" / "ci.toml").write_text('every = "5m"\n')
    commit_all(repo, "definitions")
    return repo


def _head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def _tree_of(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", f"{ref}^{{tree}}").strip()


def _users_config(text: str) -> None:
    # The account's own ~/.gitconfig: trusted, so loopctl's git never blanks it.
    Path(os.environ["GIT_CONFIG_GLOBAL"]).write_text(text)


def _program(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _change_config(project: Path) -> tuple[str, str]:
    base = _head(project)
    (project / ".loop" / "config.toml").write_text("version = 1\nallow = 2\n")
    commit_all(project, "change")
    return base, _head(project)


@pytest.mark.parametrize("habit", ["colour", "no prefix", "external diff", "textconv"])
def test_the_users_diff_habits_never_reach_a_proposals_patch(
    project: Path, tmp_path: Path, habit: str
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    if habit == "textconv":
        (project / ".gitattributes").write_text("*.toml diff=shout\n")
        commit_all(project, "attributes")
    base, head = _change_config(project)
    external = _program(tools, "difft", "echo EXTERNAL")
    shout = _program(tools, "up", "tr a-z A-Z < $1")
    _users_config(
        {
            "colour": "[color]\n\tui = always\n\tdiff = always\n",
            "no prefix": "[diff]\n\tnoprefix = true\n",
            "external diff": f"[diff]\n\texternal = {external}\n",
            "textconv": f'[diff "shout"]\n\ttextconv = {shout}\n',
        }[habit]
    )
    # The habit is real: the user's own `git diff` shows it.
    shown = git(project, "diff", base, head)
    assert shown != git(project, "-c", "diff.noprefix=false", "diff", "--no-color",
                        "--no-ext-diff", "--no-textconv", base, head)  # fmt: skip

    patch = lgit.tree_patch(project, base, head)

    assert "\x1b" not in patch
    assert "EXTERNAL" not in patch
    assert "ALLOW" not in patch
    assert "--- a/.loop/config.toml\n+++ b/.loop/config.toml\n" in patch
    assert lgit.apply_to_tree(project, base, patch) == _tree_of(project, head)


def test_a_renamed_definition_is_patched_as_the_file_removed_and_the_file_added(
    project: Path,
) -> None:
    base = _head(project)
    git(project, "mv", ".loop/loops/ci.toml", ".loop/loops/nightly.toml")
    commit_all(project, "rename")

    patch = lgit.tree_patch(project, base, _head(project))

    # Proposals name each file they change on a ---/+++ line: a pure rename has none.
    assert "--- a/.loop/loops/ci.toml\n+++ /dev/null\n" in patch
    assert "--- /dev/null\n+++ b/.loop/loops/nightly.toml\n" in patch
    assert lgit.apply_to_tree(project, base, patch) == _tree_of(project, "HEAD")


def test_the_same_change_gives_the_same_patch_whatever_the_abbreviation(project: Path) -> None:
    # A proposal is recorded once per patch digest: its text must not depend on config.
    base, head = _change_config(project)
    plain = lgit.tree_patch(project, base, head)
    git(project, "config", "core.abbrev", "9")
    assert lgit.tree_patch(project, base, head) == plain
    assert f"index {git(project, 'rev-parse', f'{base}:.loop/config.toml').strip()}" in plain


def test_the_patch_is_between_the_two_trees_whatever_the_checkout_holds(project: Path) -> None:
    base, head = _change_config(project)
    head_tree = _tree_of(project, head)
    # The checkout moves on, and files named after both trees sit at its top.
    (project / ".loop" / "config.toml").write_text("edited in the checkout\n")
    for name in (base, head_tree):
        (project / name).write_text("a file named like an object\n")

    patch = lgit.tree_patch(project, base, head_tree)

    assert "edited in the checkout" not in patch
    assert "+allow = 2" in patch
    assert lgit.apply_to_tree(project, base, patch) == head_tree


def test_applying_a_patch_never_touches_the_repositorys_index_or_files(project: Path) -> None:
    base, head = _change_config(project)
    patch = lgit.tree_patch(project, base, head)
    git(project, "reset", "--hard", base)
    # The user's own work in progress: one change staged, one not.
    (project / "notes.txt").write_text("staged\n")
    git(project, "add", "notes.txt")
    (project / ".loop" / "config.toml").write_text("version = 1\n# mine\n")
    staged = git(project, "ls-files", "--stage")
    status = git(project, "status", "--porcelain")

    tree = lgit.apply_to_tree(project, base, patch)

    assert tree == _tree_of(project, head)
    assert git(project, "ls-files", "--stage") == staged
    assert git(project, "status", "--porcelain") == status
    assert (project / ".loop" / "config.toml").read_text() == "version = 1\n# mine\n"


def test_the_repositorys_apply_config_cannot_refuse_a_clean_patch(project: Path) -> None:
    base = _head(project)
    (project / ".loop" / "loops" / "ci.toml").write_text('every = "5m"   \n')
    commit_all(project, "trailing blanks")
    head = _head(project)
    git(project, "config", "apply.whitespace", "error")

    patch = lgit.tree_patch(project, base, head)

    assert lgit.apply_to_tree(project, base, patch) == _tree_of(project, head)


@pytest.fixture(params=["pinned for every git", "pinned here alone"])
def replace_refs_pin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Replace refs are ignored by every git loopctl runs (the runner's environment); the
    patch functions pin it again. With the runner's pin off, theirs must hold alone."""
    if request.param == "pinned here alone":
        monkeypatch.delitem(git_runner._PINNED_ENV, "GIT_NO_REPLACE_OBJECTS")
    return str(request.param)


def _plant_decoys(project: Path, *objects: str) -> None:
    """A decoy commit, and its tree, planted as the replacements of `objects` (commits and
    trees alike)."""
    (project / ".loop" / "config.toml").write_text("version = 1\ndecoy = true\n")
    (project / "decoy.toml").write_text("x = 1\n")
    commit_all(project, "decoy")
    decoy = _head(project)
    for sha in objects:
        kind = git(project, "cat-file", "-t", sha).strip()
        git(project, "replace", sha, decoy if kind == "commit" else _tree_of(project, decoy))


def test_replace_refs_planted_in_the_repository_are_never_read(
    project: Path, replace_refs_pin: str
) -> None:
    base, head = _change_config(project)
    base_tree, head_tree = _tree_of(project, base), _tree_of(project, head)
    real_patch = lgit.tree_patch(project, base, head)
    real_files = lgit.tree_files(project, head_tree, [".loop/**"])
    _plant_decoys(project, base, head, base_tree, head_tree)

    assert lgit.tree_patch(project, base, head) == real_patch
    assert lgit.tree_patch(project, base_tree, head_tree) == real_patch
    assert lgit.tree_files(project, head_tree, [".loop/**"]) == real_files
    assert lgit.tree_files(project, head, [".loop/**"]) == real_files
    assert lgit.apply_to_tree(project, base, real_patch) == head_tree


def test_tree_files_by_name_lists_exactly_the_names_given(project: Path) -> None:
    (project / "run.sh").write_text("echo\n")
    (project / "run.sh").chmod(0o755)
    (project / "[x].toml").write_text("x = 1\n")
    commit_all(project, "more files")
    sub = project / ".loop"  # called from a folder below the top: paths stay from the top

    assert lgit.tree_files(project, "HEAD", [], literal=True) == []
    named = lgit.tree_files(sub, "HEAD", ["[x].toml", "run.sh"], literal=True)
    assert [(mode, path) for mode, _sha, path in named] == [
        ("100644", "[x].toml"),
        ("100755", "run.sh"),
    ]
    everything = lgit.tree_files(sub, "HEAD", ["**"])
    paths = [path for _mode, _sha, path in everything]
    assert paths == sorted(paths)
    assert {"run.sh", ".loop/config.toml"} <= set(paths)
    assert stat.S_IMODE(int(named[1][0], 8)) == 0o755


def test_restore_paths_never_follows_a_link_to_what_the_base_lacks(
    project: Path, tmp_path: Path
) -> None:
    base = _head(project)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "new.toml").write_text("the user's own file\n")
    (project / "agents").symlink_to(outside)

    # Only the file is named, not the link it lies behind.
    lgit.restore_paths(project, base, ["agents/new.toml"])

    assert (outside / "new.toml").read_text() == "the user's own file\n"


@pytest.mark.parametrize("planted", ["link", "file"])
def test_restore_paths_replaces_a_folder_turned_into_a_link_or_file_above_a_named_file(
    project: Path, tmp_path: Path, planted: str
) -> None:
    base = _head(project)
    outside = tmp_path / "outside"
    (outside / "loops").mkdir(parents=True)
    (outside / "config.toml").write_text("planted\n")
    os.rename(project / ".loop", tmp_path / "moved")
    if planted == "link":
        (project / ".loop").symlink_to(outside)
    else:
        (project / ".loop").write_text("a file\n")

    lgit.restore_paths(project, base, [".loop/config.toml"])

    assert not (project / ".loop").is_symlink()
    assert (project / ".loop").is_dir()
    assert (project / ".loop" / "config.toml").read_text() == "version = 1\n"
    assert (outside / "config.toml").read_text() == "planted\n"


def test_restore_paths_reads_the_base_as_it_is_whatever_replaces_it(
    project: Path, replace_refs_pin: str
) -> None:
    base = _head(project)
    (project / ".loop" / "loops" / "ci.toml").unlink()  # the decoy lacks it
    commit_all(project, "without ci")
    _plant_decoys(project, base, _tree_of(project, base))
    git(project, "reset", "--hard", base)  # HEAD is base again; the decoys only replace it
    (project / ".loop" / "config.toml").write_text("changed by the agent\n")
    (project / ".loop" / "loops" / "ci.toml").write_text("changed by the agent\n")

    lgit.restore_paths(project, base, [".loop/config.toml", ".loop/loops/ci.toml"])

    assert (project / ".loop" / "config.toml").read_text() == "version = 1\n"
    assert (project / ".loop" / "loops" / "ci.toml").read_text() == 'every = "5m"\n'


def test_restore_paths_refuses_a_worktree_git_leads_elsewhere(
    project: Path, tmp_path: Path
) -> None:
    base = _head(project)
    worktree = tmp_path / "task"
    git(project, "worktree", "add", "--detach", str(worktree), base)
    # The user's work in progress in the main checkout.
    (project / ".loop" / "config.toml").write_text("the user's edit\n")
    # The agent puts a repository of its own where its worktree's `.git` file was, with the
    # main checkout as its working tree.
    (worktree / ".git").unlink()
    git(project, "clone", "-q", "--bare", str(project), str(worktree / ".git"))
    git(worktree / ".git", "config", "core.bare", "false")
    git(worktree / ".git", "config", "core.worktree", str(project))
    (worktree / ".loop" / "config.toml").write_text("the agent's\n")

    with pytest.raises(ForeignWorkTree):
        lgit.restore_paths(worktree, base, [".loop/config.toml"])

    assert (project / ".loop" / "config.toml").read_text() == "the user's edit\n"


def test_nothing_to_restore_asks_nothing_of_git(project: Path) -> None:
    lgit.restore_paths(project, "0" * 40, [])  # no such commit, and no path to put back


RESTORE_AS_OWNER = """
import sys
from pathlib import Path
from loopctl import git
git.restore_paths(Path(sys.argv[1]), sys.argv[2], [".loop/config.toml"])
"""


def test_restore_paths_as_the_owner_clears_a_locked_folder_where_the_base_has_a_file() -> None:
    """As an ordinary account: the agent left a folder, with a subfolder it made mode 000,
    where the base has a file. git's checkout cannot remove what it may not read; loopctl
    gives the owner rwx back, removes it, and the file comes back."""
    python, pythonpath = runtime("nobody")
    with under_tmp("restore-") as top:
        project = top / "repo"
        git(top, "init", "-q", str(project))
        (project / ".loop").mkdir()
        (project / ".loop" / "config.toml").write_text("version = 1\n")
        commit_all(project, "definitions")
        base = _head(project)
        (project / ".loop" / "config.toml").unlink()
        locked = project / ".loop" / "config.toml" / "locked"
        (locked / "deeper").mkdir(parents=True)
        (locked / "deeper" / "f").write_text("x\n")
        give_to("nobody", top)
        locked.chmod(0)

        done = subprocess.run(
            [python, "-c", RESTORE_AS_OWNER, str(project), base], capture_output=True,
            text=True, check=False, cwd="/", timeout=120, **as_user("nobody"),
            env={"PATH": "/usr/bin:/bin", "HOME": str(top), **pythonpath},
        )  # fmt: skip

        assert done.returncode == 0, done.stderr
        assert (project / ".loop" / "config.toml").read_text() == "version = 1\n"
