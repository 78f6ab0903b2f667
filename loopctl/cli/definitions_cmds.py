"""Commands over definitions: init, new, validate, agents, skills."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from loopctl.cli import completion
from loopctl.cli.boundary import boundary
from loopctl.cli.options import JsonFlag, load_here

if TYPE_CHECKING:
    pass


def _root() -> Path:
    from loopctl.paths import find_repo_root

    return find_repo_root()


def init() -> None:
    """Scaffold .loop/ (defaults, an example loop, agents) and example skills in this repository."""
    from loopctl.commands.init import PLACEHOLDER, WHERE, init_project

    result = init_project(_root())
    for path in result.created:
        print(f"created  {path}")
    for path, added in result.updated:
        print(f"updated  {path} (added {', '.join(added)})")
    for path, why in result.skipped:
        print(f"skipped  {path} ({why})")
    if not result.created and not result.updated:
        print("nothing written: every file init would write already exists")
    print(WHERE)
    if result.detected:
        found = f"agent CLIs found: {', '.join(result.detected)}"
        # Only what was written is claimed: a kept config keeps its own default maker.
        if result.config_written:
            print(f"{found}; default maker: {result.maker}")
        else:
            print(f"{found}; .loop/config.toml was kept: its [defaults] maker is unchanged")
    else:
        print(
            f"no agent CLI found on PATH ({', '.join(result.looked_for)}): {PLACEHOLDER} is a"
            " placeholder `command` agent; set its argv to your own agent program, or install"
            " one of those CLIs and run `loopctl init` again"
        )
    print(f"next: {result.next_command()}")


def new(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The loop's name (its file name).")],
    every: Annotated[
        str | None, typer.Option("--every", metavar="DURATION", help="Tick every 5m, 1h, …")
    ] = None,
    cron: Annotated[
        str | None,
        typer.Option("--cron", metavar="EXPR", help='Tick on a cron schedule: "0 * * * *".'),
    ] = None,
    goal: Annotated[
        str | None, typer.Option("--goal", metavar="COND", help='What must hold: "tests green".')
    ] = None,
    prompt: Annotated[
        str | None, typer.Option("--prompt", metavar="TEXT", help="What to tell the maker.")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", metavar="AGENT", help="The maker agent (default: config's)."),
    ] = None,
) -> None:
    """Write .loop/loops/NAME.toml, check it loads, and say how to run it."""
    from loopctl.commands.new import check_name, create_loop, loop_document
    from loopctl.errors import DefinitionError

    check_name(name)
    doc = loop_document(every=every, cron=cron, goal=goal, prompt=prompt, agent=agent)
    root = _root()
    try:
        created = create_loop(root, name, doc)
    except DefinitionError as exc:
        for problem in exc.problems:
            print(problem.render(exc.root), file=sys.stderr)
        print(f"loopctl: {name}.toml was not kept; fix the options and try again", file=sys.stderr)
        raise typer.Exit(2) from None
    print(f"created {created.path.relative_to(root)}")
    print(f"run one tick:   loopctl run {name} --once")
    if created.trigger:
        print(f"run it {created.trigger}: loopctl run {name}  (or with every loop: loopctl up)")


def validate(json_out: JsonFlag = False) -> None:
    """Check every definition and report each problem as path:line: message."""
    from loopctl.cli.plain import validate as run_validate

    code = run_validate(json_out)
    if code:
        raise typer.Exit(code)


agents_app = typer.Typer(help="List agents, or test one.", no_args_is_help=False)


@agents_app.callback(invoke_without_command=True)
@boundary
def agents(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List the agents this repository defines."""
    if ctx.invoked_subcommand is not None:
        return
    project = load_here()
    rows = sorted(project.agents.values(), key=lambda a: a.name)
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "agents",
            [
                {
                    "name": a.name,
                    "backend": a.backend.value,
                    "model": a.model,
                    "description": a.description,
                    "path": str(a.path.relative_to(project.root)),
                    "timeout_s": a.timeout_s,
                    "max_turns": a.max_turns,
                    "env_allow": list(a.env_allow),
                }
                for a in rows
            ],
        )
        return
    from loopctl.cli.render import print_table

    print_table(
        ("NAME", "BACKEND", "MODEL", "FILE", "DESCRIPTION"),
        [
            (
                a.name,
                a.backend.value,
                a.model or "-",
                str(a.path.relative_to(project.root)),
                a.description,
            )
            for a in rows
        ],
        empty="no agents defined (run `loopctl init`, or add .loop/agents/<name>.toml)",
    )


@agents_app.command("test")
@boundary
def agents_test(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME", help="The agent to check.", autocompletion=completion.agent_names
        ),
    ],
    json_out: JsonFlag = False,
) -> None:
    """Check that an agent's backend is installed, configured and reachable, without work."""
    from loopctl.backends.probe import probe_agent

    result = probe_agent(load_here(), name)
    if json_out:
        from loopctl.cli.render import print_json

        print_json("agent_test", result.to_json())
    else:
        print(f"{result.agent} ({result.backend}{', ' + result.model if result.model else ''})")
        for check in result.checks:
            mark = "ok  " if check.ok and not check.warning else ("warn" if check.ok else "FAIL")
            print(f"  {mark} {check.name}: {check.detail}")
        print("ready" if result.ok else "not ready: fix the FAIL lines above")
    if not result.ok:
        raise typer.Exit(1)


skills_app = typer.Typer(help="List skills, or show one.", no_args_is_help=False)


@skills_app.callback(invoke_without_command=True)
@boundary
def skills(ctx: typer.Context, json_out: JsonFlag = False) -> None:
    """List the skills this repository offers its agents."""
    if ctx.invoked_subcommand is not None:
        return
    project = load_here()
    rows = sorted(project.skills.values(), key=lambda s: s.name)
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "skills",
            [
                {
                    "name": s.name,
                    "description": s.description,
                    "path": str(s.path.relative_to(project.root)),
                    "license": s.license,
                }
                for s in rows
            ],
        )
        return
    from loopctl.cli.render import print_table

    print_table(
        ("NAME", "FILE", "DESCRIPTION"),
        [(s.name, str(s.path.relative_to(project.root)), s.description) for s in rows],
        empty="no skills found (.agents/skills/<name>/SKILL.md, .claude/skills/, skills/)",
    )


@skills_app.command("show")
@boundary
def skills_show(name: str, json_out: JsonFlag = False) -> None:
    """Show one skill's front matter and instructions."""
    project = load_here()
    skill = project.skill(name)
    body = skill.instructions()
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "skill",
            {
                "name": skill.name,
                "description": skill.description,
                "path": str(skill.path.relative_to(project.root)),
                "license": skill.license,
                "compatibility": skill.compatibility,
                "allowed_tools": list(skill.allowed_tools),
                "metadata": dict(skill.metadata),
                "instructions": body,
            },
        )
        return
    print(f"{skill.name} — {skill.path.relative_to(project.root)}")
    print(skill.description)
    print()
    print(body)


def register(app: typer.Typer) -> None:
    app.command()(boundary(init))
    app.command()(boundary(new))
    app.command()(boundary(validate))
    app.add_typer(agents_app, name="agents")
    app.add_typer(skills_app, name="skills")
