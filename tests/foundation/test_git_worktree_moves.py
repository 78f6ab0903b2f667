"""Where recycle_checkout and fast_forward leave branches and files: a recycled worktree is on its
new branch with that branch's files, and a fast-forward moves exactly the branch asked, forward
only, with the files of a checkout that has it.

Each test names the mutants of loopctl/git/worktrees.py it kills (bench/mutation.py,
git-hardening-worktrees). Repositories live under /tmp and outside it (`place`).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest
from support import repos
from support.outside_tmp import Place

from loopctl import git as lgit
from loopctl.errors import GitError

# git for the test's own set-up, as a user runs it.
plain = functools.partial(repos.git, plain=True)


def head(repo: Path, rev: str = "HEAD") -> str:
    return plain(repo, "rev-parse", rev).strip()


def commit(repo: Path, message: str, **files: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    repos.commit_all(repo, message)
    return head(repo)


@pytest.fixture
def repo(place: Place) -> Path:
    return repos.make_repo(place.base / "repo")


@pytest.fixture
def worktree(repo: Path, place: Place) -> Path:
    """A task worktree on `loop/l/first` at main's commit, with work committed on it."""
    path = place.base / "wt"
    lgit.worktree_add(repo, path, "loop/l/first", head(repo))
    commit(path, "first task", **{"first.txt": "first\n"})
    return path


@pytest.mark.parametrize("exists", [False, True])
def test_a_recycled_worktree_is_on_its_branch_with_its_files_when_git_is_asked_which(
    repo: Path, worktree: Path, exists: bool
) -> None:
    """recycle_checkout asks git whether the branch exists when the caller does not say: a new
    branch is made at the base, an existing one keeps its own commits. Kills the
    `branch_is_new is None` question turned off (None taken as "exists")."""
    base = head(repo)
    earlier = None
    if exists:
        plain(repo, "branch", "loop/l/second", base)
        earlier = commit(repo, "earlier work", **{"earlier.txt": "kept\n"})
        plain(repo, "branch", "-f", "loop/l/second", earlier)
        plain(repo, "reset", "-q", "--hard", base)
    lgit.recycle_checkout(worktree, "loop/l/second", base)
    assert lgit.current_branch(worktree) == "loop/l/second"
    assert head(worktree) == (earlier or base)
    assert (worktree / "earlier.txt").exists() == exists
    assert not (worktree / "first.txt").exists()


def test_work_in_a_recycled_worktree_lands_on_its_new_branch(repo: Path, worktree: Path) -> None:
    """After recycling, the worktree's HEAD is the new branch: the next task's commit moves
    that branch and leaves the previous task's branch where it was. Kills the `symbolic-ref
    HEAD` call dropped, its branch dropped, or HEAD renamed (HEAD stays on the old branch)."""
    first = head(repo, "loop/l/first")
    base = head(repo)
    lgit.recycle_checkout(worktree, "loop/l/second", base, branch_is_new=True)
    (worktree / "second.txt").write_text("second\n")
    made = lgit.commit_all(worktree, "second task", author_name="Bot", author_email="b@x")
    assert made is not None
    assert lgit.branch_head(repo, "loop/l/second") == made
    assert lgit.branch_head(repo, "loop/l/first") == first
    assert head(repo, f"{made}~1") == base


def test_a_new_branch_planted_as_a_link_to_another_branch_moves_only_itself(
    repo: Path, worktree: Path
) -> None:
    """The agent made the next task's branch name a symbolic ref to a branch that does not
    exist yet (`release`): the task branch is made a branch of its own at the base, and
    `release` is never created through the link, neither then nor by the next task's commit.
    Kills `--no-deref` dropped from recycle_checkout's update-ref."""
    base = head(repo)
    plain(repo, "symbolic-ref", "refs/heads/loop/l/second", "refs/heads/release")
    lgit.recycle_checkout(worktree, "loop/l/second", base, branch_is_new=True)
    assert lgit.branch_head(repo, "release") is None
    assert not repos.git_succeeds(repo, "symbolic-ref", "-q", "refs/heads/loop/l/second")
    (worktree / "second.txt").write_text("second\n")
    made = lgit.commit_all(worktree, "second task", author_name="Bot", author_email="b@x")
    assert lgit.branch_head(repo, "loop/l/second") == made
    assert lgit.branch_head(repo, "release") is None


def test_fast_forwarding_a_missing_branch_is_an_error_that_makes_none(repo: Path) -> None:
    """Kills fast_forward's `head is None` check turned off."""
    sha = commit(repo, "work", **{"work.txt": "work\n"})
    with pytest.raises(GitError, match="no local branch"):
        lgit.fast_forward(repo, "missing", sha)
    assert lgit.branch_head(repo, "missing") is None


@pytest.mark.parametrize("checked_out", [False, True])
def test_a_fast_forward_to_what_the_branch_already_has_moves_nothing(
    repo: Path, checked_out: bool
) -> None:
    """The same commit or one behind: False, and the branch stays. Kills fast_forward's
    "already contains" check turned off (the commit behind would raise; the same commit
    would report a move)."""
    older = head(repo)
    newer = commit(repo, "newer", **{"newer.txt": "newer\n"})
    if not checked_out:
        plain(repo, "branch", "target", newer)
    branch = "main" if checked_out else "target"
    assert lgit.fast_forward(repo, branch, newer) is False
    assert lgit.fast_forward(repo, branch, older) is False
    assert lgit.branch_head(repo, branch) == newer
    assert (repo / "newer.txt").exists()


@pytest.mark.parametrize("checked_out", [False, True])
def test_a_branch_that_moved_on_elsewhere_is_never_moved_sideways(
    repo: Path, checked_out: bool
) -> None:
    """The branch and the commit diverged: refused, the branch and its files stay. Kills
    fast_forward's "is a fast-forward" check turned off (the ref would be replaced by a commit
    that does not contain it)."""
    base = head(repo)
    theirs = commit(repo, "theirs", **{"theirs.txt": "theirs\n"})
    plain(repo, "checkout", "-q", "-b", "side", base)
    ours = commit(repo, "ours", **{"ours.txt": "ours\n"})
    plain(repo, "checkout", "-q", "main" if checked_out else "--detach")
    with pytest.raises(GitError, match="not a fast-forward"):
        lgit.fast_forward(repo, "main", ours)
    assert lgit.branch_head(repo, "main") == theirs
    if checked_out:
        assert (repo / "theirs.txt").exists()
        assert not (repo / "ours.txt").exists()


def test_a_checked_out_branch_moves_with_its_files(repo: Path) -> None:
    """main is checked out: the fast-forward moves it in that checkout, whose files and index
    follow (nothing left looking changed). Kills the checked-out case turned off (only the ref
    would move, under files of the old commit)."""
    base = head(repo)
    plain(repo, "checkout", "-q", "-b", "work")
    work = commit(repo, "work", **{"work.txt": "work\n"})
    plain(repo, "checkout", "-q", "main")
    assert lgit.fast_forward(repo, "main", work) is True
    assert head(repo) == work
    assert (repo / "work.txt").read_text() == "work\n"
    assert plain(repo, "status", "--porcelain") == ""
    assert base != work


@pytest.mark.parametrize("where", ["nowhere", "a worktree since deleted"])
def test_a_branch_no_checkout_has_moves_as_a_ref(repo: Path, place: Place, where: str) -> None:
    """A branch checked out nowhere (or in a worktree whose folder is gone) moves as a ref,
    to exactly the commit given. Kills fast_forward's update-ref dropped, or its branch or new
    value dropped."""
    base = head(repo)
    plain(repo, "checkout", "-q", "--detach")
    work = commit(repo, "work", **{"work.txt": "work\n"})
    plain(repo, "checkout", "-q", "main")
    if where == "nowhere":
        plain(repo, "branch", "target", base)
    else:
        gone = place.base / "gone"
        plain(repo, "worktree", "add", "-q", "-b", "target", str(gone), base)
        shutil.rmtree(gone)  # still listed by git, as prunable
    assert lgit.fast_forward(repo, "target", work) is True
    assert lgit.branch_head(repo, "target") == work
    assert lgit.branch_head(repo, "main") == base
    assert not (repo / "work.txt").exists()
