"""Commands that need no typer, so `__main__` can answer them without loading it.

`loopctl validate` and `loopctl inbox` run in prompts, hooks and editors: they must start fast.
The typer app calls these same functions.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopctl.cli.validation_cache import Answer


def validate(json_out: bool = False) -> int:
    """Check every definition and report each problem as path:line: message."""
    import sys

    from loopctl.cli import validation_cache
    from loopctl.paths import find_repo_root

    root = find_repo_root()
    mode = "json" if json_out else "text"
    key = validation_cache.definitions_key(root, mode)
    answer = validation_cache.recall(root, mode, key) if key else None
    if answer is None:
        answer = _validate(root, json_out)
        if key is not None:
            validation_cache.remember(root, mode, key, answer)
    sys.stdout.write(answer.stdout)
    sys.stdout.flush()
    sys.stderr.write(answer.stderr)
    return answer.exit_code


def _validate(root: Path, json_out: bool) -> Answer:
    from dataclasses import replace

    from loopctl import node_links
    from loopctl.checks.import_roots import checkout_note
    from loopctl.cli.render import format_json
    from loopctl.cli.validation_cache import Answer
    from loopctl.definitions import load_project
    from loopctl.delivery.tools import machine_problems

    project = load_project(root)
    # What this machine and the commit lack (delivery tools, agent scripts): warnings only.
    project = replace(project, problems=(*project.problems, *machine_problems(project)))
    # Which source tree a check in a worktree imports, where the checkout's node_modules says.
    python = checkout_note(root, os.environ)
    node = node_links.describe(root, setup=False)
    imports = [line for line in (python, node) if line]
    stdout: list[str] = []
    stderr: list[str] = []
    if json_out:
        payload: dict[str, Any] = {
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
        }
        if imports:
            payload["imports"] = imports
        stdout.append(format_json("validation", payload))
    else:
        stdout += [problem.render(root) + "\n" for problem in project.problems]
        stdout += [f"note: {line}\n" for line in imports]
        errors, warnings = len(project.errors), len(project.warnings)
        summary = (
            f"{len(project.loops)} loops, {len(project.agents)} agents,"
            f" {len(project.skills)} skills"
        )
        if errors:
            stderr.append(f"{errors} error(s), {warnings} warning(s) ({summary} valid)\n")
        else:
            stdout.append(
                f"ok: {summary}" + (f", {warnings} warning(s)" if warnings else "") + "\n"
            )
    return Answer("".join(stdout), "".join(stderr), 2 if project.errors else 0)


def inbox_list(
    show_all: bool = False,
    json_out: bool = False,
    loop: str | None = None,
    kind: str | None = None,
    digest: bool = False,
    sort: str = "age",
) -> int:
    """List inbox items: open ones, or all with `show_all`; `digest` prints the daily summary;
    `sort` "risk": riskiest first, with each item's risk (loopctl.commands.inbox_risk)."""
    from loopctl.paths import ProjectPaths, find_repo_root

    paths = ProjectPaths(find_repo_root())
    if digest:
        return inbox_digest(paths, json_out)
    if kind is not None:
        from loopctl.errors import UsageError
        from loopctl.journal.inbox import ItemKind

        kinds = [k.value for k in ItemKind]
        if kind not in kinds:
            raise UsageError(f"--kind must be one of {', '.join(kinds)}, not {kind!r}")
    if sort not in ("age", "risk"):
        from loopctl.errors import UsageError

        raise UsageError(f"--sort must be age or risk, not {sort!r}")
    if json_out and loop is None and kind is None and sort == "age":
        return _inbox_json_cached(paths, show_all)
    from loopctl.journal.events import EventLog
    from loopctl.journal.inbox import items

    events = EventLog(paths.events_file).read()
    found = [
        i
        for i in items(events)
        if (show_all or i.is_open)
        and (loop is None or i.loop == loop)
        and (kind is None or i.kind == kind)
    ]
    if sort == "risk":
        return _inbox_by_risk(paths, events, found, json_out)
    if json_out:
        from loopctl.cli.render import print_json

        print_json("inbox", [i.to_json() for i in found])
        return 0
    from datetime import UTC, datetime

    from loopctl.cli.render import print_table
    from loopctl.text import shorten

    now = datetime.now(UTC)

    def age(ts: str) -> str:
        seconds = int((now - datetime.fromisoformat(ts)).total_seconds())
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds >= size:
                return f"{seconds // size}{unit}"
        return f"{seconds}s"

    def state(item: Any) -> str:
        if not item.is_open:
            return str(item.resolution or "closed")
        if item.approved:
            return "approved"
        return "refused" if item.refused else "open"

    print_table(
        ("ID", "KIND", "OUTCOME", "STATE", "LOOP", "TASK", "AGE", "SUMMARY"),
        [
            (
                i.id,
                i.kind,
                i.outcome or "-",
                state(i),
                i.loop or "-",
                i.task or "-",
                age(i.opened),
                shorten(i.summary, 90),
            )
            for i in found
        ],
        empty="inbox empty: nothing needs you",
    )
    return 0


def _inbox_by_risk(paths: Any, events: Any, found: Any, json_out: bool) -> int:
    """`inbox --sort risk`: riskiest first, each with its factors."""
    from loopctl.commands.inbox_risk import sort_by_risk
    from loopctl.definitions import load_project

    ranked = sort_by_risk(load_project(paths.root), events, found)
    if json_out:
        from loopctl.cli.render import print_json

        print_json("inbox", [{**i.to_json(), "risk": r.to_json()} for i, r in ranked])
        return 0
    from loopctl.cli.render import print_table
    from loopctl.text import shorten

    print_table(
        ("ID", "KIND", "LOOP", "TASK", "RISK", "WHY", "SUMMARY"),
        [
            (
                i.id,
                i.kind,
                i.loop or "-",
                i.task or "-",
                f"{r.score:.0f}",
                shorten(r.describe(), 60),
                shorten(i.summary, 60),
            )
            for i, r in ranked
        ],
        empty="inbox empty: nothing needs you",
    )
    return 0


def _inbox_json_cached(paths: Any, show_all: bool) -> int:
    """`inbox --json` from the projection cache when the log has not changed since."""
    import sys

    from loopctl.cli import inbox_index

    view = "all" if show_all else "open"
    state = inbox_index.log_state(paths.events_file)
    body = inbox_index.cached(paths.loop_dir, view, paths.events_file, state) if state else None
    if body is None and state is None:
        # No log yet, so no item: the answer needs neither the journal nor its decoder.
        from loopctl.cli.render import format_json

        body = format_json("inbox", []).encode("utf-8")
    if body is None:
        from loopctl.cli.render import format_json
        from loopctl.journal.events import EventLog
        from loopctl.journal.inbox import items

        found = [i for i in items(EventLog(paths.events_file).read()) if show_all or i.is_open]
        body = format_json("inbox", [i.to_json() for i in found]).encode("utf-8")
        if state is not None:
            # Keyed by the state seen before reading: a concurrent append only forces a rebuild.
            inbox_index.store(paths.loop_dir, view, state, body)
    out = getattr(sys.stdout, "buffer", None)
    if out is not None:
        sys.stdout.flush()
        out.write(body)
        out.flush()
    else:
        sys.stdout.write(body.decode("utf-8"))
    return 0


def inbox_digest(paths: Any, json_out: bool) -> int:
    """What all loops did in the last 24 hours and what waits for a human (the daily digest)."""
    from datetime import UTC, datetime

    from loopctl.journal.events import EventLog
    from loopctl.journal.notify import build_digest

    digest = build_digest(EventLog(paths.events_file).read(), datetime.now(UTC).astimezone())
    if json_out:
        from loopctl.cli.render import print_json

        print_json("digest", digest.to_json())
    else:
        sys_out = digest.text()
        print(sys_out, end="")
    return 0
