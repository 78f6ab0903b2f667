"""The typer side of the error boundary: commands raise, this maps to exit codes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from loopctl.cli.reporting import report

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
