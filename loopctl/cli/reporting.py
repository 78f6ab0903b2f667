"""Turning exceptions into one clear line and a documented exit code (docs/reference.md, "Commands
and exit codes").

Kept free of typer so the fast paths in `__main__` can use it too.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path

from loopctl.errors import DefinitionError, ExitCode, LoopctlError


def eprint(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def write_crash_log(exc: BaseException) -> Path | None:
    """Keep the traceback for a bug report; the user sees one line."""
    import traceback
    from datetime import UTC, datetime

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
    except OSError:  # no crash log is better than a second error hiding the first
        return None


_DISK_TROUBLE = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT, errno.EPERM}


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
    if isinstance(exc, OSError) and exc.errno in _DISK_TROUBLE:
        # A full disk or a read-only folder is the machine's state, not a bug: say which file.
        where = f" {exc.filename}" if exc.filename else ""
        eprint(f"loopctl: cannot write{where}: {exc.strerror}; free space or fix permissions")
        return int(ExitCode.NOT_MET)
    log = write_crash_log(exc)
    where = f"; details in {log}" if log else ""
    eprint(f"loopctl: unexpected error: {type(exc).__name__}: {exc}{where}")
    return int(ExitCode.UNEXPECTED)


def guarded(func: Callable[[], int]) -> int:
    """Run a plain command function inside the error boundary."""
    try:
        return func()
    except (Exception, KeyboardInterrupt) as exc:  # the boundary: everything ends here
        return report(exc)
