"""`loopctl worker`: serve this repository's loops to a Temporal task queue until stopped.

The SDK (the `temporal` extra) is imported here, when the command runs, never by `--help`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

from loopctl.errors import LoopctlError

DEFAULT_SERVER = "127.0.0.1:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_QUEUE = "loopctl"


def default_identity() -> str:
    """How Temporal's UI and history name this worker: host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run_worker(
    root: Path,
    *,
    server: str,
    namespace: str,
    task_queue: str,
    identity: str,
    slots: int,
    on_ready: Callable[[], None],
) -> int:
    """Serve until SIGINT or SIGTERM; exit code 0 after a clean stop."""
    try:
        from loopctl.temporal.worker import WorkerOptions, serve
    except ImportError as exc:
        raise LoopctlError(
            f"loopctl worker needs the `temporal` extra ({exc.name} is missing):"
            " pip install 'loopctl-runtime[temporal]'"
        ) from None
    options = WorkerOptions(root, server, namespace, task_queue, identity, slots=slots)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await serve(options, stop, on_ready)

    asyncio.run(main())
    return 0
