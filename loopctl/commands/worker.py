"""`loopctl worker`: serve this repository's loops to a Temporal task queue until stopped.

The SDK (the `temporal` extra) is imported here, when the command runs, never by `--help`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from loopctl.errors import LoopctlError, UsageError

DEFAULT_SERVER = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_QUEUE = "loopctl"


def default_identity(root: Path) -> str:
    """How Temporal's UI and history name this worker: host and clone, stable across restarts.

    The name is also this worker's own task queue (`<queue>@<identity>`), where the deliveries
    its attempts left at a gate resume: a restarted worker of the same clone must poll it again,
    so the name carries no process id. The clone's path is hashed (it may be long or private).
    """
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:10]
    return f"{socket.gethostname()}:{digest}"


def run_worker(
    root: Path,
    *,
    server: str,
    namespace: str,
    task_queue: str,
    identity: str,
    slots: int,
    on_ready: Callable[[], None],
    state_remote: str | None = "origin",
) -> int:
    """Serve until SIGINT or SIGTERM; exit code 0 after a clean stop."""
    need_the_extra("loopctl worker")
    # lazy: loopctl.temporal imports the `temporal` extra, checked for just above
    # lazy: commands.on_temporal imports this module
    from loopctl.commands.on_temporal import release, share_state
    from loopctl.temporal.worker import WorkerOptions, serve

    options = WorkerOptions(
        root,
        server,
        namespace,
        task_queue,
        identity,
        release=release,
        share=partial(share_state, remote=state_remote),
        slots=slots,
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await serve(options, stop, on_ready)

    asyncio.run(main())
    return 0


def schedule_loops(
    root: Path, only: Sequence[str], *, server: str, namespace: str, task_queue: str
) -> list[Any]:
    """`loopctl up --engine temporal`: each interval or cron loop as a Temporal Schedule
    (created, or updated to its definition); the schedules, for the CLI to print."""
    need_the_extra("loopctl up --engine temporal")
    # lazy: loopctl.temporal imports the `temporal` extra, checked for just above
    from loopctl.definitions import load_project
    from loopctl.temporal import schedules
    from loopctl.temporal.worker import connect

    project = load_project(root)
    unknown = sorted(set(only) - set(project.loops))
    if unknown:
        raise UsageError(f"no loop named {', '.join(map(repr, unknown))}")
    chosen = [loop for name, loop in sorted(project.loops.items()) if not only or name in only]
    local = [loop.name for loop in chosen if loop.trigger and not schedules.schedulable(loop)]
    if local:
        raise UsageError(
            f"file watches stay on this machine: run {', '.join(local)} with `loopctl up"
            " --only NAME` (a schedule cannot see this machine's files)"
        )
    wanted = [loop for loop in chosen if schedules.schedulable(loop)]

    async def main() -> list[Any]:
        client = await connect(server, namespace)
        made = list(await schedules.apply(client, wanted, task_queue))
        # A schedule `down` paused runs again (whatever an update does to its paused state).
        await schedules.unpause(client, [loop.name for loop in wanted], "loopctl up")
        return made

    made = asyncio.run(main())
    # lazy: commands.on_temporal imports this module
    from loopctl.commands.on_temporal import OnTemporal, read_record, write_record

    before = read_record(project.paths)
    kept = before.loops if before is not None and before.server == server else []
    names = sorted({*kept, *(loop.name for loop in wanted)})
    write_record(project.paths, OnTemporal(server, namespace, task_queue, names))
    return made


def need_the_extra(command: str) -> None:
    try:
        import temporalio  # noqa: F401  # lazy: the `temporal` extra may not be installed
    except ImportError:
        raise LoopctlError(
            f"{command} needs the `temporal` extra: pip install 'loopctl-runtime[temporal]'"
        ) from None


def exit_now(code: int) -> NoReturn:
    """End the process without interpreter teardown, once a Temporal client has been used.

    The SDK's Rust runtime keeps threads that may call into Python while the interpreter
    finalizes, which aborts the process (SIGABRT, "PyGILState_Release … finalizing";
    temporalio/sdk-python issue 300, open): a command that succeeded must not exit -6.
    Output is flushed first; nothing else of loopctl's waits for exit.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
