"""Running loopctl: in this process through typer (fast), or as the real program in a child."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from support.repos import PY


def invoke(monkeypatch: pytest.MonkeyPatch, repo: Path, *args: str) -> Result:
    """Run the CLI in this process (fast); SIGTERM handling is restored afterwards."""
    from loopctl.cli.app import app

    monkeypatch.chdir(repo)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        return CliRunner().invoke(app, list(args), catch_exceptions=False)
    finally:
        signal.signal(signal.SIGTERM, previous)


def loopctl_argv(*args: str) -> list[str]:
    return [PY, "-m", "loopctl", *args]


KILLED_AT = Path(__file__).parents[1] / "programs" / "loopctl_killed_at.py"


def loopctl_killed_at_argv(seq: int | str | None, *args: str) -> list[str]:
    """loopctl that dies by SIGKILL right after appending event `seq`, or the first event of a
    type given by name (None: plain loopctl)."""
    return loopctl_argv(*args) if seq is None else [PY, str(KILLED_AT), str(seq), *args]


def run_loopctl(
    repo: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    kill_at_seq: int | str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess: exit codes, stderr, no tracebacks."""
    return subprocess.run(
        loopctl_killed_at_argv(kill_at_seq, *args),
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def spawn_loopctl(repo: Path, *args: str) -> subprocess.Popen[str]:
    """Start the real CLI in a subprocess the test will signal."""
    return subprocess.Popen(
        loopctl_argv(*args),
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def assert_clean_exit(done: subprocess.CompletedProcess[str], code: int) -> None:
    """The documented exit code, and no traceback on either stream."""
    shown = f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == code, shown
    assert "Traceback" not in done.stdout + done.stderr, shown
