"""Programs the extras install, free ports and waiting on real conditions (tests/beyond)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopctl import process
from loopctl.journal.events import EventType
from loopctl.temporal.shapes import AttemptRequest, AttemptResult
from support.cli import loopctl_argv
from support.journal import events
from support.repos import git, make_project, write_loop

# The task queue the tests' workers poll.
QUEUE = "loopctl-tests"
# A loop the tests' workers run: one attempt fixes calc's add().
LOOP = 'every = "1h"\ngoal = "tests green"\nprompt = "Make add() add."\n'
# Generous: a loaded 2-core CI machine; the server is ready in about half a second.
READY_WITHIN_S = 60.0


def program(name: str) -> str:
    """A program the extras install beside this interpreter."""
    found = Path(sys.executable).parent / name
    if not found.exists():
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]' (the extras it names)")
    return str(found)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until(condition: object, what: str, within: float = READY_WITHIN_S) -> None:
    """Poll `condition()` (a real state: a port, a line in a log) until true, or fail."""
    assert callable(condition)
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within:.0f}s: {what}")
        time.sleep(0.05)  # a polling interval, not a synchronisation: the condition decides


def accepts(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def stop_group(pid: int) -> None:
    """End a program spawn_detached started, with its whole process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


@contextlib.contextmanager
def loopctl_worker(
    server: str,
    project: Path,
    name: str,
    log: Path,
    env: dict[str, str] | None = None,
    *,
    named: bool = True,
) -> Iterator[subprocess.Popen[bytes]]:
    """A real `loopctl worker NAME` polling QUEUE for `project`, stopped (killed) after; `env`:
    its own (a machine of its own: another HOME, another worktree root); `named` False: no
    --identity (the worker's default, `name` then only labels it here)."""
    argv = loopctl_argv("worker", "--server", server, "--task-queue", QUEUE)
    if named:
        argv += ["--identity", name]
    spawned = process.spawn_detached(argv, cwd=project, env=env or dict(os.environ), log_path=log)
    try:
        polling = f"loopctl worker {name}: polling" if named else f": polling {QUEUE!r}"
        wait_until(
            lambda: polling in log.read_text() or spawned.poll() is not None, f"{name} polls"
        )
        assert spawned.poll() is None, log.read_text()
        yield spawned
    finally:
        stop_group(spawned.pid)
        spawned.wait()


def start_dev_server(port: int, folder: Path, db: Path | None = None) -> subprocess.Popen[bytes]:
    """`temporal server start-dev --headless` on `port`, in memory or in the SQLite file `db`;
    returns once it listens."""
    argv = [program("temporal"), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
    argv += ["--port", str(port), "--log-level", "warn"]
    if db is not None:
        argv += ["--db-filename", str(db)]
    log = folder / f"temporal-server-{port}.log"
    server = process.spawn_detached(argv, cwd=folder, env=dict(os.environ), log_path=log)
    try:
        wait_until(lambda: accepts(port) or server.poll() is not None, "the server listens")
        assert server.poll() is None, log.read_text()
    except BaseException:
        stop_group(server.pid)
        server.wait()
        raise
    return server


def machine_env(home: Path) -> dict[str, str]:
    """This process's environment with another HOME and loopctl folder: another machine."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["HOME"] = str(home)
    env["LOOPCTL_HOME"] = str(home / ".loopctl")
    for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        env[name] = str(home / name.lower())
    return env


def loop_project(where: Path, *agent: str | Path) -> Path:
    """The calc project at `where`/project with the loop "nightly", its maker the fake agent
    `agent` (a script and its arguments; fixer.py when none), committed on main."""
    project = where / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    make_project(project, *(agent or ("fixer.py",)))
    write_loop(project, "nightly", LOOP)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a loop")
    return project


async def tick(address: str, workflow_id: str, attempt_id: str = "") -> AttemptResult:
    """One tick of "nightly" as a workflow on QUEUE, started with the SDK (as `up --engine
    temporal` or another client would), awaited to its result."""
    from temporalio.client import Client

    client = await Client.connect(address)
    result: AttemptResult = await client.execute_workflow(
        "loopctl.LoopTick",
        AttemptRequest(loop="nightly", attempt_id=attempt_id),
        id=workflow_id,
        task_queue=QUEUE,
        result_type=AttemptResult,
    )
    return result


def notes(project: Path, what: str) -> list[dict[str, object]]:
    """The data of the journal's notes `what` (a claim, a finished attempt)."""
    return [
        dict(e.data) for e in events(project) if e.type == EventType.NOTE and e.data["what"] == what
    ]
