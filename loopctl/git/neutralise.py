"""What the repository's own git config (agent-writable) names, and the command-scope pins that
blank it: filters, textconv, diff and merge drivers, in the repository and in its submodules."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from loopctl.errors import GitError
from loopctl.git.runner import _base_env, _first_line, _git_argv, _run, _split_z, _work_tree_env

# Config scopes the user controls; "local" and "worktree" (and what they include) are writable
# by the agent in a worktree of the repository.
_TRUSTED_SCOPES = frozenset({"system", "global"})
_PLANTABLE_SCOPES = frozenset({"local", "worktree"})

# Config keys that name a program git runs on file content (a filter, a diff or merge driver).
_DRIVER_KEY = re.compile(
    r"^(?:filter\..+\.(?:clean|smudge|process)|diff\..+\.(?:textconv|command)|diff\.external"
    r"|merge\..+\.driver)$",
    re.DOTALL,
)

# A remote's upload-pack program, which a lazy fetch runs (see _filter_neutralisers).
_UPLOAD_PACK_KEY = re.compile(r"^remote\..+\.uploadpack$", re.DOTALL)


def _filter_neutralisers(cwd: Path, index: str | None = None) -> dict[str, str]:
    """Environment that blanks every content program (filter, textconv, diff or merge driver)
    the repository's own config names, or the own config of any submodule in it."""
    # A driver from repository config (local or worktree scope, or a file either includes)
    # could be agent-planted, and `.gitattributes` is in the agent's hands. An empty command
    # disables a filter; a filter marked `required` then makes git fail loudly rather than
    # stage unfiltered content. Diffs also pass --no-ext-diff and --no-textconv.
    keys = sorted(
        {key for scope, key, _ in _config_entries(cwd) if scope in _PLANTABLE_SCOPES}
        | _submodule_config_keys(cwd, index)
    )
    pins = [(key, "") for key in keys if _DRIVER_KEY.match(key)]
    # A partial clone fetches a missing object through the remote config names, running its
    # upload-pack program: a second guard next to GIT_NO_LAZY_FETCH. The program runs here only
    # over the local transport (ssh is pinned to `false`), and git keeps the *first*
    # remote.<name>.uploadpack it reads ("more than one uploadpack given, using the first"), so
    # a command-scope value cannot override the repository's: refuse that transport instead.
    if any(_UPLOAD_PACK_KEY.match(key) for key in keys):
        pins.append(("protocol.file.allow", "never"))
    return _config_env(pins)


def _submodule_config_keys(cwd: Path, index: str | None) -> set[str]:
    """Keys of the own config (local and worktree scope) of every populated submodule git
    would ask whether it is dirty, nested ones included.

    `git add` always asks (it ignores diff.ignoreSubmodules), and `git status` does when a
    `.gitmodules` the agent wrote says `ignore = none`: git runs `git status` inside each
    gitlink of the index whose folder holds a `.git` (a registered submodule under
    .git/modules, or a repository the agent made itself), with that repository's own config,
    both agent-writable. That child git inherits the command-scope pins (git passes
    GIT_CONFIG_PARAMETERS and GIT_CONFIG_COUNT on to it), so blanking these keys in the
    superproject's command blanks them there too.
    """
    keys: set[str] = set()
    # As git runs its child: GIT_DIR=.git in the submodule's folder, no index of the parent's.
    child_env = {**_base_env(), "GIT_DIR": ".git"}
    pending = _gitlink_folders(cwd, {**_base_env(), **_work_tree_env(cwd)}, index)
    seen: set[Path] = set()
    while pending:
        folder = pending.pop()
        if folder in seen or not os.path.lexists(folder / ".git"):
            continue  # an unpopulated submodule: git asks nothing of it
        seen.add(folder)
        # A `.git` git cannot read makes git's own check die too: failing here loses nothing.
        entries = _config_entries(folder, child_env)
        keys |= {key for scope, key, _ in entries if scope in _PLANTABLE_SCOPES}
        pending.extend(_gitlink_folders(folder, child_env, None))
    return keys


def _gitlink_folders(cwd: Path, env: dict[str, str], index: str | None) -> list[Path]:
    """The folders of the gitlinks (mode 160000) in the index of the repository at `cwd`."""
    if index is not None:
        env = {**env, "GIT_INDEX_FILE": index}
    # The index first: most repositories have no gitlink, and then the working tree's top (a
    # git call on every guarded command) is never needed.
    staged = _run(
        _git_argv("ls-files", "--stage", "-z", "--full-name", "--", ":(top)"),
        cwd=cwd, env=env, timeout=60, input=None,
    )  # fmt: skip
    if staged.returncode != 0:
        if _no_work_tree(staged.stderr):
            return []  # no repository yet
        raise GitError(f"cannot list the index in {cwd}: {_first_line(staged)}")
    gitlinks = [
        path
        for info, _, path in (record.partition("\t") for record in _split_z(staged.stdout))
        if info.startswith("160000 ")
    ]
    if not gitlinks:
        return []
    top = _run(
        _git_argv("rev-parse", "--show-toplevel"),
        cwd=cwd, env=env, timeout=30, input=None,
    )  # fmt: skip
    if top.returncode != 0:
        if _no_work_tree(top.stderr):
            return []  # a git dir's own index: git runs no submodule's status from there
        raise GitError(f"cannot find the working tree of {cwd}: {_first_line(top)}")
    root = Path(top.stdout.rstrip("\n"))
    return [Path(os.path.realpath(root / path)) for path in gitlinks]


def _no_work_tree(stderr: str) -> bool:
    return "must be run in a work tree" in stderr or "not a git repository" in stderr


def _config_entries(
    cwd: Path, env: dict[str, str] | None = None
) -> list[tuple[str, str, str | None]]:
    """Every config entry git sees in `cwd` as (scope, key, value), includes expanded."""
    # Failing to list them fails the command (no silent fallback to running what they name).
    listed = _run(
        _git_argv("config", "--list", "--show-scope", "--null"),
        cwd=cwd,
        env=env if env is not None else {**_base_env(), **_work_tree_env(cwd)},
        timeout=30,
        input=None,
    )
    if listed.returncode != 0:
        raise GitError(f"cannot read the git config in {cwd}: {_first_line(listed)}")
    fields = listed.stdout.split("\0")
    entries: list[tuple[str, str, str | None]] = []
    for scope, record in zip(fields[::2], fields[1::2], strict=False):
        key, newline, value = record.partition("\n")
        entries.append((scope, key, value if newline else None))
    return entries


def _config_env(pins: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Command-scope config as environment: GIT_CONFIG_KEY_n carries any key exactly, even a
    driver or URL name containing "=", which `-c` would split."""
    env = {"GIT_CONFIG_COUNT": str(len(pins))} if pins else {}
    for i, (key, value) in enumerate(pins):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env
