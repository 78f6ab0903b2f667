"""loopctl/git/ (worktrees, diff, snapshot) against what an agent can do in its worktree: each test
kills one-line mutants of those modules that no other test killed (an independent review's
hand-made mutants: a flag dropped, a guard turned off, a pathspec weakened).

Each test checks behaviour (what a snapshot holds, what is shown, what is kept), never the
argument list git was given, and names the mutants it kills.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from support import repos

from loopctl import git as lgit

# git for the test's own set-up, as a user (or the agent) runs it.
plain = functools.partial(repos.git, plain=True)


def head(repo: Path, rev: str = "HEAD") -> str:
    return plain(repo, "rev-parse", rev).strip()


def blob(repo: Path, tree: str, path: str) -> str | None:
    """The content of `path` in `tree`, or None when the tree has no such file."""
    listed = plain(repo, "ls-tree", "-z", "--name-only", tree, "--", path)
    if not listed:
        return None
    return plain(repo, "cat-file", "-p", f"{tree}:{path}")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose base commit holds a test file a maker must not weaken."""
    path = repos.make_repo(tmp_path / "repo")
    (path / "test_calc.py").write_text("assert add(2, 3) == 5\n")
    repos.commit_all(path, "tests")
    return path


@pytest.fixture
def worktree(repo: Path, tmp_path: Path) -> Path:
    path = tmp_path / "wt"
    lgit.worktree_add(repo, path, "loop/l/t", head(repo))
    return path


# --- snapshot_tree: an excluded path is the parent's, wherever the agent moved HEAD -------------


def test_an_excluded_path_keeps_the_parents_version_when_the_agent_commits_it(
    repo: Path, worktree: Path
) -> None:
    """loopctl copies a `.env` into the worktree (absent from the base) and keeps the base's
    test file out of the snapshot; the agent edits both and commits them itself, moving the
    worktree's HEAD. The snapshot's excluded paths come from the parent loopctl names, never
    from that HEAD: the secret is not in the tree and the test is the base's. Kills the parent
    sha dropped from snapshot_tree's `reset` (git would reset the paths to HEAD)."""
    base = head(repo)
    (worktree / ".env").write_text("API_KEY=hunter2-secret\n")
    (worktree / "test_calc.py").write_text("assert True\n")
    (worktree / "feature.py").write_text("def add(a, b):\n    return a + b\n")
    plain(worktree, "add", "-A")
    plain(worktree, "commit", "-q", "-m", "the agent's own commit")
    assert head(worktree) != base  # live: HEAD is not the parent any more

    tree = lgit.snapshot_tree(worktree, base, exclude=[".env", "test_calc.py"])

    assert blob(repo, tree, ".env") is None
    assert blob(repo, tree, "test_calc.py") == "assert add(2, 3) == 5\n"
    # The rest of the work is in the snapshot as usual.
    assert blob(repo, tree, "feature.py") == "def add(a, b):\n    return a + b\n"


def test_an_excluded_name_that_looks_like_a_glob_excludes_only_itself(
    repo: Path, worktree: Path
) -> None:
    """A proposal's draft is the base plus the definition edits, every other changed path
    excluded by name, and those names are the agent's: a file it calls `*` must leave out only
    that file, never every path (the definition edit with it). Kills `literal` dropped from
    snapshot_tree's exclude pathspecs."""
    base = head(repo)
    (worktree / ".loop").mkdir()
    (worktree / ".loop" / "rules.md").write_text("be careful\n")
    (worktree / "*").write_text("not a definition\n")

    tree = lgit.snapshot_tree(worktree, base, exclude=["*"])

    assert blob(repo, tree, ".loop/rules.md") == "be careful\n"
    assert blob(repo, tree, "*") is None


# --- clean_worktree: what a recycled worktree keeps is exactly the folders named ----------------


def test_a_kept_folder_is_kept_at_the_top_only(worktree: Path) -> None:
    """A pooled worktree keeps its top-level `node_modules` for the next task; a `node_modules`
    the previous agent made deeper down is its leftover, and goes with the rest. Kills the
    leading `/` dropped from clean_worktree's excludes (git would keep that name at any depth)."""
    (worktree / ".gitignore").write_text("node_modules/\n")
    repos.commit_all(worktree, "ignore node_modules")
    (worktree / "node_modules" / "dep").mkdir(parents=True)
    (worktree / "node_modules" / "dep" / "index.js").write_text("module.exports = 1\n")
    (worktree / "pkg" / "node_modules").mkdir(parents=True)
    (worktree / "pkg" / "node_modules" / "planted.js").write_text("steal()\n")

    lgit.clean_worktree(worktree, ["node_modules"])

    assert (worktree / "node_modules" / "dep" / "index.js").read_text() == "module.exports = 1\n"
    assert not (worktree / "pkg").exists()


# --- diff_text and diff_stat: a nested repository is no file to show ----------------------------


def test_an_empty_nested_repository_does_not_hide_the_rest_of_the_diff(
    repo: Path, worktree: Path
) -> None:
    """An agent's `git init tool` leaves an untracked repository with no commit; git lists it
    as `tool/`. The diff shown to the checker and the approver still shows the new file beside
    it. Kills the `tool/` entries no longer left out of the untracked files added with
    --intent-to-add (git refuses a repository with no commit, and the whole diff fails)."""
    base = head(repo)
    plain(worktree, "init", "-q", "tool")
    (worktree / "feature.py").write_text("def add(a, b):\n    return a + b\n")

    shown = lgit.diff_text(worktree, base, 100_000)
    stat = lgit.diff_stat(worktree, base)

    assert "+def add(a, b):" in shown
    assert "feature.py" in stat
    assert "tool" not in stat


# --- snapshot_tree: a seed index is only a shortcut --------------------------------------------


def test_a_snapshot_whose_seed_index_is_missing_is_made_without_it(
    repo: Path, worktree: Path, tmp_path: Path
) -> None:
    """Seeding a worktree's snapshot index may have failed (loopctl swallows that error), so
    the seed named may not exist: the snapshot is then built from the parent, the same tree.
    Kills the seed's existence check dropped from snapshot_tree (copying it would fail the
    attempt)."""
    base = head(repo)
    (worktree / "feature.py").write_text("def add(a, b):\n    return a + b\n")

    tree = lgit.snapshot_tree(worktree, base, seed=tmp_path / "never-written.index")

    assert tree == lgit.snapshot_tree(worktree, base)
    assert blob(repo, tree, "feature.py") == "def add(a, b):\n    return a + b\n"


# --- tree_changes: every changed file by its full path -----------------------------------------


def test_a_change_deep_in_a_folder_is_named_by_its_full_path(repo: Path, worktree: Path) -> None:
    """What a snapshot changed is matched against protected paths (`tests/**`) and the maker's
    scope by file: an edit to tests/unit/test_calc.py must be named so, not as `tests`. Kills
    `-r` dropped from tree_changes (git names only the top-level folder that differs)."""
    (worktree / "tests" / "unit").mkdir(parents=True)
    (worktree / "tests" / "unit" / "test_calc.py").write_text("assert True\n")
    repos.commit_all(worktree, "tests")
    base = head(worktree)
    (worktree / "tests" / "unit" / "test_calc.py").write_text("assert add(2, 3) == 5\n")

    tree = lgit.snapshot_tree(worktree, base)

    assert lgit.tree_changes(repo, base, tree) == ["tests/unit/test_calc.py"]


def test_a_seeded_snapshot_never_reads_the_flags_the_agent_set_in_its_index(
    repo: Path, worktree: Path, tmp_path: Path
) -> None:
    """The agent marks the base's test file skip-worktree (and another assume-unchanged) in the
    worktree's own index, then edits both: `git add` there would take them as unchanged. The
    snapshot, started from loopctl's seed, holds both edits, and the worktree's index keeps the
    agent's flags (loopctl never wrote it). Kills GIT_INDEX_FILE dropped from snapshot_tree's
    environment (git would use the worktree's own index)."""
    base = head(repo)
    seed = tmp_path / "seed.index"
    lgit.seed_snapshot_index(worktree, seed)
    plain(worktree, "update-index", "--skip-worktree", "test_calc.py")
    plain(worktree, "update-index", "--assume-unchanged", "README.md")
    (worktree / "test_calc.py").write_text("assert True\n")
    (worktree / "README.md").write_text("rewritten\n")
    flags = plain(worktree, "ls-files", "-v")

    tree = lgit.snapshot_tree(worktree, base, seed=seed)

    assert blob(repo, tree, "test_calc.py") == "assert True\n"
    assert blob(repo, tree, "README.md") == "rewritten\n"
    assert plain(worktree, "ls-files", "-v") == flags
