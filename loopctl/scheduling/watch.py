"""File-watch triggers: tell a scheduler which repository paths changed (watchfiles, in a thread).

A loop must never trigger itself: `.git/`, `.loop/` (its log, state, inbox and locks) and the
worktree root (where its agents write) are ignored, as are editor and cache files. Changes are
debounced by watchfiles: a burst of writes arrives as one batch.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from loopctl.errors import LoopctlError
from loopctl.globs import matches

# Folders that never hold a trigger-worthy change, wherever they are (watchfiles' defaults).
IGNORED_DIRS = frozenset(
    {
        "__pycache__",
        ".git",
        ".hg",
        ".svn",
        ".tox",
        ".venv",
        ".idea",
        "node_modules",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
    }
)
_GLOB_CHARS = frozenset("*?[")
_READY_TIMEOUT = 10.0
_PROBE_EVERY = 0.5  # longer than `step`, so one probe is one batch

OnChange = Callable[[list[str]], None]


class WatchError(LoopctlError):
    """The file watcher could not start."""


def _ignored_name(name: str) -> bool:
    return (
        name.endswith(("~", ".swp", ".swo", ".swx", ".pyc", ".pyo", ".tmp"))
        or name.startswith((".#", "flycheck_"))
        or name == ".DS_Store"
    )


def relevant(relative: str) -> bool:
    """False for a repository-relative path no watch trigger should ever see."""
    parts = relative.split("/")
    if parts[0] in (".git", ".loop"):
        return False
    if any(part in IGNORED_DIRS for part in parts):
        return False
    return not _ignored_name(parts[-1])


def watch_roots(root: Path, patterns: Iterable[str]) -> list[Path]:
    """The folders to watch for `patterns`: each glob's fixed leading folders, if they exist.

    Watching `src/` for `src/**/*.py` instead of the whole repository keeps inotify away from
    node_modules and friends; a glob that starts with a wildcard needs the whole tree.
    """
    found: set[Path] = set()
    for pattern in patterns:
        text = pattern.strip().lstrip("/")
        text = text.removeprefix("./")
        parts = [p for p in text.split("/") if p]
        fixed: list[str] = []
        for part in parts[:-1]:
            if _GLOB_CHARS & set(part) or part == "..":
                break
            fixed.append(part)
        folder = root.joinpath(*fixed)
        while folder != root and not folder.is_dir():
            folder = folder.parent
        found.add(folder)
    if root in found:
        return [root]
    # A folder inside another watched one adds nothing.
    ordered = sorted(found, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for folder in ordered:
        if not any(folder.is_relative_to(k) for k in kept):
            kept.append(folder)
    return kept


def changed_for(patterns: Sequence[str], paths: Iterable[str]) -> list[str]:
    """The paths one loop's watch globs select, sorted."""
    return sorted({p for p in paths if matches(p, patterns)})


class RepoWatcher:
    """Watch folders of one repository and report relevant changed paths to `on_change`.

    `ignore` are absolute folders (the worktree root) whose changes are never reported.
    """

    def __init__(
        self,
        root: Path,
        patterns: Iterable[str],
        on_change: OnChange,
        *,
        ignore: Iterable[Path] = (),
        probe_dir: Path | None = None,
        debounce_ms: int = 1600,
        step_ms: int = 200,
    ) -> None:
        self.root = root.resolve()
        self.patterns = tuple(patterns)
        self.on_change = on_change
        # A folder holding the whole repository (a worktree root of "~") must not hide it.
        self.ignore = tuple(
            str(p.resolve()) + os.sep for p in ignore if not self.root.is_relative_to(p.resolve())
        )
        self.probe_dir = (probe_dir or self.root / ".loop" / "cache").resolve()
        self.probe = self.probe_dir / f"watch-ready-{os.getpid()}-{id(self)}"
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching; returns once the watcher sees changes (or raises WatchError)."""
        self.probe_dir.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._watch, name="loopctl-watch", daemon=True)
        self._thread.start()
        # Only a change the watcher reports proves it is listening: write a probe until seen.
        waited = 0.0
        try:
            while not self._ready.is_set():
                if self.error is not None or not self._thread.is_alive():
                    raise WatchError(
                        f"cannot watch {self.root}: {self.error or 'the watcher stopped'}"
                        " (raise fs.inotify.max_user_watches, or set WATCHFILES_FORCE_POLLING=1)"
                    )
                if waited >= _READY_TIMEOUT:
                    break  # a slow (polling) watcher still works; it just starts later
                self.probe.write_text(str(waited))
                self._ready.wait(_PROBE_EVERY)
                waited += _PROBE_EVERY
        finally:
            with contextlib.suppress(OSError):
                self.probe.unlink()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    # --- the thread -----------------------------------------------------------------------

    def _paths(self) -> list[Path]:
        roots = watch_roots(self.root, self.patterns)
        if not any(self.probe_dir.is_relative_to(r) for r in roots):
            roots.append(self.probe_dir)
        return roots

    def _keep(self, _change: object, path: str) -> bool:
        if path == str(self.probe):
            return True
        if path.startswith(self.ignore):
            return False
        relative = self._relative(path)
        return relative is not None and relevant(relative)

    def _relative(self, path: str) -> str | None:
        try:
            relative = Path(path).relative_to(self.root)
        except ValueError:
            return None
        text = relative.as_posix()
        return None if text in ("", ".") else text

    def _files_in(self, folder: str, limit: int = 1000) -> list[str]:
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if d not in IGNORED_DIRS]
            for name in filenames:
                path = os.path.join(dirpath, name)
                relative = self._relative(path)
                if relative is not None and self._keep(None, path):
                    found.append(relative)
                if len(found) >= limit:
                    return found
        return found

    def _watch(self) -> None:
        # lazy: only `watch` triggers need it; kept off `up`'s start
        from watchfiles import watch

        try:
            for batch in watch(
                *self._paths(),
                watch_filter=self._keep,
                debounce=self.debounce_ms,
                step=self.step_ms,
                stop_event=self._stop,
                raise_interrupt=False,
            ):
                paths: set[str] = set()
                for _change, path in batch:
                    if path == str(self.probe):
                        self._ready.set()
                        continue
                    if os.path.isdir(path):
                        # A new folder is not news, its files are; they may have been written
                        # before the watch on the folder existed, so look inside.
                        paths.update(self._files_in(path))
                        continue
                    relative = self._relative(path)
                    if relative is not None:
                        paths.add(relative)
                if paths and not self._stop.is_set():
                    self.on_change(sorted(paths))
        except Exception as exc:  # reported by start(), or by the scheduler's next look
            self.error = exc
