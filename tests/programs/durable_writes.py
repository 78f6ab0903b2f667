"""Append to an event log and write a file atomically, saying so after each call returns.

    python durable_writes.py FOLDER [RECORD]

Four steps, each followed by "reported: STEP" on stdout, the moment a caller would tell the user
or act on it: the log's first append (a new file), a second append, a new file written with
`write_atomic`, and the same file rewritten. Run under `strace`, the test sees every write, fsync
and rename in between. Given RECORD (a machine without strace), the program records the calls
itself, one JSON line each, by wrapping `os.write`, `os.fsync` and `os.replace`/`os.rename`: the
same claim one level up (a buffered file write is not seen there, its fsync and rename are).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

STEPS = ("first append", "second append", "new file", "rewritten file")


def fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"fd {fd}"


def record_calls(record: Path) -> Callable[[str], None]:
    """Wrap the calls that decide durability; return how a step's report is recorded."""
    sink = record.open("a", encoding="utf-8")

    def note(**op: Any) -> None:
        sink.write(json.dumps(op) + "\n")
        sink.flush()

    write, fsync, replace, rename = os.write, os.fsync, os.replace, os.rename

    def traced_write(fd: int, data: Any) -> int:
        note(op="write", path=fd_path(fd))
        return write(fd, data)

    def traced_fsync(fd: Any) -> None:
        note(op="fsync", path=fd_path(fd if isinstance(fd, int) else fd.fileno()))
        fsync(fd)

    def traced_replace(src: Any, dst: Any, **kwargs: Any) -> None:
        replace(src, dst, **kwargs)
        note(op="rename", path=os.fspath(src), to=os.fspath(dst))

    def traced_rename(src: Any, dst: Any, **kwargs: Any) -> None:
        rename(src, dst, **kwargs)
        note(op="rename", path=os.fspath(src), to=os.fspath(dst))

    os.write, os.fsync = traced_write, traced_fsync  # type: ignore[assignment]
    os.replace, os.rename = traced_replace, traced_rename  # type: ignore[assignment]
    return lambda step: note(op="report", step=step)


def main() -> int:
    folder = Path(sys.argv[1])
    on_report = record_calls(Path(sys.argv[2])) if len(sys.argv) > 2 else None
    # Imported after the wrapping, as loopctl itself would be.
    from loopctl.atomicfile import write_atomic
    from loopctl.journal.events import EventLog

    log = EventLog(folder / "log" / "events.jsonl")
    actions = (
        lambda: log.append("approved", data={"item": "i1"}),
        lambda: log.append("step_started", data={"step": 0}),
        lambda: write_atomic(folder / "STATE.md", "# Loop state\n"),
        lambda: write_atomic(folder / "STATE.md", "# Loop state\n\nmore\n"),
    )
    for step, action in zip(STEPS, actions, strict=True):
        action()
        if on_report is not None:
            on_report(step)
        sys.stdout.write(f"reported: {step}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
