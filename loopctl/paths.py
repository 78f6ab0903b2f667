"""Where things live: the repository root, the .loop/ layout, and loopctl's cache folder."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from loopctl.atomicfile import write_atomic
from loopctl.errors import NotAGitRepository

LOOP_DIR = ".loop"
# What `init` copies into a project, and the `.loop/.gitignore` every project gets on first use.
TEMPLATES = Path(__file__).parent / "templates"


def find_repo_root(start: Path | None = None) -> Path:
    """Return the top of the git working tree containing `start` (default: cwd)."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    raise NotAGitRepository(
        f"not a git repository: {here} (run `git init` first, or cd into a repository)"
    )


def attempt_folder(run: str, task: str, attempt: int | str) -> str:
    """Where an attempt's prompt, agent output and check output are kept, from the repo root."""
    return f"{LOOP_DIR}/runs/{run}/{task}/attempt-{attempt}/"


def cache_home() -> Path:
    """loopctl's own folder for worktrees and caches; LOOPCTL_HOME overrides."""
    override = os.environ.get("LOOPCTL_HOME")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "loopctl"


def repo_slug(root: Path) -> str:
    """A folder name unique to one repository path, readable by a human."""

    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:10]
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in root.name)[:40] or "repo"
    return f"{name}-{digest}"


@dataclass(frozen=True, slots=True)
class ProjectPaths:
    """The files and folders of one repository's loopctl setup."""

    root: Path

    @property
    def loop_dir(self) -> Path:
        return self.root / LOOP_DIR

    @property
    def loops_dir(self) -> Path:
        return self.loop_dir / "loops"

    @property
    def config(self) -> Path:
        return self.loop_dir / "config.toml"

    @property
    def state_md(self) -> Path:
        return self.loop_dir / "STATE.md"

    @property
    def inbox_md(self) -> Path:
        return self.loop_dir / "INBOX.md"

    @property
    def log_dir(self) -> Path:
        return self.loop_dir / "log"

    @property
    def events_file(self) -> Path:
        return self.log_dir / "events.jsonl"

    @property
    def locks_dir(self) -> Path:
        return self.loop_dir / "locks"

    @property
    def runs_dir(self) -> Path:
        """Per-attempt output captures (gitignored)."""
        return self.loop_dir / "runs"

    @property
    def crash_dir(self) -> Path:
        return cache_home() / "crashes"

    @property
    def seeds_dir(self) -> Path:
        """Dependency seeds of this repository (loopctl.seeds), beside its worktrees."""
        return cache_home() / "seeds" / repo_slug(self.root)

    def default_worktree_root(self) -> Path:
        return cache_home() / "worktrees" / repo_slug(self.root)


def ensure_loop_gitignore(loop_dir: Path) -> None:
    """`.loop/` appears on first use; its runtime folders must never be committed."""

    target = loop_dir / ".gitignore"
    if not target.exists():
        write_atomic(target, (TEMPLATES / "gitignore").read_text(encoding="utf-8"))
