"""One runner per loop: an flock the kernel frees the moment its holder dies (invariant 2)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from loopctl.errors import LockHeld

LOCK_FORMAT_VERSION = 1

_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_.-]")

# `read_holder` probes with a brief shared lock; a runner starting at that instant retries
# rather than refusing because of a status query.
_ATTEMPTS = 3
# loopctl's own locks start with "_", which no loop name can (definitions/loops.py LOOP_NAME):
# a loop called `inbox` or `worktrees` must never share a lock file with them.
INBOX_LOCK = "_inbox"
WORKTREES_LOCK = "_worktrees"
STATE_SYNC_LOCK = "_state-sync"
_RETRY_PAUSE = 0.01


def lock_path(locks_dir: Path, name: str) -> Path:
    """The lock file for loop `name`, always directly inside `locks_dir`."""
    if _SAFE_NAME.fullmatch(name):
        stem = name
    else:
        # The digest keeps distinct names distinct after their unsafe characters are replaced.
        cleaned = _UNSAFE_CHAR.sub("_", name).lstrip(".")[:64] or "loop"
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        stem = f"{cleaned}-{digest}"
    return locks_dir / f"{stem}.lock"


class RunnerLock:
    """An exclusive, non-blocking lock on one loop; use as a context manager."""

    def __init__(self, locks_dir: Path, name: str) -> None:
        self.locks_dir = locks_dir
        self.name = name
        self.path = lock_path(locks_dir, name)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock and record who holds it, or raise LockHeld naming the holder."""
        if self._fd is not None:
            raise RuntimeError(f"lock for loop {self.name!r} is already held by this object")
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a symlink planted at the lock path must not redirect our writes.
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(self.path, flags, 0o644)
        try:
            if not _try_exclusive(fd):
                raise LockHeld(_held_message(self.name, _read_info(fd)))
            info = json.dumps(holder_info(), ensure_ascii=False).encode("utf-8", "replace")
            os.ftruncate(fd, 0)
            os.pwrite(fd, info + b"\n", 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Unlock; the file stays, since unlinking a lock file races with the next taker."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            # Clear the holder info while still locked so nobody reads a stale pid.
            os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)

    def __enter__(self) -> RunnerLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def holder_info() -> dict[str, Any]:
    """What this process writes into a lock it takes."""
    since = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return {
        "v": LOCK_FORMAT_VERSION,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": since,
        "argv": list(sys.argv),
    }


def read_holder(locks_dir: Path, name: str) -> dict[str, Any] | None:
    """Who holds loop `name`'s lock (pid, host, since, argv), or None if nobody does."""
    try:
        fd = os.open(lock_path(locks_dir, name), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _try_exclusive(fd: int) -> bool:
    for attempt in range(_ATTEMPTS):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if attempt + 1 < _ATTEMPTS:
                time.sleep(_RETRY_PAUSE)
            continue
        return True
    return False


def _read_info(fd: int) -> dict[str, Any]:
    # The holder may be between taking the lock and writing its info: any field may be missing.
    try:
        raw = json.loads(os.pread(fd, min(os.fstat(fd).st_size, 1 << 20), 0))
    except (OSError, ValueError):
        raw = {}
    if not isinstance(raw, dict):
        raw = {}
    pid = raw.get("pid")
    argv = raw.get("argv")
    return {
        "pid": pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        "host": raw.get("host") if isinstance(raw.get("host"), str) else None,
        "since": raw.get("since") if isinstance(raw.get("since"), str) else None,
        "argv": [str(arg) for arg in argv] if isinstance(argv, list) else [],
    }


def _held_message(name: str, info: dict[str, Any]) -> str:
    who = f"pid {info['pid']}" if info["pid"] is not None else "another process"
    if info["host"]:
        who += f" on {info['host']}"
    if info["since"]:
        who += f" since {info['since']}"
    return f"loop {name!r} is already running ({who}); stop it first or wait for it to finish"


_SHORT_LOCKS: dict[Path, threading.Lock] = {}
_SHORT_LOCKS_GUARD = threading.Lock()


@contextlib.contextmanager
def short_lock(locks_dir: Path, name: str) -> Iterator[None]:
    """Wait for, then hold, a lock around a brief critical section (e.g. `git worktree add`).

    Unlike RunnerLock it blocks instead of refusing: git's worktree bookkeeping is not safe
    against concurrent adds, prunes and removals, whether from threads or other processes.
    """
    path = lock_path(locks_dir, name)
    with _SHORT_LOCKS_GUARD:
        thread_lock = _SHORT_LOCKS.setdefault(path, threading.Lock())
    with thread_lock:
        locks_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock


def worktree_lock(locks_dir: Path) -> contextlib.AbstractContextManager[None]:
    """git's worktree bookkeeping races under concurrent adds, prunes and removals: one at a
    time, across every process of the repository."""
    return short_lock(locks_dir, WORKTREES_LOCK)


def inbox_lock(locks_dir: Path) -> contextlib.AbstractContextManager[None]:
    """Serialise inbox decisions across processes (held for milliseconds, never for delivery)."""
    return short_lock(locks_dir, INBOX_LOCK)
