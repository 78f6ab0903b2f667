"""A linked worktree's git paths: its admin folder (writable), the files that must not change,
and the repository's object store."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

# Folders of the main checkout an agent must never write, even when it works in place.
PROTECTED_IN_CHECKOUT: tuple[str, ...] = (
    ".loop",
    "agents",
    "skills",
    ".claude",
    ".codex",
    ".agents",
    ".git",
)


# Admin files git reads once they exist, though a fresh worktree has none: an empty stand-in is
# made before the agent starts, so that the read-only bind holds it. `config.worktree` (read
# when `extensions.worktreeConfig` is on, as `git sparse-checkout` sets it) could otherwise be
# created by the agent and set `core.worktree` to the main checkout for loopctl's own git.
PINNED_EVEN_ABSENT = frozenset({"config.worktree"})


def stand_in(path: Path) -> None:
    """Create `path` empty unless something is there (O_EXCL: a link is never followed)."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))


def git_admin_paths(
    worktree: Path,
) -> tuple[tuple[Path, ...], tuple[Path, ...], Path | None]:
    """(writable, pinned, objects) git paths of a linked worktree: its admin folder, the files
    that must not change, and the repository's object store.

    The worktree's `.git` file and the admin folder's `gitdir`/`commondir` stay read-only: an
    agent that rewrote them could point loopctl's own git at a repository it planted.
    """
    dot_git = worktree / ".git"
    if not dot_git.is_file():
        return (), (), None
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except OSError:
        return (), (), None
    if not text.startswith("gitdir:"):
        return (), (), None
    admin = Path(text.removeprefix("gitdir:").strip())
    if not admin.is_absolute():
        admin = (worktree / admin).resolve()
    common_file = admin / "commondir"
    common = admin.parent.parent
    if common_file.is_file():
        with contextlib.suppress(OSError):
            named = Path(common_file.read_text(encoding="utf-8").strip())
            common = named if named.is_absolute() else (admin / named).resolve()
    writable = tuple(p for p in (admin,) if p.is_dir())
    pinned = tuple(
        p for p in (dot_git, admin / "gitdir", admin / "commondir", admin / "config.worktree")
    )
    return writable, pinned, (common / "objects" if (common / "objects").is_dir() else None)
