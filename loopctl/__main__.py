"""Entry point: `loopctl` and `python -m loopctl`."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):
        # Answered before typer loads: version checks sit in shell prompts and CI logs.
        from loopctl._version import __version__

        print(f"loopctl {__version__}")
        return 0
    from loopctl.cli.boundary import run_cli

    return run_cli(args)


if __name__ == "__main__":
    raise SystemExit(main())
