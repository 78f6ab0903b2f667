"""A Temporal worker for one repository: it polls a task queue and runs loops' attempts.

The queue says which machines may take an attempt: every worker on it holds a clone of the
repository, the agents' logins and CLIs. Attempts run on threads (the engine is synchronous),
at most `slots` at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from loopctl.errors import LoopctlError
from loopctl.temporal.activities import Attempts, Release, Share
from loopctl.temporal.gate import FuseGate
from loopctl.temporal.ledger import SpendLedger
from loopctl.temporal.shapes import own_queue
from loopctl.temporal.workflows import AwaitApproval, LoopTick


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    root: Path
    address: str
    namespace: str
    task_queue: str
    identity: str
    release: Release
    share: Share
    slots: int = 1
    beat_every: float = 2.0


async def connect(address: str, namespace: str) -> Client:
    """A client of the Temporal service at `address`, or a LoopctlError saying how to start one."""
    try:
        return await Client.connect(address, namespace=namespace)
    except RuntimeError as exc:
        raise LoopctlError(
            f"cannot reach the Temporal service at {address} ({exc}); start one, for example"
            " `temporal server start-dev`, or pass --server HOST:PORT"
        ) from None


async def serve(
    options: WorkerOptions, stop: asyncio.Event, ready: Callable[[], None] | None = None
) -> None:
    """Poll `options.task_queue`, and this worker's own queue, until `stop` is set; `ready` is
    called once polling starts."""
    client = await connect(options.address, options.namespace)
    mine = own_queue(options.task_queue, options.identity)
    attempts = Attempts(
        str(options.root),
        options.identity,
        options.beat_every,
        mine,
        options.release,
        options.share,
    )
    gate = FuseGate(str(options.root), options.identity, options.task_queue, client)
    with (
        ThreadPoolExecutor(options.slots, thread_name_prefix="loopctl-attempt") as pool,
        ThreadPoolExecutor(1, thread_name_prefix="loopctl-release") as releases,
    ):
        shared = Worker(
            client,
            task_queue=options.task_queue,
            workflows=[LoopTick, AwaitApproval, SpendLedger],
            activities=[attempts.run_attempt, gate.admit, gate.settle],
            activity_executor=pool,
            max_concurrent_activities=options.slots,
            identity=options.identity,
        )
        # Deliveries this worker's attempts left at a gate resume here: its clone has the commit.
        own = Worker(
            client,
            task_queue=mine,
            activities=[attempts.release_approval],
            activity_executor=releases,
            max_concurrent_activities=1,
            identity=options.identity,
        )
        async with shared, own:
            if ready is not None:
                ready()
            await stop.wait()
