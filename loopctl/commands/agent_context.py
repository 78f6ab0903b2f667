"""Whether this process runs on an agent's behalf: humans' commands refuse to run there.

Approving, rejecting, retrying, answering or dismissing an inbox item, syncing loop state and
starting or stopping `loopctl up` are a human's decisions (invariant 13, docs/INVARIANTS.md).
loopctl marks every agent it starts (maker, checker, judge) with `LOOPCTL_ROLE`. Check commands
are not marked: a project's own test suite, run as a loop's check, may exercise these commands
(the sandbox keeps a check from writing `.loop/`). The agent can unset that variable for its own
children, but not in the environment its ancestors were started with, which the kernel keeps in
/proc/PID/environ; so we look at our own environment and at every ancestor's.

An agent that replaces itself (`exec env -u LOOPCTL_ROLE loopctl …`) keeps its pid, its process
group and its session while shedding the variable. The event log records the pid of every agent
loopctl starts, so a process whose own pid, an ancestor's, or whose group or session leader is an
agent still running is refused as well.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from loopctl.errors import LoopctlError
from loopctl.journal.events import Event, EventLog, EventType
from loopctl.journal.schema import AgentStarted, agent_finished, read

ROLE_VARIABLE = "LOOPCTL_ROLE"
_MARK = ROLE_VARIABLE.encode() + b"="
# A loop in the parent links (a broken /proc) must not hang the check.
_MAX_ANCESTORS = 4096
# A logged agent pid names the process that started within this window before its
# `agent_started` event (exec keeps a start time); any other process is a reused pid.
_STARTED_BEFORE_EVENT_S = 30.0
_CLOCK_SLACK_S = 2.0


class InsideAgent(LoopctlError):
    """A human's command was started from inside an agent's environment (exit 1)."""


def _stat(pid: int, proc: Path) -> tuple[int, int, int] | None:
    """(parent, process group, session) of `pid`, from /proc/PID/stat."""
    try:
        stat = (proc / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # The command name sits in parentheses and may itself hold spaces or ")": skip past the last.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[2]), int(fields[3])
    except (IndexError, ValueError):
        return None


def _parent(pid: int, proc: Path) -> int | None:
    found = _stat(pid, proc)
    return found[0] if found else None


def _marked(pid: int, proc: Path) -> bool:
    try:
        environ = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return False  # another user's process, or gone: it tells us nothing
    return any(entry.startswith(_MARK) for entry in environ.split(b"\0"))


def ancestors(pid: int | None = None, proc: Path = Path("/proc")) -> list[int]:
    """The parent, grandparent, … of `pid` (default: this process), up to pid 1."""
    found: list[int] = []
    current = os.getpid() if pid is None else pid
    while len(found) < _MAX_ANCESTORS:
        parent = _parent(current, proc)
        if parent is None or parent <= 0 or parent in found:
            break
        found.append(parent)
        current = parent
    return found


def running_agents(events: Iterable[Event]) -> dict[int, float]:
    """The agents the log says loopctl started and that have not finished: pid -> start time."""
    started: dict[tuple[object, ...], tuple[int, float]] = {}
    for event in events:
        if event.type == EventType.AGENT_STARTED:
            turn = read(AgentStarted, event)
            key = (event.run, event.task, turn.attempt, turn.role)
            if turn.pid is not None and turn.pid > 1:
                started[key] = (turn.pid, event.time.timestamp())
        elif event.type == EventType.AGENT_FINISHED:
            ended = agent_finished(event)
            started.pop((event.run, event.task, ended.attempt, ended.role), None)
        elif event.type == EventType.TICK_FINISHED:
            started = {k: v for k, v in started.items() if k[0] != event.run}
    return dict(started.values())


def _started_at(pid: int, proc: Path) -> float | None:
    """When `pid` started (epoch seconds), or None when no such process is visible."""
    try:
        stat = (proc / str(pid) / "stat").read_bytes()
        boot = next(
            float(line.split()[1])
            for line in (proc / "stat").read_bytes().splitlines()
            if line.startswith(b"btime ")
        )
        ticks = int(stat[stat.rfind(b")") + 2 :].split()[19])
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _is_that_agent(pid: int, logged_at: float, proc: Path) -> bool:
    started = _started_at(pid, proc)
    if started is None:
        # A group or session whose leader is gone: an agent's orphans still carry its id.
        return True
    return logged_at - _STARTED_BEFORE_EVENT_S <= started <= logged_at + _CLOCK_SLACK_S


def agent_marker(
    environ: Mapping[str, str] | None = None,
    pid: int | None = None,
    proc: Path = Path("/proc"),
    agents: Mapping[int, float] | None = None,
) -> str | None:
    """What shows this process runs for an agent, or None when nothing does.

    `agents`: agents the log says are running, pid -> when started (see `running_agents`).
    """
    env = os.environ if environ is None else environ
    role = env.get(ROLE_VARIABLE)
    if role is not None:
        return f"{ROLE_VARIABLE}={role[:40]!r} is set"
    me = os.getpid() if pid is None else pid
    line = ancestors(me, proc)
    for ancestor in line:
        if _marked(ancestor, proc):
            return f"its ancestor process {ancestor} was started by loopctl for an agent"
    if not agents:
        return None
    for member in (me, *line):
        stat = _stat(member, proc)
        related = {member, *(stat[1:] if stat else ())}
        for candidate in sorted(related & agents.keys()):
            if _is_that_agent(candidate, agents[candidate], proc):
                return f"process {candidate} is an agent loopctl started and it is still running"
    return None


def refuse_inside_agent(command: str, events_file: Path | None = None) -> None:
    """Raise InsideAgent when `command` (a human's decision) runs on an agent's behalf.

    `events_file`: the project's event log, whose running agents are looked for too.
    """
    agents: dict[int, float] = {}
    if events_file is not None:
        agents = running_agents(EventLog(events_file).read())
    marker = agent_marker(agents=agents)
    if marker is not None:
        raise InsideAgent(
            f"`loopctl {command}` is a human's command and refuses to run inside an agent's"
            f" environment ({marker}); run it from your own terminal"
        )
