"""Objects without a working tree: blobs and trees read from a commit, and blobs, trees and
commits written for data branches (state sync); no index or HEAD is involved."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from loopctl.errors import GitError
from loopctl.git.command import git
from loopctl.git.refs import _FULL_SHA, _NO_REPLACE, _require_sha
from loopctl.git.runner import _split_z


def read_blob(repo: Path, commit: str, path: str) -> str | None:
    """The content of `path` in `commit` (surrogate-escaped text), or None when it has none."""
    sha = _require_sha(repo, commit)
    # cat-file never applies filters: what comes back is the stored bytes.
    result = git(["cat-file", "blob", f"{sha}:{path}"], cwd=repo, check=False)
    return result.stdout if result.returncode == 0 else None


def paths_in_commit(repo: Path, commit: str, paths: Sequence[str]) -> set[str]:
    """Which of `paths` (repository-relative files) `commit` holds."""
    if not paths:
        return set()
    sha = _require_sha(repo, commit)
    # Literal pathspecs: a name with `*` or a leading `:(` is a file name, never a pattern.
    specs = [f":(literal){p}" for p in paths]
    out = git(["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha, "--", *specs], cwd=repo)
    wanted = set(paths)
    return {name for name in _split_z(out.stdout) if name in wanted}


def tracked_under(repo: Path, commit: str, paths: Sequence[str]) -> set[str]:
    """Those of `paths` that `commit` tracks a file in (or at)."""
    if not paths:
        return set()
    out = git(
        [
            "ls-tree",
            "-r",
            "--name-only",
            "-z",
            "--full-tree",
            _require_sha(repo, commit),
            "--",
            *(f":(top,literal){p.strip('/')}" for p in paths),
        ],
        cwd=repo,
        extra_env=_NO_REPLACE,
    ).stdout
    found = _split_z(out)
    return {
        p
        for p in paths
        if any(f == p.strip("/") or f.startswith(p.strip("/") + "/") for f in found)
    }


def write_blob(repo: Path, content: str) -> str:
    """Store `content` as a blob (no filters) and return its sha."""
    out = git(["hash-object", "-w", "--no-filters", "--stdin"], cwd=repo, input=content).stdout
    return out.strip()


def write_tree(repo: Path, files: Mapping[str, str]) -> str:
    """A tree of regular files at the top level (name -> blob sha), built without an index."""
    for name in files:
        if not name or "/" in name or "\t" in name or "\n" in name or name in (".", ".."):
            raise ValueError(f"not a top-level file name: {name!r}")
    listing = "".join(f"100644 blob {sha}\t{name}\n" for name, sha in sorted(files.items()))
    return git(["mktree"], cwd=repo, input=listing).stdout.strip()


def tree_of(repo: Path, commit: str) -> str:
    """The sha of the tree a commit records."""
    sha = _require_sha(repo, commit)
    return git(["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=repo).stdout.strip()


def tree_of_commit(repo: Path, commit: str) -> str:
    """The tree `commit` records, replacement refs ignored."""
    sha = _require_sha(repo, commit)
    return git(
        ["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=repo, extra_env=_NO_REPLACE
    ).stdout.strip()


def commit_tree(
    repo: Path,
    tree: str,
    parents: Sequence[str],
    message: str,
    *,
    author_name: str,
    author_email: str,
) -> str:
    """A commit of `tree` on `parents`; no ref, index or working tree changes."""
    identity = {
        "GIT_AUTHOR_NAME": author_name,
        "GIT_AUTHOR_EMAIL": author_email,
        "GIT_COMMITTER_NAME": author_name,
        "GIT_COMMITTER_EMAIL": author_email,
    }
    args = ["commit-tree", "--no-gpg-sign"]
    for parent in parents:
        args += ["-p", _require_sha(repo, parent)]
    if not _FULL_SHA.match(tree):
        raise GitError(f"not a tree sha: {tree!r}")
    args += ["-F", "-", tree]
    return git(args, cwd=repo, input=message, extra_env=identity).stdout.strip()
