"""`git`: one hardened command, with the guards its subcommand needs (the call every query uses)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from loopctl.errors import GitError
from loopctl.git.neutralise import _config_env, _filter_neutralisers
from loopctl.git.runner import (
    _LOCAL_ONLY,
    GitResult,
    _base_env,
    _first_line,
    _git_argv,
    _run,
    _subcommand,
    _subcommand_at,
    _work_tree_env,
)

# Subcommands that never read working-tree file content, so no clean/smudge filter can run.
_CONTENT_FREE = frozenset(
    {
        "--version",
        "branch",
        "check-ref-format",
        "clean",  # lists untracked files by name and deletes them: no content is read
        "config",
        "for-each-ref",
        "ls-files",
        "ls-remote",
        "merge-base",
        "push",
        "remote",
        "rev-parse",
        "show-ref",
        "symbolic-ref",
        "update-ref",
        "version",
    }
)

# Commands that read or write objects only, never the index or the working tree, as loopctl runs
# them (`_objects_only`): no filter, textconv or driver runs, and git never runs inside a
# submodule, so the config that names those is not read (two git processes fewer each: 107 to 97
# in a `goal` run). Not read-tree or write-tree: writing an index re-reads a racily clean file's
# content, through its clean filter. What config could still steer here is a lazy fetch of a
# missing object, which GIT_NO_LAZY_FETCH stops; the second guard refuses the local transport
# outright (where the upload-pack program a remote names would run).
_OBJECTS_ONLY = frozenset({"commit-tree", "ls-tree", "mktree", "rev-list"})
_OBJECTS_ONLY_PINS = (("protocol.file.allow", "never"),)

# Commands that make a repository: the worktree around their folder is not theirs (git refuses
# GIT_WORK_TREE without GIT_DIR for them).
_MAKES_A_REPOSITORY = frozenset({"init", "clone"})

# `git worktree` bookkeeping that reads no file content (`add` checks files out: not here).
_CONTENT_FREE_WORKTREE = frozenset({"list", "lock", "prune", "unlock"})


def git(
    args: Sequence[str],
    *,
    cwd: Path,
    check: bool = True,
    timeout: float = 120,
    input: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> GitResult:
    """Run one hardened git command in `cwd`; raise GitError on failure when `check`."""
    argv, env = _hardened(args, cwd, extra_env)
    result = _run(argv, cwd=cwd, env=env, timeout=timeout, input=input)
    if check and result.returncode != 0:
        raise GitError(f"git {_subcommand(args)} failed: {_first_line(result)}")
    return result


def _hardened(
    args: Sequence[str], cwd: Path, extra_env: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one hardened git command."""
    subcommand = _subcommand(args)
    if any("\0" in arg for arg in args):
        raise GitError(f"git {subcommand} refused: an argument contains a NUL byte")
    env = _base_env()
    if subcommand not in _MAKES_A_REPOSITORY:
        env.update(_work_tree_env(cwd))
    if _objects_only(subcommand, args):
        env.update(_config_env(_OBJECTS_ONLY_PINS))
    elif not _content_free(subcommand, args):
        env.update(_filter_neutralisers(cwd, (extra_env or {}).get("GIT_INDEX_FILE")))
    env.update(extra_env or {})
    return _git_argv(*_LOCAL_ONLY, *args), env


def _content_free(subcommand: str, args: Sequence[str]) -> bool:
    """True when the command reads no working-tree file content (no filter can run)."""
    if subcommand == "worktree":
        at = _subcommand_at(args)
        action = args[at + 1] if at is not None and at + 1 < len(args) else ""
        return action in _CONTENT_FREE_WORKTREE
    return subcommand in _CONTENT_FREE


def _objects_only(subcommand: str, args: Sequence[str]) -> bool:
    """True when the command reads or writes objects only: one of `_OBJECTS_ONLY`, or
    `cat-file` without an option that filters (`--filters`, `--textconv`, a batch that may)."""
    if subcommand == "cat-file":
        at = _subcommand_at(args)
        options = [arg for arg in args[at + 1 :] if arg.startswith("-")] if at is not None else []
        return all(option in ("-t", "-s", "-e", "-p") for option in options)
    return subcommand in _OBJECTS_ONLY
