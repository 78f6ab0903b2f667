"""The typer application: argument parsing only; each command calls one core function."""

from __future__ import annotations

from typing import Annotated

import typer

from loopctl.cli import (
    daemon_cmds,
    definitions_cmds,
    doctor_cmds,
    help_format,
    inbox_cmds,
    inspect_cmds,
    remote_cmds,
    report_cmds,
    run_cmds,
    spend_cmds,
    traces_cmds,
    ui_cmds,
    worker_cmds,
)
from loopctl.cli.reporting import eprint, report
from loopctl.errors import ExitCode

app = typer.Typer(
    name="loopctl",
    help="Run agent loops: a worktree per task, maker and checker, budgets, an inbox for humans.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals can hold tokens
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from loopctl._version import __version__

        print(f"loopctl {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """loopctl: loop engineering for coding agents."""


definitions_cmds.register(app)
run_cmds.register(app)
daemon_cmds.register(app)
inspect_cmds.register(app)
spend_cmds.register(app)
inbox_cmds.register(app)
report_cmds.register(app)
remote_cmds.register(app)
traces_cmds.register(app)
doctor_cmds.register(app)
ui_cmds.register(app)
worker_cmds.register(app)
help_format.polish(app)


def run_cli(args: list[str]) -> int:
    """Run the typer app on `args` and return the exit code; nothing escapes as a traceback."""
    try:
        app(args=args, prog_name="loopctl")
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        eprint("loopctl: interrupted")
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:  # anything a command's own boundary did not see
        return report(exc)
    return 0
