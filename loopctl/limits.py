"""Resource limits for every process of an agent turn or check (docs/INVARIANTS.md, invariant 11).

Four limits, per agent in `[sandbox]`: `memory`, `pids`, `cpu_time` and `disk` (growth of the
worktree and the turn's state). Two mechanisms hold them, because cgroups v2 are rarely
delegated to the user who runs loopctl (a container's root has only a read-only v1 tree):

- **rlimits**, set in the child between fork and exec (one `setrlimit` each, nothing else) and
  inherited by everything it starts: `RLIMIT_DATA` (memory; it counts what a process can write,
  not the address space a runtime reserves, so Node and Go start under it), `RLIMIT_NPROC`
  (pids: the kernel ignores it for root), `RLIMIT_CPU` and `RLIMIT_FSIZE` (no file larger than
  `disk`). They bound each process; the kernel refuses the allocation, the fork, the write.
- **a watcher** thread beside the program that sums what rlimits count per process over the
  whole tree: anonymous memory, processes (the tree as root, the uid's total otherwise: where
  `RLIMIT_NPROC` refuses a fork), CPU seconds, and the bytes the watched folders grew by. Past a
  limit it kills the program's process group, which ends the sandbox and everything in it.

Either way the turn ends with one reason ("memory limit 4 GiB reached"): from the watcher, from
the signal the kernel sent (SIGXCPU, SIGXFSZ), or from a failing program's own words for a
refused allocation or fork.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import resource
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

GIB = 1024**3
DEFAULT_MEMORY = 8 * GIB
DEFAULT_PIDS = 4096
DEFAULT_DISK = 10 * GIB
# cpu_time has no default: an agent mostly waits for its model, and its `timeout` bounds it.
DEFAULT_CPU_TIME: float | None = None

# How often the watcher looks at the tree, and how much of its time a folder walk may take.
_TICK = 0.25
_WALK_EVERY_MIN = 2.0
_WALK_SHARE = 20  # walk again after at least 20 times the last walk's duration
# What a program prints when the kernel refused it memory or a process, as it dies of it.
_OUT_OF_MEMORY = re.compile(
    r"MemoryError|Cannot allocate memory|out of memory|std::bad_alloc|ENOMEM"
    r"|failed to allocate|allocation failed",
    re.I,
)
_NO_PROCESS = re.compile(
    r"Resource temporarily unavailable|BlockingIOError|fork: retry|EAGAIN|can't fork"
    r"|Cannot fork|failed to spawn|spawn .*EAGAIN",
    re.I,
)


# Python ignores SIGXFSZ: the write past RLIMIT_FSIZE fails with EFBIG instead.
_FILE_TOO_LARGE = re.compile(r"File too large|EFBIG", re.I)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one agent's processes may use; None means unlimited."""

    memory: int | None = DEFAULT_MEMORY  # bytes, each process and the tree's sum
    pids: int | None = DEFAULT_PIDS
    cpu_time: float | None = DEFAULT_CPU_TIME  # seconds of CPU, each process and the tree
    disk: int | None = DEFAULT_DISK  # bytes the watched folders may grow by

    def reached(self, name: str) -> str:
        """The turn's end reason for limit `name`: "memory limit 4 GiB reached"."""
        return f"{name} limit {self.shown(name)} reached"

    def shown(self, name: str) -> str:
        value = getattr(self, name)
        if value is None:
            return "unlimited"
        if name in ("memory", "disk"):
            return format_size(int(value))
        if name == "cpu_time":
            return f"{value:g}s"
        return str(value)

    def values(self) -> dict[str, int]:
        """The limits set, as the whole numbers their rlimits take (CPU seconds rounded up)."""
        cpu = None if self.cpu_time is None else max(math.ceil(self.cpu_time), 1)
        found = {"memory": self.memory, "pids": self.pids, "cpu_time": cpu, "disk": self.disk}
        return {name: value for name, value in found.items() if value is not None}

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.memory, self.pids, self.cpu_time, self.disk))


UNLIMITED = Limits(memory=None, pids=None, cpu_time=None, disk=None)


def format_size(size: int) -> str:
    """1073741824 -> "1 GiB", 1536 MiB -> "1.5 GiB": the unit that keeps the number short."""
    for unit, scale in (("TiB", 1024**4), ("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.4g} {unit}"
    return f"{size} B"


# --- rlimits -------------------------------------------------------------------------------

# The rlimit each limit sets in every process: RLIMIT_DATA counts the memory a process can
# write (not what a runtime only reserves), RLIMIT_FSIZE the largest file it may write.
RLIMITS = {
    "memory": resource.RLIMIT_DATA,
    "pids": resource.RLIMIT_NPROC,
    "cpu_time": resource.RLIMIT_CPU,
    "disk": resource.RLIMIT_FSIZE,
}


def rlimits(limits: Limits) -> list[tuple[int, tuple[int, int]]]:
    """The (resource, (soft, hard)) pairs to set in the child, never above what we hold."""
    pairs = []
    for name, value in limits.values().items():
        kind = RLIMITS[name]
        if name == "pids":
            value = nproc_ceiling(value)
        # SIGXCPU at the soft CPU limit (a program may catch it); SIGKILL a second later.
        soft = value
        hard = value + 1 if name == "cpu_time" else value
        _, held = resource.getrlimit(kind)
        if held != resource.RLIM_INFINITY:
            # An unprivileged process cannot raise its hard limit: stay under the one it has.
            soft, hard = min(soft, held), min(hard, held)
        pairs.append((kind, (soft, hard)))
    return pairs


def nproc_ceiling(pids: int) -> int:
    """RLIMIT_NPROC for `pids` more tasks: the kernel counts every process and thread the user
    has (a desktop's browser and editor hold thousands), so the ceiling is what runs now plus
    `pids`. Root is not counted: the kernel ignores the limit for it."""
    uid = os.getuid()
    return pids if uid == 0 else pids + _tree(os.getpid(), uid)[1]


def preexec(pairs: Sequence[tuple[int, tuple[int, int]]]) -> Callable[[], None]:
    """What the child runs between fork and exec: only setrlimit, computed beforehand."""
    settings = tuple(pairs)
    setrlimit = resource.setrlimit

    def apply() -> None:
        for kind, values in settings:
            setrlimit(kind, values)

    return apply


# --- what holds here -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hold:
    """How one limit is enforced on this machine, for `loopctl doctor`."""

    name: str
    value: str
    held: bool
    how: str


def holds(limits: Limits, euid: int | None = None) -> list[Hold]:
    """Which limits the kernel holds here, and how; a limit not held is only watched."""
    root = (os.geteuid() if euid is None else euid) == 0
    delegated = cgroup_delegated()
    cgroup = f"cgroups v2: {delegated}" if delegated else "no delegated cgroup v2 subtree here"
    rows = [
        Hold(
            "memory",
            limits.shown("memory"),
            True,
            "RLIMIT_DATA per process, and the tree's anonymous memory watched",
        ),
        Hold(
            "pids",
            limits.shown("pids"),
            not root,
            "the tree's processes watched (root ignores RLIMIT_NPROC; " + cgroup + ")"
            if root
            else "RLIMIT_NPROC for this user's processes, and watched",
        ),
        Hold(
            "cpu_time",
            limits.shown("cpu_time"),
            True,
            "RLIMIT_CPU per process, and the tree's CPU seconds watched",
        ),
        Hold(
            "disk",
            limits.shown("disk"),
            True,
            "RLIMIT_FSIZE per file, and the worktree's and state's growth watched",
        ),
    ]
    return [
        row
        if getattr(limits, row.name) is not None
        else Hold(row.name, "unlimited", True, f"not set (per agent: [sandbox] {row.name})")
        for row in rows
    ]


def cgroup_delegated() -> str | None:
    """The cgroup v2 folder this process could make children in, or None (v1, or read-only)."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    unified = next((line[3:] for line in lines if line.startswith("0::")), None)
    mount = Path("/sys/fs/cgroup")
    if unified is None or not (mount / "cgroup.controllers").is_file():
        return None
    folder = mount / unified.lstrip("/")
    if os.access(folder, os.W_OK) and os.access(folder / "cgroup.procs", os.W_OK):
        return str(folder)
    return None


# --- after the program ended -------------------------------------------------------------------


def reason_from_exit(limits: Limits, returncode: int, output: str) -> str | None:
    """Which limit ended a program that exited on its own: the signal the kernel sends for
    CPU time and file size (bwrap exits 128+N for its child's signal N), or, for a failing
    program, its own words for a refused allocation or fork."""
    signals = {abs(returncode), returncode - 128}
    if limits.cpu_time is not None and signal.SIGXCPU in signals:
        return limits.reached("cpu_time")
    if limits.disk is not None and signal.SIGXFSZ in signals:
        return limits.reached("disk")
    if returncode == 0:
        return None
    tail = output[-3000:]
    if limits.memory is not None and _OUT_OF_MEMORY.search(tail):
        return limits.reached("memory")
    if limits.pids is not None and _NO_PROCESS.search(tail):
        return limits.reached("pids")
    if limits.disk is not None and _FILE_TOO_LARGE.search(tail):
        return limits.reached("disk")
    return None


# --- the watcher -------------------------------------------------------------------------------


class Watch:
    """Sum the tree's use every tick; past a limit, call `stop` (which kills the group) once."""

    def __init__(
        self,
        limits: Limits,
        pid: int,
        folders: Sequence[Path],
        stop: Callable[[], None],
        tick: float = _TICK,
        ceiling: int | None = None,
    ) -> None:
        self._limits = limits
        self._ceiling = ceiling  # RLIMIT_NPROC as set: where the kernel refuses a fork
        self._pid = pid
        self._folders = tuple(folders)
        self._stop = stop
        self._tick = tick
        self._done = threading.Event()
        self._uid = os.getuid()
        self.reason: str | None = None
        self._thread = threading.Thread(target=self._run, name="loopctl-limits", daemon=True)
        self._disk_base: int | None = None
        self._fs_base: dict[int, int] = {}
        self._grown = 0
        self._next_walk = 0.0

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        """Stop watching; a disk limit gets one last look when the file system says it may
        have been passed since the last walk (a program that filled it and exited)."""
        self._done.set()
        self._thread.join()
        disk = self._limits.disk
        if (
            self.reason is None
            and disk is not None
            and self._disk_base is not None
            and self._fs_growth() >= disk - self._grown
        ):
            self._check_disk(force=True)

    def _run(self) -> None:
        if self._limits.disk is not None:
            self._fs_base = self._fs_used()
            self._disk_base = folder_bytes(self._folders)
        while not self._done.wait(self._tick):
            with contextlib.suppress(OSError, ValueError):
                self.reason = self._check_tree() or self._check_disk(force=False)
            if self.reason is not None:
                self._stop()
                return

    def _check_tree(self) -> str | None:
        limits = self._limits
        if limits.memory is None and limits.pids is None and limits.cpu_time is None:
            return None
        tree, uid_count = _tree(self._pid, self._uid)
        if limits.pids is not None:
            # As root RLIMIT_NPROC does not hold: count the tree. Otherwise the kernel counts
            # every task (thread) of the uid, and refuses a fork there: count the same.
            count = len(tree) if self._uid == 0 else uid_count
            if count >= (limits.pids if self._uid == 0 else self._ceiling or limits.pids):
                return limits.reached("pids")
        if limits.memory is not None and sum(_anon_bytes(p) for p in tree) > limits.memory:
            return limits.reached("memory")
        if limits.cpu_time is not None and sum(_cpu_seconds(p) for p in tree) > limits.cpu_time:
            return limits.reached("cpu_time")
        return None

    def _check_disk(self, *, force: bool) -> str | None:
        limit = self._limits.disk
        if limit is None or self._disk_base is None:
            return None
        now = time.monotonic()
        # A walk of a large worktree takes time: walk when due, or at once when the file
        # system grew by what is left of the limit (cheap, one statvfs per file system).
        if not force and now < self._next_walk and self._fs_growth() < limit - self._grown:
            return None
        started = time.monotonic()
        self._grown = folder_bytes(self._folders) - self._disk_base
        spent = time.monotonic() - started
        self._next_walk = time.monotonic() + max(_WALK_EVERY_MIN, _WALK_SHARE * spent)
        if self._grown > limit:
            self.reason = self._limits.reached("disk")
            return self.reason
        return None

    def _fs_used(self) -> dict[int, int]:
        used: dict[int, int] = {}
        for folder in self._folders:
            with contextlib.suppress(OSError):
                device = os.stat(folder).st_dev
                if device not in used:
                    info = os.statvfs(folder)
                    used[device] = (info.f_blocks - info.f_bfree) * info.f_frsize
        return used

    def _fs_growth(self) -> int:
        now = self._fs_used()
        return max((now[d] - self._fs_base.get(d, now[d]) for d in now), default=0)


def folder_bytes(folders: Sequence[Path]) -> int:
    """Bytes on disk under `folders` (allocated blocks, each inode once); links not followed."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(f) for f in folders]
    while stack:
        top = stack.pop()
        try:
            entries = os.scandir(top)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                key = (info.st_dev, info.st_ino)
                if key in seen:
                    continue
                seen.add(key)
                total += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


def _tree(root: int, uid: int) -> tuple[list[int], int]:
    """The pids of `root` and its descendants, and how many tasks (threads) `uid` has."""
    children: dict[int, list[int]] = {}
    owned = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
            if uid != 0:
                owned += _tasks_of(name, uid)
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: split after the last ")".
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(name))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found, owned


def _tasks_of(pid: str, uid: int) -> int:
    """How many tasks of process `pid` count against `uid`'s RLIMIT_NPROC: its threads, when
    its real uid is `uid`. Its /proc folder shows the owner, except for a process that made
    itself non-dumpable (loopctl itself, an ssh-agent): that folder is root's, and only its
    status tells."""
    owner = os.stat(f"/proc/{pid}").st_uid
    if owner not in (uid, 0):
        return 0
    real, threads = -1, 1
    with open(f"/proc/{pid}/status", "rb") as handle:
        for line in handle:
            if line.startswith(b"Uid:"):
                real = int(line.split()[1])
            elif line.startswith(b"Threads:"):
                threads = int(line.split()[1])
                break
    return threads if real == uid else 0


def _anon_bytes(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/status", "rb") as handle:
        for line in handle:
            if line.startswith(b"RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float:
    """CPU time of `pid` and of the children it has reaped (each process counted once)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        # utime, stime, cutime, cstime: fields 14-17, here 11-14 after the name.
        return sum(int(fields[i]) for i in range(11, 15)) / _CLOCK_TICKS
    return 0.0
