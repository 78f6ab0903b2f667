"""A goal that held on a base, remembered: the next task or tick on the same base tree, with the
same check in the same environment, is done without running the suite again.

A heartbeat loop whose goal holds would otherwise pay a full test run on every tick although
nothing changed. The result is keyed by everything it depends on that loopctl can see: the
base commit's tree (its sha: tracked lockfiles and manifests are in it), the check commands
and which of them are counted, the check's environment (names, and values of what is not a
secret), the programs each command starts (their file identity; for Python, the interpreter
and the names of what its venv has installed; for Node, the checkout's `node_modules` as its
last install left it), and the worktree's setup commands and copied files. `[checker] cache =
false` turns reuse off for a check that depends on the outside world.

Only a passing check is remembered, only for that exact tree, and only where no agent can
forge it: the entries live in `.loop/cache/checks/`, in the main checkout's `.loop/`, which the
sandbox keeps read-only for every agent and check (in place as well); with `[sandbox] mode =
"off"` an agent could write there, so nothing is reused. In-place runs check the checkout's
working tree, which no tree sha describes, so they are never reused either.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopctl import git, node_links
from loopctl.atomicfile import write_atomic
from loopctl.checks import verdicts as checks
from loopctl.checks.import_roots import python_of, site_folders
from loopctl.definitions.sandbox import SandboxMode
from loopctl.engine.context import RunContext, check_commands, check_env
from loopctl.engine.workspace import resolve_base
from loopctl.errors import LoopctlError, swallowed
from loopctl.globs import compile_glob
from loopctl.journal.schema import Note
from loopctl.secrets import is_secret_name
from loopctl.tasks.spec import TaskSpec
from loopctl.worktrees import Workspace

logger = logging.getLogger(__name__)

# 2: checks of known test runners are armed (checks.runners); a pass remembered before is not
# reused, as it was decided on a printed summary alone.
CACHE_VERSION = 2
CHECK_CACHED = "check_cached"  # the note a reused result records
_KEEP = 64  # entries kept; the oldest go first


@dataclass(frozen=True, slots=True)
class Lookup:
    """What a task's base was looked up under, and the remembered verdict if there is one."""

    key: str
    tree: str
    verdict: checks.Verdict | None


def cache_folder(ctx: RunContext) -> Path:
    return ctx.paths.loop_dir / "cache" / "checks"


def applies(ctx: RunContext) -> bool:
    """Whether this run's goal check on a base may be reused (and so is worth remembering):
    a command-checked goal, checked first on a task's base (see `verdict.check_first`)."""
    condition = ctx.condition
    return (
        ctx.loop.checker.cache
        and not ctx.in_place
        and ctx.project.config.sandbox is not SandboxMode.OFF
        and condition is not None
        and not condition.judged
        and ctx.judge is None
        and ctx.loop.tasks is None
    )


def lookup(ctx: RunContext, spec: TaskSpec) -> Lookup | None:
    """The task's base looked up in the cache; None when reuse does not apply (or its base
    cannot be resolved, which preparing the worktree reports)."""
    if not applies(ctx):
        return None
    try:
        tree = git.tree_of_commit(
            ctx.paths.root, resolve_base(ctx.rec, spec.base_ref or ctx.base_ref)
        )
    except LoopctlError:
        return None
    key = cache_key(ctx, tree)
    entry = _read(cache_folder(ctx) / f"{key}.json")
    if entry is None or entry.get("key") != key or entry.get("tree") != tree:
        return Lookup(key, tree, None)
    if entry.get("passed") is not True:
        return Lookup(key, tree, None)
    commands = [c for c in entry.get("commands", []) if isinstance(c, dict)]
    shown = " && ".join(
        " ".join(str(a) for a in c.get("argv", [])) for c in commands if c.get("argv")
    )
    saved = sum(float(c.get("duration_s") or 0.0) for c in commands)
    run = str(entry.get("run") or "an earlier run")
    reason = (
        f"the goal already holds: `{shown}` passed on this base tree ({tree[:12]}) in run {run},"
        " and neither the tree nor the check, its environment or its programs have changed"
        " since; it was not run again and no agent was called"
    )
    cached = {"tree": tree, "key": key, "checked_in": run, "saved_s": round(saved, 3)}
    ctx.record(spec.id, Note(what=CHECK_CACHED, reason=reason, extra=cached))
    return Lookup(key, tree, checks.Verdict(True, reason, None, 0, "", "cache"))


def remember(
    ctx: RunContext,
    spec: TaskSpec,
    found: Lookup,
    workspace: Workspace,
    verdict: checks.Verdict,
    ran: Sequence[Mapping[str, Any]],
) -> None:
    """Keep a passing check of the task's base, under the key looked up before it ran (what
    it depended on then: a change made while it ran misses next time rather than hits)."""
    if not verdict.passed or verdict.source == "cache":
        return
    try:
        # The worktree is at the commit it was made from, which may have moved since the lookup.
        if git.tree_of_commit(ctx.paths.root, workspace.base_sha) != found.tree:
            return
    except LoopctlError:
        return
    entry = {
        "version": CACHE_VERSION,
        "key": found.key,
        "tree": found.tree,
        "passed": True,
        "run": ctx.run_id,
        "task": spec.id,
        "commands": [
            {"argv": list(r.get("argv", [])), "duration_s": r.get("duration_s")} for r in ran
        ],
        "checked": ctx.clock().isoformat(timespec="seconds"),
    }
    folder = cache_folder(ctx)
    # A cache that cannot be written costs the next tick one check run, nothing more.
    with swallowed(logger, "writing the check cache", OSError):
        write_atomic(folder / f"{found.key}.json", json.dumps(entry, indent=1) + "\n")
        _prune(folder)


def cache_key(ctx: RunContext, tree: str) -> str:
    """The digest of everything a check of `tree` depends on that loopctl can see."""
    root = ctx.paths.root
    env = check_env(ctx.rec)
    commands = check_commands(ctx)
    document = {
        "version": CACHE_VERSION,
        "tree": tree,
        "commands": [list(argv) for argv in commands],
        "counted": [
            list(argv) for argv in checks.counted_commands(ctx.loop.checker, ctx.condition)
        ],
        # A secret's value is never part of the key (the entry's name is written to disk).
        "env": {
            name: None if is_secret_name(name) else value for name, value in sorted(env.items())
        },
        "programs": [program_identity(argv, root, env) for argv in commands],
        "node_modules": node_modules_identity(root, commands),
        "setup": [list(argv) for argv in ctx.loop.worktree.setup],
        "copy": _copied(root, ctx.loop.worktree.copy),
    }
    text = json.dumps(document, sort_keys=True).encode("utf-8", "surrogateescape")
    return hashlib.sha256(text).hexdigest()


def program_identity(argv: Sequence[str], root: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """What a check command starts, as files: the program, and for Python its interpreter and
    what the interpreter's venv has installed (a new version of a plugin changes the result)."""

    if not argv:
        return {}
    program = argv[0]
    if "/" in program:
        found: str | None = program if os.path.isabs(program) else str(root / program)
    else:
        found = shutil.which(program, path=env.get("PATH"))
    identity: dict[str, Any] = {"program": _file_identity(found)}
    interpreter = python_of(argv, root, env.get("PATH"))
    if interpreter is not None:
        identity["python"] = _file_identity(str(interpreter))
        identity["site"] = [
            sorted((entry.name, _mtime(entry)) for entry in _listing(folder))
            for folder in site_folders(interpreter)
        ]
    return identity


# What npm, yarn (classic and berry) and pnpm rewrite on every install into node_modules.
_INSTALL_STAMPS = (".package-lock.json", ".yarn-integrity", ".yarn-state.yml", ".modules.yaml")


def node_modules_identity(root: Path, commands: Sequence[Sequence[str]]) -> list[Any] | None:
    """For a Node check, the checkout's `node_modules` as files: worktrees link their packages
    to it (`loopctl.node_links`), so an install there changes what the check imports although
    no tracked file changed. Cheap on purpose: the folder itself and the files each package
    manager rewrites on install, never a walk of the tree."""
    if not any(node_links.is_node_command(argv, root) for argv in commands):
        return None
    folder = root / node_links.NODE_MODULES
    return [_stat_identity(folder)] + [_stat_identity(folder / name) for name in _INSTALL_STAMPS]


def _stat_identity(path: Path) -> list[int] | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    return [info.st_ino, info.st_size, info.st_mtime_ns]


def _file_identity(path: str | None) -> list[Any] | None:
    if path is None:
        return None
    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        return [path, None]
    return [path, real, info.st_size, info.st_mtime_ns, info.st_ino]


def _listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def _mtime(path: Path) -> int | None:
    try:
        return path.lstat().st_mtime_ns
    except OSError:
        return None


def _copied(root: Path, patterns: Sequence[str]) -> dict[str, str | None]:
    """The files `[worktree] copy` puts into each worktree (untracked, so not in the tree)."""

    if not patterns:
        return {}
    regexes = [compile_glob(pattern) for pattern in patterns]
    found: dict[str, str | None] = {}
    for source in sorted(root.rglob("*")):
        if ".git" in source.parts or not source.is_file():
            continue
        relative = source.relative_to(root).as_posix()
        if any(regex.match(relative) for regex in regexes):
            try:
                found[relative] = hashlib.sha256(source.read_bytes()).hexdigest()
            except OSError:
                found[relative] = None
    return found


def _read(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or value.get("version") != CACHE_VERSION:
        return None
    return value


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.json"), key=_mtime_or_zero)
    for old in entries[: max(0, len(entries) - _KEEP)]:
        with contextlib.suppress(OSError):
            old.unlink()


def _mtime_or_zero(path: Path) -> int:
    return _mtime(path) or 0
