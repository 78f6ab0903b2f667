"""The typer side of the error boundary: commands raise, this maps to exit codes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from loopctl.cli.reporting import eprint, report
from loopctl.errors import ExitCode

P = ParamSpec("P")
R = TypeVar("R")


def boundary(func: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command so foreseeable failures exit with their documented code, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except (Exception, KeyboardInterrupt) as exc:  # the boundary: everything ends here
            raise typer.Exit(report(exc)) from None

    return wrapper


def run_cli(args: list[str]) -> int:
    from loopctl.cli.app import app

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
