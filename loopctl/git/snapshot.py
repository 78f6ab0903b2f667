"""Invariant 12, commit exactly what was checked: a worktree's files as a tree (its own index
never read), committed on a branch only if the branch is where loopctl left it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from loopctl.errors import GitError
from loopctl.git.command import git
from loopctl.git.diff import _SAFE_DIFF
from loopctl.git.refs import _FULL_SHA, _NO_REPLACE, _require_sha, head_sha, require_work_tree
from loopctl.git.runner import _first_line


def snapshot_tree(
    worktree: Path, parent: str, *, exclude: Sequence[str] = (), seed: Path | None = None
) -> str:
    """The worktree's files as a tree object, built in a private index started from `parent`.

    Untracked files are included and ignored ones are not (as `git add -A`); each path in
    `exclude` keeps its version in `parent` (absent there: absent here). The worktree's own index
    is never read: an agent can set flags in it (assume-unchanged, skip-worktree) that hide a
    changed file from `git add`.

    `seed`, when it exists, is an index of `parent` that loopctl took from a worktree it had
    just created (no flags, every file's stat data): starting from a copy of it, `git add`
    hashes only the files that changed instead of every file, with the same result.
    """
    sha = _require_sha(worktree, parent)
    require_work_tree(worktree, "snapshot")
    with tempfile.TemporaryDirectory(prefix="loopctl-snapshot-") as tmp:
        index = Path(tmp) / "index"
        env = {**_NO_REPLACE, "GIT_INDEX_FILE": str(index)}
        if seed is not None and seed.is_file():
            # copy2 keeps the index file's mtime, on which git's racy-clean check relies: an
            # entry as new as the index is re-read, not trusted by its stat data.
            shutil.copy2(seed, index)
        else:
            git(["read-tree", sha], cwd=worktree, extra_env=env)
        git(["add", "-A"], cwd=worktree, extra_env=env)
        if exclude:
            # ":(top,literal)" keeps names like "*" from acting as pathspec magic.
            git(
                ["reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul", sha],
                cwd=worktree,
                input="".join(f":(top,literal){name}\0" for name in exclude),
                extra_env=env,
            )
        return git(["write-tree"], cwd=worktree, extra_env=env).stdout.strip()


def commit_snapshot(
    repo: Path,
    branch: str,
    tree: str,
    parent: str,
    message: str,
    *,
    author_name: str,
    author_email: str,
    date: str,
    expect: str | None,
) -> str:
    """Commit `tree` on `parent` and point `branch` at it, only if it still points at `expect`.

    `date` ("<unix seconds> +0000") makes the commit the same object when a resumed run makes
    it again; `expect` None means the branch must not exist.
    """
    if not _FULL_SHA.match(tree):
        raise GitError(f"not a tree sha: {tree!r}")
    parent_sha = _require_sha(repo, parent)
    identity = {
        **_NO_REPLACE,
        "GIT_AUTHOR_NAME": author_name,
        "GIT_AUTHOR_EMAIL": author_email,
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_NAME": author_name,
        "GIT_COMMITTER_EMAIL": author_email,
        "GIT_COMMITTER_DATE": date,
    }
    sha = git(
        ["commit-tree", "--no-gpg-sign", "-p", parent_sha, "-F", "-", tree],
        cwd=repo,
        input=message,
        extra_env=identity,
    ).stdout.strip()
    if expect != sha:
        old = expect if expect is not None else "0" * len(sha)
        # --no-deref: a task branch an agent turned into a symbolic ref must not move its target.
        result = git(
            ["update-ref", "--no-deref", "--", f"refs/heads/{branch}", sha, old],
            cwd=repo,
            check=False,
        )
        if result.returncode != 0:
            raise GitError(
                f"{branch} moved while loopctl committed to it ({_first_line(result)});"
                " nothing was committed"
            )
    return sha


def seed_snapshot_index(worktree: Path, seed: Path, *, git_dir: Path | None = None) -> None:
    """Keep a copy of a just-created worktree's index as the seed of its snapshots (`git_dir`:
    the worktree's git dir when the caller knows it)."""
    if git_dir is not None:
        index = git_dir / "index"
    else:
        index = Path(
            git(
                ["rev-parse", "--path-format=absolute", "--git-path", "index"], cwd=worktree
            ).stdout.strip()
        )
    seed.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(index, seed)  # mtime kept: see snapshot_tree


def reset_index(worktree: Path, commit: str) -> None:
    """Make the worktree's index match `commit` (its files stay as they are)."""
    require_work_tree(worktree, "reset the index of")
    git(["read-tree", _require_sha(worktree, commit)], cwd=worktree, extra_env=_NO_REPLACE)


def commit_all(
    worktree: Path,
    message: str,
    *,
    author_name: str,
    author_email: str,
    exclude: Sequence[str] = (),
) -> str | None:
    """Stage everything (deletions too) but `exclude`, and commit; None when nothing changed."""
    git(["add", "-A"], cwd=worktree)
    if exclude:
        # Files loopctl placed itself (copied .env files, setup output) are not the task's work.
        git(["reset", "--quiet", "--", *exclude], cwd=worktree, check=False)
    staged = git(["diff", "--cached", "--quiet", *_SAFE_DIFF], cwd=worktree, check=False)
    if staged.returncode == 0:
        return None
    if staged.returncode != 1:
        raise GitError(f"git diff failed: {_first_line(staged)}")
    identity = {
        "GIT_AUTHOR_NAME": author_name,
        "GIT_AUTHOR_EMAIL": author_email,
        "GIT_COMMITTER_NAME": author_name,
        "GIT_COMMITTER_EMAIL": author_email,
    }
    git(
        [
            "-c", f"user.name={author_name}",
            "-c", f"user.email={author_email}",
            "commit", "--quiet", "--no-verify", "--no-gpg-sign", "--file=-",
        ],
        cwd=worktree,
        input=message,
        extra_env=identity,
    )  # fmt: skip
    return head_sha(worktree)
