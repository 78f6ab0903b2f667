"""Processes in tests: waiting without sleeping as synchronisation, pids across the sandbox's
PID namespaces, lines from a child, and long-lived loopctl processes that never outlive a test."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from support.cli import loopctl_argv

T = TypeVar("T")

# A deadline that only keeps a broken test from hanging for ever, never what a test waits on: a
# test waits for an event (a pid file, a FIFO, a log line, an event in the journal), and a loaded
# machine may take far longer than an idle one to produce it (`scripts/under-load`).
SAFETY_NET = 300.0
# The same for a call that takes milliseconds unless it blocks for ever (an open(2) of a FIFO).
BLOCKED_AFTER = 120.0


def wait_for(predicate: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)


def read_pid(path: Path) -> int | None:
    """The host pid of the fake agent that wrote its pid to `path` (and still runs).

    A sandboxed agent lives in a PID namespace and writes the pid it sees there; the host
    process is the one whose command line names `path` and whose innermost pid is that one.
    """
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    if not text:
        return None
    pid = int(text.split()[0])
    return host_pid(pid, str(path)) or pid


def host_pid(inner: int, named: str) -> int | None:
    """The host pid of a live process whose argv contains `named` and whose own (innermost)
    PID namespace calls it `inner`; None when there is none."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        if named.encode() not in argv:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == inner:
                return int(entry.name)
    return None


def pid_alive(pid: int) -> bool:
    """True while `pid` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state letter follows the parenthesised command name, which may itself hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def kill_if_alive(pid: int | None) -> None:
    if pid is not None and pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_until_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """The pids still alive after up to `timeout` seconds of polling (empty when all went)."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if pid_alive(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


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


# --- long-lived loopctl processes (triggers, `up`) ----------------------------------------------


class Proc:
    """A loopctl subprocess whose output goes to files (a pipe nobody reads could block it)."""

    def __init__(self, repo: Path, out_dir: Path, *args: str) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = out_dir / "stdout"
        self.stderr_path = out_dir / "stderr"
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.popen = subprocess.Popen(
                loopctl_argv(*args), cwd=repo, stdout=out, stderr=err, stdin=subprocess.DEVNULL
            )
        self.pid = self.popen.pid

    @property
    def output(self) -> str:
        return self.stdout_path.read_text() + self.stderr_path.read_text()

    def signal(self, signum: int, timeout: float = 30) -> int:
        self.popen.send_signal(signum)
        return self.popen.wait(timeout)

    def wait(self, timeout: float = 30) -> int:
        return self.popen.wait(timeout)


def running_procs() -> Iterator[list[Proc]]:
    """For a fixture: the processes a test starts; any still running at the end are killed."""
    started: list[Proc] = []
    yield started
    for proc in started:
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.popen.send_signal(signal.SIGKILL)
            proc.popen.wait(30)


def spawn(procs: list[Proc], repo: Path, tmp_path: Path, *args: str) -> Proc:
    proc = Proc(repo, tmp_path / f"proc-{len(procs)}", *args)
    procs.append(proc)
    return proc


def finishes(call: Callable[[], object]) -> BaseException | None:
    """What `call` raised (None: it returned), once it finished. A call blocked in open(2) on a
    FIFO never finishes: after BLOCKED_AFTER, far beyond the milliseconds it takes, that is a
    failure (the daemon thread is left behind, blocked)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BLOCKED_AFTER)
    assert not thread.is_alive(), "blocked: a FIFO was opened as a file or a folder"
    return outcome[0]
