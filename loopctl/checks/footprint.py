"""An attempt's footprint and the steps of it outside the declared scope (issue 31, item 1).

The footprint is what the attempt did, measured by loopctl, never taken from the agent's
account: the files the diff changed (base to the checked snapshot, a rename under both names)
and the links among them, the files, commands and tools the CLI's event stream shows, the hosts
the egress proxy saw asked for, and the diff's size. `outside` holds it against a
`definitions.scope.ScopeSpec` and names each step the scope does not cover. Pure functions.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loopctl.definitions.scope import ScopeSpec, command_matches, host_matches, path_in


@dataclass(frozen=True, slots=True)
class Footprint:
    """What one attempt touched."""

    files: tuple[str, ...] = ()  # changed in the diff (renames under both names)
    written: tuple[str, ...] = ()  # written according to the stream (deleted since, too)
    links: tuple[tuple[str, str], ...] = ()  # symlinks in the diff: (path, where it points)
    commands: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()  # host:port the proxy was asked for (refused ones too)
    added: int = 0
    removed: int = 0
    stream: bool = False  # the CLI's event stream was read (else: diff and proxy only)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.files, *self.written)))

    @property
    def lines(self) -> int:
        return self.added + self.removed

    def to_json(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "written": list(self.written),
            "links": [list(link) for link in self.links],
            "commands": list(self.commands),
            "tools": list(self.tools),
            "hosts": list(self.hosts),
            "added": self.added,
            "removed": self.removed,
            "stream": self.stream,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Footprint:
        def strings(key: str) -> tuple[str, ...]:
            value = data.get(key)
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        links = data.get("links")
        return cls(
            files=strings("files"),
            written=strings("written"),
            links=tuple(
                (str(pair[0]), str(pair[1]))
                for pair in (links if isinstance(links, list) else ())
                if isinstance(pair, list) and len(pair) == 2
            ),
            commands=strings("commands"),
            tools=strings("tools"),
            hosts=strings("hosts"),
            added=_count(data.get("added")),
            removed=_count(data.get("removed")),
            stream=data.get("stream") is True,
        )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True, slots=True)
class Excursion:
    """One step outside the scope: its kind (path, link, command, host, tool, size) and what."""

    kind: str
    what: str

    def describe(self) -> str:
        return f"{self.kind} {self.what}"

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "what": self.what}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Excursion:
        return cls(str(data.get("kind") or "?"), str(data.get("what") or ""))


def split_commands(line: str) -> list[str]:
    """The commands one command line runs (`a && b | c` is three), split where the shell would
    (`&&`, `||`, `;`, `|`, a newline) outside quotes; empty parts dropped."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    i = 0
    while i < len(line):
        char = line[i]
        if quote:
            current.append(char)
            if char == "\\" and quote == '"' and i + 1 < len(line):
                current.append(line[i + 1])
                i += 1
            elif char == quote:
                quote = ""
        elif char == "\\" and i + 1 < len(line):
            current += [char, line[i + 1]]
            i += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif line.startswith(("&&", "||"), i) or char in ";|\n":
            parts.append("".join(current))
            current = []
            i += 1 if line.startswith(("&&", "||"), i) else 0
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def outside(
    footprint: Footprint, scope: ScopeSpec, model_hosts: Iterable[str] = ()
) -> tuple[Excursion, ...]:
    """Every step of `footprint` that `scope` does not cover, in a stable order. The agent's
    own model (`model_hosts`) is always reachable: it is how the agent works at all."""
    found: list[Excursion] = []
    if scope.paths or scope.task_paths:
        found += [Excursion("path", p) for p in footprint.paths if not path_in(p, scope)]
        for path, target in footprint.links:
            if path_in(path, scope) and not path_in(target, scope):
                found.append(Excursion("link", f"{path} -> {target}"))
    if scope.commands:
        for line in footprint.commands:
            found += [
                Excursion("command", part)
                for part in split_commands(line)
                if not command_matches(part, scope.commands)
            ]
    if scope.tools:
        found += [
            Excursion("tool", tool)
            for tool in footprint.tools
            if not any(fnmatch.fnmatchcase(tool, pattern) for pattern in scope.tools)
        ]
    if scope.hosts:
        own = set(model_hosts)
        found += [
            Excursion("host", host)
            for host in footprint.hosts
            if host not in own and not host_matches(host, scope.hosts)
        ]
    found += _size(footprint, scope)
    return tuple(dict.fromkeys(found))


def _size(footprint: Footprint, scope: ScopeSpec) -> list[Excursion]:
    over: list[Excursion] = []
    if scope.max_files is not None and len(footprint.files) > scope.max_files:
        changed = f"{len(footprint.files)} files changed"
        over.append(Excursion("size", f"{changed} (max_files = {scope.max_files})"))
    if scope.max_lines is not None and footprint.lines > scope.max_lines:
        over.append(
            Excursion("size", f"{footprint.lines} lines changed (max_lines = {scope.max_lines})")
        )
    return over


def summary(found: Sequence[Excursion], limit: int = 6) -> str:
    """The steps, as one line an inbox item and a task's reason carry."""
    shown = [e.describe() for e in found[:limit]]
    more = f" and {len(found) - limit} more" if len(found) > limit else ""
    return "; ".join(shown) + more
