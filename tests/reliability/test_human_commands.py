"""Humans' commands stay human (DESIGN §5, invariant 13), with the sandbox off.

A hostile maker that finds an approval waiting runs `loopctl inbox approve ID` itself: as its
child, with LOOPCTL_ROLE unset, from a grandchild, after re-executing itself without the
variable, and as itself. Every try exits 1 with one line, the item stays unapproved and nothing
is delivered; the same command from the test (a human) then works. `inbox retry` counts against
the daily fuse: retrying a task again and again stops at the cap.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from support.cli import assert_clean_exit, run_loopctl
from support.delivery import action, ledger_entries
from support.journal import events
from support.repos import FAST_CHECK, PY, make_project, toml_value, write_config, write_loop

from loopctl.commands.agent_context import agent_marker
from loopctl.journal.events import EventLog
from loopctl.journal.fuse import day_spend
from loopctl.paths import ProjectPaths
from loopctl.scheduling.daemon import up_info
from loopctl.scheduling.timing import zone

HOSTILE = Path(__file__).parent / "agents" / "runs_human_commands.py"
SANDBOX_OFF = '\n[sandbox]\nmode = "off"\n'
REFUSAL = "is a human's command and refuses to run inside an agent's environment"


def _config(repo: Path, extra: str = "") -> None:
    text = (
        'version = 1\n\n[defaults]\nmaker = "maker"\n\n[conditions]\n'
        f'"tests green" = {toml_value(FAST_CHECK)}\n' + SANDBOX_OFF + extra
    )
    write_config(repo, text)


def _pending_approval(repo: Path, ledger: Path) -> str:
    """A loop whose delivery (a custom action writing to `ledger`) waits for a human."""
    make_project(repo, "fixer.py")
    _config(repo)
    write_loop(
        repo,
        "ship",
        'goal = "tests green"\nprompt = "fix add"\n\n[deliver]\n'
        f'actions = ["commit", {action(ledger, "deploy")}]\n',
    )
    done = run_loopctl(repo, "run", "ship", "--once")
    assert_clean_exit(done, 0)
    (opened,) = events(repo, "inbox_opened")
    assert opened.data["kind"] == "approval"
    return str(opened.data["id"])


def _hostile_goal(repo: Path, record: Path, mode: str, *args: str) -> None:
    """A goal whose maker is the hostile agent, run by the real CLI in a subprocess."""
    argv = [PY, str(HOSTILE), str(record), str(repo), mode, *args]
    path = repo / "agents" / "hostile.toml"
    path.write_text(f'backend = "command"\nargv = {toml_value(argv)}\ntimeout = "60s"\n')
    done = run_loopctl(repo, "goal", "tests green", "--agent", "hostile", "--max-iterations", "1")
    assert_clean_exit(done, 1)  # the goal is not met: the hostile maker fixed nothing


def _tries(record: Path) -> list[dict[str, object]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


@pytest.mark.parametrize("mode", ["direct", "unset", "grandchild", "exec"])
def test_an_agent_cannot_approve_what_waits_for_a_human(
    repo: Path, tmp_path: Path, mode: str
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    item = _pending_approval(repo, ledger)
    record = tmp_path / "tries.jsonl"

    _hostile_goal(repo, record, mode, "inbox", "approve", item)

    (tried,) = _tries(record)
    approvals = len(events(repo, "approved"))
    print(f"\nagent ran `inbox approve` ({mode}): exit {tried['code']}, {approvals} approvals")
    assert tried["code"] == 1, tried
    lines = str(tried["stderr"]).strip().splitlines()
    assert len(lines) == 1, tried
    assert "`loopctl inbox approve`" in lines[0]
    assert REFUSAL in lines[0]
    assert "Traceback" not in str(tried["stderr"])
    assert events(repo, "approved") == []
    assert ledger_entries(ledger) == []
    # The refusal was the guard's doing: the same command from a human's shell works.
    approved = run_loopctl(repo, "inbox", "approve", item)
    assert_clean_exit(approved, 0)
    assert [e["name"] for e in ledger_entries(ledger)] == ["deploy"]


def test_an_agent_that_becomes_loopctl_is_refused_too(repo: Path, tmp_path: Path) -> None:
    # exec() keeps the pid the runner recorded while shedding every LOOPCTL_* variable.
    ledger = tmp_path / "ledger.jsonl"
    item = _pending_approval(repo, ledger)

    _hostile_goal(repo, tmp_path / "tries.jsonl", "exec-loopctl", "inbox", "approve", item)

    (hostile,) = [e for e in events(repo, "agent_finished") if e.data["agent"] == "hostile"]
    assert hostile.data["exit_code"] == 1
    assert events(repo, "approved") == []
    assert ledger_entries(ledger) == []
    stderr = next((Path(ProjectPaths(repo).runs_dir) / hostile.run).rglob("maker.err"))
    assert REFUSAL in stderr.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ("inbox", "reject", "ITEM"),
        ("inbox", "dismiss", "ITEM"),
        ("inbox", "retry", "ITEM"),
        ("inbox", "reply", "ITEM", "yes"),
        ("state", "push"),
        ("state", "pull"),
        ("down",),
        ("up", "--detach"),
        ("stop", "goal"),  # the very goal run this agent works in
    ],
)
def test_every_human_command_refuses_inside_an_agent(
    repo: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    item = _pending_approval(repo, ledger)
    record = tmp_path / "tries.jsonl"
    before = len(events(repo))

    try:
        _hostile_goal(repo, record, "unset", *(item if a == "ITEM" else a for a in args))
    finally:
        leaked = up_info(ProjectPaths(repo))
        if leaked is not None and leaked.pid:  # only if the guard failed: stop what it started
            os.kill(leaked.pid, signal.SIGTERM)

    (tried,) = _tries(record)
    assert tried["code"] == 1, tried
    assert REFUSAL in str(tried["stderr"]), tried
    assert len(str(tried["stderr"]).strip().splitlines()) == 1
    # Nothing the command would have done happened: no decision, no requeue, no scheduler.
    done_by_it = {"approved", "inbox_closed", "task_requeued", "scheduler_started"}
    assert [e.type for e in events(repo)[before:] if e.type in done_by_it] == []
    assert ledger_entries(ledger) == []
    assert up_info(ProjectPaths(repo)) is None


def test_listing_and_showing_stay_open_to_agents(repo: Path, tmp_path: Path) -> None:
    # Reading the inbox is harmless (and useful to an agent); only decisions are refused.
    item = _pending_approval(repo, tmp_path / "ledger.jsonl")
    record = tmp_path / "tries.jsonl"

    _hostile_goal(repo, record, "direct", "inbox", "show", item)

    (tried,) = _tries(record)
    assert tried["code"] == 0, tried


def test_repeated_retries_cannot_pass_the_daily_fuse(repo: Path, tmp_path: Path) -> None:
    # Each attempt reports 300 tokens and never fixes the bug; the day allows 1000 tokens.
    make_project(repo, "never_fixes.py", "--tokens", "300")
    _config(repo, "\n[budget]\nmax_tokens_per_day = 1000\n")
    write_loop(
        repo,
        "tidy",
        'goal = "tests green"\nprompt = "fix add"\n\n[budget]\nmax_iterations = 2\n'
        "stop_after_identical_failures = 10\n",
    )
    assert_clean_exit(run_loopctl(repo, "run", "tidy", "--once"), 1)
    outcomes = []
    for _ in range(6):
        open_items = [e for e in events(repo, "inbox_opened") if e.data["kind"] == "failed"]
        closed = {e.data["id"] for e in events(repo, "inbox_closed")}
        (item,) = [e.data["id"] for e in open_items if e.data["id"] not in closed]
        done = run_loopctl(repo, "inbox", "retry", item)
        assert "Traceback" not in done.stdout + done.stderr
        outcomes.append(done.returncode)
        if "daily budget fuse" in done.stderr:
            break
    log = EventLog(ProjectPaths(repo).events_file).read()
    spent = day_spend(log, log[-1].time, zone(None))
    print(f"\n{len(outcomes)} retries: {spent.tokens} of 1000 tokens spent today; the last refused")
    assert spent.tokens <= 1000, outcomes
    # 600 on the first run, 300 on the retry (its budget narrowed to the 400 left), then the
    # task's history (300 an attempt) says the next one would pass the cap: refused, exit 1.
    assert spent.tokens == 900
    assert outcomes == [1, 1]
    assert "an attempt of this task takes about 300" in done.stderr
    assert done.stderr.strip().count("\n") == 0
    # The refused item stays open for a retry once the day allows it.
    closed = {e.data["id"] for e in events(repo, "inbox_closed")}
    assert item not in closed


def test_a_reused_pid_is_not_taken_for_an_agent() -> None:
    # A run killed while its agent ran leaves an unfinished `agent_started` in the log; its pid
    # may later belong to a human's shell. Only the process that started with the agent counts.
    me = os.getpid()
    now = time.time()
    assert agent_marker(environ={}, agents={me: now + 3600}) is None
    assert agent_marker(environ={}, agents={me + 10**7: now}) is None
    with_our_start = {me: _our_start_time()}
    marker = agent_marker(environ={}, agents=with_our_start)
    assert marker is not None
    assert str(me) in marker


def _our_start_time() -> float:
    """This process's start, as the kernel counts it (field 22 of /proc/self/stat)."""
    stat = Path("/proc/self/stat").read_bytes()
    ticks = int(stat[stat.rfind(b")") + 2 :].split()[19])
    boot = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_bytes().splitlines()
        if line.startswith(b"btime ")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK") + 1.0
