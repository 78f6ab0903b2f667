"""Refs and commits: what a name points at, ancestry, and moving a branch (no working tree)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from loopctl.errors import ForeignWorkTree, GitError
from loopctl.git.command import git
from loopctl.git.runner import _first_line

_FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")

# Replacement refs would let a planted refs/replace/* swap the commits loopctl reads.
_NO_REPLACE = {"GIT_NO_REPLACE_OBJECTS": "1"}


def is_git_repo(path: Path) -> bool:
    """True when `path` is inside a git working tree."""
    try:
        result = git(["rev-parse", "--is-inside-work-tree"], cwd=path, check=False)
    except GitError:
        return False
    return result.returncode == 0 and result.stdout.strip() == "true"


def toplevel(path: Path) -> Path:
    """The top folder of the working tree containing `path`."""
    return Path(git(["rev-parse", "--show-toplevel"], cwd=path).stdout.rstrip("\n"))


def require_work_tree(worktree: Path, doing: str) -> None:
    """Raise ForeignWorkTree unless git, run in `worktree`, takes that very folder as its
    working tree. What loopctl snapshots, resets or cleans must be the task's worktree, never
    the main checkout or another tree a rewritten `.git` file or `core.worktree` leads to."""
    result = git(["rev-parse", "--show-toplevel"], cwd=worktree, check=False)
    top = result.stdout.rstrip("\n")
    if result.returncode == 0 and os.path.realpath(top) == os.path.realpath(worktree):
        return
    found = f"git's working tree there is {top}" if result.returncode == 0 else _first_line(result)
    raise ForeignWorkTree(
        f"refusing to {doing} {worktree}: {found}, not the worktree itself (its `.git` file or"
        " its git admin folder was changed, maybe by the agent); loopctl left it alone"
    )


def resolve_commit(repo: Path, ref: str) -> str:
    """The full sha of the commit `ref` names; GitError "unknown ref" when there is none."""
    sha = ""
    if "\0" not in ref:
        result = git(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
            cwd=repo,
            check=False,
        )
        sha = result.stdout.strip() if result.returncode == 0 else ""
    if not _FULL_SHA.match(sha):
        raise GitError(
            f"unknown ref {ref!r}: no branch, tag or commit by that name in {repo} "
            "(check the spelling, or fetch it first)"
        )
    return sha


def has_commits(repo: Path) -> bool:
    """True once HEAD points at a commit."""
    result = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=repo, check=False)
    return result.returncode == 0


def current_branch(repo: Path) -> str | None:
    """The checked-out branch's short name, or None when HEAD is detached."""
    result = git(["symbolic-ref", "--quiet", "HEAD"], cwd=repo, check=False)
    ref = result.stdout.rstrip("\n")
    if result.returncode != 0 or not ref.startswith("refs/heads/"):
        return None
    return ref.removeprefix("refs/heads/")


def branch_exists(repo: Path, branch: str) -> bool:
    """True when refs/heads/<branch> exists."""
    # for-each-ref walks the ref store, so a hostile name is never used to open a file.
    wanted = f"refs/heads/{branch}"
    out = git(["for-each-ref", "--format=%(refname)", "--", wanted], cwd=repo).stdout
    return wanted in out.splitlines()


def delete_branch(repo: Path, branch: str, force: bool = True) -> None:
    """Delete a local branch (with `force`, even when it is not merged)."""
    git(["branch", "-D" if force else "-d", "--", branch], cwd=repo)


def merge_base(repo: Path, a: str, b: str) -> str | None:
    """The best common ancestor of two commits, or None when they share no history."""
    result = git(["merge-base", "--end-of-options", a, b], cwd=repo, check=False)
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and _FULL_SHA.match(sha) else None


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    """True when `ancestor` is reachable from `descendant` (or they are the same commit)."""
    result = git(
        ["merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant],
        cwd=repo,
        check=False,
    )
    return result.returncode == 0


def branch_head(repo: Path, branch: str) -> str | None:
    """The commit a local branch points at, or None when it does not exist."""
    result = git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"refs/heads/{branch}^{{commit}}"],
        cwd=repo,
        check=False,
    )
    sha = result.stdout.strip()
    return sha if result.returncode == 0 and _FULL_SHA.match(sha) else None


def rename_branch(repo: Path, old: str, new: str) -> None:
    git(["branch", "-m", "--", old, new], cwd=repo)


def point_branch(repo: Path, branch: str, sha: str) -> None:
    """Move `branch` to `sha` (creating it), without touching any working tree."""
    git(["update-ref", "--", f"refs/heads/{branch}", sha], cwd=repo)


def switch_branch(worktree: Path, branch: str) -> None:
    """Attach the worktree's HEAD to `branch`, keeping uncommitted changes."""
    require_work_tree(worktree, "switch the branch of")
    git(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], cwd=worktree)


def valid_branch_name(repo: Path, name: str) -> bool:
    """Whether git accepts `name` as a branch name (checked as refs/heads/NAME: never an option)."""
    if not name or "\0" in name or name.startswith("-"):
        return False
    result = git(["check-ref-format", f"refs/heads/{name}"], cwd=repo, check=False)
    return result.returncode == 0


def git_dir(worktree: Path) -> Path:
    """The absolute git dir of a worktree (for a linked one, <main>/.git/worktrees/<name>)."""
    return Path(git(["rev-parse", "--absolute-git-dir"], cwd=worktree).stdout.rstrip("\n"))


def common_dir(repo: Path) -> Path:
    """The absolute git dir shared by all worktrees of the repository."""
    out = git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=repo).stdout
    return Path(out.rstrip("\n"))


def head_sha(worktree: Path) -> str:
    """The full sha HEAD points at."""
    return git(["rev-parse", "--verify", "HEAD^{commit}"], cwd=worktree).stdout.strip()


def ref_values(repo: Path) -> dict[str, str]:
    """Every ref of the repository (branches, tags, remote-tracking, notes, stash…) -> sha."""
    out = git(["for-each-ref", "--format=%(objectname) %(refname)"], cwd=repo).stdout
    values: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition(" ")
        if name:
            values[name] = sha
    return values


def commits_between(repo: Path, old: str, new: str, *, limit: int = 100) -> list[str]:
    """Commits reachable from `new` but not from `old`, newest first (at most `limit`)."""
    a, b = _require_sha(repo, old), _require_sha(repo, new)
    out = git(
        ["rev-list", f"--max-count={limit}", "--end-of-options", b, f"^{a}"],
        cwd=repo,
        extra_env=_NO_REPLACE,
    ).stdout
    return [line for line in out.split() if _FULL_SHA.match(line)]


def _require_sha(repo: Path, ref: str) -> str:
    return ref if _FULL_SHA.match(ref) else resolve_commit(repo, ref)


# Objects an open inbox item will need (a held snapshot's tree) are reachable from nothing else:
# git's own gc prunes such objects after two weeks, and an approval may come later than that.
HELD = "refs/loopctl/held/"


def hold_object(repo: Path, name: str, sha: str) -> None:
    """Keep object `sha` from git's gc, as `refs/loopctl/held/<name>`, until `release_object`."""
    if not _FULL_SHA.match(sha):
        raise GitError(f"not an object id: {sha!r}")
    git(["update-ref", "--no-deref", "--", HELD + name, sha], cwd=repo)


def release_object(repo: Path, name: str) -> None:
    """Let git's gc have what `hold_object(name)` kept (nothing held: nothing to do)."""
    git(["update-ref", "--no-deref", "-d", "--", HELD + name], cwd=repo)
