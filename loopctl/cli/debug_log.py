"""The debug log: quiet unless asked for with `-v`/`--verbose` or LOOPCTL_DEBUG=1.

Where loopctl deliberately carries on past an exception (a view that broke, telemetry that
failed, a worktree that could not be parked), the module logs it at debug level to its own
`logging.getLogger(__name__)`, under the "loopctl" logger (`errors.swallowed`). Nothing shows it
by default; this attaches the one handler, on stderr, when it is asked for. Every value of a
secret-looking variable of the environment is redacted from what it prints, as from the log.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

DEBUG_ENV = "LOOPCTL_DEBUG"
VERBOSE_FLAGS = ("-v", "--verbose")
_HANDLER = "loopctl-debug"


def wanted(args: Sequence[str], environ: Mapping[str, str] | None = None) -> bool:
    """Whether this invocation asks for the debug log: LOOPCTL_DEBUG set (but not to 0), or
    `-v`/`--verbose` among its arguments (the flag of `goal`, `run` and `up`)."""
    value = (os.environ if environ is None else environ).get(DEBUG_ENV, "")
    return value not in ("", "0") or any(arg in VERBOSE_FLAGS for arg in args)


def configure(args: Sequence[str]) -> None:
    """Show loopctl's debug log on stderr when `wanted`; otherwise leave it silent (and do not
    import `logging`, which start-up does not need)."""
    if not wanted(args):
        return
    import logging

    from loopctl.secrets import Redactor

    top = logging.getLogger("loopctl")
    if any(handler.get_name() == _HANDLER for handler in top.handlers):
        return
    redactor = Redactor.from_environment()

    # Defined here, where `logging` is imported: only a debugging run pays for it.
    class Redacting(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redactor.redact(super().format(record))

    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER)
    handler.setFormatter(Redacting("loopctl debug: %(name)s: %(message)s"))
    top.addHandler(handler)
    top.setLevel(logging.DEBUG)
