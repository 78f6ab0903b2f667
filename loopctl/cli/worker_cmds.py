"""`loopctl worker`: run this repository's loop attempts for a Temporal service (issue 32)."""

from __future__ import annotations

from typing import Annotated

import typer

from loopctl.cli.boundary import boundary


def worker(
    server: Annotated[
        str, typer.Option("--server", metavar="HOST:PORT", help="The Temporal service.")
    ] = "127.0.0.1:7233",
    task_queue: Annotated[
        str,
        typer.Option("--task-queue", metavar="QUEUE", help="Take attempts from this task queue."),
    ] = "loopctl",
    namespace: Annotated[
        str, typer.Option("--namespace", metavar="NAME", help="The Temporal namespace.")
    ] = "default",
    identity: Annotated[
        str | None,
        typer.Option(
            "--identity",
            metavar="NAME",
            help="This worker's name and own queue (host:clone hash; the same after a restart).",
        ),
    ] = None,
    slots: Annotated[int, typer.Option("--slots", metavar="N", help="Attempts run at once.")] = 1,
    state_remote: Annotated[
        str,
        typer.Option(
            "--state-remote",
            metavar="REMOTE",
            help="Push the journal to this remote's state branch after each attempt"
            " (`state pull` brings it home); none: never.",
        ),
    ] = "origin",
) -> None:
    """Run loop attempts for a Temporal service: each is claimed in this repository's journal.

    Needs the `temporal` extra. Stop it with Ctrl-C (or SIGTERM); an attempt it was running is
    taken over by another worker on the same queue.
    """
    from loopctl.commands.worker import default_identity, exit_now, run_worker
    from loopctl.errors import UsageError
    from loopctl.paths import find_repo_root

    if slots < 1:
        raise UsageError(f"--slots must be at least 1, not {slots}")
    root = find_repo_root()
    name = identity or default_identity(root)

    def ready() -> None:
        print(f"loopctl worker {name}: polling {task_queue!r} on {server}", flush=True)

    exit_now(
        run_worker(
            root,
            server=server,
            namespace=namespace,
            task_queue=task_queue,
            identity=name,
            slots=slots,
            on_ready=ready,
            state_remote=None if state_remote == "none" else state_remote,
        )
    )


def register(app: typer.Typer) -> None:
    app.command()(boundary(worker))
