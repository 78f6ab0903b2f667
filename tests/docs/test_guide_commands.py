"""Every `loopctl` command the guide shows is one the CLI accepts: its subcommand exists and every
option it passes is one that subcommand takes, with a value its type accepts (issue 29).

The commands are parsed by loopctl's own command line (click, under typer), exactly as a shell
would hand them over, so a renamed flag or command fails here before a reader trips on it.
"""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import pytest
import typer.main
from support.guide import Shown, inline_commands, loopctl_invocations, pages, shown_commands
from typer import Exit

# typer carries its own copy of click (typer._click); its parser raises this for any bad usage.
from typer._click.exceptions import BadParameter, MissingParameter, UsageError
from typer.core import TyperGroup

from loopctl.cli.app import app


@functools.cache
def inert_cli() -> Any:
    """loopctl's command tree with no option callbacks: parsing `--install-completion` or
    `--version` must not act (the help option's own callback only prints, then exits 0)."""
    root = copy.deepcopy(typer.main.get_command(app))
    stack = [root]
    while stack:
        command = stack.pop()
        for param in command.params:
            param.callback = None
        stack.extend(getattr(command, "commands", {}).values())
    return root


def parse(args: list[str]) -> list[str]:
    """Parse `loopctl ARGS` down to its leaf command; the command path, e.g. ['inbox', 'show']."""
    command = inert_cli()
    try:
        return _parse(command, args)
    except (Exit, SystemExit) as done:  # --help: the option exists, and help was printed
        status = getattr(done, "exit_code", getattr(done, "code", 1))
    if status not in (0, None):
        pytest.fail(f"loopctl {' '.join(args)} exited {status}")
    return ["--help"]


def _parse(command: Any, args: list[str]) -> list[str]:
    context = command.make_context("loopctl", list(args))
    path: list[str] = []
    while isinstance(command, TyperGroup):
        rest = [*context._protected_args, *context.args]
        alone = {"--version", "-V", "--install-completion", "--show-completion"}
        if not rest and not path and alone.intersection(args):
            break  # `loopctl --show-completion`: an option of loopctl itself that acts alone
        if not rest:
            assert command.invoke_without_command, f"`loopctl {' '.join(path)}` needs a command"
            break
        name, sub, remaining = command.resolve_command(context, rest)
        assert sub is not None
        assert name is not None
        path.append(name)
        command = sub
        context = command.make_context(name, remaining, parent=context)
    return path


def shown(commands: list[Shown] | None = None) -> list[tuple[str, list[str]]]:
    return [
        (f"{cmd.where}: {cmd.line}", args)
        for cmd in (shown_commands() if commands is None else commands)
        for args in loopctl_invocations(cmd.line)
    ]


def test_the_guide_shows_commands_on_every_page_that_needs_them() -> None:
    found = shown()
    assert len(found) >= 60, found
    where = {label.split(":")[0] for label, _ in found}
    for name in ("README.md", "getting-started.md", "delivery.md", "loops.md", "inbox.md"):
        assert any(w.endswith(name) for w in where), f"no loopctl command shown in {name}"
    assert len(pages()) >= 12


@pytest.mark.parametrize(("label", "args"), shown(), ids=lambda value: str(value)[:90])
def test_every_command_the_guide_shows_parses(label: str, args: list[str]) -> None:
    try:
        path = parse(args)
    except UsageError as exc:
        pytest.fail(f"{label}\n  loopctl refuses it: {exc.format_message()}")
    assert path, f"{label}: no loopctl command"


@pytest.mark.parametrize(("label", "args"), shown(inline_commands()), ids=lambda v: str(v)[:90])
def test_every_command_the_text_names_parses(label: str, args: list[str]) -> None:
    """`loopctl …` in running text and in the reference's synopses, `[--option VALUE]` included.

    Text may name a command without its arguments (`loopctl run`) or with a placeholder for a
    number (`--port N`); an unknown command or option, or an extra argument, still fails.
    """
    try:
        parse(args)
    except (MissingParameter, BadParameter) as exc:
        message = exc.format_message()
        placeholder = isinstance(exc, MissingParameter) or re.search(r"'[A-Z]+' is not a", message)
        assert placeholder, f"{label}\n  loopctl refuses it: {message}"
    except UsageError as exc:
        pytest.fail(f"{label}\n  loopctl refuses it: {exc.format_message()}")


@pytest.mark.parametrize(
    "args",
    [
        ["goal", "tests green", "--no-such-flag"],
        ["no-such-command"],
        ["inbox", "approve"],  # its ID is missing
        ["spend", "--since"],  # its value is missing
        ["run", "x", "--max-ticks", "three"],
    ],
)
def test_a_command_the_cli_would_refuse_is_caught(args: list[str]) -> None:
    with pytest.raises(UsageError):
        parse(args)
