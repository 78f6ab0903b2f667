"""Scenario 10: a full disk or a read-only state folder stops loopctl with one clear line.

Uses a real tiny tmpfs mounted over the repository's `.loop/log` (a full disk) or `.loop`
(read-only). Mounting needs root, as in CI; without root they say so and skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.repos import git

from loopctl.journal.events import EventLog

PY = sys.executable
CHECK = "import calc, sys; sys.exit(0 if calc.add(2, 3) == 5 else 1)"
FIXER = Path(__file__).parents[1] / "agents" / "fixer.py"


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[None]:
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        reason = mounted.stderr.decode().strip()
        if os.geteuid() != 0:
            pytest.skip(f"mounting a tmpfs needs root, as CI has: {reason}")
        # As root the mount must work: a failure here would hide the scenario, not skip it.
        pytest.fail(f"cannot mount a tmpfs as root: {reason}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / ".gitignore").write_text("__pycache__/\n.loop/\n")
    (root / "agents").mkdir()
    (root / "agents" / "fixer.toml").write_text(
        f'backend = "command"\nargv = {json.dumps([PY, str(FIXER)])}\n'
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def goal(
    repo: Path, home: Path, condition: str = "fixed", *extra: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPCTL_HOME": str(home)}
    check = f"{PY} -B -c '{CHECK}'" if condition == "fixed" else f"{PY} -c 'raise SystemExit(1)'"
    return subprocess.run(
        [PY, "-m", "loopctl", "goal", condition, "--agent", "fixer", "--check", check, *extra],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_disk_full_under_the_log_is_one_clear_line_and_keeps_what_was_written(
    repo: Path, tmp_path: Path
) -> None:
    log_dir = repo / ".loop" / "log"
    home = tmp_path / "home"
    with tmpfs(log_dir, "size=64k"):
        assert goal(repo, home).returncode == 0
        before = EventLog(log_dir / "events.jsonl").read()
        # Fill the disk; what is left is the slack in the log's last page, less than one run.
        with contextlib.suppress(OSError), (log_dir / "ballast").open("wb") as ballast:
            while True:
                ballast.write(b"\0" * 512)
                ballast.flush()
        done = goal(repo, home, "never", "--max-iterations", "3")
        after = EventLog(log_dir / "events.jsonl").read()
    print(
        f"\ndisk full: exit {done.returncode}, {len(before)} events before, {len(after)} after;"
        f" {done.stderr.strip().splitlines()[-1]}"
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "No space left on device" in done.stderr
    assert after[: len(before)] == before, "events written before the disk filled were lost"


def test_read_only_state_folder_is_one_clear_line(repo: Path, tmp_path: Path) -> None:
    with tmpfs(repo / ".loop", "size=64k,ro"):
        done = goal(repo, tmp_path / "home")
    print(f"\nread-only .loop: exit {done.returncode}; {done.stderr.strip()}")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "Read-only file system" in done.stderr
