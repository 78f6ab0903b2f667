"""`loopctl report`: the morning report, as text, JSON, or sent through `[notify]`."""

from __future__ import annotations

from typing import Annotated

import typer

from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag, load_here


def report(
    since: Annotated[
        str,
        typer.Option(
            "--since",
            metavar="last|all|DURATION|TIME",
            help="From when: the last report shown (last), 24h, 90m, all, a time of day"
            " (07:30: its latest passing), or a time like 2026-12-05T07:30 (local unless it has"
            " an offset).",
        ),
    ] = "last",
    json_out: JsonFlag = False,
    no_mark: Annotated[
        bool,
        typer.Option("--no-mark", help="Do not move `last`: the next report covers this too."),
    ] = False,
    show_all: Annotated[
        bool, typer.Option("--all", help="Every line of each section, not one screen.")
    ] = False,
    send: Annotated[
        bool,
        typer.Option("--notify", help="Send it through the [notify] channels instead of printing."),
    ] = False,
) -> None:
    """What the loops did since you last looked: done, delivered, waiting for you, stalled,
    rate-limited, failed, and spent; each line with the command that acts on it."""
    from loopctl.commands import report as use_case

    project = load_here(strict=False)
    found = use_case.build(project, since)
    via = "notify" if send else ("json" if json_out else "text")
    if send:
        notified = use_case.send(project, found)
        for sent in notified.sent:
            state = "sent" if sent.ok else f"failed: {sent.error}"
            print(f"report {state} ({sent.channel})")
        if not notified.ok:
            raise typer.Exit(1)
    elif json_out:
        from loopctl.cli.render import print_json

        print_json("report", found.to_json())
    else:
        print(found.text(cap=None if show_all else 8), end="")
    if not no_mark:
        use_case.mark_shown(project, found, via)


def register(app: typer.Typer) -> None:
    app.command()(boundary(report))
