"""A cache of the rendered inbox listing, valid exactly while the inbox part of the log is.

`loopctl inbox --json` sits in prompts, hooks and status bars, and with 10 000 items re-reading
and re-rendering the whole log costs ten times Python's start-up. The log stays the source of
truth: the cache is keyed by the log file's identity (device, inode, size, mtime and a checksum
of its last bytes) and by the cache format. When the log only grew, and the bytes it gained
name no inbox event, the listing cannot have changed and the cache is carried forward; any
other change (an inbox event, truncation, replacement) rebuilds it from the log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from loopctl.errors import swallowed

logger = logging.getLogger(__name__)

CACHE_VERSION = 2  # 2: each item carries its outcome
_TAIL = 256
# Event types that change the listing. A false match (the word inside some text) only costs a
# rebuild; a real inbox event always contains its type name.
_MARKERS = (b"inbox_opened", b"inbox_closed", b"approved", b"approval_refused")


@dataclass(frozen=True, slots=True)
class LogState:
    dev: int
    ino: int
    size: int
    mtime_ns: int
    crc: int  # of the last bytes: two states with the same key hold the same log

    @property
    def key(self) -> str:
        return f"v{CACHE_VERSION}:{self.dev}:{self.ino}:{self.size}:{self.mtime_ns}:{self.crc:08x}"

    @classmethod
    def parse(cls, key: str) -> LogState | None:
        parts = key.split(":")
        if len(parts) != 6 or parts[0] != f"v{CACHE_VERSION}":
            return None
        try:
            return cls(
                int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5], 16)
            )
        except ValueError:
            return None


def _crc_before(fd: int, end: int) -> int:
    return zlib.crc32(os.pread(fd, min(_TAIL, end), max(end - _TAIL, 0)))


def log_state(events_file: Path) -> LogState | None:
    """Where the log is now; None when there is no log."""
    try:
        fd = os.open(events_file, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        return LogState(
            st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, _crc_before(fd, st.st_size)
        )
    finally:
        os.close(fd)


def cache_file(loop_dir: Path, view: str) -> Path:
    return loop_dir / "cache" / f"inbox-{view}.json"


def _alias_file(loop_dir: Path, view: str) -> Path:
    # "<later state> <state the body was built at>": carrying a listing forward rewrites these
    # few bytes, not the whole (possibly megabytes long) listing.
    return loop_dir / "cache" / f"inbox-{view}.alias"


def cached(loop_dir: Path, view: str, events_file: Path, now: LogState) -> bytes | None:
    """The listing for the log as it is `now`, or None when it must be rebuilt."""
    try:
        data = cache_file(loop_dir, view).read_bytes()
    except OSError:
        return None
    head, newline, body = data.partition(b"\n")
    built = head.decode("ascii", "replace")
    if not newline:
        return None
    if built == now.key:
        return body
    latest = built
    with contextlib.suppress(OSError, ValueError):
        later, of = _alias_file(loop_dir, view).read_text(encoding="ascii").split()
        if of == built:
            latest = later
    if latest == now.key:
        return body
    then = LogState.parse(latest)
    if then is None or (then.dev, then.ino) != (now.dev, now.ino) or now.size <= then.size:
        return None
    try:
        fd = os.open(events_file, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _crc_before(fd, then.size) != then.crc:
            return None  # not the same log with more at its end
        gained = os.pread(fd, now.size - then.size, then.size)
    finally:
        os.close(fd)
    if len(gained) != now.size - then.size or any(m in gained for m in _MARKERS):
        return None
    from loopctl.atomicfile import write_atomic

    with swallowed(logger, "writing the inbox index's alias", OSError):
        write_atomic(_alias_file(loop_dir, view), f"{now.key} {built}\n")
    return body


def store(loop_dir: Path, view: str, state: LogState, body: bytes) -> None:
    """Keep `body` for `state`; a cache that cannot be written is simply not kept."""
    from loopctl.atomicfile import write_atomic

    with swallowed(logger, "writing the inbox index", OSError):
        write_atomic(cache_file(loop_dir, view), state.key.encode("ascii") + b"\n" + body)
