"""Checkers and goals (issue 14): who judges, when a check runs, and what stops an attempt.

Real git, real agent processes, the real CLI in a subprocess; the sandbox is off so each check
here proves itself on its own. Claude Code is the fake CLI of tests/fake_clis, or absent.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from support.backends import install_fake_clis, set_scenario
from support.cli import assert_clean_exit, run_loopctl
from support.journal import events
from support.processes import kill_if_alive, read_pid
from support.repos import (
    CALC,
    PY,
    commit_all,
    git,
    make_project,
    toml_value,
    write_config,
    write_loop,
)

from loopctl.checks.verdicts import same_command
from loopctl.paths import TEMPLATES

FIXED_CALC = CALC.replace("a - b", "a + b")
FIX_LOOP = 'goal = "tests green"\nprompt = "Make the failing test pass."\n'


def roles(repo: Path) -> list[str]:
    return [str(e.data["role"]) for e in events(repo, "agent_finished")]


def with_claude_checker(repo: Path) -> None:
    """The default checker `loopctl init` writes when it finds Claude Code."""
    shutil.copy(TEMPLATES / "agents" / "claude-checker.toml", repo / "agents")
    # The fake claude records its calls in ~/.fake-cli: granted, so the sandbox stays on.
    with (repo / "agents" / "claude-checker.toml").open("a") as agent:
        agent.write('\n[sandbox]\nwrite = ["~/.fake-cli"]\n')
    write_config(
        repo,
        'version = 1\n\n[defaults]\nmaker = "maker"\nchecker = "claude-checker"\n',
    )


def env_without_agent_clis(tmp_path: Path) -> dict[str, str]:
    """loopctl's environment with only git on PATH: no agent CLI can be found."""
    folder = tmp_path / "only-git"
    folder.mkdir()
    real = shutil.which("git")
    assert real is not None
    (folder / "git").symlink_to(real)
    return {**os.environ, "PATH": str(folder)}


# --- a built-in goal is checked by its command, not by an LLM judge --------------------------


def test_a_loop_with_a_builtin_goal_runs_without_the_default_checker_agent(
    repo: Path, tmp_path: Path
) -> None:
    make_project(repo, "fixer.py", check=None)  # "tests green" -> the detected pytest run
    with_claude_checker(repo)
    write_loop(repo, "fix-and-push", FIX_LOOP + '\n[deliver]\nactions = ["commit"]\n')
    commit_all(repo, "a loop and a default checker")
    env = env_without_agent_clis(tmp_path)

    done = run_loopctl(repo, "run", "fix-and-push", "--once", env=env)

    assert_clean_exit(done, 0)
    assert roles(repo) == ["maker"]
    assert events(repo, "tick_started")[0].data["judge"] is None
    assert "return a + b" in git(repo, "show", "loop/fix-and-push/main:calc.py")

    # A prose goal is still judged by the default checker agent, so it needs its CLI.
    write_loop(repo, "prose", 'goal = "add() adds its arguments"\nprompt = "Fix add()."\n')
    commit_all(repo, "a prose loop")
    judged = run_loopctl(repo, "run", "prose", "--once", env=env)
    assert_clean_exit(judged, 1)
    assert "'claude-checker' needs the claude CLI" in judged.stderr


def test_the_example_loop_of_init_runs_without_claude_with_another_maker(
    repo: Path, tmp_path: Path
) -> None:
    make_project(repo, "fixer.py", check=None)
    env = env_without_agent_clis(tmp_path)
    (repo / ".loop" / "config.toml").unlink()
    assert_clean_exit(run_loopctl(repo, "init", env=env), 0)
    config = repo / ".loop" / "config.toml"
    text = config.read_text().replace('maker = "command-maker"', 'maker = "maker"')
    config.write_text(text)
    commit_all(repo, "loopctl init, with a command maker")

    done = run_loopctl(repo, "run", "example", "--once", env=env)

    assert_clean_exit(done, 0)
    assert roles(repo) == ["maker"]
    assert "return a + b" in git(repo, "show", "loop/example/main:calc.py")


# --- a checker that cannot log in stops the task at once -------------------------------------


def test_a_checker_that_cannot_log_in_stops_the_task_after_one_maker_turn(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_clis(tmp_path / "bin", monkeypatch)
    set_scenario("claude", mode="not_logged_in")
    make_project(repo, "fixer.py")
    with_claude_checker(repo)
    commit_all(repo, "a default checker")

    done = run_loopctl(repo, "goal", "add() adds its arguments")

    assert_clean_exit(done, 1)
    assert roles(repo) == ["maker", "checker"]  # no second maker turn spends more tokens
    finished = events(repo, "task_finished")[-1]
    assert finished.data["status"] == "stopped"
    reason = str(finished.data["reason"])
    assert "the checker 'claude-checker' could not authenticate: Not logged in" in reason
    assert "no parsable verdict" not in reason
    item = events(repo, "inbox_opened")[-1]
    assert item.data["kind"] == "failed"
    assert "could not authenticate" in item.data["summary"]
    assert "could not authenticate" in done.stdout


# --- a goal that already holds calls no agent ------------------------------------------------


@pytest.mark.parametrize("check", ["configured", "builtin"])
def test_a_goal_that_already_holds_calls_no_agent(repo: Path, tmp_path: Path, check: str) -> None:
    seen = tmp_path / "prompts.txt"
    if check == "configured":
        make_project(repo, "records_prompt.py", seen)
    else:
        make_project(repo, "records_prompt.py", seen, check=None)
    (repo / "calc.py").write_text(FIXED_CALC)
    commit_all(repo, "add() is already right")

    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 0)
    assert "already holds" in done.stdout
    assert not seen.exists()
    assert events(repo, "agent_started") == []
    assert events(repo, "attempt_started") == []
    held = [e for e in events(repo, "note") if e.data.get("what") == "goal_already_holds"]
    assert len(held) == 1
    finished = events(repo, "task_finished")[-1]
    assert (finished.data["status"], finished.data["attempts"]) == ("done", 0)
    assert "already holds" in str(finished.data["reason"])


def test_a_loop_task_whose_goal_holds_on_its_base_is_done_without_an_agent(
    repo: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "prompts.txt"
    make_project(repo, "records_prompt.py", seen)
    (repo / "calc.py").write_text(FIXED_CALC)
    write_loop(repo, "green", FIX_LOOP)
    # Without a goal a checker command verifies the maker's work; it does not say that the
    # task is done, so the maker works the task.
    write_loop(
        repo,
        "checked",
        'prompt = "Document add()."\n\n[checker]\n'
        f"command = {toml_value([PY, '-c', 'import calc'])}\n",
    )
    commit_all(repo, "add() is already right")

    green = run_loopctl(repo, "run", "green", "--once")
    assert_clean_exit(green, 0)
    assert not seen.exists()
    assert events(repo, "agent_started") == []

    checked = run_loopctl(repo, "run", "checked", "--once")
    assert_clean_exit(checked, 0)
    assert seen.read_text().count("=====") == 1


# --- one run of each check command per attempt -----------------------------------------------


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        (["pytest", "-q"], ["python", "-m", "pytest", "-q"], True),
        (["/p/.venv/bin/python3.11", "-m", "pytest", "-q"], ["/usr/bin/pytest", "-q"], True),
        (["pytest", "-q"], ["pytest", "-x"], False),
        (["pytest"], ["pytest", "-q"], False),
        (["python", "-m", "pytest"], ["python", "pytest"], False),
        (["npm", "test"], ["npm", "test"], True),
    ],
)
def test_equivalent_check_commands(one: list[str], other: list[str], same: bool) -> None:
    assert same_command(one, other) is same
    assert same_command(other, one) is same


def test_pytest_runs_once_per_attempt_with_a_builtin_goal_and_a_pytest_checker(
    repo: Path,
) -> None:
    script = Path(PY).parent / "pytest"
    if not script.is_file():
        pytest.skip("no pytest script beside this interpreter")
    make_project(repo, "fixer.py", check=None)
    write_loop(
        repo,
        "fix",
        FIX_LOOP + f"\n[checker]\ncommand = {toml_value([str(script), '-q'])}\n",
    )
    commit_all(repo, "a loop with a goal and a pytest checker")

    done = run_loopctl(repo, "run", "fix", "--once")

    assert_clean_exit(done, 0)
    baseline = events(repo, "baseline_checked")
    assert [c["argv"] for c in baseline[0].data["commands"]] == [[str(script), "-q"]]
    checks = events(repo, "check_finished")
    assert [[c["argv"] for c in e.data["commands"]] for e in checks] == [[[str(script), "-q"]]]


# --- the wall budget ends an attempt ---------------------------------------------------------


def test_max_wall_ends_the_makers_turn(repo: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    make_project(
        repo,
        "hangs.py",
        pidfile,
        agent_timeout="60s",
        config_extra='\n[budget]\nmax_wall = "6s"\n',
    )
    started = time.monotonic()
    try:
        done = run_loopctl(repo, "goal", "tests green", timeout=120)
        elapsed = time.monotonic() - started
    finally:
        text = pidfile.read_text() if pidfile.exists() else ""
        for pid in (read_pid(pidfile), *(int(p) for p in text.split()[1:])):
            kill_if_alive(pid)

    assert_clean_exit(done, 1)
    assert elapsed < 30, f"the run took {elapsed:.1f}s against a 6s wall budget"
    assert [e.data["status"] for e in events(repo, "agent_finished")] == ["timeout"]
    stopped = events(repo, "budget_stopped")
    assert len(stopped) == 1
    assert "max_wall" in str(stopped[0].data["reason"])
    finished = events(repo, "task_finished")[-1]
    assert finished.data["status"] == "stopped"
    assert "time budget" in str(finished.data["reason"])
    assert events(repo, "check_finished") == []  # nothing of the cut-off turn is checked


# --- the next prompt names what earlier attempts changed -------------------------------------


def test_the_next_prompt_names_the_files_earlier_attempts_changed(
    repo: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "prompts.txt"
    make_project(
        repo,
        "notes_each_attempt.py",
        seen,
        config_extra="\n[budget]\nmax_iterations = 2\n",
    )

    done = run_loopctl(repo, "goal", "tests green")

    assert_clean_exit(done, 1)
    first, second = seen.read_text().split("\n=====\n")[:2]
    assert "attempt-1.txt" not in first
    assert "earlier attempts changed" not in first
    section = second.split("earlier attempts changed", 1)[1]
    assert "attempt-1.txt" in section.split("\n# ", 1)[0]
    assert "attempt-2.txt" not in second
