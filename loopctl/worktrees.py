"""Worktree per task: safe names, creation, reuse after a crash, and clean-up."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from loopctl import git, nofollow
from loopctl.atomicfile import write_atomic
from loopctl.errors import GitError, LoopctlError

BRANCH_PREFIX = "loop/"
MAX_ID_LENGTH = 64
_HASH_LENGTH = 8
_BASE_FILE = "loopctl-base"  # in the worktree's own git dir, so it lives and dies with it
_INITIALIZING = "initializing"  # the lock reason `git worktree add` holds while it populates

_SAFE = re.compile(r"[A-Za-z0-9._-]+")
_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._-]+")
_DASHES = re.compile(r"-{2,}")
_DOTS = re.compile(r"\.{2,}")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Workspace:
    """A task's worktree, ready for an agent."""

    path: Path
    branch: str
    base_sha: str
    created: bool
    # Checked out at base_sha by loopctl just now, on a branch made for it: no agent has run in
    # it, so its index is a trustworthy stat cache of the base.
    at_base: bool = False


@dataclass(frozen=True, slots=True)
class Known:
    """What a caller has just asked git, under the worktree lock, so it is not asked again."""

    top: Path  # the repository's top folder, which has commits
    entries: list[git.WorktreeEntry]  # `git worktree list`
    branch_is_new: bool  # the task's branch does not exist
    common: Path | None = None  # the git dir all worktrees share, resolved


@dataclass(frozen=True, slots=True)
class WorktreeInfo:
    """One of loopctl's worktrees as `loopctl worktrees` shows it."""

    loop: str
    task_id: str
    path: Path
    branch: str
    head: str  # "" when git does not know the folder
    dirty: bool
    exists: bool  # the folder is on disk
    registered: bool = True  # False: a leftover folder git does not know (a crashed add)


def sanitize_task_id(raw: str) -> str:
    """A task id that is safe as a folder name and a ref component; safe ids come back as is."""
    return _sanitize(raw, fallback="task")


def sanitize_loop_name(raw: str) -> str:
    """A loop name that is safe as a folder name and a ref component; safe names come back as is."""
    return _sanitize(raw, fallback="loop")


def branch_name(loop: str, task_id: str) -> str:
    """The branch a task's worktree is on: loop/<loop>/<task-id>."""
    return f"{BRANCH_PREFIX}{sanitize_loop_name(loop)}/{sanitize_task_id(task_id)}"


def worktree_path(worktree_root: Path, loop: str, task_id: str) -> Path:
    """The folder of a task's worktree: <root>/<loop>/<task-id>, never outside the root."""
    path = worktree_root / sanitize_loop_name(loop) / sanitize_task_id(task_id)
    # Resolve first: a symlinked loop folder must not carry the worktree out of the root.
    if not path.resolve().is_relative_to(worktree_root.resolve()):
        raise LoopctlError(
            f"worktree folder {path} resolves outside the worktree root {worktree_root}; "
            "remove the symlink in the root"
        )
    return path


def ensure_worktree(
    repo: Path,
    worktree_root: Path,
    loop: str,
    task_id: str,
    base_ref: str = "HEAD",
    *,
    known: Known | None = None,
) -> Workspace:
    """The task's worktree: reused when git has it on the right branch, else (re)created.

    With `known`, `base_ref` is a commit sha the caller resolved, and what `known` says is not
    asked again (a task's wait for its worktree is mostly git calls besides the add).
    """
    if known is None:
        top = git.toplevel(repo)
        if not git.has_commits(top):
            raise LoopctlError("the repository has no commits yet; commit something first")
        entries = git.worktree_list(top)
    else:
        top, entries = known.top, known.entries
    path = worktree_path(worktree_root, loop, task_id)
    _refuse_inside_repo(top, worktree_root, path)
    branch = branch_name(loop, task_id)

    if any(entry.prunable for entry in entries):
        git.worktree_prune(top)
        entries = git.worktree_list(top)
    entry = _entry_for(entries, path)
    if entry is not None and (entry.branch != branch or entry.lock_reason == _INITIALIZING):
        # Killed mid-add, or switched to another branch: the branch keeps the committed work.
        _unregister(top, entry)
        entry = None
    if entry is not None:
        return Workspace(path, branch, _recorded_base(top, path, base_ref), created=False)

    base_sha = git.resolve_commit(top, base_ref) if known is None else base_ref
    if path.is_symlink() or path.exists():
        _discard_leftover(top, path)
    branch_existed = not known.branch_is_new if known else git.branch_exists(top, branch)
    path.parent.mkdir(parents=True, exist_ok=True)
    git.worktree_add(top, path, branch, base_sha, branch_is_new=not branch_existed)
    if branch_existed:
        # Earlier work on the branch is not this task's change; measure from where it forked.
        base_sha = git.merge_base(top, branch, base_sha) or base_sha
    record_base(path, base_sha, git_dir=git.new_worktree_git_dir(path))
    return Workspace(path, branch, base_sha, created=True, at_base=not branch_existed)


def remove_worktree(repo: Path, ws_path: Path, *, delete_branch: bool = False) -> None:
    """Remove a worktree git knows (and, if asked, its loop/ branch); otherwise do nothing."""
    entries = git.worktree_list(repo)
    entry = _entry_for(entries, ws_path)
    if entry is None:
        return
    if entry is entries[0]:
        raise LoopctlError(f"refusing to remove {ws_path}: it is the repository's main worktree")
    _unregister(repo, entry)
    if delete_branch and entry.branch and entry.branch.startswith(BRANCH_PREFIX):
        git.delete_branch(repo, entry.branch)


def list_worktrees(repo: Path, worktree_root: Path) -> list[WorktreeInfo]:
    """loopctl's worktrees (branches under loop/), plus leftover folders under the root."""
    infos: list[WorktreeInfo] = []
    known: set[Path] = set()
    for entry in git.worktree_list(repo):
        parts = (entry.branch or "").split("/")
        if len(parts) != 3 or f"{parts[0]}/" != BRANCH_PREFIX:
            continue
        known.add(entry.path.resolve())
        exists = entry.path.is_dir() and not entry.prunable
        infos.append(
            WorktreeInfo(
                loop=parts[1],
                task_id=parts[2],
                path=entry.path,
                branch=entry.branch or "",
                head=entry.head,
                dirty=exists and _is_dirty(entry.path),
                exists=exists,
            )
        )
    for path in _leftovers(worktree_root, known):
        infos.append(
            WorktreeInfo(
                loop=path.parent.name,
                task_id=path.name,
                path=path,
                branch=branch_name(path.parent.name, path.name),
                head="",
                dirty=False,
                exists=True,
                registered=False,
            )
        )
    return sorted(infos, key=lambda info: (info.loop, info.task_id, str(info.path)))


def prune_worktrees(repo: Path, worktree_root: Path) -> list[Path]:
    """Forget worktrees whose folders are gone and delete this repository's leftover folders."""
    top = git.toplevel(repo)
    git.worktree_prune(top)
    known = {entry.path.resolve() for entry in git.worktree_list(top)}
    common = git.common_dir(top).resolve()
    removed: list[Path] = []
    for path in _leftovers(worktree_root, known):
        if _belongs_to(common, path):
            _delete_folder(path)
            removed.append(path)
    return removed


# --- naming ------------------------------------------------------------------------------------


def _sanitize(raw: str, *, fallback: str) -> str:
    if _is_safe(raw):
        return raw
    text = unicodedata.normalize("NFKD", raw)
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = _UNSAFE_RUN.sub("-", text)
    text = _DASHES.sub("-", text)
    text = _DOTS.sub(".", text)
    text = text.lstrip("-.")
    text = text[: MAX_ID_LENGTH - _HASH_LENGTH - 1].rstrip("-.")
    # The hash of the raw text keeps two hostile ids that clean up alike apart.
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LENGTH]
    return f"{text or fallback}-{digest}"


def _is_safe(name: str) -> bool:
    return (
        0 < len(name) <= MAX_ID_LENGTH
        and _SAFE.fullmatch(name) is not None
        and name[0] not in "-."
        and ".." not in name
        and not name.endswith((".", ".lock"))
    )


# --- worktree state ----------------------------------------------------------------------------


def _refuse_inside_repo(top: Path, worktree_root: Path, path: Path) -> None:
    top = top.resolve()
    for candidate in (worktree_root, path):
        if candidate.resolve().is_relative_to(top):
            raise LoopctlError(
                f"the worktree root {worktree_root} puts worktrees inside the repository {top}; "
                "choose a folder outside it (the default is under loopctl's cache folder)"
            )


def _entry_for(entries: list[git.WorktreeEntry], path: Path) -> git.WorktreeEntry | None:
    wanted = path.resolve()
    return next((entry for entry in entries if entry.path.resolve() == wanted), None)


def _unregister(repo: Path, entry: git.WorktreeEntry) -> None:
    if entry.locked:
        git.worktree_unlock(repo, entry.path)
    if entry.path.is_dir():
        git.worktree_remove(repo, entry.path, force=True)
    else:
        git.worktree_prune(repo)


def _is_dirty(path: Path) -> bool:
    try:
        return git.is_dirty(path)
    except GitError:
        return True  # a worktree git cannot read is not one to throw away as clean


def _recorded_base(top: Path, path: Path, base_ref: str) -> str:
    base_file = git.git_dir(path) / _BASE_FILE
    try:
        recorded = base_file.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        recorded = ""
    if _SHA.fullmatch(recorded):
        try:
            return git.resolve_commit(path, recorded)
        except GitError:
            pass
    # No usable record (made by hand, or by an older loopctl): the fork point is the base.
    # base_ref is resolved in the main worktree: "HEAD" there is what the task started from.
    head = git.head_sha(path)
    base = git.merge_base(top, head, git.resolve_commit(top, base_ref)) or head
    record_base(path, base)
    return base


def record_base(path: Path, base_sha: str, *, git_dir: Path | None = None) -> None:
    """Note the commit a worktree's task started from (read back when a run resumes)."""
    write_atomic((git_dir or git.git_dir(path)) / _BASE_FILE, base_sha + "\n")


def _discard_leftover(top: Path, path: Path) -> None:
    if not _belongs_to(git.common_dir(top).resolve(), path):
        raise LoopctlError(
            f"{path} is in the way and belongs to another repository; "
            "remove it, or give each repository its own worktree root"
        )
    _delete_folder(path)


def _belongs_to(common: Path, path: Path) -> bool:
    """True unless `path` holds a repository or another repository's worktree."""
    dot_git = path / ".git"
    if path.is_symlink() or not dot_git.exists():
        return True
    if not dot_git.is_file():
        return False
    text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    gitdir = Path(text.removeprefix("gitdir:").strip())
    gitdir = gitdir if gitdir.is_absolute() else path / gitdir
    return gitdir.resolve().is_relative_to(common)


def _delete_folder(path: Path) -> None:
    # A symlink is unlinked, never followed, here or anywhere below: its target is not ours to
    # delete (loopctl may be root), and a folder a maker made unwritable is opened up first.
    nofollow.remove_tree(path)


def _leftovers(worktree_root: Path, known: set[Path]) -> list[Path]:
    """Folders at <root>/<loop>/<task> with loopctl-made names that git does not know."""
    if not worktree_root.is_dir():
        return []
    found: list[Path] = []
    for loop_dir in sorted(worktree_root.iterdir()):
        if loop_dir.is_symlink() or not loop_dir.is_dir() or not _is_safe(loop_dir.name):
            continue
        for path in sorted(loop_dir.iterdir()):
            if _is_safe(path.name) and path.resolve() not in known:
                found.append(path)
    return found
