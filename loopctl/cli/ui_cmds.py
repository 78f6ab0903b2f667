"""`loopctl ui`: the local dashboard. Its web stack (the `[ui]` extra) is imported only here,
inside the command, so every other command starts as fast as before."""

from __future__ import annotations

from typing import Annotated

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
) -> None:
    """A local dashboard in your browser: loops, the inbox with diffs and buttons, live runs.

    Served on 127.0.0.1 at a random port; the printed URL carries a one-time session token.
    Stop it with Ctrl-C.
    """
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.paths import ProjectPaths, find_repo_root

    root = find_repo_root()
    # Approving is a human's decision (invariant 13): no dashboard for an agent.
    refuse_inside_agent("ui", ProjectPaths(root).events_file)
    if not 0 <= port <= 65535:
        from loopctl.errors import UsageError

        raise UsageError(f"--port must be 0..65535, not {port}")
    from loopctl.cli.reporting import eprint

    try:
        from loopctl.ui import server
    except ImportError as exc:
        from loopctl.errors import LoopctlError

        missing = (exc.name or "its web stack").split(".")[0]
        raise LoopctlError(
            f"`loopctl ui` needs the ui extra ({missing} is missing):"
            " pip install 'loopctl-runtime[ui]'"
        ) from None
    from loopctl.ui.security import is_loopback, new_token

    if not is_loopback(host):
        eprint(
            f"loopctl: warning: listening on {host}, not loopback: anyone who can reach this"
            " machine can try the dashboard, and plain HTTP shows the token to the network"
        )

    def ready(url: str) -> None:
        print(f"loopctl ui: serving {root}", flush=True)
        print(f"  open {url}", flush=True)
        print("  (the token in this URL is your session; Ctrl-C stops the dashboard)", flush=True)
        if not no_open:
            server.start_browser(url)

    server.serve(root, host=host, port=port, token=new_token(), on_ready=ready)


def register(app: typer.Typer) -> None:
    app.command()(boundary(ui))
