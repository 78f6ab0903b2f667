"""A pool of finished worktrees per loop, recycled for the next task as if they were new.

A task's worktree that `keep` lets go is parked under `<worktree root>/.pool/<loop>/` instead of
being removed. The next task takes it, and loopctl makes it what a fresh `git worktree add` would
give, trusting nothing the last maker could write:

- the worktree's git admin folder keeps only HEAD, commondir and gitdir; everything else (a
  planted `config.worktree`, per-worktree refs, logs, the index) is deleted, and the `.git` file
  and `gitdir` are written anew;
- the index is loopctl's own copy, taken when the worktree was last ready and before any agent
  ran in it; `reset --hard` against it rewrites every file whose content or stat data changed
  since (a file's change time cannot be set back), and only those;
- `git clean -ffdx` deletes every untracked and ignored file except the preserved folders;
- each preserved folder is compared with the stat digest recorded when it was ready
  (`seeds.tree_digest`); one that anything touched is deleted, to be seeded or set up again.

What loopctl records about a pooled worktree (the trusted index, the digests, the inputs hash
its setup last ran for) lives next to the pool, where the sandbox lets no agent write.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loopctl import git, nofollow
from loopctl.atomicfile import write_atomic
from loopctl.errors import GitError, LoopctlError, swallowed
from loopctl.seeds import remove_preserved, remove_tree, tree_digest, tree_size
from loopctl.worktrees import Known, Workspace, record_base, remove_worktree

logger = logging.getLogger(__name__)

POOL_DIR = ".pool"  # a name `worktrees._leftovers` never takes for a loop folder
STATE_VERSION = 1
_ADMIN_KEEP = frozenset({"HEAD", "commondir", "gitdir"})


@dataclass(frozen=True, slots=True)
class Recycled:
    """A pooled worktree made ready for a task."""

    workspace: Workspace
    inputs_hash: str | None  # what its setup last ran for
    intact: tuple[str, ...]  # preserved folders that are exactly as they were when ready
    digests: dict[str, str]  # of every preserved folder as it is now ("absent" when gone)
    discarded: tuple[str, ...]  # preserved folders that had changed, now deleted
    setup_s: float  # how long its setup ran (what a skipped setup saves)
    fresh_s: float  # how long its creation took when it was new (what recycling saves)


@dataclass(frozen=True, slots=True)
class PooledWorktree:
    """One parked worktree, as `loopctl worktrees` shows it."""

    loop: str
    path: Path
    bytes: int
    parked: float
    preserved: tuple[str, ...] = field(default_factory=tuple)


def pool_folder(worktree_root: Path, loop: str) -> Path:
    """Where a loop's parked worktrees and their records live."""
    return worktree_root / POOL_DIR / loop


def has_idle(worktree_root: Path, loop: str) -> bool:
    """True when the loop has a parked worktree (`acquire` would try it, and may change what
    git knows of worktrees on the way)."""
    return bool(_idle(pool_folder(worktree_root, loop)))


def mark_ready(
    repo: Path,
    worktree_root: Path,
    loop: str,
    path: Path,
    *,
    preserve: Sequence[str],
    inputs_hash: str | None,
    setup_s: float = 0.0,
    fresh_s: float = 0.0,
    digests: Mapping[str, str] | None = None,
) -> None:
    """Record a worktree as loopctl made it, before any agent runs in it: its index, the digest
    of each preserved folder, the inputs hash its setup ran for."""
    admin = admin_folder(repo, path)
    if admin is None:
        return
    state_dir = pool_folder(worktree_root, loop) / "state"
    state_dir.mkdir(parents=True, exist_ok=True)
    index = admin / "index"
    if index.is_file():
        # copy2: git's racy-clean check reads the index file's own mtime.
        shutil.copy2(index, state_dir / f"{admin.name}.index")
    state = {
        "version": STATE_VERSION,
        "admin": str(admin),
        # `digests`: taken by `acquire` of folders nothing has touched since (no walk twice).
        "preserve": {
            name: (digests or {}).get(name) or tree_digest(path / name) for name in preserve
        },
        "inputs_hash": inputs_hash,
        "setup_s": setup_s,
        "fresh_s": fresh_s,
        "ready": time.time(),
    }
    write_atomic(state_dir / f"{admin.name}.json", json.dumps(state, indent=1) + "\n")


def release(
    repo: Path,
    worktree_root: Path,
    loop: str,
    path: Path,
    capacity: int,
    head: str | None = None,
) -> bool:
    """Park a finished task's worktree in the pool; False when it cannot be (the caller then
    removes it): the pool is full, or loopctl has no record of it ready. `head`: a commit to
    leave it detached at (any will do; the repository's HEAD when not given)."""
    admin = admin_folder(repo, path)
    folder = pool_folder(worktree_root, loop)
    if admin is None or capacity <= 0 or _read_state(folder, admin.name) is None:
        return False
    idle = folder / "idle"
    if len(_idle(folder)) >= capacity:
        return False
    idle.mkdir(parents=True, exist_ok=True)
    target = idle / admin.name
    if target.exists() or target.is_symlink():
        remove_tree(target)
    # Detached (at any commit: acquiring resets it): the task's branch is free again, and its
    # commits stay on it.
    write_atomic(admin / "HEAD", (head or git.resolve_commit(repo, "HEAD")) + "\n")
    os.rename(path, target)
    _point(admin, target)
    state = _read_state(folder, admin.name) or {}
    state["parked"] = time.time()
    write_atomic(folder / "state" / f"{admin.name}.json", json.dumps(state, indent=1) + "\n")
    return True


def acquire(
    repo: Path,
    worktree_root: Path,
    loop: str,
    path: Path,
    branch: str,
    base_sha: str,
    preserve: Sequence[str],
    known: Known | None = None,
) -> Recycled | None:
    """A parked worktree moved to `path` and made fresh at `base_sha` on `branch`, or None when
    the pool is empty. One that cannot be made fresh is removed and the next one tried.
    `known`: what the caller has just asked git under the worktree lock (not asked again)."""
    folder = pool_folder(worktree_root, loop)
    if path.exists() or path.is_symlink() or not _idle(folder):
        return None  # empty; or a leftover is in the way, which the caller clears first
    top = known.top if known else git.toplevel(repo)
    entries = known.entries if known else git.worktree_list(top)
    if any(entry.branch == branch for entry in entries):
        # The branch is checked out elsewhere: `git worktree add` (the caller's way) refuses
        # that with its own message.
        return None
    common = (known.common if known else None) or git.common_dir(top).resolve()
    branch_is_new = known.branch_is_new if known else None
    for candidate in _idle(folder):
        admin = common / "worktrees" / candidate.name
        state = _read_state(folder, candidate.name)
        try:
            if state is None or Path(str(state.get("admin"))) != admin or not admin.is_dir():
                raise LoopctlError("no record of this pooled worktree")
            return _recycle(
                top, folder, candidate, admin, state, path, branch, base_sha, preserve,
                branch_is_new,
            )  # fmt: skip
        except (LoopctlError, OSError):
            # Whatever stopped it (a folder the maker made undeletable, a broken record), a
            # fresh worktree is the answer: this one goes, wherever the move left it.
            discard(top, worktree_root, loop, candidate if candidate.exists() else path, admin)
    return None


def discard(repo: Path, worktree_root: Path, loop: str, path: Path, admin: Path | None) -> None:
    """Remove a pooled worktree for good: its folder, git's record of it, loopctl's."""
    with swallowed(logger, f"removing the pooled worktree {path}", GitError, OSError):
        remove_tree(path)
    if admin is not None:
        with swallowed(logger, f"removing git's record {admin}", OSError):
            remove_tree(admin)
        state_dir = pool_folder(worktree_root, loop) / "state"
        for suffix in (".json", ".index"):
            (state_dir / f"{admin.name}{suffix}").unlink(missing_ok=True)
    with swallowed(logger, "git worktree prune", GitError):
        git.worktree_prune(repo)


def retire(
    repo: Path, worktree_root: Path, loop: str, path: Path, capacity: int, head: str | None
) -> None:
    """A finished task's worktree that its `keep` policy lets go: parked in the loop's pool
    (`capacity` 0: there is none), or removed. The caller holds the worktree lock."""
    if release(repo, worktree_root, loop, path, capacity, head):
        return
    forget(worktree_root, loop, repo, path)
    remove_worktree(repo, path)


def forget(worktree_root: Path, loop: str, repo: Path, path: Path) -> None:
    """Drop loopctl's record of a worktree that is being removed instead of parked."""
    admin = admin_folder(repo, path)
    if admin is None:
        return
    state_dir = pool_folder(worktree_root, loop) / "state"
    for suffix in (".json", ".index"):
        (state_dir / f"{admin.name}{suffix}").unlink(missing_ok=True)


def list_pool(worktree_root: Path) -> list[PooledWorktree]:
    """Every parked worktree under the root, with its size on disk."""
    found: list[PooledWorktree] = []
    base = worktree_root / POOL_DIR
    if not base.is_dir():
        return found
    for loop_folder in sorted(base.iterdir()):
        for idle in _idle(loop_folder):
            state = _read_state(loop_folder, idle.name) or {}
            _files, used = tree_size(idle)
            preserved = state.get("preserve")
            found.append(
                PooledWorktree(
                    loop=loop_folder.name,
                    path=idle,
                    bytes=used,
                    parked=_number(state.get("parked")),
                    preserved=tuple(preserved) if isinstance(preserved, dict) else (),
                )
            )
    return found


def prune_pool(repo: Path, worktree_root: Path, only: Sequence[str] | None = None) -> list[Path]:
    """Remove the parked worktrees of this repository (of the loops `only` names, if given);
    the branches they worked on stay."""
    top = git.toplevel(repo)
    common = git.common_dir(top).resolve()
    removed: list[Path] = []
    base = worktree_root / POOL_DIR
    if not base.is_dir():
        return removed
    for loop_folder in sorted(base.iterdir()):
        if only is not None and loop_folder.name not in only:
            continue
        for idle in _idle(loop_folder):
            admin = common / "worktrees" / idle.name
            state = _read_state(loop_folder, idle.name)
            if state is None or Path(str(state.get("admin"))) != admin:
                continue  # another repository's, sharing the root
            discard(top, worktree_root, loop_folder.name, idle, admin)
            removed.append(idle)
    return removed


def admin_folder(repo: Path, path: Path) -> Path | None:
    """The git admin folder of the linked worktree at `path`, found from the repository's side
    (`<common>/worktrees/*/gitdir` names the worktree), never from its `.git` file alone."""
    wanted = (path / ".git").resolve()
    common = _common_dir(repo)
    if common is None:
        return None
    # The quick way: the `.git` file names a folder of this repository's that names it back.
    with contextlib.suppress(OSError, UnicodeDecodeError):
        text = (path / ".git").read_text(encoding="utf-8").strip()
        named = Path(text.removeprefix("gitdir:").strip())
        if (
            text.startswith("gitdir:")
            and named.is_absolute()
            and named.parent == common / "worktrees"
            and Path((named / "gitdir").read_text(encoding="utf-8").strip()).resolve() == wanted
        ):
            return named
    admins = common / "worktrees"
    if not admins.is_dir():
        return None
    for admin in admins.iterdir():
        with contextlib.suppress(OSError, UnicodeDecodeError):
            named = Path((admin / "gitdir").read_text(encoding="utf-8").strip())
            if named.resolve() == wanted:
                return admin
    return None


# --- internals ---------------------------------------------------------------------------------


def _common_dir(repo: Path) -> Path | None:
    """The repository's git folder: `<repo>/.git` when it is one (no git process), else git's."""
    dot_git = repo / ".git"
    if dot_git.is_dir() and not dot_git.is_symlink() and (dot_git / "worktrees").is_dir():
        return dot_git.resolve()
    try:
        return git.common_dir(git.toplevel(repo)).resolve()
    except GitError:
        return None


def _recycle(
    top: Path,
    folder: Path,
    candidate: Path,
    admin: Path,
    state: dict[str, object],
    path: Path,
    branch: str,
    base_sha: str,
    preserve: Sequence[str],
    branch_is_new: bool | None,
) -> Recycled:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.rename(candidate, path)
    _sanitize_admin(admin)
    _point(admin, path)
    index = folder / "state" / f"{admin.name}.index"
    if not index.is_file():
        raise LoopctlError("no trusted index for this pooled worktree")
    shutil.copy2(index, admin / "index")
    # A preserved folder the base now tracks is the repository's, not a cache: it goes.
    tracked = git.tracked_under(top, base_sha, list(preserve)) if preserve else set()
    for name in tracked:
        remove_preserved(path, name)
    kept = [name for name in preserve if name not in tracked]
    for name in kept:
        # A symlink planted on the way to a preserved folder could make `clean` spare a
        # folder elsewhere: such a path is not preserved.
        if _has_symlink(path, name):
            remove_tree(path / Path(name).parts[0], within=path)
    if branch_is_new is None:
        branch_is_new = not git.branch_exists(top, branch)
    branch_existed = not branch_is_new
    git.recycle_checkout(path, branch, base_sha, branch_is_new=branch_is_new)
    try:
        git.clean_worktree(path, kept)
    except GitError:
        # A folder the maker made read-only keeps its files from `clean`: open them and retry.
        _own_folders(path, skip=kept)
        git.clean_worktree(path, kept)
    recorded = state.get("preserve")
    recorded = recorded if isinstance(recorded, dict) else {}
    intact: list[str] = []
    discarded: list[str] = []
    digests = dict.fromkeys(preserve, "absent")
    for name in kept:
        digest = tree_digest(path / name)
        if digest != "absent" and recorded.get(name) == digest and not _has_symlink(path, name):
            intact.append(name)
            digests[name] = digest
        elif digest != "absent":
            remove_preserved(path, name)
            discarded.append(name)
    base = base_sha
    if branch_existed:
        base = git.merge_base(top, branch, base_sha) or base_sha
    record_base(path, base, git_dir=admin)
    inputs = state.get("inputs_hash")
    return Recycled(
        workspace=Workspace(path, branch, base, created=True, at_base=not branch_existed),
        inputs_hash=inputs if isinstance(inputs, str) else None,
        intact=tuple(intact),
        digests=digests,
        discarded=tuple(discarded),
        setup_s=_number(state.get("setup_s")),
        fresh_s=_number(state.get("fresh_s")),
    )


def _sanitize_admin(admin: Path) -> None:
    """Keep only what git needs to know the worktree; the rest was the last maker's to write."""
    for entry in admin.iterdir():
        if entry.name not in _ADMIN_KEEP or entry.is_symlink() or not entry.is_file():
            remove_tree(entry)
    (admin / "commondir").write_text("../..\n", encoding="utf-8")


def _point(admin: Path, path: Path) -> None:
    """Tie the admin folder and the worktree folder to each other (what `worktree repair` does)."""
    dot_git = path / ".git"
    if dot_git.is_symlink() or dot_git.exists():
        remove_tree(dot_git)
    dot_git.write_text(f"gitdir: {admin}\n", encoding="utf-8")
    write_atomic(admin / "gitdir", f"{dot_git}\n")


def _idle(folder: Path) -> list[Path]:
    idle = folder / "idle"
    if not idle.is_dir():
        return []
    return sorted(p for p in idle.iterdir() if p.is_dir() and not p.is_symlink())


def _read_state(folder: Path, name: str) -> dict[str, object] | None:
    try:
        state = json.loads((folder / "state" / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return None
    return state


def _has_symlink(root: Path, name: str) -> bool:
    parts = Path(name).parts
    return any((root / Path(*parts[:depth])).is_symlink() for depth in range(1, len(parts) + 1))


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _own_folders(path: Path, skip: Sequence[str]) -> None:
    # Descriptor by descriptor, links never entered: a link the maker left to a folder of the
    # host must not make loopctl (perhaps root) chmod that folder and all below it.
    nofollow.open_up(path, skip=skip)
