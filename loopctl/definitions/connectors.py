"""MCP connectors: the `[connectors.NAME]` tables of .loop/config.toml.

A connector is an MCP server an agent may use: a program loopctl's agent CLI starts over stdio
(`command`), or a streamable-HTTP endpoint (`url`). The file names the variables the *server*
may see (`env_allow`, `headers_env`); their values are read from loopctl's environment when an
agent turn starts and go to the server alone, never to the agent (see loopctl.backends.connectors).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from loopctl.definitions.fields import Table
from loopctl.definitions.schema import Field, command, duration, read, string, strings, subtable

# Codex takes the name as a TOML bare key (`-c mcp_servers.NAME.command=…`), and loopctl's own
# agent exposes tools as NAME__tool under the model APIs' [A-Za-z0-9_-]{1,64} rule.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
DEFAULT_TOOL_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Connector:
    """One MCP server: how to reach it and which variables of loopctl's environment it gets."""

    name: str
    command: tuple[str, ...] | None = None  # stdio: the server's argv
    url: str | None = None  # streamable HTTP endpoint
    env_allow: tuple[str, ...] = ()  # stdio: variables passed to the server process
    headers_env: tuple[tuple[str, str], ...] = ()  # HTTP: (header, variable holding its value)
    timeout_s: float = DEFAULT_TOOL_TIMEOUT_S  # one tool call, for loopctl's own agent

    @property
    def variables(self) -> tuple[str, ...]:
        """Every variable whose value this server receives."""
        return (*self.env_allow, *(variable for _, variable in self.headers_env))


def server_env(connector: Connector, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values of a stdio connector's `env_allow` that are set in `source` (loopctl's env)."""
    origin = os.environ if source is None else source
    return {name: origin[name] for name in connector.env_allow if origin.get(name)}


def server_headers(connector: Connector, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers of an HTTP connector, from the variables `headers_env` names."""
    origin = os.environ if source is None else source
    return {header: origin[name] for header, name in connector.headers_env if origin.get(name)}


def secret_values(
    connectors: tuple[Connector, ...], source: Mapping[str, str] | None = None
) -> list[str]:
    """Every value a connector receives: to be redacted from whatever loopctl writes."""
    values: list[str] = []
    for connector in connectors:
        values += server_env(connector, source).values()
        values += server_headers(connector, source).values()
    return [value for value in values if value]


def read_connectors(table: Table | None) -> tuple[Connector, ...]:
    """Every `[connectors.NAME]` of the config; problems are reported on `table`'s file."""
    if table is None:
        return ()
    found: list[Connector] = []
    for name in list(table.data):
        entry = table.table(name)
        if entry is None:
            continue
        named = _NAME.match(name) is not None
        if not named:
            table.error(
                name,
                f"connector name {name!r} must be 1-32 letters, digits, '-' or '_',"
                " starting with a letter or digit",
            )
        connector = _read_one(name, entry)
        entry.finish()
        if connector is not None and named and not entry.failed:
            found.append(connector)
    return tuple(found)


# The keys of `[connectors.NAME]`, in the order they are read.
CONNECTOR_FIELDS = (
    Field("command", command),
    Field("url", string),
    Field("env_allow", strings, single=False),
    Field("headers_env", subtable),  # header name -> variable holding its value
    Field("timeout", duration, DEFAULT_TOOL_TIMEOUT_S, attr="timeout_s"),
)


def _read_one(name: str, entry: Table) -> Connector | None:
    values = read(entry, CONNECTOR_FIELDS)
    command_, url, headers = values["command"], values["url"], values.pop("headers_env")
    where = f"[connectors.{name}]"
    if (command_ is None) == (url is None):
        if not entry.failed:
            entry.error(
                None,
                f"{where} needs either 'command' (a stdio MCP server, as an argv) or 'url'"
                " (a streamable HTTP endpoint), not both or neither",
            )
        return None
    if url is not None and not re.match(r"^https?://[^\s/]+", url):
        entry.error("url", f"'url' in {where} must be an http:// or https:// URL, not {url!r}")
    if url is not None and values["env_allow"]:
        entry.error(
            "env_allow",
            f"'env_allow' in {where} passes variables to a server loopctl starts; an HTTP"
            " connector gets credentials as headers: use headers_env = {Authorization ="
            ' "MY_TOKEN"}',
        )
    for allowed in values["env_allow"]:
        if not _VARIABLE.match(allowed):
            entry.error("env_allow", f"'env_allow' in {where} must name variables, not {allowed!r}")
    pairs = _read_headers(headers, where, stdio=command_ is not None)
    if entry.failed or (headers is not None and headers.failed):
        return None
    return Connector(name=name, headers_env=pairs, **values)


def _read_headers(headers: Table | None, where: str, *, stdio: bool) -> tuple[tuple[str, str], ...]:
    """`headers_env`: (header, variable) pairs; errors are reported on `headers`."""
    if headers is None:
        return ()
    if stdio:
        headers.error(None, f"'headers_env' in {where} is for a 'url' connector")
    pairs: list[tuple[str, str]] = []
    for header in list(headers.data):
        variable = headers.string(header, required=True)
        if not _HEADER.match(header):
            headers.error(header, f"{header!r} is not a valid HTTP header name")
        elif variable is not None and not _VARIABLE.match(variable):
            headers.error(
                header,
                f"headers_env.{header} must name the variable holding the value"
                f' (like "MY_TOKEN"), not {variable!r}: the value itself never goes in a file',
            )
        elif variable is not None:
            pairs.append((header, variable))
    headers.finish()
    return tuple(pairs)
