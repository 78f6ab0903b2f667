"""An agent that cannot start stops its task at once (issue 23, item 6).

A program that is missing or not executable, or a script that is only in the main checkout
(never committed, so the task's worktree lacks it), would fail every attempt the same way, with
each failure blamed on the check. The task stops before its first check instead, with one line
naming the agent and the fix, and an inbox item; `--dry-run` shows what `validate` warns.

Each check here counts its runs through a TCP listener of the test's (support.suite_counter),
so a test sees how many times the suite ran with the sandbox on, as a user runs it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import invoke, run_loopctl
from support.journal import events
from support.repos import AGENTS, PY, commit_all, make_project, toml_value
from support.suite_counter import SuiteCounter

from loopctl.backends import AgentResult, AgentStatus
from loopctl.definitions.agents import Agent, Backend
from loopctl.engine.agents import exec_failure, launch_problem
from loopctl.journal.events import EventLog
from loopctl.journal.inbox import open_items
from loopctl.paths import ProjectPaths

NOT_COMMITTED = (
    "agent 'maker': scripts/agent.py is not committed; the task's worktree is made from HEAD"
    " — commit it, or name it by its absolute path in agents/maker.toml"
)


def counting_project(repo: Path, counter: SuiteCounter) -> None:
    """The calc project whose "tests green" check counts its runs with `counter`."""
    make_project(repo, check=list(counter.check()), config_extra=counter.network)


@pytest.fixture
def counter() -> Iterator[SuiteCounter]:
    found = SuiteCounter()
    yield found
    found.close()


def suite_runs(counter: SuiteCounter) -> int:
    return counter.runs


def command_agent(repo: Path, argv: list[str]) -> None:
    """agents/maker.toml running `argv` (the agent the calc project makes its maker)."""
    (repo / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {toml_value(argv)}\ntimeout = "60s"\n'
    )


def stopped_with(repo: Path, reason: str) -> None:
    """The task stopped with `reason`, before any attempt, and the inbox holds it."""
    log = EventLog(ProjectPaths(repo).events_file).read()
    (finished,) = [e for e in log if e.type == "task_finished"]
    assert finished.data["status"] == "stopped"
    assert finished.data["reason"] == reason
    assert events(repo, "attempt_started") == []
    assert events(repo, "check_finished") == []
    (item,) = open_items(log)
    assert item.kind == "failed"
    assert item.evidence["reason"] == reason


def test_an_uncommitted_script_stops_the_task_before_any_check(
    repo: Path, tmp_path: Path, counter: SuiteCounter
) -> None:
    counting_project(repo, counter)
    command_agent(repo, [PY, "scripts/agent.py", "{prompt_file}"])
    commit_all(repo, "the maker runs scripts/agent.py")
    (repo / "scripts").mkdir()
    shutil.copy(AGENTS / "fixer.py", repo / "scripts" / "agent.py")  # not committed yet

    done = run_loopctl(repo, "goal", "tests green", "-q")
    assert done.returncode == 1, done.stderr
    assert NOT_COMMITTED in [line.strip() for line in done.stdout.splitlines()]
    assert "Traceback" not in done.stdout + done.stderr
    assert suite_runs(counter) == 0
    stopped_with(repo, NOT_COMMITTED)

    # Committed, the same script is found in the worktree: the agent works and the goal holds.
    commit_all(repo, "the agent's script")
    again = run_loopctl(repo, "goal", "tests green", "-q")
    assert again.returncode == 0, again.stdout + again.stderr
    assert suite_runs(counter) >= 1


@pytest.mark.parametrize(
    ("argv", "setup", "reason"),
    [
        pytest.param(
            ["scripts/agent.sh", "{prompt_file}"],
            "not-executable",
            "agent 'maker': scripts/agent.sh is not executable: `chmod +x scripts/agent.sh` and"
            " commit it, or run it through its interpreter in argv (agents/maker.toml)",
            id="committed-without-x",
        ),
        pytest.param(
            ["bin/agent"],
            "none",
            "agent 'maker': bin/agent does not exist (fix argv in agents/maker.toml)",
            id="missing-relative-program",
        ),
        pytest.param(
            [PY, "tools/agent.py"],
            "none",
            "agent 'maker': tools/agent.py does not exist (fix argv in agents/maker.toml)",
            id="missing-script",
        ),
        pytest.param(
            [".venv/bin/python", "scripts/agent.py"],
            "ignored-venv",
            "agent 'maker': .venv/bin/python is ignored by git, so the task's worktree (made from"
            " HEAD) does not have it — name it by its absolute path in agents/maker.toml",
            id="ignored-interpreter",
        ),
        pytest.param(
            ["scripts/agent.sh"],
            "bad-interpreter",
            "agent 'maker': scripts/agent.sh cannot run: its #! line names /no/such/interpreter,"
            " which is not here (fix the #! line, or argv in agents/maker.toml)",
            id="missing-interpreter",
        ),
    ],
)
def test_a_program_the_worktree_cannot_run_stops_the_task_before_any_check(
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    setup: str,
    reason: str,
    counter: SuiteCounter,
) -> None:
    counting_project(repo, counter)
    command_agent(repo, argv)
    script = repo / "scripts" / "agent.sh"
    if setup == "not-executable":
        script.parent.mkdir()
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(0o644)
    elif setup == "ignored-venv":
        # The checkout's own virtualenv, which git ignores.
        with (repo / ".gitignore").open("a") as ignore:
            ignore.write(".venv/\n")
        (repo / ".venv" / "bin").mkdir(parents=True)
        (repo / ".venv" / "bin" / "python").symlink_to(PY)
    elif setup == "bad-interpreter":
        script.parent.mkdir()
        script.write_text("#!/no/such/interpreter\nexit 0\n")
        script.chmod(0o755)
    commit_all(repo, "the maker")

    result = invoke(monkeypatch, repo, "goal", "tests green", "-q")
    assert result.exit_code == 1, result.output
    assert reason in result.stdout
    assert suite_runs(counter) == 0
    stopped_with(repo, reason)


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        pytest.param(
            "no-such-agent-program",
            "agent 'maker': program 'no-such-agent-program' is not on PATH (install it, or fix"
            " argv in {path})",
            id="not-on-path",
        ),
        pytest.param(
            "{outside}",
            "agent 'maker': {outside} is not an executable file (`chmod +x` it, or run it"
            " through its interpreter in argv in {path})",
            id="absolute-not-executable",
        ),
    ],
)
def test_a_program_missing_from_this_machine_is_refused_before_the_run(
    repo: Path, tmp_path: Path, program: str, reason: str, counter: SuiteCounter
) -> None:
    counting_project(repo, counter)
    outside = tmp_path / "tools" / "agent.sh"
    outside.parent.mkdir()
    outside.write_text("#!/bin/sh\nexit 0\n")
    outside.chmod(0o644)
    command_agent(repo, [program.format(outside=outside)])
    commit_all(repo, "the maker")

    done = run_loopctl(repo, "goal", "tests green")
    assert done.returncode == 1
    path = repo / "agents" / "maker.toml"
    assert done.stderr.strip().splitlines()[-1] == "loopctl: " + reason.format(
        outside=outside, path=path
    )
    assert "Traceback" not in done.stderr
    assert suite_runs(counter) == 0
    assert not ProjectPaths(repo).events_file.exists()  # refused before the run began


def test_a_program_that_fails_to_execute_ends_the_task_after_one_attempt(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counter: SuiteCounter
) -> None:
    """What the check before the run cannot see (here, a script without a #! line, which
    the kernel refuses to execute) ends the task on its first attempt, never its check.

    Unconfined: inside the sandbox bwrap's execvp runs such a script with /bin/sh instead, so
    only an unconfined start meets the kernel's refusal this test is about."""
    make_project(repo, check=list(counter.check()), config_extra='\n[sandbox]\nmode = "off"\n')
    command_agent(repo, ["scripts/agent.sh"])
    script = repo / "scripts" / "agent.sh"
    script.parent.mkdir()
    script.write_text("exit 0\n")
    script.chmod(0o755)
    commit_all(repo, "the maker")

    result = invoke(monkeypatch, repo, "goal", "tests green", "-q")
    reason = (
        "agent 'maker' cannot start: scripts/agent.sh: not a program (a script needs a #! line"
        " naming its interpreter) (fix argv in agents/maker.toml)"
    )
    assert result.exit_code == 1, result.output
    assert reason in result.stdout
    assert [int(e.data["attempt"]) for e in events(repo, "attempt_started")] == [1]
    assert events(repo, "check_finished") == []
    assert suite_runs(counter) == 1  # the base's, before the agent: none after it
    (finished,) = events(repo, "task_finished")
    assert (finished.data["status"], finished.data["reason"]) == ("stopped", reason)


def test_dry_run_shows_every_warning_validate_prints(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(repo, config_extra='\n[sandbox]\nmode = "off"\n')  # its warning is one shown
    command_agent(repo, [PY, "scripts/agent.py", "{prompt_file}"])
    commit_all(repo, "the maker runs scripts/agent.py")
    (repo / "scripts").mkdir()
    shutil.copy(AGENTS / "fixer.py", repo / "scripts" / "agent.py")

    validated = invoke(monkeypatch, repo, "validate")
    assert validated.exit_code == 0, validated.output
    warned = [line for line in validated.stdout.splitlines() if ": warning: " in line]
    assert len(warned) == 2  # the uncommitted script, the sandbox turned off
    assert any("scripts/agent.py" in line for line in warned)

    text = invoke(monkeypatch, repo, "goal", "tests green", "--dry-run")
    assert text.exit_code == 0, text.output
    shown = text.stdout.splitlines()
    for line in warned:
        assert line in shown

    as_json = invoke(monkeypatch, repo, "goal", "tests green", "--dry-run", "--json")
    assert json.loads(as_json.stdout)["dry_run"]["warnings"] == warned
    assert events(repo) == []  # a dry run appends nothing


def launchable(tmp_path: Path, argv: list[str]) -> str | None:
    """launch_problem of a command agent in a worktree beside a checkout, both in tmp_path."""
    agent = Agent(
        name="a",
        path=tmp_path / "checkout" / "agents" / "a.toml",
        backend=Backend.COMMAND,
        argv=tuple(argv),
    )
    return launch_problem(agent, tmp_path / "worktree", tmp_path / "checkout", "HEAD", None)


def test_only_the_program_and_the_scripts_it_runs_must_be_there(tmp_path: Path) -> None:
    checkout, worktree = tmp_path / "checkout", tmp_path / "worktree"
    for root in (checkout, worktree):
        (root / "scripts").mkdir(parents=True)
        (root / "scripts" / "agent.py").write_text("print('hi')\n")
    # An argument that names an output or a log, there only in the checkout, is not the
    # agent's program: the agent may well create it.
    (checkout / "logs").mkdir()
    (checkout / "logs" / "agent.log").write_text("")
    assert launchable(tmp_path, [PY, "scripts/agent.py", "--log", "logs/agent.log"]) is None
    # Only the script the interpreter runs is asked for, not a script it is told to write,
    # nor anything given to a program that is itself a script, nor a module's arguments.
    assert launchable(tmp_path, [PY, "scripts/agent.py", "--out", "new.py"]) is None
    assert launchable(tmp_path, [PY, "-m", "agent", "tools/new.py"]) is None
    run_sh = worktree / "scripts" / "run.sh"
    run_sh.write_text("#!/bin/sh\n")
    run_sh.chmod(0o755)
    assert launchable(tmp_path, ["scripts/run.sh", "tools/new.py"]) is None
    assert launchable(tmp_path, [PY, "tools/agent.py"]) == (
        "agent 'a': tools/agent.py does not exist (fix argv in agents/a.toml)"
    )
    # What a script's #! line asks for through env must be on PATH.
    env_script = worktree / "scripts" / "run"
    env_script.write_text("#!/usr/bin/env no-such-interpreter-xyz\n")
    env_script.chmod(0o755)
    assert launchable(tmp_path, ["scripts/run"]) == (
        "agent 'a': scripts/run cannot run: its #! line names 'no-such-interpreter-xyz', which"
        " is not on PATH (fix the #! line, or argv in agents/a.toml)"
    )
    # A backend that runs a CLI (refused before the run when missing) or no program is not asked.
    preset = Agent(name="c", path=checkout / "agents" / "c.toml", backend=Backend.CLAUDE)
    assert launch_problem(preset, worktree, checkout, "HEAD", "") is None


def test_a_sandboxed_program_that_bwrap_cannot_execute_is_named(tmp_path: Path) -> None:
    """Inside the sandbox the exec fails in bwrap, which says so and nothing else."""
    agent = Agent(
        name="a",
        path=tmp_path / "agents" / "a.toml",
        backend=Backend.COMMAND,
        argv=("scripts/agent.sh",),
    )
    failed = AgentResult(
        status=AgentStatus.ERROR,
        exit_code=1,
        duration_s=0.01,
        output_tail="bwrap: execvp /wt/scripts/agent.sh: Permission denied\n",
    )
    assert exec_failure(agent, failed, tmp_path) == (
        "agent 'a' cannot start: scripts/agent.sh: Permission denied (fix argv in agents/a.toml)"
    )
    # The same words from a program that ran (a CLI's own nested sandbox) are its output.
    ran = AgentResult(
        status=AgentStatus.ERROR,
        exit_code=1,
        duration_s=3.0,
        output_tail="working…\nbwrap: execvp /wt/scripts/agent.sh: Permission denied\n",
    )
    assert exec_failure(agent, ran, tmp_path) is None
