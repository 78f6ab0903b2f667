"""Commands that run work: goal, run, demo."""

from __future__ import annotations

import shlex
import signal
from typing import TYPE_CHECKING, Annotated, Any

import typer

from loopctl.cli import completion
from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag, load_here

if TYPE_CHECKING:
    from loopctl.scheduling.mandate import Mandate


def _sigterm_as_interrupt() -> None:
    # SIGTERM (from `kill`, systemd, `loopctl down`) takes the same clean path as Ctrl-C.
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _waiting_on_you(outcome: Any, engine: Any) -> list[str]:
    """The ids of the inbox items this run opened that are still open."""
    if engine is None:
        return []
    from loopctl.journal.inbox import open_items

    return [item.id for item in open_items(engine.log.read()) if item.run == outcome.run]


def _print_outcome(outcome: Any, json_out: bool, engine: Any = None) -> None:
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "run",
            {
                "run": outcome.run,
                "loop": outcome.loop,
                "status": outcome.status,
                "outcome": outcome.outcome,
                "reason": outcome.reason,
                "resumed": outcome.resumed,
                "tokens": outcome.tokens,
                "cost_usd": round(outcome.cost_usd, 6),
                "tasks": [
                    {
                        "task": t.task,
                        "status": t.status,
                        "outcome": t.outcome,
                        "reason": t.reason,
                        "attempts": t.attempts,
                        "commit": t.commit,
                        "branch": t.branch,
                        "worktree": t.worktree,
                        "next": t.next_step,
                    }
                    for t in outcome.tasks
                ],
            },
        )
        return
    for task in outcome.tasks:
        where = f" → {task.commit[:12]} on {task.branch}" if task.commit else ""
        print(f"{task.task}: {task.status} after {task.attempts} attempt(s){where}")
        print(f"  outcome: {task.outcome}")
        if task.reason and (task.status != "done" or not task.attempts):  # e.g. already holds
            print(f"  {task.reason}")
        if task.next_step:
            print(f"  next: {task.next_step}")
        if task.status == "done" and task.commit and task.branch:
            print(f"  see the change: git diff HEAD...{task.branch}")
    spend = f"{outcome.tokens} tokens" + (f", ${outcome.cost_usd:.2f}" if outcome.cost_usd else "")
    print(
        f"run {outcome.run}: {outcome.status} ({spend}), outcome {outcome.outcome}"
        + (" [resumed]" if outcome.resumed else "")
    )
    waiting = _waiting_on_you(outcome, engine)
    for item in waiting:
        print(f"needs you: loopctl inbox show {item}")
    if outcome.status != "done" and not waiting:
        print("see `loopctl inbox` for what needs you")


def warn_if_unconfined(config: Any) -> None:
    """Say once per run, on stderr, that the user opted out of the sandbox (invariant 11)."""
    from loopctl.definitions.sandbox import SandboxMode

    if config.sandbox is SandboxMode.OFF:
        import sys

        where = config.path or ".loop/config.toml"
        print(
            f'warning: agents run unconfined ([sandbox] mode = "off" in {where}): they can'
            " read your credentials and other processes, and write outside their worktree",
            file=sys.stderr,
        )


Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Stream each agent's output as it works: tool calls, edits, messages.",
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the outcome, no progress.")]


def check_verbosity(verbose: bool, quiet: bool) -> None:
    if verbose and quiet:
        from loopctl.errors import UsageError

        raise UsageError("give -v/--verbose or -q/--quiet, not both")


def observer_for(view: Any, project: Any, verbose: bool, *, with_loop: bool = False) -> Any:
    """The view itself, or (-v) the view behind a follower of each running agent's output."""
    if not verbose:
        return view
    from loopctl.cli.agent_stream import AgentStream

    def backend_of(name: str) -> str:
        agent = project.agents.get(name)
        return str(agent.backend) if agent is not None else "command"

    return AgentStream(
        view, project.paths.runs_dir, backend_of, view.agent_line, with_loop=with_loop
    )


def _engine(json_out: bool, verbose: bool = False, quiet: bool = False) -> Any:
    from loopctl.cli.live import RunView
    from loopctl.engine.runner import Engine
    from loopctl.journal.recorder import Recorder

    check_verbosity(verbose, quiet)
    project = load_here()
    warn_if_unconfined(project.config)
    view = RunView(live=False if json_out else None, quiet=quiet)
    return Engine(Recorder(project, observer=observer_for(view, project, verbose))), view


Fresh = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Close an interrupted run of this goal or loop and start a new one (default: resume"
        " it, and refuse other arguments than it started with).",
    ),
]

DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print the maker's first prompt, argv, env names, sandbox and checks; run nothing.",
    ),
]


def _print_preview(preview: Any, json_out: bool) -> None:
    if json_out:
        from loopctl.cli.render import print_json

        print_json("dry_run", preview.to_json())
        return
    from loopctl.engine.preview import render
    from loopctl.text import strip_controls

    # Task text from a task source (an issue title, a PR body) is not loopctl's own words.
    print(strip_controls(render(preview)))


def _preview_engine() -> Any:
    from loopctl.engine.runner import Engine
    from loopctl.journal.recorder import Recorder

    return Engine(Recorder(load_here()))


def goal(
    condition: Annotated[
        str, typer.Argument(metavar="CONDITION", help='The condition, e.g. "tests green".')
    ],
    check: Annotated[
        str | None,
        typer.Option("--check", metavar="CMD", help="Command whose exit 0 means the goal holds."),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="AGENT",
            help="Maker agent to use.",
            autocompletion=completion.agent_names,
        ),
    ] = None,
    checker_agent: Annotated[
        str | None,
        typer.Option(
            "--checker-agent", metavar="AGENT", help="Agent that judges the goal (any backend)."
        ),
    ] = None,
    max_iterations: Annotated[
        int | None, typer.Option("--max-iterations", min=1, help="Attempts before giving up.")
    ] = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Work in this checkout instead of a worktree.")
    ] = False,
    base: Annotated[
        str, typer.Option("--base", metavar="REF", help="Ref the worktree starts from.")
    ] = "HEAD",
    fresh: Fresh = False,
    dry_run: DryRun = False,
    verbose: Verbose = False,
    quiet: Quiet = False,
    json_out: JsonFlag = False,
) -> None:
    """Iterate maker and checker until CONDITION holds (exit 0) or the budget is spent (exit 1)."""
    from loopctl.engine.runner import GoalOptions
    from loopctl.errors import UsageError

    argv: tuple[str, ...] | None = None
    if check is not None:
        try:
            argv = tuple(shlex.split(check))
        except ValueError as exc:
            raise UsageError(f"--check cannot be split into arguments: {exc}") from None
        if not argv:
            raise UsageError("--check is empty")
    options = GoalOptions(
        condition,
        argv,
        agent,
        max_iterations,
        in_place,
        base,
        checker_agent=checker_agent,
        fresh=fresh,
    )
    if dry_run:
        _print_preview(_preview_engine().preview_goal(options), json_out)
        return
    _sigterm_as_interrupt()
    engine, view = _engine(json_out, verbose, quiet)
    with view:
        outcome = engine.run_goal(options)
    _print_outcome(outcome, json_out, engine)
    raise typer.Exit(0 if outcome.ok else 1)


def _trigger_override(every: str | None, cron: str | None, watch: list[str] | None) -> Any:
    """The trigger given on the command line (None: the loop's own), or a usage error."""
    from loopctl.definitions import Trigger, TriggerKind
    from loopctl.definitions.fields import parse_duration, validate_cron
    from loopctl.errors import UsageError

    given = [
        flag for flag, value in (("--every", every), ("--cron", cron), ("--watch", watch)) if value
    ]
    if len(given) > 1:
        raise UsageError(f"give one trigger: {' or '.join(given)}, not both")
    if every is not None:
        try:
            seconds = parse_duration(every)
        except ValueError as exc:
            raise UsageError(f"--every: {exc}") from None
        if seconds <= 0:
            raise UsageError("--every must be longer than 0s")
        return Trigger(TriggerKind.EVERY, every_s=seconds)
    if cron is not None:
        problem = validate_cron(cron)
        if problem:
            raise UsageError(f"--cron: {problem}")
        return Trigger(TriggerKind.CRON, cron=cron)
    if watch:
        if not all(pattern.strip() for pattern in watch):
            raise UsageError("--watch needs a glob pattern, such as 'src/**/*.py'")
        return Trigger(TriggerKind.WATCH, watch=tuple(watch))
    return None


def _run_on_trigger(
    name: str,
    trigger: Any,
    max_ticks: int | None,
    start: bool,
    json_out: bool,
    verbose: bool = False,
    quiet: bool = False,
    mandate: Mandate | None = None,
) -> None:
    from loopctl.cli.schedule_view import ScheduleView
    from loopctl.scheduling.daemon import run_bounded
    from loopctl.scheduling.timing import Schedule

    project = load_here()
    loop = project.loop(name)
    schedule = Schedule.of(loop, trigger)
    view = ScheduleView(
        {name: schedule.describe() if schedule else "manual"},
        live=False if json_out else None,
        quiet=quiet,
    )
    if mandate is not None and mandate.bounded and not quiet and not json_out:
        from loopctl.cli.daemon_cmds import mandate_line

        print(mandate_line(mandate, "the run"), flush=True)
    with view:
        ended = run_bounded(
            project,
            name,
            trigger,
            max_ticks=max_ticks,
            start=start,
            observer=observer_for(view, project, verbose),
            listener=view,
            mandate=mandate,
        )
    results = ended.results
    # The ticks a mandate checkpointed resume on the next run: not failures.
    ok = all(r.ok or (bool(ended.reason) and r.interrupted) for r in results)
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "ticks",
            [
                {
                    "loop": r.loop,
                    "due": r.slot.isoformat(),
                    "fired": r.fired,
                    "run": r.outcome.run if r.outcome else None,
                    "status": r.outcome.status if r.outcome else "skipped",
                    "outcome": r.outcome.outcome if r.outcome else None,
                    "reason": r.outcome.reason if r.outcome else r.skipped,
                    "tokens": r.outcome.tokens if r.outcome else 0,
                    "cost_usd": round(r.outcome.cost_usd, 6) if r.outcome else 0.0,
                }
                for r in results
            ],
            # Why a mandate (--until, --max-usd) stopped it; absent otherwise.
            {"stopped": {"reason": ended.reason, "checkpointed": ended.checkpointed}}
            if ended.reason
            else None,
        )
    else:
        done = sum(1 for r in results if r.ok)
        print(f"{len(results)} tick(s): {done} done, {len(results) - done} not")
        for r in results:
            if r.outcome is None and not r.interrupted:
                print(f"  tick due {r.slot:%H:%M:%S} skipped: {r.skipped or 'no reason given'}")
        from loopctl.journal.events import EventLog
        from loopctl.journal.inbox import open_items

        runs = {r.outcome.run for r in results if r.outcome}
        for item in open_items(EventLog(project.paths.events_file).read()):
            if item.run in runs:
                print(f"needs you: loopctl inbox show {item.id}")
        if ended.reason:
            from loopctl.cli.daemon_cmds import stopped_line

            print(stopped_line(ended, f"loopctl run {name}"))
    raise typer.Exit(0 if ok else 1)


def run(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="Loop name (.loop/loops/NAME.toml).",
            autocompletion=completion.loop_names,
        ),
    ],
    once: Annotated[bool, typer.Option("--once", help="Run one tick and exit.")] = False,
    every: Annotated[
        str | None,
        typer.Option(
            "--every", metavar="D", help="Tick every D (90s, 5m, 1h), not on the loop's trigger."
        ),
    ] = None,
    cron: Annotated[
        str | None,
        typer.Option(
            "--cron", metavar="EXPR", help='Tick on a cron schedule ("*/15 9-17 * * 1-5").'
        ),
    ] = None,
    watch: Annotated[
        list[str] | None,
        typer.Option(
            "--watch", metavar="GLOB", help="Tick when matching files change (repeatable)."
        ),
    ] = None,
    max_ticks: Annotated[
        int | None, typer.Option("--max-ticks", metavar="N", min=1, help="Stop after N ticks.")
    ] = None,
    no_start: Annotated[
        bool, typer.Option("--no-start", help="Wait for the first due time instead of ticking now.")
    ] = False,
    fresh: Fresh = False,
    dry_run: DryRun = False,
    verbose: Verbose = False,
    quiet: Quiet = False,
    json_out: JsonFlag = False,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="WHEN",
            help="Stop at 07:30 (next occurrence, local), an ISO date-time, or after 8h;"
            " a running tick is checkpointed.",
        ),
    ] = None,
    max_usd: Annotated[
        float | None,
        typer.Option(
            "--max-usd", metavar="USD", help="Stop once this run's agent calls cost this much."
        ),
    ] = None,
) -> None:
    """Run a loop on its trigger (or --every/--cron/--watch) until Ctrl-C; one tick with --once.

    Exit 0 when every tick succeeded (with --max-ticks, or until --until/--max-usd stopped it:
    the tick it checkpointed resumes on the next run), 1 otherwise, 130 when interrupted.
    """
    from loopctl.errors import UsageError

    trigger = _trigger_override(every, cron, watch)
    mandate = None
    if until is not None or max_usd is not None:
        if once or dry_run:
            raise UsageError("--until and --max-usd bound a run on a trigger, not --once/--dry-run")
        from datetime import UTC, datetime

        from loopctl.definitions.config import Config
        from loopctl.scheduling.mandate import resolve

        # The flags only: `[budget] up_until`/`up_max_usd` are `up`'s.
        mandate = resolve(Config(), until, max_usd, datetime.now(UTC))
    if dry_run:
        # The tick a run would start with; its task source is listed, no agent runs.
        engine = _preview_engine()
        _print_preview(engine.preview_loop(engine.project.loop(name)), json_out)
        return
    if once:
        if trigger is not None or max_ticks is not None or no_start:
            raise UsageError(
                "--once runs one tick now: drop --every/--cron/--watch/--max-ticks/--no-start,"
                " or drop --once"
            )
        _sigterm_as_interrupt()
        engine, view = _engine(json_out, verbose, quiet)
        loop = engine.project.loop(name)
        with view:
            outcome = engine.run_loop_once(loop, fresh=fresh)
        _print_outcome(outcome, json_out, engine)
        raise typer.Exit(0 if outcome.ok else 1)
    check_verbosity(verbose, quiet)
    if fresh:
        # Closed before the schedule starts: its first tick is then a new one.
        closer = _preview_engine()
        closer.close_interrupted(closer.project.loop(name))
    _sigterm_as_interrupt()
    _run_on_trigger(name, trigger, max_ticks, not no_start, json_out, verbose, quiet, mandate)


def demo(
    keep: Annotated[
        bool, typer.Option("--keep/--no-keep", help="Keep the demo repository afterwards.")
    ] = True,
) -> None:
    """Walk through a goal loop in a throwaway repository with a failing test."""
    from loopctl.cli.live import RunView
    from loopctl.commands.demo import run_demo

    with RunView(live=False) as view:
        code = run_demo(keep=keep, say=print, observer=view)
    raise typer.Exit(code)


def deliver(
    run: Annotated[str, typer.Argument(metavar="RUN", help="The finished goal's run (a prefix).")],
    action: Annotated[str, typer.Argument(metavar="ACTION", help="merge, push or pr.")],
    commit: Annotated[
        str,
        typer.Option(
            "--commit", metavar="SHA", help="The commit you reviewed; refused if it moved."
        ),
    ],
) -> None:
    """Merge, push or open a pull request for a finished goal's commit, once."""
    from loopctl.cli.reporting import eprint
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.commands.deliver import deliver as deliver_goal
    from loopctl.definitions import load_project
    from loopctl.paths import ProjectPaths, find_repo_root

    root = find_repo_root()
    refuse_inside_agent("deliver", ProjectPaths(root).events_file)
    result = deliver_goal(load_project(root), run, action, commit)
    if not result.ok:
        eprint(f"loopctl: {result.message}")
        raise typer.Exit(1)
    print(result.message)


def register(app: typer.Typer) -> None:
    app.command()(boundary(goal))
    app.command()(boundary(deliver))
    app.command()(boundary(run))
    app.command()(boundary(demo))
