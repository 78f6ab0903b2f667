"""Humans' commands refuse inside an agent's environment: the one-line bugs of
loopctl/commands/agent_context.py that would let an agent's process through (issue 27).

The real-process tests stand in for the runner the way it starts an agent: a process in its own
session (`start_new_session`, as loopctl.process starts every agent) whose pid is logged as a
running agent of the project. That "agent" then hides from the check the ways a process can (it
exits and leaves an orphan behind, an orphan moves to its own process group, a child starts its
own session, a program name that mimics the fields of /proc/PID/stat), and the child runs a real
`loopctl inbox approve` against a real approval waiting in the project. Each test names the
mutants it kills.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.delivery import action, ledger_entries
from support.journal import events
from support.repos import FAST_CHECK, PY, make_project, toml_value, write_config, write_loop

from loopctl.commands.agent_context import agent_marker, running_agents
from loopctl.journal.events import EventLog
from loopctl.paths import ProjectPaths

REFUSAL = "is a human's command and refuses to run inside an agent's environment"
RUN = "20261205T070000-a9e1"


def pending_approval(repo: Path, ledger: Path) -> str:
    """The calc project (sandbox off) whose delivery, a custom action writing to `ledger`,
    waits for a human; returns the approval's id."""
    make_project(repo, "fixer.py")
    allow = '\n[env]\nallow = ["PYTHONPATH"]\n' if os.environ.get("PYTHONPATH") else ""
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n'
        f'"tests green" = {toml_value(FAST_CHECK)}\n\n[sandbox]\nmode = "off"\n' + allow,
    )
    write_loop(
        repo,
        "ship",
        'goal = "tests green"\nprompt = "fix add"\n\n[deliver]\n'
        f'actions = ["commit", {action(ledger, "deploy")}]\n',
    )
    assert_clean_exit(run_loopctl(repo, "run", "ship", "--once"), 0)
    (opened,) = events(repo, "inbox_opened")
    return str(opened.data["id"])


def log_agent(repo: Path, pid: int) -> None:
    """What the runner logs right after it started an agent (no `agent_finished` follows)."""
    EventLog(ProjectPaths(repo).events_file).append(
        "agent_started",
        run=RUN,
        loop="ship",
        task="main",
        data={"attempt": 1, "role": "maker", "agent": "maker", "pid": pid},
    )


def unmarked_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_ROLE")}


# The stand-in agent. argv: RECORD REPO HOW ITEM [PROGRAM]. It waits for its pid to be logged
# (a line on stdin), then:
#   orphan-after-exit: forks a child that waits until the agent has exited, then runs loopctl
#     (the agent's session is the child's only tie to it, and the agent is gone);
#   own-group: double-forks an orphan that moves to its own process group (setpgid) and runs
#     loopctl as PROGRAM (a symlink to python; its name can mimic /proc/PID/stat fields); the
#     agent waits for it;
#   own-session: starts a child in a session of its own (setsid) that runs loopctl, and waits.
# The child's result is one JSON line in RECORD.
AGENT = r"""
import json, os, subprocess, sys, time

record, repo, how, item, *rest = sys.argv[1:]
program = rest[0] if rest else sys.executable
sys.stdin.readline()
agent = os.getpid()
clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_ROLE")}

def approve(**kwargs):
    done = subprocess.run(
        [program, "-m", "loopctl", "inbox", "approve", item], cwd=repo, env=clean,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240, **kwargs
    )
    return {"code": done.returncode, "stderr": done.stderr, "parent": os.getppid(),
            "group": os.getpgid(0), "session": os.getsid(0), "agent": agent}

def write(entry):
    # Whole or not at all: the test reads the record as soon as it exists.
    with open(record + ".part", "w", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")
    os.replace(record + ".part", record)

def wait_for_orphaning(parent):
    # Polled until the parent is gone; the bound only ends a broken machine's wait.
    deadline = time.monotonic() + 240
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.01)

if how == "orphan-after-exit":
    if os.fork() == 0:
        wait_for_orphaning(agent)
        write(approve())
        os._exit(0)
    os._exit(0)
elif how == "own-group":
    ended_r, ended_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(ended_r)
        middle_pid = os.getpid()
        if os.fork() == 0:
            wait_for_orphaning(middle_pid)
            os.setpgid(0, 0)
            entry = approve()
            entry["orphaned"] = entry["parent"] != middle_pid
            write(entry)
            os._exit(0)
        os._exit(0)
    os.close(ended_w)
    os.waitpid(middle, 0)
    os.read(ended_r, 1)  # end of file once the orphan has finished
elif how == "own-session":
    write(approve(start_new_session=True))
"""


def start_agent(repo: Path, record: Path, how: str, item: str, *program: str) -> int:
    """Run the stand-in agent as loopctl runs one and log it as running; returns its exit."""
    # A python started through a symlink of another name finds no virtual environment: it is
    # given this process's import path (a mutant's copy of loopctl first, when one is tested).
    env = {**unmarked_env(), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    agent = subprocess.Popen(
        [PY, "-c", AGENT, str(record), str(repo), how, item, *program], cwd=repo,
        env=env, stdin=subprocess.PIPE, start_new_session=True, text=True,
    )  # fmt: skip
    assert agent.stdin is not None
    log_agent(repo, agent.pid)
    agent.stdin.write("logged\n")
    agent.stdin.close()
    return agent.wait(timeout=300)


def tried(record: Path) -> dict[str, object]:
    """The child's one try, once it is recorded (an orphan may finish after its agent)."""
    deadline = time.monotonic() + 300  # a safety net: the orphan writes as soon as loopctl ends
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (entry,) = [json.loads(line) for line in record.read_text().splitlines()]
    return dict(entry)


def assert_refused_and_nothing_delivered(
    repo: Path, ledger: Path, item: str, entry: dict[str, object]
) -> None:
    assert entry["code"] == 1, entry
    assert REFUSAL in str(entry["stderr"]), entry
    assert "Traceback" not in str(entry["stderr"]), entry
    if "agent" in entry:  # refused for the logged agent it hides from, not for another reason
        assert f"process {entry['agent']} is an agent loopctl started" in str(entry["stderr"])
    assert events(repo, "approved") == []
    assert ledger_entries(ledger) == []
    # The refusal was the guard's doing: the same command from a human's shell works.
    human = run_loopctl(repo, "inbox", "approve", item, env=unmarked_env())
    assert_clean_exit(human, 0)
    assert [entry["name"] for entry in ledger_entries(ledger)] == ["deploy"]


def test_the_role_variable_alone_refuses(repo: Path, tmp_path: Path) -> None:
    """Kills `if role is not None:` turned off and the variable's name changed or emptied: the
    command's own environment carries LOOPCTL_ROLE (no ancestor is marked, the log knows no
    running agent)."""
    ledger = tmp_path / "ledger.jsonl"
    item = pending_approval(repo, ledger)
    marked = {**unmarked_env(), "LOOPCTL_ROLE": "checker"}
    done = run_loopctl(repo, "inbox", "approve", item, env=marked)
    assert done.returncode == 1, done.stdout + done.stderr
    assert REFUSAL in done.stderr
    assert "LOOPCTL_ROLE='checker' is set" in done.stderr
    entry = {"code": done.returncode, "stderr": done.stderr}
    assert_refused_and_nothing_delivered(repo, ledger, item, entry)


# A human's shell-like parent that runs loopctl, with a variable whose name only begins with
# the mark's.
MIDDLE = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def test_a_variable_that_only_begins_with_the_marks_name_is_no_mark(
    repo: Path, tmp_path: Path
) -> None:
    """Kills the mark's `=` emptied: an ancestor's `LOOPCTL_ROLEPLAY=…` (any variable that
    merely begins with LOOPCTL_ROLE) would refuse a human's own command."""
    ledger = tmp_path / "ledger.jsonl"
    item = pending_approval(repo, ledger)
    env = {**unmarked_env(), "LOOPCTL_ROLEPLAY": "a human's own variable"}
    done = subprocess.run(
        [PY, "-c", MIDDLE, PY, "-m", "loopctl", "inbox", "approve", item], cwd=repo, env=env,
        capture_output=True, text=True, timeout=240, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert [entry["name"] for entry in ledger_entries(ledger)] == ["deploy"]


def test_an_orphan_of_an_agent_that_already_exited_is_refused(repo: Path, tmp_path: Path) -> None:
    """Kills `if started is None: return True` turned off and OSError dropped from
    `_started_at`'s except: the logged agent is gone (no /proc entry) while its orphan, in the
    agent's session, runs the command."""
    ledger, record = tmp_path / "ledger.jsonl", tmp_path / "tries.jsonl"
    item = pending_approval(repo, ledger)
    assert start_agent(repo, record, "orphan-after-exit", item) == 0
    entry = tried(record)
    assert entry["session"] == entry["agent"], entry
    assert entry["parent"] != entry["agent"], entry
    assert_refused_and_nothing_delivered(repo, ledger, item, entry)


@pytest.mark.parametrize("name", ["python3", ") R 1 1 1 1 1"])
def test_an_orphan_in_its_own_process_group_is_refused_by_its_session(
    repo: Path, tmp_path: Path, name: str
) -> None:
    """Kills the session dropped from `_stat`'s (parent, group, session): the orphan left the
    agent's process group, its parent is no agent, only its session is the agent's. With the
    program named `) R 1 1 1 1 1` (what /proc/PID/stat shows in parentheses), it also kills
    parsing the stat line from the first `)` instead of the last: that name would make its
    parent, group and session read as 1."""
    ledger, record = tmp_path / "ledger.jsonl", tmp_path / "tries.jsonl"
    item = pending_approval(repo, ledger)
    program = tmp_path / name
    program.symlink_to(sys.executable)
    assert start_agent(repo, record, "own-group", item, str(program)) == 0
    entry = tried(record)
    assert entry["orphaned"] is True, entry
    assert entry["group"] != entry["agent"], entry
    assert entry["session"] == entry["agent"], entry
    assert_refused_and_nothing_delivered(repo, ledger, item, entry)


def test_a_child_in_a_session_of_its_own_is_refused_by_its_parent(
    repo: Path, tmp_path: Path
) -> None:
    """Kills the ancestors dropped from the processes matched against running agents: the
    child called setsid (its own group and session) and carries no mark; only its parent, the
    agent, whose environment has no LOOPCTL_ROLE either, ties it to the agent."""
    ledger, record = tmp_path / "ledger.jsonl", tmp_path / "tries.jsonl"
    item = pending_approval(repo, ledger)
    assert start_agent(repo, record, "own-session", item) == 0
    entry = tried(record)
    assert_refused_and_nothing_delivered(repo, ledger, item, entry)


# --- the running agents the log names --------------------------------------------------------


def _started(
    log: EventLog, pid: int, *, run: str = RUN, task: str = "main", **data: object
) -> None:
    log.append(
        "agent_started",
        run=run,
        loop="ship",
        task=task,
        data={"attempt": 1, "role": "maker", "pid": pid, **data},
    )


def _finished(log: EventLog, *, run: str = RUN, task: str = "main", **data: object) -> None:
    log.append(
        "agent_finished",
        run=run,
        loop="ship",
        task=task,
        data={"attempt": 1, "role": "maker", "exit_code": 0, **data},
    )


def test_an_agent_that_finished_is_no_longer_running(tmp_path: Path) -> None:
    """Kills the `agent_finished` branch turned off and its pop dropped."""
    log = EventLog(tmp_path / "events.jsonl")
    _started(log, 4242)
    assert set(running_agents(log.read())) == {4242}
    _finished(log)
    assert running_agents(log.read()) == {}


def test_an_ended_tick_ends_its_own_runs_agents_only(tmp_path: Path) -> None:
    """Kills the `tick_finished` branch turned off."""
    log = EventLog(tmp_path / "events.jsonl")
    _started(log, 4242)
    _started(log, 4343, run="20261205T070100-b0b0")
    log.append("tick_finished", run=RUN, loop="ship")
    assert set(running_agents(log.read())) == {4343}


@pytest.mark.parametrize(
    ("other", "why"),
    [
        ({"run": "20261205T070100-b0b0"}, "another run"),
        ({"task": "other"}, "another task of the same run"),
        ({"attempt": 2}, "another attempt"),
        ({"role": "checker"}, "the checker of the same attempt"),
    ],
)
def test_another_agent_finishing_does_not_end_a_running_one(
    tmp_path: Path, other: dict[str, object], why: str
) -> None:
    """Kills each part of the key an agent is known by dropped (run, task, attempt, role) and
    the `attempt`/`role` names changed or emptied: with parallel tasks and a checker after the
    maker, another agent's `agent_finished` would end a running agent and let its processes
    through."""
    log = EventLog(tmp_path / "events.jsonl")
    _started(log, 4242)
    where = {k: v for k, v in other.items() if k in ("run", "task")}
    data = {k: v for k, v in other.items() if k not in ("run", "task")}
    _started(log, 4343, **where, **data)  # type: ignore[arg-type]
    _finished(log, **where, **data)  # type: ignore[arg-type]
    assert set(running_agents(log.read())) == {4242}, why


# --- an odd /proc: an answer, never a crash -------------------------------------------------


def _fake_proc(
    tmp_path: Path, stat: bytes, system: bytes = b"cpu 1 2 3\nbtime 1700000000\n"
) -> Path:
    proc = tmp_path / "proc"
    (proc / "100").mkdir(parents=True)
    (proc / "100" / "stat").write_bytes(stat)
    (proc / "100" / "environ").write_bytes(b"HOME=/x\0")
    (proc / "stat").write_bytes(system)
    return proc


@pytest.mark.parametrize(
    "stat",
    [b"100 (x) S", b"100 (x) S one two three"],
    ids=["short", "not-numbers"],
)
def test_an_unreadable_stat_line_is_no_parent_and_no_crash(tmp_path: Path, stat: bytes) -> None:
    """Kills IndexError or ValueError dropped from `_stat`'s except (a /proc of another kind,
    a process caught mid-exit): the command must still answer, not crash."""
    proc = _fake_proc(tmp_path, stat)
    assert agent_marker(environ={}, pid=100, proc=proc, agents={}) is None
    assert agent_marker(environ={}, pid=100, proc=proc, agents={7: 0.0}) is None


STAT = b"100 (x) S 1 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %s 0 0"


@pytest.mark.parametrize(
    ("stat", "system"),
    [
        (STAT % b"5", b"cpu 1 2 3\n"),  # no boot time
        (STAT[:40], b"btime 1700000000\n"),  # no start time field
        (STAT % b"soon", b"btime 1700000000\n"),  # a start time that is no number
    ],
    ids=["no-btime", "short", "not-a-number"],
)
def test_an_agent_whose_start_cannot_be_read_still_counts(
    tmp_path: Path, stat: bytes, system: bytes
) -> None:
    """Kills StopIteration, IndexError or ValueError dropped from `_started_at`'s except: a
    logged agent whose start time cannot be read is taken for that agent (refused), not a
    crash."""
    proc = _fake_proc(tmp_path, stat, system)
    marker = agent_marker(environ={}, pid=100, proc=proc, agents={100: 1700000005.0})
    assert marker is not None
    assert "process 100 is an agent" in marker
