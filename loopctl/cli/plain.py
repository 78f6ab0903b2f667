"""Commands that need no typer, so `__main__` can answer them without loading it.

`loopctl validate` and `loopctl inbox` run in prompts, hooks and editors: they must start fast.
The typer app calls these same functions.
"""

from __future__ import annotations

from loopctl.cli.reporting import eprint


def validate(json_out: bool = False) -> int:
    """Check every definition and report each problem as path:line: message."""
    from loopctl.definitions import load_project
    from loopctl.paths import find_repo_root

    project = load_project(find_repo_root())
    root = project.root
    if json_out:
        from loopctl.cli.render import print_json

        print_json(
            "validation",
            {
                "ok": not project.errors,
                "loops": sorted(project.loops),
                "agents": sorted(project.agents),
                "skills": sorted(project.skills),
                "problems": [
                    {
                        "path": str(p.path.relative_to(root)) if p.path else None,
                        "line": p.line,
                        "severity": p.severity,
                        "message": p.message,
                    }
                    for p in project.problems
                ],
            },
        )
    else:
        for problem in project.problems:
            print(problem.render(root))
        errors, warnings = len(project.errors), len(project.warnings)
        summary = (
            f"{len(project.loops)} loops, {len(project.agents)} agents,"
            f" {len(project.skills)} skills"
        )
        if errors:
            eprint(f"{errors} error(s), {warnings} warning(s) ({summary} valid)")
        else:
            print(f"ok: {summary}" + (f", {warnings} warning(s)" if warnings else ""))
    return 2 if project.errors else 0


def inbox_list(show_all: bool = False, json_out: bool = False) -> int:
    """List inbox items: open ones, or all with `show_all`."""
    from loopctl.events import EventLog
    from loopctl.inbox import items
    from loopctl.paths import ProjectPaths, find_repo_root

    paths = ProjectPaths(find_repo_root())
    found = [i for i in items(EventLog(paths.events_file).read()) if show_all or i.is_open]
    if json_out:
        from loopctl.cli.render import print_json

        print_json("inbox", [i.to_json() for i in found])
        return 0
    from datetime import UTC, datetime

    from loopctl.cli.render import print_table

    now = datetime.now(UTC)

    def age(ts: str) -> str:
        seconds = int((now - datetime.fromisoformat(ts)).total_seconds())
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds >= size:
                return f"{seconds // size}{unit}"
        return f"{seconds}s"

    print_table(
        ("ID", "KIND", "LOOP", "TASK", "AGE", "SUMMARY"),
        [
            (i.id, i.kind, i.loop or "-", i.task or "-", age(i.opened), i.summary[:90])
            for i in found
        ],
        empty="inbox empty: nothing needs you",
    )
    return 0
