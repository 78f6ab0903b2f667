"""Commands that run work: goal, run, demo."""

from __future__ import annotations

import shlex
import signal
from typing import Annotated, Any

import typer

from loopctl.cli.boundary import boundary
from loopctl.cli.definitions_cmds import JsonFlag


def _sigterm_as_interrupt() -> None:
    # SIGTERM (from `kill`, systemd, `loopctl down`) takes the same clean path as Ctrl-C.
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _print_outcome(outcome: Any, json_out: bool) -> None:
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "run",
            {
                "run": outcome.run,
                "loop": outcome.loop,
                "status": outcome.status,
                "reason": outcome.reason,
                "resumed": outcome.resumed,
                "tokens": outcome.tokens,
                "cost_usd": round(outcome.cost_usd, 6),
                "tasks": [
                    {
                        "task": t.task,
                        "status": t.status,
                        "reason": t.reason,
                        "attempts": t.attempts,
                        "commit": t.commit,
                        "branch": t.branch,
                        "worktree": t.worktree,
                    }
                    for t in outcome.tasks
                ],
            },
        )
        return
    for task in outcome.tasks:
        where = f" → {task.commit[:12]} on {task.branch}" if task.commit else ""
        print(f"{task.task}: {task.status} after {task.attempts} attempt(s){where}")
        if task.reason and task.status != "done":
            print(f"  {task.reason}")
    spend = f"{outcome.tokens} tokens" + (f", ${outcome.cost_usd:.2f}" if outcome.cost_usd else "")
    print(
        f"run {outcome.run}: {outcome.status} ({spend})" + (" [resumed]" if outcome.resumed else "")
    )
    if outcome.status != "done":
        print("see `loopctl inbox` for what needs you")


def _engine(json_out: bool) -> Any:
    from loopctl.cli.live import RunView
    from loopctl.definitions import load_project
    from loopctl.engine import Engine
    from loopctl.paths import find_repo_root

    project = load_project(find_repo_root())
    project.raise_for_errors()
    view = RunView(live=False if json_out else None)
    return Engine(project, observer=view), view


def goal(
    condition: Annotated[
        str, typer.Argument(metavar="CONDITION", help='The condition, e.g. "tests green".')
    ],
    check: Annotated[
        str | None, typer.Option("--check", help="Command whose exit 0 means the goal holds.")
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Maker agent to use.")] = None,
    max_iterations: Annotated[
        int | None, typer.Option("--max-iterations", min=1, help="Attempts before giving up.")
    ] = None,
    in_place: Annotated[
        bool, typer.Option("--in-place", help="Work in this checkout instead of a worktree.")
    ] = False,
    base: Annotated[str, typer.Option("--base", help="Ref the worktree starts from.")] = "HEAD",
    json_out: JsonFlag = False,
) -> None:
    """Iterate maker and checker until CONDITION holds (exit 0) or the budget is spent (exit 1)."""
    from loopctl.engine import GoalOptions
    from loopctl.errors import UsageError

    argv: tuple[str, ...] | None = None
    if check is not None:
        try:
            argv = tuple(shlex.split(check))
        except ValueError as exc:
            raise UsageError(f"--check cannot be split into arguments: {exc}") from None
        if not argv:
            raise UsageError("--check is empty")
    _sigterm_as_interrupt()
    engine, view = _engine(json_out)
    with view:
        outcome = engine.run_goal(
            GoalOptions(condition, argv, agent, max_iterations, in_place, base)
        )
    _print_outcome(outcome, json_out)
    raise typer.Exit(0 if outcome.ok else 1)


def run(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Loop name (.loop/loops/NAME.toml).")],
    once: Annotated[bool, typer.Option("--once", help="Run one tick and exit.")] = False,
    json_out: JsonFlag = False,
) -> None:
    """Run a loop: one tick with --once."""
    from loopctl.errors import UsageError

    if not once:
        raise UsageError(
            "scheduled runs are not available yet; run one tick with `loopctl run NAME --once`"
        )
    _sigterm_as_interrupt()
    engine, view = _engine(json_out)
    loop = engine.project.loop(name)
    with view:
        outcome = engine.run_loop_once(loop)
    _print_outcome(outcome, json_out)
    raise typer.Exit(0 if outcome.ok else 1)


def demo(
    keep: Annotated[
        bool, typer.Option("--keep/--no-keep", help="Keep the demo repository afterwards.")
    ] = True,
) -> None:
    """Walk through a goal loop in a throwaway repository with a failing test."""
    from loopctl.demo import run_demo

    code = run_demo(keep=keep, say=print)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command()(boundary(goal))
    app.command()(boundary(run))
    app.command()(boundary(demo))
