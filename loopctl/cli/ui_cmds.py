"""`loopctl ui`: the local dashboard. Its web stack (the `[ui]` extra) is imported only here,
inside the command, so every other command starts as fast as before."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from typing import Annotated, Any

import typer

from loopctl.cli.boundary import boundary


def ui(
    port: Annotated[
        int, typer.Option("--port", metavar="PORT", help="Port to listen on (0: a free one).")
    ] = 0,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="ADDRESS",
            help="Address to listen on; anything but loopback is reachable by others.",
        ),
    ] = "127.0.0.1",
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Print the URL; do not open a browser.")
    ] = False,
    idle: Annotated[
        str,
        typer.Option(
            "--idle",
            metavar="DURATION",
            help="A session ends after this long without a page opened or an action.",
        ),
    ] = "30m",
    max_session: Annotated[
        str,
        typer.Option("--max-session", metavar="DURATION", help="A session ends at this age."),
    ] = "12h",
) -> None:
    """A local dashboard in your browser: loops, the inbox with diffs and buttons, live runs.

    Served on 127.0.0.1 at a random port; the printed link works once, for one browser session.
    Press Enter in this terminal (or send SIGUSR1) for a new link. Stop it with Ctrl-C.
    """
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.paths import ProjectPaths, find_repo_root

    root = find_repo_root()
    # Approving is a human's decision (invariant 13): no dashboard for an agent.
    refuse_inside_agent("ui", ProjectPaths(root).events_file)
    from loopctl.errors import UsageError

    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be 0..65535, not {port}")
    idle_s, max_s = _duration("--idle", idle), _duration("--max-session", max_session)
    from loopctl.cli.reporting import eprint

    try:
        from loopctl.ui import server
    except ImportError as exc:
        from loopctl.errors import LoopctlError

        missing = (exc.name or "its web stack").split(".")[0]
        raise LoopctlError(
            f"`loopctl ui` needs the ui extra ({missing} is missing): pip install "
            + " ".join(f"'{requirement}'" for requirement in _ui_requirements())
            + " (or pip install -e '.[ui]' in a clone)"
        ) from None
    from loopctl.ui.security import Sessions, is_loopback

    if not is_loopback(host):
        eprint(
            f"loopctl: warning: listening on {host}, not loopback: anyone who can reach this"
            " machine can try the dashboard, and plain HTTP shows the link to the network"
        )

    def ready(url: str, new_link: Callable[[], str]) -> None:
        # First: a SIGUSR1 sent by someone who read the link must find its handler in place.
        _offer_new_links(new_link)
        print(f"loopctl ui: serving {root} (pid {os.getpid()})", flush=True)
        print(f"  open {url}", flush=True)
        print(
            "  (this link works once, for one browser; Enter here or `kill -USR1"
            f" {os.getpid()}` prints a new one; Ctrl-C stops the dashboard)",
            flush=True,
        )
        if not no_open:
            server.start_browser(url)

    sessions = Sessions(idle_s=idle_s, max_age_s=max_s)
    server.serve(root, host=host, port=port, sessions=sessions, on_ready=ready)


def _duration(flag: str, text: str) -> float:
    from loopctl.definitions.fields import parse_duration
    from loopctl.errors import UsageError

    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None
    if seconds < 1:
        raise UsageError(f"{flag} must be at least 1s")
    return seconds


def _offer_new_links(new_link: Callable[[], str]) -> None:
    """A new one-time link on this terminal for each Enter, and for each SIGUSR1 (a dashboard
    with no terminal of its own). Both reach only the human: an agent's sandbox shares neither
    this terminal (a session of its own) nor the PID namespace a signal needs."""
    lock = threading.Lock()

    def show() -> None:
        with lock:  # two requests at once: two whole messages, the second link the live one
            url = new_link()
            print("loopctl ui: a new one-time link (any unused earlier one no longer works):")
            print(f"  open {url}", flush=True)

    def on_signal(signum: int, frame: Any) -> None:
        # Not in the handler: it may interrupt a print of the main thread.
        threading.Thread(target=show, daemon=True).start()

    signal.signal(signal.SIGUSR1, on_signal)
    if _reads_stdin():
        threading.Thread(target=_each_line, args=(show,), daemon=True).start()


def _reads_stdin() -> bool:
    try:
        fd = sys.stdin.fileno()
        # A dashboard started in the background (`loopctl ui &`) would be stopped by the
        # terminal for reading it; with SIGTTIN ignored a read fails instead and Enter is off.
        if os.isatty(fd):
            signal.signal(signal.SIGTTIN, signal.SIG_IGN)
            return os.tcgetpgrp(fd) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False
    return True


def _each_line(show: Callable[[], None]) -> None:
    # os.read, not sys.stdin: a daemon thread holding sys.stdin's lock at exit aborts Python.
    fd = sys.stdin.fileno()
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return  # end of input: no terminal to listen to
        if b"\n" in chunk:  # one link per burst of input: the last one would be the live one
            show()


def register(app: typer.Typer) -> None:
    app.command()(boundary(ui))


def _ui_requirements() -> list[str]:
    """The ui extra's requirements as the installed distribution declares them.

    loopctl-runtime is not on the package index, so `pip install 'loopctl-runtime[ui]'` would
    fail: the hint names the packages themselves.
    """
    from importlib import metadata

    try:
        declared = metadata.requires("loopctl-runtime") or []
    except metadata.PackageNotFoundError:
        declared = []
    marker = re.compile(r"""\s*;\s*extra\s*==\s*["']ui["']\s*$""")
    found = [marker.sub("", line) for line in declared if marker.search(line)]
    return found or ["starlette>=0.41,<2", "uvicorn>=0.30,<1"]
