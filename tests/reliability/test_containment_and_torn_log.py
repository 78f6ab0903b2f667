"""Scenarios 2 and 7: a torn or damaged log, and an agent that tries to escape its worktree.

Containment: an agent that plants hooks, core.hooksPath, core.fsmonitor and a filter driver gets
0 executions by loopctl's git commands; one that edits protected checker files fails its
attempt; one that forks a child and hangs leaves no process behind after its timeout.
Torn log: the last record cut at every byte offset still reads, and the next run appends after
it; a damaged record in the middle is refused with file:line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import wait_until_gone
from support.repos import git
from typer.testing import CliRunner

from loopctl.cli.app import app
from loopctl.journal.events import EventLog, EventType
from loopctl.paths import ProjectPaths

PY = sys.executable
AGENTS = Path(__file__).parents[1] / "agents"
CHECK = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"


# These scenarios test what holds without the sandbox (invariant 8's git hardening, the process
# group kill): the sandbox would stop the planting and hide the pids, so it is off here; the
# same attacks with the sandbox on are in test_hostile_agents.py.
UNCONFINED = '\n[sandbox]\nmode = "off"\n'


def project(root: Path, argv: list[str], extra_loop: str = "", timeout: str = "60s") -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / ".gitignore").write_text("__pycache__/\n")
    (root / "agents").mkdir()
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps(argv)}\ntimeout = "{timeout}"\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    (root / ".loop" / "config.toml").write_text('[defaults]\nmaker = "maker"\n' + UNCONFINED)
    (root / ".loop" / "loops" / "fix.toml").write_text(
        'prompt = "Fix add()."\n\n'
        f"[checker]\ncommand = {json.dumps([PY, '-B', '-c', CHECK])}\n"
        'protect = ["tests/**"]\n\n[budget]\nmax_iterations = 1\n' + extra_loop
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def run(repo: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "loopctl", "run", "fix", "--once"],
        cwd=repo, env={**os.environ, "LOOPCTL_HOME": str(home)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_planted_hooks_fsmonitor_and_filters_never_run(tmp_path: Path) -> None:
    sentinel = tmp_path / "ran.txt"
    repo = project(tmp_path / "repo", [PY, str(AGENTS / "plants_hook.py"), str(sentinel)])
    # Invariant 12: the planted config and hooks fail the first turn as tampering; once a
    # human approves, the next run commits with them in place, and none of them runs.
    planted = run(repo, tmp_path / "home")
    assert planted.returncode == 1, planted.stderr
    tampering = [
        e for e in EventLog(ProjectPaths(repo).events_file).read()
        if e.type == "inbox_opened" and e.data["evidence"].get("tampering")
    ]  # fmt: skip
    approve = [PY, "-m", "loopctl", "inbox", "approve", tampering[0].data["id"]]
    assert subprocess.run(approve, cwd=repo, capture_output=True).returncode == 0
    done = run(repo, tmp_path / "home")
    ran = sentinel.read_text().split() if sentinel.exists() else []
    print(f"\nplanted programs executed by loopctl: {len(ran)} {ran}")
    assert done.returncode == 0, done.stderr
    assert ran == []


def test_an_edit_to_protected_checker_files_fails_the_attempt(tmp_path: Path) -> None:
    repo = project(tmp_path / "repo", [PY, str(AGENTS / "edits_tests.py")])
    done = run(repo, tmp_path / "home")
    finished = [
        e for e in EventLog(ProjectPaths(repo).events_file).read() if e.type == "attempt_finished"
    ]
    assert done.returncode == 1
    assert [e.data["verdict"] for e in finished] == ["failed"]
    assert "tests/test_calc.py (protected by tests/**)" in finished[0].data["reason"]


def test_a_hanging_agent_and_its_children_are_gone_after_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    repo = project(
        tmp_path / "repo",
        [PY, str(AGENTS / "hangs.py"), str(pidfile), "--stubborn-child"],
        timeout="3s",
    )
    done = run(repo, tmp_path / "home")
    pids = [int(p) for p in pidfile.read_text().split()]
    alive = wait_until_gone(pids, timeout=10)
    print(f"\nhanging agent: {len(pids)} processes, {len(alive)} left after the timeout")
    assert done.returncode == 1
    assert alive == []


@pytest.fixture
def finished_repo(tmp_path: Path) -> Path:
    repo = project(tmp_path / "repo", [PY, str(AGENTS / "fixer.py")])
    assert run(repo, tmp_path / "home").returncode == 0
    return repo


def test_a_torn_last_record_at_every_offset_reads_and_is_appended_after(
    finished_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_path = ProjectPaths(finished_repo).events_file
    whole = log_path.read_bytes()
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    count = len(EventLog(log_path).read())
    monkeypatch.chdir(finished_repo)
    offsets = range(last_start + 1, len(whole) - 1)
    for cut in offsets:
        log_path.write_bytes(whole[:cut])
        events = EventLog(log_path).read()
        assert len(events) == count - 1, cut
        status = CliRunner().invoke(app, ["status", "--json"])
        assert status.exit_code == 0, (cut, status.stdout)
        EventLog(log_path).append(EventType.NOTE, data={"after": cut})
        after = EventLog(log_path).read()
        assert [e.type for e in after][-1] == "note", cut
        assert len(after) == count
    print(f"\ntorn tail: {len(offsets)} cut points, every one read and appended after")


def test_a_damaged_record_in_the_middle_is_refused_with_its_line(
    finished_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_path = ProjectPaths(finished_repo).events_file
    lines = log_path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"seq"', b'"sqe"', 1)
    log_path.write_bytes(b"".join(lines))
    monkeypatch.chdir(finished_repo)
    result = CliRunner().invoke(app, ["log"])
    assert result.exit_code == 1
    assert "events.jsonl:3:" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
