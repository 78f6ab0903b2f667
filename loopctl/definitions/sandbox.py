"""The sandbox settings a project and an agent file may give (DESIGN §5 invariant 11)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from loopctl.definitions.fields import Table
from loopctl.limits import Limits


class SandboxMode(StrEnum):
    REQUIRED = "required"  # no sandbox, no run: the default
    OFF = "off"  # the user's explicit opt-out: agents run unconfined, said on every run


@dataclass(frozen=True, slots=True)
class AgentSandbox:
    """What one agent may reach beyond the defaults: `[sandbox]` in its agent file."""

    read: tuple[str, ...] = ()  # credential stores (or other hidden paths) it may read
    write: tuple[str, ...] = ()  # folders or files outside its worktree it may write
    network: bool = True  # agents call model APIs: on unless the file says otherwise
    # memory, pids, cpu_time, disk: for the agent's processes and the checks of its turns
    limits: Limits = field(default_factory=Limits)


def read_agent_sandbox(table: Table | None) -> AgentSandbox:
    """`[sandbox]` of an agent file; paths may start with `~` and must be absolute after that."""
    if table is None:
        return AgentSandbox()
    read = _paths(table, "read")
    write = _paths(table, "write")
    network = table.boolean("network", True)
    limits = _limits(table)
    table.finish()
    return AgentSandbox(read=read, write=write, network=network, limits=limits)


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
