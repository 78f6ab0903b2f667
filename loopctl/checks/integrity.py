"""Invariant 12: an agent turn leaves refs, definitions and git config as it found them.

Before a maker's turn loopctl takes a `Baseline`: a digest of every definition file and of what
git reads from the repository's git dir as configuration or runs as code (config, info/, hooks/),
and the value of every ref outside loopctl's own namespaces. After the turn, and again after the
checks (they run the maker's code) and the checker agent, it takes another and compares. A
difference is tampering, unless loopctl's own log explains it (another task's delivery pushed or
merged that exact commit meanwhile), or it is a user's commits on a branch no task owns while the
agent could not write refs (`user_branch_moves`). Each ref change names its old and new commit
and the git command that shows them, so a human can tell whether the change was their own.

Also here: the `Snapshot` of a worktree, the exact tree loopctl checks and then commits.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl import git
from loopctl.atomicfile import write_atomic
from loopctl.journal.events import Event, EventType
from loopctl.journal.inbox import InboxItem, ItemKind, open_items
from loopctl.journal.schema import ActionFinished, ActionStarted, read
from loopctl.paths import LOOP_DIR

# What loopctl itself writes in .loop/ while agents run (see paths.ProjectPaths).
RUNTIME = frozenset({"log", "runs", "locks", "cache", "STATE.md", "INBOX.md"})
DEFINITION_FOLDERS = ("agents", "skills", ".claude", ".codex", ".agents")
# In the common git dir: files git reads as configuration or runs as programs.
GIT_WATCHED = ("config", "config.worktree", "info", "hooks")
# loopctl's own refs: task branches (and their archives) and private fetch targets. loopctl moves
# them while other tasks' agents run, and fetches the private ones afresh before each use.
OWN_REFS = ("refs/heads/loop/", "refs/loopctl/")
FORMAT = 1

_turns = 0
_turns_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Baseline:
    """Digests of the definition files and values of the watched refs at one moment."""

    files: Mapping[str, str]
    refs: Mapping[str, str]
    seq: int  # the log's last event when it was taken

    def digest(self) -> str:
        return _sha(json.dumps([self.files, self.refs], sort_keys=True).encode())[:32]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "files": dict(self.files),
            "refs": dict(self.refs),
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: Any) -> Baseline | None:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        files, refs, seq = data.get("files"), data.get("refs"), data.get("seq")
        if not (isinstance(files, dict) and isinstance(refs, dict) and isinstance(seq, int)):
            return None
        return cls(
            {str(k): str(v) for k, v in files.items()},
            {str(k): str(v) for k, v in refs.items()},
            seq,
        )


@dataclass(frozen=True, slots=True)
class Change:
    name: str  # a repository-relative path (.git/… for the git dir), or a ref name
    how: str
    # A ref's values before and after (None: it did not exist); `how` names them as a human
    # reads them, which is what two changes are compared by.
    old: str | None = field(default=None, compare=False)
    new: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.name} {self.how}"

    @property
    def look(self) -> str | None:
        """The git command that shows a human what a ref change brought (None: not a commit)."""
        old, new = _commit(self.old), _commit(self.new)
        if old and new:
            return f"git log --stat {old[:12]}..{new[:12]}"
        if new:
            return f"git show --stat {new[:12]}"
        if old:
            return f"git show --stat {old[:12]}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"ref": self.name, "old": self.old, "new": self.new, "look": self.look}


@dataclass(frozen=True, slots=True)
class Findings:
    """What a turn changed that it must not have."""

    files: tuple[Change, ...] = ()
    refs: tuple[Change, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.files or self.refs)

    def describe(self, limit: int = 12) -> str:
        changes = [*self.files, *self.refs]
        text = "; ".join(_described(c) for c in changes[:limit])
        return text + (f"; and {len(changes) - limit} more" if len(changes) > limit else "")

    def evidence(self) -> dict[str, Any]:
        return {
            "tampering": True,
            "files": [c.name for c in self.files],
            "refs": [c.name for c in self.refs],
            "changes": [str(c) for c in (*self.files, *self.refs)],
            # Each ref's old and new commit, and the git command that shows what moved.
            "ref_changes": [c.to_json() for c in self.refs],
            "reason": self.describe(),
        }


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The worktree as checked: a tree object, and the files loopctl placed (never committed)."""

    tree: str
    changed: tuple[str, ...]  # paths differing from the base, placed files the maker edited too
    placed: Mapping[str, str | None]  # digests of the placed files when it was taken


# --- taking and comparing -------------------------------------------------------------------------


def take(root: Path, seq: int) -> Baseline:
    """The definitions and refs of the repository at `root` (its main checkout) now."""
    return Baseline(definition_files(root), watched_refs(root), seq)


def definition_files(root: Path) -> dict[str, str]:
    """path -> digest of every definition file and every file of the git dir's config and hooks."""
    found: dict[str, str] = {}
    loop_dir = root / LOOP_DIR
    for path in _walk(loop_dir):
        parts = path.relative_to(loop_dir).parts
        # No parts: `.loop` is itself a link, which names where the definitions are read from.
        if parts and (parts[0] in RUNTIME or _atomic_temp(path.name)):
            continue
        found[path.relative_to(root).as_posix()] = _digest(path)
    for folder in DEFINITION_FOLDERS:
        for path in _walk(root / folder):
            found[path.relative_to(root).as_posix()] = _digest(path)
    common = git.common_dir(root)
    label = ".git" if common.resolve() == (root / ".git").resolve() else str(common)
    for name in GIT_WATCHED:
        for path in _walk(common / name):
            found[f"{label}/{path.relative_to(common).as_posix()}"] = _digest(path)
    return found


def watched_refs(root: Path) -> dict[str, str]:
    """ref -> value of every ref outside loopctl's own, and what the main checkout's HEAD names."""
    refs = {
        name: sha for name, sha in git.ref_values(root).items() if not name.startswith(OWN_REFS)
    }
    with contextlib.suppress(OSError):
        refs["HEAD"] = (git.git_dir(root) / "HEAD").read_text(errors="replace").strip()
    return refs


def compare(
    before: Baseline,
    after: Baseline,
    explained: Iterable[str] = (),
    users: Iterable[str] = (),
) -> Findings:
    """Every difference, but ref moves to a commit loopctl itself delivered meanwhile and the
    refs named in `users` (a user's own commits, see `user_branch_moves`)."""
    own = set(explained)
    theirs = set(users)
    files = []
    for path in sorted(before.files.keys() | after.files.keys()):
        old, new = before.files.get(path), after.files.get(path)
        if old != new:
            how = "added" if old is None else "removed" if new is None else "changed"
            files.append(Change(path, how))
    refs = []
    for name in sorted(before.refs.keys() | after.refs.keys()):
        old, new = before.refs.get(name), after.refs.get(name)
        if old == new or (new is not None and new in own) or name in theirs:
            continue
        if old is None:
            how = f"created at {_short(new)}"
        elif new is None:
            how = f"deleted (was {_short(old)})"
        else:
            how = f"moved from {_short(old)} to {_short(new)}"
        refs.append(Change(name, how, old, new))
    return Findings(tuple(files), tuple(refs))


def user_branch_moves(root: Path, before: Baseline, after: Baseline) -> dict[str, str]:
    """Branches no task owns that were created or moved forward since `before`: ref -> how.

    What a user's own `git commit`, `merge` or `pull` on `main` looks like. A rewound or
    deleted branch is not in it, nor is anything outside `refs/heads/`.
    """
    moves: dict[str, str] = {}
    for name, new in after.refs.items():
        old = before.refs.get(name)
        if old == new or not name.startswith("refs/heads/") or name.startswith(OWN_REFS):
            continue
        if old is None:
            moves[name] = f"created at {_short(new)}"
        elif _commit(old) and _commit(new) and git.is_ancestor(root, old, new):
            moves[name] = f"moved forward from {_short(old)} to {_short(new)}"
    return moves


def explained_commits(events: Sequence[Event], since_seq: int) -> set[str]:
    """Commits loopctl's deliveries may have put on refs since event `since_seq`.

    A push updates the remote-tracking ref and a merge the base branch, to the step's commit:
    a step started since counts, and so does one still running at `since_seq` (started, and not
    finished since that start: a step a re-planned delivery runs again is a new start).
    """
    explained: set[str] = set()
    running: dict[tuple[str | None, str | None, int | None], set[str]] = {}
    for e in events:
        if e.type == EventType.ACTION_STARTED:
            start = read(ActionStarted, e)
            if start.commit is None:
                continue
            if e.seq > since_seq:
                explained.add(start.commit)
            else:
                running.setdefault((e.run, e.task, start.step), set()).add(start.commit)
        elif e.type == EventType.ACTION_FINISHED and e.seq <= since_seq:
            running.pop((e.run, e.task, read(ActionFinished, e).step), None)
    return explained.union(*running.values())


def save(baseline: Baseline, path: Path) -> None:
    write_atomic(path, json.dumps(baseline.to_json(), sort_keys=True))


def load(path: Path, digest: str) -> Baseline | None:
    """A saved baseline, if it is still the one whose digest the log recorded."""
    try:
        found = Baseline.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
    return found if found is not None and found.digest() == digest else None


# --- holding runs ---------------------------------------------------------------------------------


def held_by(events: Iterable[Event]) -> list[InboxItem]:
    """Open tampering items about definitions or git config: no run starts while one is open."""
    return held_among(open_items(events))


def held_among(found: Iterable[InboxItem]) -> list[InboxItem]:
    """`held_by`, of items already folded (`inbox.current_items`)."""
    return [
        item
        for item in found
        if item.is_open
        and item.kind == ItemKind.APPROVAL
        and item.evidence.get("tampering")
        and item.evidence.get("files")
    ]


def held_reason(items: Sequence[InboxItem]) -> str:
    item = items[0]
    files = ", ".join(str(f) for f in item.evidence.get("files") or ())
    return (
        f"runs are held: an agent turn changed {files} (inbox item {item.id}); look at the change,"
        f" then `loopctl inbox approve {item.id}` to run again"
    )


@contextlib.contextmanager
def turn() -> Iterator[None]:
    """Mark an attempt (agent turns and checks) in progress in this process."""
    global _turns
    with _turns_lock:
        _turns += 1
    try:
        yield
    finally:
        with _turns_lock:
            _turns -= 1


def turns_open() -> bool:
    """True while an attempt runs in this process: its definitions are not to be trusted yet."""
    with _turns_lock:
        return _turns > 0


# --- snapshots ------------------------------------------------------------------------------------


def take_snapshot(
    worktree: Path,
    *,
    parent: str,
    base: str,
    placed_then: Mapping[str, str | None],
    placed_now: Mapping[str, str | None],
    seed: Path | None = None,
) -> Snapshot:
    """The worktree's tree (placed files left out) and what differs from `base`."""
    tree = git.snapshot_tree(worktree, parent, exclude=sorted(placed_then), seed=seed)
    changed = set(git.tree_changes(worktree, base, tree))
    # A placed file the maker edited is its change (protect and scope apply), though never
    # committed.
    changed |= {path for path, digest in placed_then.items() if placed_now.get(path) != digest}
    return Snapshot(tree, tuple(sorted(changed)), dict(placed_now))


def snapshot_changes(worktree: Path, before: Snapshot, after: Snapshot) -> list[str]:
    """Paths whose content differs between two snapshots of one worktree."""
    changed = set(git.tree_changes(worktree, before.tree, after.tree))
    changed |= {
        path
        for path in before.placed.keys() | after.placed.keys()
        if before.placed.get(path) != after.placed.get(path)
    }
    return sorted(changed)


# --- helpers --------------------------------------------------------------------------------------


def _walk(top: Path) -> Iterator[Path]:
    """Files and symlinks under `top` (or `top` itself), never following a link."""
    if top.is_symlink() or top.is_file():
        yield top
        return
    if not top.is_dir():
        return
    for folder, dirs, files in os.walk(top, followlinks=False):
        here = Path(folder)
        for name in dirs:
            if (here / name).is_symlink():
                yield here / name
        for name in files:
            yield here / name


def _digest(path: Path) -> str:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return "link:" + _sha(os.readlink(path).encode("utf-8", "surrogateescape"))[:32]
        if not stat.S_ISREG(info.st_mode):
            return f"other:{stat.S_IFMT(info.st_mode):o}"
        # The exec bit decides whether git runs a hook.
        kind = "exec:" if info.st_mode & 0o111 else "file:"
        return kind + _sha(path.read_bytes())[:32]
    except OSError as exc:
        return f"unreadable:{exc.errno}"


def _atomic_temp(name: str) -> bool:
    # write_atomic's temp files (".loopctl-<pid>-….tmp") beside STATE.md and INBOX.md.
    return name.startswith(".loopctl-") and name.endswith(".tmp")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _commit(value: str | None) -> str | None:
    """`value` if it is an object name (a ref's value), not a symbolic HEAD's text."""
    text = value or ""
    return text if len(text) >= 40 and all(c in "0123456789abcdef" for c in text) else None


def _described(change: Change) -> str:
    look = change.look
    return f"{change} (`{look}` shows it)" if look else str(change)


def _short(value: str | None) -> str:
    text = value or ""
    return text[:12] if len(text) >= 40 and " " not in text else repr(text)
