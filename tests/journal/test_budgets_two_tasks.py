"""A loop's budget is the run's, shared by its tasks: the second task of a tick sees what the
first one spent (issue 18: every other budget test has one task)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import invoke
from support.journal import attempt_starts, events
from support.repos import commit_all, make_project, tasks_command, write_loop


def test_the_second_task_of_a_run_is_stopped_by_what_the_first_spent(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each attempt reports 600 tokens and fixes nothing. Task a: attempt 1 (0 + 600 <= 1500),
    # attempt 2 (600 + 600), then 1200 + 600 > 1500 stops it. Task b starts with 1200 of the
    # run's 1500 spent: not one attempt. Counted per task, b would get two attempts too.
    make_project(repo, "never_fixes.py", "--tokens", "600")
    write_loop(
        repo,
        "pair",
        'goal = "tests green"\n\n[tasks]\n'
        + tasks_command("a", "b")
        + 'prompt = "Fix {title}"\n\n[budget]\nmax_parallel = 1\nmax_iterations = 5\n'
        "max_tokens = 1500\nstop_after_identical_failures = 10\n",
    )
    commit_all(repo, "pair loop")

    result = invoke(monkeypatch, repo, "run", "pair", "--once")

    assert result.exit_code == 1, result.output
    assert attempt_starts(repo, "a") == [1, 2]
    assert attempt_starts(repo, "b") == []
    finished = {e.task: e.data for e in events(repo, "task_finished")}
    assert finished["a"]["status"] == finished["b"]["status"] == "stopped"
    assert finished["a"]["reason"] == (
        "token budget: 1200 of 1500 used and an attempt takes about 600"
    )
    assert finished["b"]["reason"] == finished["a"]["reason"]
