"""`loopctl export …` and `loopctl state pull|push`: running a loop beyond one machine."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from loopctl.cli import completion
from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag, load_here

if TYPE_CHECKING:
    from loopctl.commands.export import Exported
    from loopctl.commands.state_sync import SyncResult

export_app = typer.Typer(
    help="Write a loop as a GitHub Actions workflow or a Kubernetes CronJob.",
    no_args_is_help=True,
)
state_app = typer.Typer(
    help="Share loop state (event log, STATE.md, INBOX.md) through the loopctl-state branch.",
    no_args_is_help=True,
)

LoopName = Annotated[
    str,
    typer.Argument(
        metavar="NAME",
        help="The loop (.loop/loops/NAME.toml).",
        autocompletion=completion.loop_names,
    ),
]
Output = Annotated[
    str | None,
    typer.Option("--output", "-o", metavar="PATH", help="Write here instead; '-' for stdout."),
]
Force = Annotated[bool, typer.Option("--force", help="Replace the file if it exists.")]
Cron = Annotated[
    str | None,
    typer.Option("--cron", metavar="EXPR", help="Use this schedule instead of the loop's trigger."),
]
Spec = Annotated[
    str | None,
    typer.Option(
        "--loopctl-spec",
        metavar="SPEC",
        help="What `pip install` installs (default: this version of loopctl).",
    ),
]
Remote = Annotated[
    str, typer.Option("--remote", metavar="REMOTE", help="The remote holding the state branch.")
]


def _emit(exported: Exported, output: str | None, force: bool) -> None:
    from loopctl.cli.reporting import eprint
    from loopctl.commands.export import write_export

    for warning in exported.warnings:
        eprint(f"warning: {warning}")
    if output == "-":
        sys.stdout.write(exported.text)
        return
    from loopctl.paths import find_repo_root

    root = find_repo_root()
    written = write_export(
        exported, root, Path(output) if output is not None else None, force=force
    )
    shown = written.relative_to(root) if written.is_relative_to(root) else written
    print(f"wrote {shown} (schedule {exported.cron!r})")
    if exported.secrets:
        print("secrets it reads: " + ", ".join(exported.secrets))


@export_app.command("github-actions")
@boundary
def export_github_actions(
    name: LoopName,
    output: Output = None,
    force: Force = False,
    cron: Cron = None,
    spec: Spec = None,
) -> None:
    """Write .github/workflows/loop-NAME.yml: the loop on GitHub's scheduler, state on a branch."""
    from loopctl.commands.export_github import github_actions

    _emit(github_actions(load_here(), name, cron=cron, loopctl_spec=spec), output, force)


@export_app.command("k8s")
@boundary
def export_k8s(
    name: LoopName,
    output: Output = None,
    force: Force = False,
    cron: Cron = None,
    spec: Spec = None,
    state: Annotated[
        str,
        typer.Option(
            "--state",
            metavar="branch|pvc",
            help="Keep state on the loopctl-state branch (default) or a PersistentVolumeClaim.",
        ),
    ] = "branch",
    repo_url: Annotated[
        str | None,
        typer.Option("--repo-url", metavar="URL", help="What the pod clones (default: origin)."),
    ] = None,
    image: Annotated[str, typer.Option("--image", help="The container image.")] = "python:3.12",
    secret: Annotated[
        str | None,
        typer.Option("--secret", metavar="NAME", help="The Secret holding env.allow variables."),
    ] = None,
    pvc: Annotated[
        str | None, typer.Option("--pvc", metavar="NAME", help="The claim's name (--state pvc).")
    ] = None,
) -> None:
    """Write loop-NAME.cronjob.yaml: a Kubernetes CronJob running one tick per schedule."""
    from loopctl.commands.export import StateStore
    from loopctl.commands.export_k8s import kubernetes
    from loopctl.errors import UsageError

    if state not in {s.value for s in StateStore}:
        raise UsageError(f"--state must be 'branch' or 'pvc', not {state!r}")
    exported = kubernetes(
        load_here(),
        name,
        cron=cron,
        state=StateStore(state),
        repo_url=repo_url,
        image=image,
        secret=secret,
        pvc=pvc,
        loopctl_spec=spec,
    )
    _emit(exported, output, force)


def _report(result: SyncResult, json_out: bool) -> None:
    if json_out:
        from loopctl.cli.render import print_json

        print_json("state", result.to_json())
        return
    where = f"{result.remote}/{result.branch}"
    outcome = result.outcome.value
    if outcome == "no-remote-state":
        print(f"{where} does not exist yet: nothing to pull (`loopctl state push` creates it)")
        return
    if result.action == "pull":
        if outcome == "up-to-date":
            ahead = f"; {result.ahead} local events to push" if result.ahead else ""
            print(f"already up to date with {where}{ahead}")
        else:
            print(f"pulled {result.received} events from {where}" + _rebased(result))
        return
    taken = f" (took {result.received} new events from it{_rebased(result)})"
    if outcome == "pushed":
        print(f"pushed {result.sent} events to {where}" + (taken if result.received else ""))
    else:
        print(f"{where} is already up to date")


def _rebased(result: SyncResult) -> str:
    return f"; {result.rebased} local events now follow them" if result.rebased else ""


@state_app.command("pull")
@boundary
def state_pull(remote: Remote = "origin", json_out: JsonFlag = False) -> None:
    """Merge the remote's loop state into this clone (then `loopctl inbox` shows its items)."""
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.commands.state_sync import pull
    from loopctl.paths import ProjectPaths, find_repo_root

    paths = ProjectPaths(find_repo_root())
    refuse_inside_agent("state pull", paths.events_file)
    _report(pull(paths, remote), json_out)


@state_app.command("push")
@boundary
def state_push(remote: Remote = "origin", json_out: JsonFlag = False) -> None:
    """Publish this clone's loop state on the remote (merging what it gained first)."""
    from loopctl.commands.agent_context import refuse_inside_agent
    from loopctl.commands.state_sync import push
    from loopctl.paths import ProjectPaths, find_repo_root

    paths = ProjectPaths(find_repo_root())
    refuse_inside_agent("state push", paths.events_file)
    _report(push(paths, remote), json_out)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
    app.add_typer(state_app, name="state")
