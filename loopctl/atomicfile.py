"""Whole-file writes that a crash can never leave half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

_TMP_PREFIX = ".loopctl-"
_TMP_SUFFIX = ".tmp"


def write_atomic(path: Path, data: str | bytes, *, mode: int = 0o644) -> None:
    """Write `data` to `path` via a temp file in the same folder, fsync, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    # The writer's pid in the name lets a sweep tell a dead writer's leftover from a live write.
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f"{_TMP_PREFIX}{os.getpid()}-", suffix=_TMP_SUFFIX
    )
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def sweep_temp_files(folder: Path) -> int:
    """Remove temp files left by writers that were killed mid-write; return how many."""
    removed = 0
    if not folder.is_dir():
        return 0
    for leftover in folder.glob(f"{_TMP_PREFIX}*{_TMP_SUFFIX}"):
        if _writer_alive(leftover.name):
            continue  # another thread or process is writing it right now
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
            removed += 1
    return removed


def _writer_alive(name: str) -> bool:
    pid_text = name[len(_TMP_PREFIX) :].split("-", 1)[0]
    if not pid_text.isdigit():
        return False  # no pid in the name: an older loopctl's leftover
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries: a new or renamed file is only durable once its entry is."""
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
