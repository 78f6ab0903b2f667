"""Talking to child processes in tests without ever hanging the suite."""

from __future__ import annotations

import os
import select
import subprocess
import time


def read_line(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> str:
    """One line of a child's stdout, failing the test instead of hanging if it never comes."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"child {proc.pid} printed no line within {timeout}s: {buf!r}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 1)
            if not chunk:
                break
            buf += chunk
    return buf.decode().strip()
