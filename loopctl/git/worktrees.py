"""Linked worktrees: adding, listing, recycling and removing them, and fast-forwarding a branch
whose checkout must follow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl.errors import GitError
from loopctl.git.command import git
from loopctl.git.refs import (
    _NO_REPLACE,
    _require_sha,
    branch_exists,
    branch_head,
    git_dir,
    is_ancestor,
    require_work_tree,
)

# Writing a whole tree (a new worktree, a recycled one moved far) is most of a task's wait for
# its worktree: one checkout worker per core (git's default is one in all), for trees of at
# least git's default 100 files.
_PARALLEL_CHECKOUT = ("-c", "checkout.workers=0")

# A recycled worktree's index is loopctl's own copy, so its stat data are trusted; these make
# sure git compares all of it (a maker cannot set a file's change time back) before it skips a
# file as unchanged.
_FULL_STAT = ("-c", "core.trustctime=true", "-c", "core.checkStat=default")


@dataclass(frozen=True, slots=True)
class WorktreeEntry:
    """One record of `git worktree list --porcelain`."""

    path: Path
    head: str
    branch: str | None  # short name (no refs/heads/); None when detached or bare
    detached: bool
    locked: bool
    prunable: bool
    lock_reason: str = ""


def worktree_add(
    repo: Path, path: Path, branch: str, base_sha: str, *, branch_is_new: bool | None = None
) -> None:
    """Add a worktree at `path` on `branch`, creating the branch at `base_sha` if needed.

    `branch_is_new` is what the caller already knows (None: ask git); a branch that exists
    after all makes `-b` fail rather than be overwritten.
    """
    if branch_is_new is None:
        branch_is_new = not branch_exists(repo, branch)
    if branch_is_new:
        sha = _require_sha(repo, base_sha)
        args = ["worktree", "add", "--quiet", "--no-track", "-b", branch, "--", str(path), sha]
    else:
        # An existing branch is checked out as it is: its commits are earlier work.
        args = ["worktree", "add", "--quiet", "--", str(path), branch]
    git([*_PARALLEL_CHECKOUT, *args], cwd=repo)


def new_worktree_git_dir(path: Path) -> Path:
    """The git dir of a linked worktree `git worktree add` has just made, read from its `.git`
    file (no git call): no agent has run in it yet, so the pointer is the one git wrote."""
    try:
        text = (path / ".git").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return git_dir(path)
    pointed = text.removeprefix("gitdir:").strip()
    if not text.startswith("gitdir:") or not Path(pointed).is_absolute():
        return git_dir(path)
    return Path(pointed)


def worktree_remove(repo: Path, path: Path, force: bool = True) -> None:
    """Remove the worktree at `path` (with `force`, even when it has uncommitted changes)."""
    git(["worktree", "remove", *(["--force"] if force else []), "--", str(path)], cwd=repo)


def worktree_unlock(repo: Path, path: Path) -> None:
    """Unlock the worktree at `path`."""
    git(["worktree", "unlock", "--", str(path)], cwd=repo)


def worktree_list(repo: Path) -> list[WorktreeEntry]:
    """Every worktree git knows for this repository, the main one first."""
    result = git(["worktree", "list", "--porcelain", "-z"], cwd=repo, check=False)
    if result.returncode == 0:
        return _parse_worktrees(result.stdout.split("\0"))
    # git < 2.36 has no -z; loopctl's own worktree paths never contain newlines.
    plain = git(["worktree", "list", "--porcelain"], cwd=repo)
    return _parse_worktrees(plain.stdout.split("\n"))


def worktree_prune(repo: Path) -> None:
    """Forget worktrees whose folders are gone."""
    git(["worktree", "prune"], cwd=repo)


def _parse_worktrees(lines: list[str]) -> list[WorktreeEntry]:
    entries: list[WorktreeEntry] = []
    record: dict[str, str] = {}
    for line in [*lines, ""]:
        if line:
            key, _, value = line.partition(" ")
            record[key] = value
            continue
        if "worktree" in record:
            branch = record.get("branch")
            entries.append(
                WorktreeEntry(
                    path=Path(record["worktree"]),
                    head=record.get("HEAD", ""),
                    branch=branch.removeprefix("refs/heads/") if branch else None,
                    detached="detached" in record,
                    locked="locked" in record,
                    prunable="prunable" in record,
                    lock_reason=record.get("locked", ""),
                )
            )
        record = {}
    return entries


def recycle_checkout(
    worktree: Path, branch: str, base_sha: str, *, branch_is_new: bool | None = None
) -> None:
    """Put a recycled worktree on `branch` (made at `base_sha` when new), its files matching it.

    `reset --hard` rewrites only the files whose content or stat data differ from the index, so
    a worktree moved to a nearby commit costs the files that changed, not the whole tree.
    """
    ref = f"refs/heads/{branch}"
    sha = _require_sha(worktree, base_sha)
    require_work_tree(worktree, "check out")
    if branch_is_new is None:
        branch_is_new = not branch_exists(worktree, branch)
    if branch_is_new:
        # Created only if absent (the all-zero old value), so it is at `sha` once this returns.
        git(["update-ref", "--no-deref", "--", ref, sha, "0" * len(sha)], cwd=worktree)
        target = sha
    else:
        target = git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
            cwd=worktree,
            extra_env=_NO_REPLACE,
        ).stdout.strip()
    git(["symbolic-ref", "HEAD", ref], cwd=worktree)
    git(
        [
            *_FULL_STAT,
            *_PARALLEL_CHECKOUT,
            "reset",
            "--hard",
            "--quiet",
            _require_sha(worktree, target),
        ],
        cwd=worktree,
        extra_env=_NO_REPLACE,
    )


def clean_worktree(worktree: Path, keep: Sequence[str]) -> None:
    """Delete every untracked and ignored file (nested repositories too) except under `keep`."""
    excludes = [arg for name in keep for arg in ("-e", "/" + name.strip("/"))]
    require_work_tree(worktree, "clean")
    git(["clean", "-ffdxq", *excludes], cwd=worktree)


def fast_forward(repo: Path, branch: str, sha: str) -> bool:
    """Move local `branch` forward to `sha`; False when it already contains `sha`.

    Refuses anything but a fast-forward. A branch checked out in a working tree is moved with
    `merge --ff-only` there, so that checkout's files follow; otherwise only the ref moves.
    """
    sha = _require_sha(repo, sha)
    head = branch_head(repo, branch)
    if head is None:
        raise GitError(f"there is no local branch {branch!r} to fast-forward")
    if head == sha or is_ancestor(repo, sha, head):
        return False
    if not is_ancestor(repo, head, sha):
        raise GitError(
            f"{branch} has moved on to {head[:12]}: {sha[:12]} is not a fast-forward of it"
            " (rebase the task branch, or merge by hand)"
        )
    for entry in worktree_list(repo):
        if entry.branch == branch and entry.path.exists():
            git(["merge", "--ff-only", "--quiet", sha], cwd=entry.path)
            return True
    git(["update-ref", "--", f"refs/heads/{branch}", sha, head], cwd=repo)
    return True


def worktree_add_detached(repo: Path, path: Path, commit: str) -> None:
    """Add a worktree at `path` with `commit` checked out on a detached HEAD (no branch made)."""
    sha = _require_sha(repo, commit)
    git(
        [*_PARALLEL_CHECKOUT, "worktree", "add", "--quiet", "--detach", "--", str(path), sha],
        cwd=repo,
    )
