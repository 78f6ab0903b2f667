"""The sandbox settings a project and an agent file may give (DESIGN §5 invariant 11)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from loopctl.definitions.fields import Table, describe_type
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
    read = _paths(table, "read")
    write = _paths(table, "write")
    network = _agent_network(table)
    hosts = read_hosts(table, "hosts", "[sandbox] hosts")
    limits = _limits(table)
    table.finish()
    return AgentSandbox(read=read, write=write, network=network, hosts=hosts, limits=limits)


OPEN_WARNING = (
    '{what} runs on the host\'s network, unfiltered (network = "open"): it can reach'
    " any service on this machine and send what it holds anywhere; remove it to confine it"
)


def _agent_network(table: Table) -> NetworkMode:
    """`network = "proxy" | "none" | "open"`; true and false (the old switch) mean proxy and
    none."""
    value = table.raw("network")
    if value is None:
        return NetworkMode.PROXY
    if isinstance(value, bool):
        return NetworkMode.PROXY if value else NetworkMode.NONE
    modes = [mode.value for mode in NetworkMode]
    if not isinstance(value, str) or value not in modes:
        shown = repr(value) if isinstance(value, str) else describe_type(value)
        table.error(
            "network",
            f"{table.where('network')} must be one of {', '.join(modes)}, not {shown}",
        )
        return NetworkMode.PROXY
    mode = NetworkMode(value)
    if mode is NetworkMode.OPEN:
        table.warn("network", OPEN_WARNING.format(what="the agent"))
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


def _limits(table: Table) -> Limits:
    """`memory` and `disk` are sizes ("8GiB"), `pids` a count, `cpu_time` a duration ("10m");
    each may be "unlimited". Absent keys keep loopctl's defaults (loopctl.limits)."""
    default = Limits()

    def off(key: str) -> bool:
        return bool(table.raw(key) == UNLIMITED)

    memory = None if off("memory") else table.size("memory", default.memory)
    disk = None if off("disk") else table.size("disk", default.disk)
    cpu_time = None if off("cpu_time") else table.duration("cpu_time", default.cpu_time)
    if off("pids"):
        pids = None
    elif isinstance(table.raw("pids"), str):
        table.error("pids", f'{table.where("pids")} must be a number of processes or "unlimited"')
        pids = default.pids
    else:
        pids = table.integer("pids", default.pids, minimum=1)
    return Limits(memory=memory, pids=pids, cpu_time=cpu_time, disk=disk)


def read_project_sandbox(table: Table | None) -> SandboxMode:
    """`[sandbox]` of .loop/config.toml: only `mode` lives there."""
    if table is None:
        return SandboxMode.REQUIRED
    text = table.string(
        "mode", SandboxMode.REQUIRED.value, choices=[mode.value for mode in SandboxMode]
    )
    if text == SandboxMode.OFF.value:
        table.warn(
            "mode",
            'agents run unconfined ([sandbox] mode = "off"): they can read your credentials and'
            " other processes and write outside their worktree; remove it to confine them",
        )
    table.finish()
    return SandboxMode(text) if text else SandboxMode.REQUIRED


def _paths(table: Table, key: str) -> tuple[str, ...]:
    paths = table.string_list(key)
    for path in paths:
        if not (path.startswith("/") or path == "~" or path.startswith("~/")):
            table.error(
                key,
                f"[sandbox] {key} names {path!r}: give an absolute path or one starting with ~/",
            )
    return paths
