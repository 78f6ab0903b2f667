"""Entry point: `loopctl` and `python -m loopctl`."""

from __future__ import annotations

import sys
from collections.abc import Callable


def _fast_path(args: list[str]) -> Callable[[], int] | None:
    """The few invocations answered without loading typer (they sit in prompts and hooks)."""
    flags = set(args[1:])
    if not args or len(flags) != len(args) - 1:
        return None
    if args[0] == "validate" and flags <= {"--json"}:
        from loopctl.cli.plain import validate

        return lambda: validate("--json" in flags)
    if args[0] == "inbox" and flags <= {"--json", "--all", "--digest"}:
        from loopctl.cli.plain import inbox_list

        return lambda: inbox_list("--all" in flags, "--json" in flags, digest="--digest" in flags)
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    args = sys.argv[1:] if argv is None else argv
    from loopctl.cli.debug_log import configure

    configure(args)  # the debug log: silent unless -v/--verbose or LOOPCTL_DEBUG=1
    if args in (["--version"], ["-V"]):
        from loopctl._version import __version__

        print(f"loopctl {__version__}")
        return 0
    fast = _fast_path(args)
    if fast is not None:
        from loopctl.cli.reporting import guarded

        return guarded(fast)
    from loopctl.cli.app import run_cli

    return run_cli(args)


if __name__ == "__main__":
    raise SystemExit(main())
