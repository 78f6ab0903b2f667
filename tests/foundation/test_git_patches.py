"""loopctl.git.patches on real repositories: a patch between trees applies to a tree, and a
worktree's paths are put back as a commit has them, whatever link or folder an agent put there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.repos import commit_all, git

from loopctl import git as lgit
from loopctl.errors import GitError


@pytest.fixture
def project(repo: Path) -> Path:
    (repo / ".loop" / "loops").mkdir(parents=True)
    (repo / ".loop" / "config.toml").write_text("version = 1\n")
    (repo / ".loop" / "loops" / "ci.toml").write_text('every = "5m"\n')
    (repo / "calc.py").write_text("x = 1\n")
    commit_all(repo, "definitions")
    return repo


def test_a_patch_between_trees_applies_to_the_base_tree(project: Path) -> None:
    base = git(project, "rev-parse", "HEAD").strip()
    (project / ".loop" / "config.toml").write_text("version = 1\nallow = 2\n")
    commit_all(project, "change")
    head = git(project, "rev-parse", "HEAD").strip()

    patch = lgit.tree_patch(project, base, head)
    tree = lgit.apply_to_tree(project, base, patch)

    assert tree == git(project, "rev-parse", "HEAD^{tree}").strip()
    assert "+allow = 2" in patch
    with pytest.raises(GitError, match="does not apply"):
        lgit.apply_to_tree(project, head, patch)


def test_tree_files_lists_the_definitions_under_globs(project: Path) -> None:
    found = [path for _mode, _sha, path in lgit.tree_files(project, "HEAD", [".loop/loops/**"])]
    assert found == [".loop/loops/ci.toml"]


def test_restore_paths_removes_a_link_over_the_definitions_without_following_it(
    project: Path, tmp_path: Path
) -> None:
    base = git(project, "rev-parse", "HEAD").strip()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.toml").write_text("planted\n")
    os.rename(project / ".loop", tmp_path / "moved-loop")
    (project / ".loop").symlink_to(outside)
    (project / "agents").mkdir()
    (project / "agents" / "new.toml").write_text("x = 1\n")

    lgit.restore_paths(
        project,
        base,
        [".loop", ".loop/config.toml", ".loop/loops/ci.toml", "agents/new.toml"],
    )

    assert not (project / ".loop").is_symlink()
    assert (project / ".loop" / "config.toml").read_text() == "version = 1\n"
    assert (outside / "config.toml").read_text() == "planted\n"  # never followed
    assert not (project / "agents" / "new.toml").exists()
    assert git(project, "status", "--porcelain", "--", ".loop", "agents") == ""


def test_restore_paths_replaces_a_folder_put_where_a_file_was(project: Path) -> None:
    base = git(project, "rev-parse", "HEAD").strip()
    (project / ".loop" / "config.toml").unlink()
    (project / ".loop" / "config.toml").mkdir()
    (project / ".loop" / "config.toml" / "x").write_text("y\n")

    lgit.restore_paths(project, base, [".loop/config.toml", ".loop/config.toml/x"])

    assert (project / ".loop" / "config.toml").read_text() == "version = 1\n"
