"""Proposals' patches (issue 31, item 3): the patch between two trees, a patch applied to a tree
in a private index, the files a commit holds under some globs, and a worktree's paths put back
as a commit has them. No working tree is read for the first three; the last never follows a
link an agent planted."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from loopctl.errors import GitError
from loopctl.git.command import git
from loopctl.git.refs import _FULL_SHA, _NO_REPLACE, _require_sha, require_work_tree
from loopctl.git.runner import _first_line, _split_z
from loopctl.globs import first_match
from loopctl.nofollow import remove_tree

# What a patch made here must be, whatever the repository's config says (see diff.patch_between).
_PATCH_OPTIONS = (
    "--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index",
    "--src-prefix=a/", "--dst-prefix=b/", "--ignore-submodules=dirty",
)  # fmt: skip


def _tree(repo: Path, ref: str) -> str:
    """The tree `ref` names: a tree sha as it is, a commit's tree otherwise."""
    if _FULL_SHA.match(ref):
        kind = git(["cat-file", "-t", ref], cwd=repo, extra_env=_NO_REPLACE).stdout.strip()
        if kind == "tree":
            return ref
    sha = _require_sha(repo, ref)
    return git(
        ["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=repo, extra_env=_NO_REPLACE
    ).stdout.strip()


def tree_patch(repo: Path, old: str, new: str) -> str:
    """The unified diff from `old` to `new` (trees or commits), as `git apply` takes it."""
    args = ["-c", "core.quotePath=false", "diff", *_PATCH_OPTIONS]
    args += [_tree(repo, old), _tree(repo, new), "--"]
    return git(args, cwd=repo, extra_env=_NO_REPLACE).stdout


def apply_to_tree(repo: Path, base: str, patch: str) -> str:
    """The tree `base` (a tree or commit) becomes with `patch` applied; GitError naming what
    does not apply. Neither the repository's index nor any working tree is touched."""
    tree = _tree(repo, base)
    with tempfile.TemporaryDirectory(prefix="loopctl-proposal-") as tmp:
        env = {**_NO_REPLACE, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(["read-tree", tree], cwd=repo, extra_env=env)
        # --cached: the index only; no --unsafe-paths, so git itself refuses a path outside.
        done = git(
            ["apply", "--cached", "--whitespace=nowarn", "-"],
            cwd=repo,
            input=patch,
            extra_env=env,
            check=False,
        )
        if done.returncode != 0:
            raise GitError(f"the patch does not apply: {_first_line(done)}")
        return git(["write-tree"], cwd=repo, extra_env=env).stdout.strip()


def tree_files(
    repo: Path, ref: str, globs: Sequence[str], *, literal: bool = False
) -> list[tuple[str, str, str]]:
    """(mode, object sha, path) of each file `ref` (a tree or commit) holds under `globs`
    (git's `**` globs, from the top; `literal`: file names, no pattern), sorted by path."""
    if not globs:
        return []
    # ls-tree takes no glob magic: every file is listed and the globs are matched here.
    specs = [f":(top,literal){name}" for name in globs] if literal else []
    out = git(
        ["ls-tree", "-r", "-z", "--full-tree", _tree(repo, ref), "--", *specs],
        cwd=repo,
        extra_env=_NO_REPLACE,
    ).stdout
    found = []
    for record in _split_z(out):
        meta, _, path = record.partition("\t")
        mode, _kind, sha = meta.split(" ")
        if literal or first_match(path, globs) is not None:
            found.append((mode, sha, path))
    return sorted(found, key=lambda entry: entry[2])


def restore_paths(worktree: Path, base: str, paths: Sequence[str]) -> None:
    """Put `paths` of `worktree` back as commit `base` holds them: absent there, deleted here.

    A link or folder an agent put where `base` has a file is removed first, never followed,
    so the checkout writes the file itself and nothing outside the worktree.
    """
    if not paths:
        return
    sha = _require_sha(worktree, base)
    require_work_tree(worktree, "restore paths of")
    held = set(
        _split_z(
            git(
                ["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha, "--"]
                + [f":(top,literal){p}" for p in paths],
                cwd=worktree,
                extra_env=_NO_REPLACE,
            ).stdout
        )
    )
    # Deepest first: an added link `.loop` goes after the files an agent added under it.
    for path in sorted(paths, key=lambda p: p.count("/"), reverse=True):
        if path not in held:
            # Behind a link or a file put on the way, no such path is in the worktree: nothing
            # to delete (a link named itself goes on its own).
            with contextlib.suppress(NotADirectoryError):
                remove_tree(worktree / path, within=worktree)
            continue
        target = worktree / path
        for parent in reversed(Path(path).parents[:-1]):
            # A folder of the path turned into a link (or a file): git would refuse, or worse.
            try:
                mode = os.lstat(worktree / parent).st_mode
            except FileNotFoundError:
                break
            if not stat.S_ISDIR(mode):
                remove_tree(worktree / parent, within=worktree)
                break
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(mode):
            remove_tree(target, within=worktree)
    restore = sorted(p for p in paths if p in held)
    if restore:
        git(
            ["checkout", "--pathspec-from-file=-", "--pathspec-file-nul", sha],
            cwd=worktree,
            input="".join(f":(top,literal){name}\0" for name in restore),
            extra_env=_NO_REPLACE,
        )
