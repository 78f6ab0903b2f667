"""`loopctl up` and `loopctl down`: one long-lived scheduler for every loop with a trigger."""

from __future__ import annotations

from typing import Annotated

import typer

from loopctl.cli.boundary import boundary
from loopctl.cli.definitions_cmds import JsonFlag


def up(
    only: Annotated[
        list[str] | None,
        typer.Option("--only", metavar="NAME", help="Run only this loop (repeatable)."),
    ] = None,
    detach: Annotated[
        bool,
        typer.Option("--detach", help="Run in the background, output to .loop/log/up.log."),
    ] = False,
) -> None:
    """Run every loop that has a trigger, in one process, until `loopctl down` (or Ctrl-C).

    Definitions are re-read when their files change; a second `up` exits 1 naming the first.
    """
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.paths import ProjectPaths, find_repo_root

    root = find_repo_root()
    refuse_inside_agent("up", ProjectPaths(root).events_file)
    names = tuple(only or ())
    if detach:
        from loopctl.scheduling.daemon import start_detached

        started = start_detached(root, names)
        print(f"loopctl up started in the background (pid {started.pid}); log: {started.log}")
        return
    from loopctl.cli.reporting import write_crash_log
    from loopctl.cli.run_cmds import _sigterm_as_interrupt
    from loopctl.cli.schedule_view import ScheduleView
    from loopctl.scheduling.daemon import serve
    from loopctl.scheduling.scheduler import TickResult

    class _View(ScheduleView):
        def finished(self, result: TickResult) -> None:
            super().finished(result)
            if result.error is not None:
                # A bug in one tick: the loop goes on, the traceback goes where bugs go.
                write_crash_log(result.error)

    from loopctl.cli.run_cmds import warn_if_unconfined
    from loopctl.definitions.config import load_config
    from loopctl.definitions.source import Problems
    from loopctl.paths import ProjectPaths

    warn_if_unconfined(load_config(ProjectPaths(root).config, Problems()))
    _sigterm_as_interrupt()
    view = _View({}, prefix_loop=True)
    with view:
        serve(root, names, observer=view, listener=view)


def down(
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for it to stop.")
    ] = 60.0,
    json_out: JsonFlag = False,
) -> None:
    """Stop `loopctl up` gracefully: running ticks are checkpointed and resume on the next start."""
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.paths import ProjectPaths, find_repo_root
    from loopctl.scheduling.daemon import stop_up

    paths = ProjectPaths(find_repo_root())
    refuse_inside_agent("down", paths.events_file)
    stopped = stop_up(paths, timeout=timeout)
    if json_out:
        from loopctl.cli.render import print_json

        print_json("down", {"pid": stopped.pid, "was_running": stopped.was_running})
        return
    if stopped.was_running:
        print(f"loopctl up (pid {stopped.pid}) stopped")
    else:
        print("loopctl up is not running")


def register(app: typer.Typer) -> None:
    app.command()(boundary(up))
    app.command()(boundary(down))
