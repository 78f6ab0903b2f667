"""The one place where exceptions become exit codes and messages (DESIGN §3)."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import ParamSpec, TypeVar

import typer

from loopctl.errors import DefinitionError, ExitCode, LoopctlError

P = ParamSpec("P")
R = TypeVar("R")


def eprint(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def write_crash_log(exc: BaseException) -> Path | None:
    """Keep the traceback for a bug report; the user sees one line."""
    from loopctl.paths import cache_home

    folder = cache_home() / "crashes"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        path = folder / f"crash-{stamp}-{os.getpid()}.log"
        text = "".join(traceback.format_exception(exc))
        from loopctl.secrets import Redactor

        path.write_text(Redactor.from_environment().redact(text), encoding="utf-8")
        return path
    except Exception:
        return None


def report(exc: BaseException) -> int:
    """Print the one-line (or one-per-problem) message for `exc`; return its exit code."""
    if isinstance(exc, DefinitionError):
        for problem in exc.problems:
            eprint(problem.render(exc.root))
        return int(exc.exit_code)
    if isinstance(exc, LoopctlError):
        eprint(f"loopctl: {exc}")
        return int(exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        eprint("loopctl: interrupted")
        return int(ExitCode.INTERRUPTED)
    if isinstance(exc, BrokenPipeError):
        # `loopctl log | head` closing the pipe is not an error worth a traceback.
        return 0
    log = write_crash_log(exc)
    where = f"; details in {log}" if log else ""
    eprint(f"loopctl: unexpected error: {type(exc).__name__}: {exc}{where}")
    return int(ExitCode.UNEXPECTED)


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
