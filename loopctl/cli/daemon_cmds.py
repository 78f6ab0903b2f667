"""`loopctl up` and `loopctl down`: one long-lived scheduler for every loop with a trigger."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from loopctl.cli import completion
from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag

if TYPE_CHECKING:
    from loopctl.scheduling.daemon import UpEnded
    from loopctl.scheduling.mandate import Mandate


def up(
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            metavar="NAME",
            help="Run only this loop (repeatable).",
            autocompletion=completion.loop_names,
        ),
    ] = None,
    detach: Annotated[
        bool,
        typer.Option("--detach", help="Run in the background, output to .loop/log/up.log."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Stream each agent's output as it works: tool calls, edits."
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress; problems still reach the inbox.")
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            metavar="local|temporal",
            help="temporal: each loop's trigger a Temporal Schedule, run by `loopctl worker`.",
        ),
    ] = "local",
    server: Annotated[
        str, typer.Option("--server", metavar="HOST:PORT", help="With --engine temporal.")
    ] = "127.0.0.1:7233",
    task_queue: Annotated[
        str, typer.Option("--task-queue", metavar="QUEUE", help="With --engine temporal.")
    ] = "loopctl",
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="WHEN",
            help="Stop at 07:30 (next occurrence, local), an ISO date-time, or after 8h;"
            " running ticks are checkpointed. none: no deadline ([budget] up_until).",
        ),
    ] = None,
    max_usd: Annotated[
        float | None,
        typer.Option(
            "--max-usd",
            metavar="USD",
            help="Stop once this session's agent calls cost this much ([budget] up_max_usd).",
        ),
    ] = None,
    resolved_until: Annotated[
        str | None,
        # `--detach` hands its child the deadline it resolved and announced: an instant that
        # may have passed by the time the child reads it (then it stops at once).
        typer.Option("--resolved-until", hidden=True),
    ] = None,
) -> None:
    """Run every loop that has a trigger, in one process, until `loopctl down` (or Ctrl-C).

    Definitions are re-read when their files change; a second `up` exits 1 naming the first.
    With `--until`/`--max-usd` (the night's mandate) it stops by itself at the deadline or the
    cap: running ticks are checkpointed, resume on the next `up`, and it exits 0 saying why.
    A bad --until or --max-usd exits 2.
    With `--engine temporal`, the loops' schedules are set on a Temporal service and `up` returns.
    """
    from loopctl.cli.run_cmds import check_verbosity
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.paths import ProjectPaths, find_repo_root

    check_verbosity(verbose, quiet)
    root = find_repo_root()
    refuse_inside_agent("up", ProjectPaths(root).events_file)
    names = tuple(only or ())
    if engine not in ("local", "temporal"):
        from loopctl.errors import UsageError

        raise UsageError(f"--engine must be local or temporal, not {engine!r}")
    from datetime import UTC, datetime

    from loopctl.definitions.config import load_config
    from loopctl.definitions.source import Problems
    from loopctl.scheduling.mandate import resolve

    config = load_config(ProjectPaths(root).config, Problems())
    mandate = resolve(config, until, max_usd, datetime.now(UTC), resolved=resolved_until)
    if engine == "temporal" and mandate.bounded and (until is not None or max_usd is not None):
        from loopctl.errors import UsageError

        raise UsageError("--until and --max-usd bound a local `loopctl up`, not --engine temporal")
    if engine == "temporal":
        from loopctl.commands.worker import exit_now, schedule_loops

        for made in schedule_loops(
            root, names, server=server, namespace="default", task_queue=task_queue
        ):
            verb = "scheduled" if made.created else "updated"
            print(f"{verb} {made.loop} ({made.describe}) as {made.schedule_id} on {server}")
        exit_now(0)
    if detach:
        from loopctl.scheduling.daemon import start_detached

        started = start_detached(root, names, mandate=mandate)
        print(f"loopctl up started in the background (pid {started.pid}); log: {started.log}")
        if mandate.bounded:
            print(mandate_line(mandate))
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

    warn_if_unconfined(config)
    _sigterm_as_interrupt()
    view = _View({}, prefix_loop=True, quiet=quiet)
    observer: Any = view
    if verbose:
        from loopctl.cli.run_cmds import observer_for
        from loopctl.definitions import load_project

        # Agents are named by the definitions at start; one added by a reload shows as text.
        observer = observer_for(view, load_project(root), True, with_loop=True)
    if mandate.bounded and not quiet:
        print(mandate_line(mandate), flush=True)
    with view:
        ended = serve(root, names, observer=observer, listener=view, mandate=mandate)
    if ended.reason:
        # Exit 0: the session did what it was asked; the turns it cut short resume.
        print(stopped_line(ended, "loopctl up"))


def stopped_line(ended: UpEnded, again: str) -> str:
    """`stopped at 07:30:00: the mandate's deadline (07:30); 1 turn checkpointed, …`."""
    from datetime import UTC, datetime

    count = ended.checkpointed
    turns = f"{count} turn{'s' if count != 1 else ''} checkpointed"
    after = f", they resume on the next `{again}`" if count else ""
    at = (ended.at or datetime.now(UTC)).astimezone()
    return f"stopped at {at:%H:%M:%S}: {ended.reason}; {turns}{after}"


def mandate_line(mandate: Mandate, who: str = "up") -> str:
    """The session's mandate, with the resolved deadline: what `07:30` turned out to mean."""
    parts = []
    if mandate.until is not None:
        parts.append(f"until {mandate.until.astimezone().isoformat(timespec='seconds')}")
    if mandate.max_usd is not None:
        parts.append(f"at most ${mandate.max_usd:g} of agent calls")
    return f"mandate: {', '.join(parts)}; then running ticks are checkpointed and {who} stops"


def down(
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for it to stop.")
    ] = 60.0,
    json_out: JsonFlag = False,
) -> None:
    """Stop `loopctl up` gracefully: running ticks are checkpointed and resume on the next start.

    Loops this clone put on Temporal (`up --engine temporal`) have their schedules paused, not
    deleted; `up --engine temporal` resumes them.
    """
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.commands.on_temporal import read_record, set_paused
    from loopctl.paths import ProjectPaths, find_repo_root
    from loopctl.scheduling.daemon import stop_up

    paths = ProjectPaths(find_repo_root())
    refuse_inside_agent("down", paths.events_file)
    stopped = stop_up(paths, timeout=timeout)
    record = read_record(paths)
    paused: list[str] = []
    if record is not None and record.loops:
        # Paused, not deleted: the schedules keep their history; `up --engine temporal` resumes.
        paused = set_paused(paths, record, record.loops, paused=True, note="loopctl down")
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "down", {"pid": stopped.pid, "was_running": stopped.was_running, "paused": paused}
        )
    elif stopped.was_running:
        print(f"loopctl up (pid {stopped.pid}) stopped")
    elif not paused:
        print("loopctl up is not running")
    if record is not None and paused:
        from loopctl.commands.worker import exit_now

        if not json_out:
            print(
                f"paused {', '.join(paused)} on {record.server};"
                " `loopctl up --engine temporal` resumes them"
            )
        exit_now(0)


def stop(
    target: Annotated[
        str,
        typer.Argument(
            metavar="NAME|RUN",
            help="A loop's name, or a run id (a unique prefix works).",
            autocompletion=completion.loops_and_runs,
        ),
    ],
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for it to stop.")
    ] = 60.0,
    json_out: JsonFlag = False,
) -> None:
    """Stop one loop or one run gracefully; every other loop keeps running.

    Its agents are stopped and the run is checkpointed (run_interrupted); `loopctl run NAME`
    resumes it. Under `loopctl up` the loop is not scheduled again until `up` restarts.
    Exits 1 when it is not running, 2 for an unknown name. A loop on Temporal has its schedule
    paused instead (its running attempt finishes); `up --engine temporal` resumes it.
    """
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.commands.stop import stop as stop_target
    from loopctl.definitions import load_project
    from loopctl.paths import ProjectPaths, find_repo_root

    root = find_repo_root()
    refuse_inside_agent("stop", ProjectPaths(root).events_file)  # before anything else
    from loopctl.commands.on_temporal import read_record, set_paused

    record = read_record(ProjectPaths(root))
    if record is not None and target in record.loops:
        from loopctl.commands.worker import exit_now

        (paused,) = set_paused(ProjectPaths(root), record, [target], paused=True, note="stop")
        if json_out:
            from loopctl.cli.render import print_json

            print_json("stop", {"loop": target, "paused": paused, "server": record.server})
        else:
            print(
                f"loop {target}: schedule {paused} paused on {record.server} (a running attempt"
                " finishes); `loopctl up --engine temporal` resumes it"
            )
        exit_now(0)
    project = load_project(root)
    loops = sorted({*project.loops, *(bad.name for bad in project.invalid)})
    result = stop_target(project.paths, target, loops, timeout=timeout)
    if json_out:
        from loopctl.cli.render import print_json

        print_json("stop", result.to_json())
        return
    run = f", run {result.run} interrupted" if result.run else ""
    by = "in loopctl up" if result.via == "up" else "its process"
    print(f"loop {result.loop} stopped ({by}, pid {result.pid}){run}")
    if result.run:
        again = (
            "the same `loopctl goal ...` command"
            if result.loop == "goal"
            else f"`loopctl run {result.loop} --once` (or its next tick)"
        )
        print(f"resume it with {again}")


def register(app: typer.Typer) -> None:
    app.command()(boundary(up))
    app.command()(boundary(down))
    app.command()(boundary(stop))
