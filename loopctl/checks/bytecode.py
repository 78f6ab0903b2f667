"""Cached bytecode a check must not read: what a maker left in the worktree's `__pycache__`.

Python trusts a `__pycache__/<name>.<tag>.pyc` whose header holds its source's mtime and size,
and pytest does the same with its rewritten test modules. A maker can write such a file beside
a protected test or the code under test, with the header copied from the real source: the
check would then run the planted code while every source, and so `git diff`, is unchanged.

Before each check loopctl removes every `__pycache__` in the worktree (no link followed); a
check runs with PYTHONDONTWRITEBYTECODE (engine.context.check_env), so it leaves none behind to
be committed or read by the next one. The bytecode of the interpreter and of a venv outside the
worktree, which no agent can write, is still read: a check does not compile all of pytest and
its plugins again (a check of a small project took 2.7 s instead of 0.9 s).

Where the base commit tracks a file inside a `__pycache__` (rare, and deleting it would change
the work), nothing is removed and the check reads no cached bytecode at all: its own fresh
PYTHONPYCACHEPREFIX, as every check did before (seconds more for each check).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from loopctl import git, nofollow

CACHE_FOLDER = "__pycache__"


def check_bytecode_env(worktree: Path, base_sha: str, fresh_cache: Path) -> Mapping[str, str]:
    """Clear `worktree` of cached bytecode so that a check reads none an agent could have
    written; where that would change a tracked file, what the check's environment adds
    instead: a cache folder of its own (`fresh_cache`, which must not exist yet)."""
    found = planted_caches(worktree)
    own_cache = {"PYTHONPYCACHEPREFIX": str(fresh_cache)}
    if found and git.tracked_under(worktree, base_sha, found):
        return own_cache
    try:
        for relative in found:
            nofollow.remove_tree(worktree / relative, within=worktree)
    except OSError:
        # A folder became a link since the walk (sandbox off: a process the agent left
        # behind): it is not followed, and what could not be removed is not read either.
        return own_cache
    return {}


def planted_caches(worktree: Path) -> list[str]:
    """Every entry named `__pycache__` under `worktree` (a folder, or a link or file in its
    place), relative; git's own folder is not walked. `os.fwalk` opens each folder relative to
    its parent and never enters a link."""
    found: list[str] = []
    for folder, subfolders, files, _fd in os.fwalk(worktree, follow_symlinks=False):
        relative = os.path.relpath(folder, worktree)
        # fwalk lists a link to a folder among the folders, without entering it.
        for name in (*subfolders, *files):
            if name == CACHE_FOLDER:
                found.append(name if relative == "." else os.path.join(relative, name))
        subfolders[:] = [
            name
            for name in subfolders
            if name != CACHE_FOLDER and not (relative == "." and name == ".git")
        ]
    return sorted(found)
