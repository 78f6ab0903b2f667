"""How `--help` reads: commands grouped in panels, examples under each command, one notation.

Like `gh`: `loopctl --help` lists commands under Run / Inspect / Triage / Share, and every
command's help ends with examples. The panels are typer's `rich_help_panel`, but drawn by click's
plain formatter (rich is not imported for help: start-up stays fast). Arguments are written one
way in every usage line: required `NAME`, optional `[NAME]`, alternatives `NAME|RUN`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperCommand, TyperGroup

if TYPE_CHECKING:
    # typer vendors its own click; importing the separate `click` package would cost start-up.
    from typer import _click as click

PANELS: dict[str, tuple[str, ...]] = {
    "Run": (
        "init",
        "new",
        "validate",
        "goal",
        "deliver",
        "run",
        "demo",
        "up",
        "down",
        "stop",
        "worker",
    ),
    "Inspect": (
        "status",
        "log",
        "replay",
        "spend",
        "worktrees",
        "agents",
        "skills",
        "doctor",
        "ui",
    ),
    "Triage": ("inbox", "report"),
    "Share": ("export", "state", "traces"),
}
OTHER_PANEL = "Other"

# Keyed by the command's path below `loopctl`; each line is one example, run as shown.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": ('loopctl goal "tests green"', "loopctl inbox", "loopctl status"),
    "init": ("loopctl init",),
    "new": (
        'loopctl new ci --every 30m --goal "tests green"',
        'loopctl new triage --cron "0 9 * * 1-5" --prompt "Label new issues" --agent claude',
    ),
    "validate": ("loopctl validate", "loopctl validate --json"),
    "goal": (
        'loopctl goal "tests green"',
        'loopctl goal "lint clean" --check "ruff check ." --max-iterations 3 -v',
        'loopctl goal "tests green" --dry-run',
    ),
    "deliver": (
        "loopctl deliver 20260301T101500 merge --commit 69ade1bc2da2",
        "loopctl deliver 20260301T101500 push --commit 69ade1bc2da2",
    ),
    "run": (
        "loopctl run nightly --once",
        "loopctl run nightly --every 10m -v",
        "loopctl run docs --watch 'docs/**/*.md'",
        "loopctl run nightly --dry-run",
    ),
    "demo": ("loopctl demo", "loopctl demo --no-keep"),
    "up": (
        "loopctl up",
        "loopctl up --only nightly --only docs -v",
        "loopctl up --detach",
        "loopctl up --engine temporal --server 127.0.0.1:7233",
    ),
    "down": ("loopctl down", "loopctl down --timeout 120"),
    "stop": ("loopctl stop nightly", "loopctl stop 20260301T101500-ab12", "loopctl stop goal"),
    "status": ("loopctl status", "loopctl status --json"),
    "log": ("loopctl log", "loopctl log nightly --follow", "loopctl log --json | jq .type"),
    "replay": ("loopctl replay 20260301T101500", "loopctl replay 20260301T101500 --json"),
    "spend": ("loopctl spend", "loopctl spend --since 30d --by loop", "loopctl spend --json"),
    "doctor": ("loopctl doctor",),
    "ui": ("loopctl ui", "loopctl ui --no-open --port 8765"),
    "worker": ("loopctl worker --server 127.0.0.1:7233 --task-queue loopctl",),
    "agents": ("loopctl agents", "loopctl agents --json"),
    "agents test": ("loopctl agents test claude-maker",),
    "skills": ("loopctl skills",),
    "skills show": ("loopctl skills show review",),
    "worktrees": ("loopctl worktrees", "loopctl worktrees --json"),
    "worktrees prune": ("loopctl worktrees prune --dry-run", "loopctl worktrees prune"),
    "inbox": ("loopctl inbox", "loopctl inbox --kind approval", "loopctl inbox --digest"),
    "report": (
        "loopctl report",
        "loopctl report --since 24h --no-mark",
        "loopctl report --since 2026-12-05T07:30 --json",
        "loopctl report --notify",
    ),
    "inbox show": ("loopctl inbox show a1b2", "loopctl inbox show a1b2 --stat"),
    "inbox diff": ("loopctl inbox diff a1b2 | git apply --check",),
    "inbox approve": ("loopctl inbox approve a1b2", 'loopctl inbox approve a1b2 --note "read it"'),
    "inbox reject": (
        'loopctl inbox reject a1b2 --reason "wrong approach"',
        'loopctl inbox reject a1b2 --changes "keep the old name as an alias"',
    ),
    "inbox retry": ("loopctl inbox retry a1b2",),
    "inbox reply": ('loopctl inbox reply a1b2 "use the v2 API"',),
    "inbox dismiss": ("loopctl inbox dismiss a1b2",),
    "export": ("loopctl export github-actions nightly",),
    "export github-actions": ("loopctl export github-actions nightly",),
    "export k8s": ("loopctl export k8s nightly > nightly.yaml",),
    "state": ("loopctl state pull", "loopctl state push"),
    "state pull": ("loopctl state pull",),
    "state push": ("loopctl state push",),
    "traces": ("loopctl traces export 20260301T101500 --otlp",),
    "traces export": (
        "loopctl traces export 20260301T101500 --otlp-json run.json",
        "loopctl traces export 20260301T101500 --otlp --capture-content",
    ),
}

_BRACED = re.compile(r"\{([^{}]*)\}")


def _usage(pieces: list[str]) -> list[str]:
    """Typer writes a required argument as `{name}`: one notation instead, `NAME` / `[NAME]`."""
    fixed = []
    for piece in pieces:
        piece = _BRACED.sub(lambda m: m.group(1).upper(), piece)
        if piece.startswith("[") and piece != "[OPTIONS]" and "ARGS" not in piece:
            piece = piece.upper()
        fixed.append(piece)
    return fixed


def _write_examples(ctx: click.Context, formatter: click.HelpFormatter) -> None:
    path = " ".join(ctx.command_path.split()[1:])
    examples = EXAMPLES.get(path)
    if examples:
        with formatter.section("Examples"):
            for line in examples:
                # Written as is: wrapping would break a command meant to be copied.
                formatter.write(f"{'':>{formatter.current_indent}}{line}\n")
    if ctx.command.epilog:
        formatter.write_paragraph()
        formatter.write_text(ctx.command.epilog)


def _name_options(params: list[Any]) -> None:
    """Options without a metavar get one in loopctl's notation (`--base REF`, not `<str>`)."""
    for param in params:
        if getattr(param, "param_type_name", "") != "option" or param.is_flag or param.metavar:
            continue
        kind = getattr(param.type, "name", "")
        if kind in ("int", "int range", "integer", "integer range"):
            param.metavar = "N"
        elif kind in ("float", "float range"):
            param.metavar = "SECONDS" if "timeout" in (param.name or "") else "N"
        elif kind in ("str", "text"):
            param.metavar = (param.name or "value").upper().replace("_", "-")


class LoopctlCommand(TyperCommand):
    """A command whose help uses loopctl's notation and ends with its examples."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _name_options(self.params)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return _usage(super().collect_usage_pieces(ctx))

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _write_examples(ctx, formatter)


class LoopctlGroup(TyperGroup):
    """A group whose commands are listed under their panel, in the panels' order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _name_options(self.params)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return _usage(super().collect_usage_pieces(ctx))

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        _write_examples(ctx, formatter)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        listed: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                listed.append((name, command))
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in listed)
        panels: dict[str, list[tuple[str, str]]] = {}
        for name, command in listed:
            panel = getattr(command, "rich_help_panel", None) or "Commands"
            panels.setdefault(panel, []).append((name, command.get_short_help_str(limit)))
        order = [*PANELS, *(p for p in panels if p not in PANELS)]
        for panel in order:
            if panel in panels:
                with formatter.section(panel):
                    formatter.write_dl(panels[panel])


def panel_of(name: str) -> str:
    return next((panel for panel, names in PANELS.items() if name in names), OTHER_PANEL)


def polish(app: typer.Typer, *, top: bool = True) -> None:
    """Give every command of `app` loopctl's help classes, and the top level its panels."""
    app.info.cls = LoopctlGroup
    for command in app.registered_commands:
        command.cls = LoopctlCommand
        if top:
            name = command.name or (command.callback.__name__ if command.callback else "")
            command.rich_help_panel = panel_of(name.replace("_", "-"))
    for group in app.registered_groups:
        group.cls = LoopctlGroup
        if top:
            group.rich_help_panel = panel_of(group.name or "")
        if group.typer_instance is not None:
            polish(group.typer_instance, top=False)


def all_paths(command: Any, prefix: str = "") -> list[str]:
    """Every command path below `command` ("", "inbox", "inbox show", …), for tests."""
    paths = [prefix]
    for name, sub in getattr(command, "commands", {}).items():
        paths += all_paths(sub, f"{prefix} {name}".strip())
    return paths
