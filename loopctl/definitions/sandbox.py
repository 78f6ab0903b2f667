"""The sandbox settings a project and an agent file may give (invariant 11, docs/INVARIANTS.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from loopctl.definitions.fields import Table, describe_type
from loopctl.definitions.schema import (
    Field,
    Kind,
    duration,
    integer,
    read,
    read_field,
    size,
    string,
    strings,
)
from loopctl.egress import HostPort, NetworkMode
from loopctl.limits import Limits


class SandboxMode(StrEnum):
    REQUIRED = "required"  # no sandbox, no run: the default
    OFF = "off"  # the user's explicit opt-out: agents run unconfined, said on every run


@dataclass(frozen=True, slots=True)
class AgentSandbox:
    """What one agent may reach beyond the defaults: `[sandbox]` in its agent file."""

    read: tuple[str, ...] = ()  # credential stores (or other hidden paths) it may read
    write: tuple[str, ...] = ()  # folders or files outside its worktree it may write
    # proxy: its own network namespace, out only to its model and `hosts` (issue 25)
    network: NetworkMode = NetworkMode.PROXY
    hosts: tuple[HostPort, ...] = ()  # reachable beyond the backend's model endpoints
    # memory, pids, cpu_time, disk: for the agent's processes and the checks of its turns
    limits: Limits = field(default_factory=Limits)


def read_agent_sandbox(table: Table | None) -> AgentSandbox:
    """`[sandbox]` of an agent file; paths may start with `~` and must be absolute after that."""
    if table is None:
        return AgentSandbox()
    values = read(table, AGENT_SANDBOX_FIELDS)
    table.finish()
    limits = Limits(**{key: values.pop(key) for key in LIMIT_KEYS})
    return AgentSandbox(**values, limits=limits)


OPEN_WARNING = (
    '{what} runs on the host\'s network, unfiltered (network = "open"): it can reach'
    " any service on this machine and send what it holds anywhere; remove it to confine it"
)


def _agent_network(table: Table, field: Field, default: NetworkMode) -> NetworkMode:
    """`network = "proxy" | "none" | "open"`; true and false (the old switch) mean proxy and
    none."""
    value = table.raw(field.key)
    if value is None:
        return default
    if isinstance(value, bool):
        return NetworkMode.PROXY if value else NetworkMode.NONE
    modes = [mode.value for mode in NetworkMode]
    if not isinstance(value, str) or value not in modes:
        shown = repr(value) if isinstance(value, str) else describe_type(value)
        table.error(
            field.key,
            f"{table.where(field.key)} must be one of {', '.join(modes)}, not {shown}",
        )
        return default
    mode = NetworkMode(value)
    if mode is NetworkMode.OPEN:
        table.warn(field.key, OPEN_WARNING.format(what="the agent"))
    return mode


# A DNS name (letters, digits, '-', '.', '_') or an IP literal (IPv6 has ':').
_HOST_NAME = re.compile(r"^(?:[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?|[0-9a-f:.]+)$")


def read_hosts(table: Table, key: str, label: str) -> tuple[HostPort, ...]:
    """A list of `host` or `host:port` entries (443 when no port is given)."""
    found: list[HostPort] = []
    for text in table.string_list(key, allow_single=False):
        try:
            target = HostPort.parse(text)
            if not _HOST_NAME.match(target.host):
                raise ValueError(f"{target.host!r} is not a host name or an IP address")
        except ValueError as error:
            table.error(key, f"{label} names {text!r}: {error}; write host or host:port")
            continue
        if target not in found:
            found.append(target)
    return tuple(found)


def read_checker_network(
    table: Table, default: tuple[NetworkMode, tuple[HostPort, ...]] = (NetworkMode.NONE, ())
) -> tuple[NetworkMode, tuple[HostPort, ...]]:
    """`[checker] network`: "none" (the default: checks run the agent's code), "open", or a
    list of hosts the checks may reach through the proxy; `default` when absent."""
    value = table.raw("network")
    if value is None:
        return default
    if value == NetworkMode.NONE.value:
        return NetworkMode.NONE, ()
    if value == NetworkMode.OPEN.value:
        table.warn("network", OPEN_WARNING.format(what="every check"))
        return NetworkMode.OPEN, ()
    if isinstance(value, list):
        return NetworkMode.PROXY, read_hosts(table, "network", "[checker] network")
    shown = repr(value) if isinstance(value, str) else describe_type(value)
    table.error(
        "network",
        f'{table.where("network")} must be "none", "open" or a list of hosts'
        f' (["pypi.org", "files.pythonhosted.org"]), not {shown}',
    )
    return NetworkMode.NONE, ()


def checker_network(
    table: Table, field: Field, default: tuple[NetworkMode, tuple[HostPort, ...]]
) -> tuple[NetworkMode, tuple[HostPort, ...]]:
    """`read_checker_network` as a field kind (key `network`)."""
    return read_checker_network(table, default)


def agent_sandbox(table: Table, field: Field, default: object) -> AgentSandbox:
    """`read_agent_sandbox` of the sub-table `field.key`, as a field kind."""
    return read_agent_sandbox(table.table(field.key))


def secret_hosts(table: Table, field: Field, default: object) -> tuple[SecretHosts, ...]:
    """`read_secret_hosts` of the sub-table `field.key`, as a field kind."""
    return read_secret_hosts(table.table(field.key))


REAL = "real"  # `[env.secrets] NAME = "real"`: lent unchanged, the explicit opt-out


@dataclass(frozen=True, slots=True)
class SecretHosts:
    """`[env.secrets] NAME = [...]` of an agent file: the hosts a lent secret is for (its real
    value goes only into requests to them), or `real`: the value itself is lent."""

    name: str
    hosts: tuple[HostPort, ...] = ()
    real: bool = False


def read_secret_hosts(table: Table | None) -> tuple[SecretHosts, ...]:
    """`[env.secrets]`: each key a variable name, each value a list of hosts or "real"."""
    if table is None:
        return ()
    found: list[SecretHosts] = []
    for name in list(table.data):
        value = table.raw(name)
        if value == REAL:
            table.warn(
                name,
                f'{name} is lent unchanged ({name} = "real"): the agent holds the real'
                " value and can send it to any host it reaches; give the hosts it is for"
                " instead",
            )
            found.append(SecretHosts(name, real=True))
        elif isinstance(value, list):
            found.append(SecretHosts(name, read_hosts(table, name, f"[env.secrets] {name}")))
        else:
            shown = repr(value) if isinstance(value, str) else describe_type(value)
            table.error(
                name,
                f'{table.where(name)} must be a list of hosts (["api.example.com"]) or'
                f' "real", not {shown}',
            )
    table.finish()
    return tuple(found)


UNLIMITED = "unlimited"


def _or_unlimited(kind: Kind) -> Kind:
    """A limit of `kind` that may also be "unlimited" (None)."""

    def read_limit(table: Table, field: Field, default: Any) -> Any:
        if table.raw(field.key) == UNLIMITED:
            return None
        return kind(table, field, default)

    return read_limit


def _pids(table: Table, field: Field, default: int | None) -> int | None:
    if isinstance(table.raw(field.key), str):
        table.error(
            field.key, f'{table.where(field.key)} must be a number of processes or "unlimited"'
        )
        return default
    return integer(table, field, default)


def _hosts(table: Table, field: Field, default: object) -> tuple[HostPort, ...]:
    return read_hosts(table, field.key, f"[sandbox] {field.key}")


def _absolute(table: Table, key: str, paths: tuple[str, ...]) -> None:
    for path in paths:
        if not (path.startswith("/") or path == "~" or path.startswith("~/")):
            table.error(
                key,
                f"[sandbox] {key} names {path!r}: give an absolute path or one starting with ~/",
            )


# `[sandbox]` of an agent file, in the order it is read. `memory` and `disk` are sizes ("8GiB"),
# `pids` a count, `cpu_time` a duration ("10m"); each may be "unlimited". Absent keys keep
# loopctl's defaults (loopctl.limits).
LIMIT_KEYS = ("memory", "disk", "cpu_time", "pids")
AGENT_SANDBOX_FIELDS = (
    Field("read", strings, check=_absolute),
    Field("write", strings, check=_absolute),
    Field("network", _agent_network, NetworkMode.PROXY),
    Field("hosts", _hosts),
    Field("memory", _or_unlimited(size), Limits().memory),
    Field("disk", _or_unlimited(size), Limits().disk),
    Field("cpu_time", _or_unlimited(duration), Limits().cpu_time),
    Field("pids", _or_unlimited(_pids), Limits().pids, minimum=1),
)
PROJECT_SANDBOX_FIELD = Field(
    "mode", string, SandboxMode.REQUIRED.value, choices=tuple(mode.value for mode in SandboxMode)
)


def read_project_sandbox(table: Table | None) -> SandboxMode:
    """`[sandbox]` of .loop/config.toml: only `mode` lives there."""
    if table is None:
        return SandboxMode.REQUIRED
    text = read_field(table, PROJECT_SANDBOX_FIELD, PROJECT_SANDBOX_FIELD.default)
    if text == SandboxMode.OFF.value:
        table.warn(
            "mode",
            'agents run unconfined ([sandbox] mode = "off"): they can read your credentials and'
            " other processes and write outside their worktree; remove it to confine them",
        )
    table.finish()
    return SandboxMode(text) if text else SandboxMode.REQUIRED
