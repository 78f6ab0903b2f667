"""Scenario 8: a run killed mid-task and resumed still counts what it already spent.

Iterations, tokens and USD spent before the kill count after it, and the identical-failure rule
still sees the fingerprint recorded before the kill.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import loopctl_killed_at_argv
from support.repos import git

from loopctl.journal.events import EventLog, EventType
from loopctl.paths import ProjectPaths

PY = sys.executable
NEVER_FIXES = Path(__file__).parents[1] / "agents" / "never_fixes.py"
CHECK = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"


def project(root: Path, budget: str) -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / ".gitignore").write_text("__pycache__/\nnotes.txt\n")
    (root / "agents").mkdir()
    argv = [PY, str(NEVER_FIXES), "--tokens", "600", "--cost", "0.4"]
    (root / "agents" / "idle.toml").write_text(f'backend = "command"\nargv = {json.dumps(argv)}\n')
    (root / ".loop").mkdir()
    (root / ".loop" / "config.toml").write_text(
        '[defaults]\nmaker = "idle"\n\n[conditions]\n'
        f'"fixed" = {json.dumps([PY, "-B", "-c", CHECK])}\n\n[budget]\n{budget}'
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def goal(repo: Path, home: Path, kill_at_seq: int | None = None) -> int:
    env = {**os.environ, "LOOPCTL_HOME": str(home)}
    return subprocess.run(
        loopctl_killed_at_argv(kill_at_seq, "goal", "fixed"),
        cwd=repo,
        env=env,
        capture_output=True,
        timeout=300,
    ).returncode


def first_seq(repo: Path, type_: str) -> int:
    for event in EventLog(ProjectPaths(repo).events_file).read():
        if event.type == type_:
            return event.seq
    raise AssertionError(f"no {type_} event")


@pytest.mark.parametrize(
    ("budget", "attempts", "reason"),
    [
        # The same failure twice stops the task; the first of the two happened before the kill.
        ("max_iterations = 5\nstop_after_identical_failures = 2\n", 2, "identical failures"),
        # $0.40 per attempt: after two ($0.80) a third would pass $1.00; one was paid pre-kill.
        ("max_iterations = 5\nmax_usd = 1.0\nstop_after_identical_failures = 9\n", 2, "cost"),
        # 600 tokens per attempt, 1500 allowed: the same arithmetic in tokens.
        ("max_iterations = 5\nmax_tokens = 1500\nstop_after_identical_failures = 9\n", 2, "token"),
        # Iterations: the attempt finished before the kill is one of the three.
        ("max_iterations = 3\nstop_after_identical_failures = 9\n", 3, "after 3 attempts"),
    ],
)
def test_spend_before_a_kill_still_counts(
    tmp_path: Path, budget: str, attempts: int, reason: str
) -> None:
    clean = project(tmp_path / "clean", budget)
    assert goal(clean, tmp_path / "home-clean") == 1
    kill_after = first_seq(clean, EventType.ATTEMPT_FINISHED)

    repo = project(tmp_path / "repo", budget)
    home = tmp_path / "home"
    assert goal(repo, home, kill_at_seq=kill_after) == -signal.SIGKILL
    assert goal(repo, home) == 1

    events = EventLog(ProjectPaths(repo).events_file).read()
    finished = [e for e in events if e.type == EventType.ATTEMPT_FINISHED]
    stopped = [e for e in events if e.type == EventType.TASK_FINISHED]
    print(f"\n{reason}: {len(finished)} attempts across a kill, stop: {stopped[-1].data['reason']}")
    assert len(finished) == attempts
    assert len({e.run for e in events if e.run}) == 1
    assert reason in stopped[-1].data["reason"]
