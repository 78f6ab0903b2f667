"""A loop's declared scope, `[scope]`: what its work may touch (issue 31, item 1).

    [scope]
    paths = ["styles/**"]          # files the work may write (globs, as `[maker] scope`)
    commands = ["npx stylelint *"]  # command lines the agent may run (shell-style globs)
    hosts = ["registry.npmjs.org"]  # hosts it may reach through the egress proxy
    tools = ["Read", "Edit", "Bash"]  # the CLI's tools it may call
    max_files = 10                  # a size budget: files changed,
    max_lines = 400                 # and lines added plus removed

Each key left out does not confine that kind of step. A task may narrow the paths (its source's
`scope` field), never widen them. What an attempt did is measured (engine.footprint) and held
against this; a step outside it pauses the task with an inbox item (engine.drift_gate).

`[maker] scope` stays what it was (invariant 10): a change outside it fails the attempt. `[scope]`
is softer and wider: outside it, a human decides.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from loopctl.definitions.fields import Table
from loopctl.definitions.schema import Field, globs, integer, read, strings
from loopctl.globs import first_match

# A host as `[scope] hosts` writes it: a name, `*.` and a name, or either with `:port`.
_HOST = re.compile(r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]{0,252})(:[0-9]{1,5})?$")


@dataclass(frozen=True, slots=True)
class ScopeSpec:
    """What a loop's work may touch; an empty tuple or None leaves that kind unconfined."""

    paths: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    max_files: int | None = None
    max_lines: int | None = None
    task_paths: tuple[str, ...] = ()  # the task's own narrowing (never in a loop file)

    @property
    def declared(self) -> bool:
        return bool(
            self.paths
            or self.task_paths
            or self.commands
            or self.hosts
            or self.tools
            or self.max_files is not None
            or self.max_lines is not None
        )

    def to_json(self) -> dict[str, object]:
        return {
            "paths": list(self.paths),
            "commands": list(self.commands),
            "hosts": list(self.hosts),
            "tools": list(self.tools),
            "max_files": self.max_files,
            "max_lines": self.max_lines,
            **({"task_paths": list(self.task_paths)} if self.task_paths else {}),
        }


def _check_hosts(table: Table, key: str, hosts: tuple[str, ...]) -> None:
    for host in hosts:
        if not _HOST.match(host):
            table.error(
                key,
                f"{table.where(key)}: {host!r} is not a host (write a name such as"
                ' "registry.npmjs.org", "*.example.com", or either with ":443")',
            )
            return


def _check_commands(table: Table, key: str, patterns: tuple[str, ...]) -> None:
    for pattern in patterns:
        if not pattern.strip() or "\n" in pattern:
            table.error(key, f"{table.where(key)}: {pattern!r} must be one command line")
            return


SCOPE_FIELDS = (
    Field("paths", globs),
    Field("commands", strings, check=_check_commands),
    Field("hosts", strings, check=_check_hosts),
    Field("tools", strings),
    Field("max_files", integer, minimum=1),
    Field("max_lines", integer, minimum=1),
)


def read_scope(parent: Table) -> ScopeSpec:
    """`[scope]` of a loop file (an empty one when the file has none)."""
    table = parent.table("scope")
    if table is None:
        return ScopeSpec()
    values = read(table, SCOPE_FIELDS)
    for pattern in values["paths"]:
        if pattern.startswith("/") or ".." in pattern.split("/"):
            table.error("paths", f"'paths' in [scope]: {pattern!r} must stay inside the repository")
            break
    table.finish()
    return ScopeSpec(**values)


def narrowed(scope: ScopeSpec, task_paths: Sequence[str]) -> ScopeSpec:
    """`scope` with a task's own paths: a file must then match both (a task never widens)."""
    if not task_paths:
        return scope
    return replace(scope, task_paths=(*scope.task_paths, *task_paths))


def path_in(path: str, scope: ScopeSpec) -> bool:
    """Whether `path` (relative to the repository) is inside the scope's paths."""
    if scope.paths and first_match(path, scope.paths) is None:
        return False
    return not scope.task_paths or first_match(path, scope.task_paths) is not None


def command_matches(line: str, patterns: Sequence[str]) -> bool:
    """Whether one command line (whitespace collapsed) matches a `commands` glob."""
    flat = " ".join(line.split())
    return any(fnmatch.fnmatchcase(flat, " ".join(p.split())) for p in patterns)


def host_matches(host: str, patterns: Sequence[str]) -> bool:
    """Whether `host` (`name` or `name:port`) matches a `hosts` entry."""
    name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    for pattern in patterns:
        want, _, want_port = pattern.partition(":")
        if want_port and want_port != port:
            continue
        if want.startswith("*."):
            if name.endswith(want[1:]) and name != want[2:]:
                return True
        elif name == want:
            return True
    return False


def rule_lines(scope: ScopeSpec) -> list[str]:
    """The scope as rules a maker's prompt carries (engine.rules): what it may touch, and that
    anything else waits for a human."""
    lines: list[str] = []
    paths = [*scope.paths, *(f"{p} (this task)" for p in scope.task_paths)]
    if paths:
        lines.append("- Write only files matching: " + ", ".join(paths))
    if scope.commands:
        lines.append("- Run only commands matching: " + ", ".join(scope.commands))
    if scope.hosts:
        lines.append("- Reach only these hosts: " + ", ".join(scope.hosts))
    if scope.tools:
        lines.append("- Use only these tools: " + ", ".join(scope.tools))
    sizes = []
    if scope.max_files is not None:
        sizes.append(f"{scope.max_files} files")
    if scope.max_lines is not None:
        sizes.append(f"{scope.max_lines} lines added or removed")
    if sizes:
        lines.append("- Change at most " + " and ".join(sizes))
    if lines:
        lines.append("- Anything outside this scope waits for a human; none of it is committed.")
    return lines
