"""When a program stopped making progress (`IdleLimit`, `IdleClock`, used by loopctl.process),
and whether the files it works on changed (`TreeWatch`, the progress probe the engine gives it).

A turn that prints nothing may still be working: an agent CLI that reports only at the end
(`claude -p --output-format json`) edits files, writes its session transcript, runs a build.
`TreeWatch` answers "did anything under these folders change since I last looked?" from a
scan of names, sizes and modification times (a folder's own time moves when an entry is added
or removed). Each scan is bounded: at most `max_entries` entries of each folder watched,
breadth first so the top of the tree (where sources are) is always seen; `.git` is skipped
(git's own bookkeeping is not the agent's work), and symbolic links are not followed.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

MAX_ENTRIES = 20_000
_SKIPPED = frozenset({".git"})


@dataclass(frozen=True, slots=True)
class IdleLimit:
    """End a program that makes no progress for `seconds`, as `stalled` (not a timeout).

    Any byte it prints is progress; so is `progress()` answering True (something it works on
    changed since the last question: `TreeWatch`). `progress` is asked every `seconds / 4` (at
    most every 30 s) and once more before the program is ended, in the thread that waits for
    the program, so it must be cheap and bounded.
    """

    seconds: float
    progress: Callable[[], bool] | None = None

    @property
    def every(self) -> float:
        return min(max(self.seconds / 4, 0.05), 30.0)


class IdleClock:
    """When a program last made progress: its last output (`last_output`, a time.monotonic()
    value, 0 before any) or a change `progress` saw."""

    def __init__(self, limit: IdleLimit, last_output: Callable[[], float], started: float) -> None:
        self._limit = limit
        self._last_output = last_output
        self._last = started
        self._probe_at = started + limit.every
        self.fired = False  # the program was found idle past its limit (and is being ended)

    def expired(self, now: float) -> bool:
        """Whether the program has made no progress for its limit, as of `now`."""
        self._last = max(self._last, self._last_output())
        probe = self._limit.progress
        idle = now - self._last >= self._limit.seconds
        if probe is not None and (idle or now >= self._probe_at):
            self._probe_at = now + self._limit.every
            if probe():
                self._last = now
                return False
        self.fired = idle
        return idle


class TreeWatch:
    """Answers True when something under `roots` changed since it was last asked (or made)."""

    def __init__(self, roots: Iterable[Path], max_entries: int = MAX_ENTRIES) -> None:
        self._roots = tuple(dict.fromkeys(roots))
        self._max = max_entries
        self._last = self.signature()

    def __call__(self) -> bool:
        now = self.signature()
        changed, self._last = now != self._last, now
        return changed

    def signature(self) -> bytes:
        """A digest of every entry seen: its path, kind, size and modification time."""
        digest = hashlib.blake2b(digest_size=16)
        for root in self._roots:
            seen = 0
            folders: deque[str] = deque([str(root)])
            while folders and seen < self._max:
                folder = folders.popleft()
                try:
                    with os.scandir(folder) as entries:
                        listed = sorted(entries, key=lambda entry: entry.name)
                except OSError:
                    digest.update(f"{folder}\0gone\n".encode(errors="replace"))
                    continue
                for entry in listed:
                    if seen >= self._max:
                        break
                    if entry.name in _SKIPPED:
                        continue
                    seen += 1
                    try:
                        stat = entry.stat(follow_symlinks=False)
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue  # removed while we looked: its folder's time says so
                    if is_dir:
                        folders.append(entry.path)
                    line = f"{entry.path}\0{is_dir}\0{stat.st_size}\0{stat.st_mtime_ns}\n"
                    digest.update(line.encode(errors="surrogateescape"))
        return digest.digest()
