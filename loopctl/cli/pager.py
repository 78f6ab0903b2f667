"""Long output for people: a diff coloured and paged on a terminal as git does; plain when piped."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys

from loopctl.text import strip_controls


def on_terminal() -> bool:
    return sys.stdout.isatty()


def colour_wanted() -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    return on_terminal() and not os.environ.get("NO_COLOR")


def coloured_diff(patch: str) -> str:
    """`patch` with its control sequences stripped, then coloured by rich's diff lexer.

    The patch holds the agent's file contents: stripping comes first, so the only escape
    sequences in the result are rich's own colours.
    """
    import io

    from rich.console import Console
    from rich.syntax import Syntax

    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=True, color_system="standard", soft_wrap=True, width=10_000
    )
    syntax = Syntax(
        strip_controls(patch),
        "diff",
        theme="ansi_dark",
        background_color="default",
        word_wrap=False,
    )
    console.print(syntax, end="")
    return buffer.getvalue()


def show(text: str, *, page: bool = True) -> None:
    """Print `text`; on a terminal through `$PAGER` (default `less`, with LESS=FRX as git sets
    it: quit if one screen, keep colours, no screen clear), never through a shell."""
    argv = _pager_argv() if page and on_terminal() else None
    if argv is None:
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
        sys.stdout.flush()
        return
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    sys.stdout.flush()
    try:
        # The pager is the user's own program, given the terminal: not an agent's process.
        pager = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
    except OSError:
        sys.stdout.write(text)
        return
    assert pager.stdin is not None
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):  # the user quit the pager early
        pager.stdin.write(text.encode("utf-8", "replace"))
    with contextlib.suppress(BrokenPipeError):
        pager.stdin.close()
    while True:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C belongs to the pager, as in git
            pager.wait()
            break


def _pager_argv() -> list[str] | None:
    configured = os.environ.get("PAGER")
    if configured is None:
        return ["less", "-R"]
    try:
        argv = shlex.split(configured)
    except ValueError:
        return ["less", "-R"]
    if not argv or argv == ["cat"]:
        return None
    return argv
