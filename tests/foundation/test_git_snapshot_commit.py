"""commit_snapshot against hostile repositories (invariant 12: commit exactly what was checked,
under a lease): the commit it makes is the one object its arguments name, whatever the repository
says, and a tree given by a name that could move is refused.

Each test names the mutants of loopctl/git/snapshot.py it kills (bench/mutation.py,
git-hardening-snapshot). Repositories live under /tmp and outside it (`place`).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest
from support import repos
from support.outside_tmp import Place

from loopctl import git as lgit
from loopctl.errors import GitError
from loopctl.git import runner as git_runner

# git for the test's own set-up, as a user runs it (planted traps live).
plain = functools.partial(repos.git, plain=True)

DATE = "1700000000 +0000"


@pytest.fixture
def repo(place: Place) -> Path:
    """A repository with one commit and an identity of its own in its config (as a user's has):
    a commit that fell back on it would name `Someone`, not the author loopctl passed."""
    path = repos.make_repo(place.base / "repo")
    plain(path, "config", "user.name", "Someone")
    plain(path, "config", "user.email", "someone@example.com")
    return path


def snapshot(repo: Path, tree: str, parent: str, *, expect: str | None = None) -> str:
    return lgit.commit_snapshot(
        repo,
        "loop/l/t",
        tree,
        parent,
        "snapshot of the task\n",
        author_name="Bot",
        author_email="bot@example.com",
        date=DATE,
        expect=expect,
    )


def test_a_snapshot_commit_is_exactly_the_object_its_arguments_name(repo: Path) -> None:
    """The commit records the tree, the parent, the author and committer loopctl passed (not the
    repository's user.name / user.email) at the date passed, and the message: the same object
    whenever it is made, so a resumed run finds the commit it made before and moves nothing.
    Kills each entry of commit_snapshot's identity (name, email and date of the author and of
    the committer) dropped, renamed or emptied."""
    base = plain(repo, "rev-parse", "HEAD").strip()
    tree = lgit.tree_of(repo, base)
    made = snapshot(repo, tree, base)
    person = f"Bot <bot@example.com> {DATE}"
    expected = (
        f"tree {tree}\nparent {base}\nauthor {person}\ncommitter {person}\n\nsnapshot of the task\n"
    )
    assert plain(repo, "cat-file", "commit", made) == expected
    assert lgit.branch_head(repo, "loop/l/t") == made
    # A resumed run: the same commit, the branch already at it.
    assert snapshot(repo, tree, base, expect=made) == made
    assert lgit.branch_head(repo, "loop/l/t") == made


@pytest.mark.parametrize("name", ["main^{tree}", "abbreviated"])
def test_a_tree_named_otherwise_than_by_its_full_sha_is_refused(repo: Path, name: str) -> None:
    """What was checked is one tree object: a name git would resolve at commit time (a branch's
    tree, which moves with the branch; an abbreviated sha, which a planted object can make
    ambiguous or another's) is refused and nothing is committed. Kills commit_snapshot's
    `if not _FULL_SHA.match(tree)` guard turned off."""
    base = plain(repo, "rev-parse", "HEAD").strip()
    tree = lgit.tree_of(repo, base)
    given = tree[:12] if name == "abbreviated" else name
    # The trap is live: git itself takes either name as the tree.
    plain(repo, "commit-tree", "-m", "x", given)
    with pytest.raises(GitError, match="not a tree sha"):
        snapshot(repo, given, base)
    assert lgit.branch_head(repo, "loop/l/t") is None


def test_a_planted_replacement_of_the_tree_cannot_stop_the_commit_with_the_global_pin_off(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIT_NO_REPLACE_OBJECTS in git.runner._PINNED_ENV (the first guard) is off here. A planted
    refs/replace/<tree> makes the checked tree a blob for git: commit_snapshot commits the real
    tree all the same, because it pins the variable again itself. Kills `**_NO_REPLACE` dropped
    from commit_snapshot's environment."""
    monkeypatch.delitem(git_runner._PINNED_ENV, "GIT_NO_REPLACE_OBJECTS")
    base = plain(repo, "rev-parse", "HEAD").strip()
    tree = lgit.tree_of(repo, base)
    plain(repo, "replace", "-f", tree, lgit.write_blob(repo, "not a tree\n"))
    # The trap is live: git with replacements on refuses the tree.
    live = subprocess.run(
        ["git", "commit-tree", "-m", "x", tree], cwd=repo, capture_output=True, text=True
    )
    assert live.returncode != 0
    assert "not a valid 'tree' object" in live.stderr
    made = snapshot(repo, tree, base)
    assert plain(repo, "--no-replace-objects", "cat-file", "commit", made).startswith(
        f"tree {tree}\nparent {base}\n"
    )
    assert lgit.branch_head(repo, "loop/l/t") == made
