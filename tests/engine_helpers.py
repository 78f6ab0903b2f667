"""Shared set-up for the end-to-end engine tests: a tiny project, fake agents, and the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner, Result

from loopctl.journal.events import Event, EventLog
from loopctl.paths import ProjectPaths

PY = sys.executable
AGENTS = Path(__file__).parent / "agents"
GOAL_BRANCH = "loop/goal/tests-green"

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYTEST_CHECK = (PY, "-m", "pytest", "-q", "-p", "no:cacheprovider")
# A quick stand-in for pytest where a test only needs *a* check: -B so no bytecode is cached.
FAST_CHECK = (PY, "-B", "-c", "import calc; assert calc.add(2, 3) == 5, 'add(2, 3) is not 5'")

T = TypeVar("T")


def toml_value(value: Any) -> str:
    """A TOML literal for a string or a list of strings (JSON strings are valid TOML)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(json.dumps(str(v)) for v in value) + "]"
    return json.dumps(str(value))


def git(cwd: Path, *args: str) -> str:
    """git with a fixed identity and every planted hook or fsmonitor switched off."""
    done = subprocess.run(
        [
            "git",
            "-c", "user.name=t",
            "-c", "user.email=t@example.com",
            "-c", "core.hooksPath=/dev/null",
            "-c", "core.fsmonitor=false",
            *args,
        ],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    return done.stdout


def agent_argv(script: str, *args: str | Path) -> list[str]:
    return [PY, str(AGENTS / script), *(str(a) for a in args)]


def write_agent(
    repo: Path, name: str, script: str, *args: str | Path, extra: str = "", timeout: str = "60s"
) -> Path:
    """agents/<name>.toml running tests/agents/<script> with `args`.

    A file argument outside the repository is how a fake agent reports to its test (a marker,
    a prompt record): its folder is declared writable in the agent's `[sandbox]`, exactly as a
    user grants a real agent a place outside its worktree.
    """
    path = repo / "agents" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    outside = sorted(
        {
            str(Path(arg).parent)
            for arg in args
            if str(arg).startswith("/") and not Path(arg).is_relative_to(repo)
        }
    )
    sandbox = f"\n[sandbox]\nwrite = {toml_value(outside)}\n" if outside else ""
    path.write_text(
        f'description = "fake agent {script}"\n'
        'backend = "command"\n'
        f"argv = {toml_value(agent_argv(script, *args))}\n"
        f'timeout = "{timeout}"\n' + extra + sandbox
    )
    return path


def write_loop(repo: Path, name: str, body: str) -> Path:
    path = repo / ".loop" / "loops" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def make_project(
    repo: Path,
    script: str = "fixer.py",
    *args: str | Path,
    agent: str = "maker",
    agent_extra: str = "",
    agent_timeout: str = "60s",
    check: Sequence[str] | None = FAST_CHECK,
    config_extra: str = "",
) -> Path:
    """The calc project from issue 3 in `repo`, with one fake agent as the default maker.

    `check` None leaves "tests green" to the built-in pytest detection (which protects tests).
    """
    (repo / "calc.py").write_text(CALC)
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "tests" / "test_calc.py").write_text(TEST_CALC)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    write_agent(repo, agent, script, *args, extra=agent_extra, timeout=agent_timeout)
    config = f'version = 1\n\n[defaults]\nmaker = "{agent}"\n'
    if check is not None:
        config += f'\n[conditions]\n"tests green" = {toml_value(check)}\n'
    write_config(repo, config + config_extra)
    commit_all(repo, "calc with a bug in add()")
    return repo


def write_config(repo: Path, text: str) -> None:
    path = repo / ".loop" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


# --- running loopctl -------------------------------------------------------------------------


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


def run_loopctl(
    repo: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess: exit codes, stderr, no tracebacks."""
    return subprocess.run(
        loopctl_argv(*args),
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


# --- reading what happened -------------------------------------------------------------------


def events(repo: Path, type_: str | None = None, task: str | None = None) -> list[Event]:
    found = EventLog(ProjectPaths(repo).events_file).read()
    return [
        e for e in found if (type_ is None or e.type == type_) and (task is None or e.task == task)
    ]


def attempt_starts(repo: Path, task: str) -> list[int]:
    """The attempt number of every attempt_started event of `task`, in order."""
    return [int(e.data["attempt"]) for e in events(repo, "attempt_started", task)]


def worktree_root() -> Path:
    return Path(os.environ["LOOPCTL_HOME"]) / "worktrees"


def git_worktrees(repo: Path) -> list[dict[str, str]]:
    """`git worktree list --porcelain`, one dict per worktree."""
    entries: list[dict[str, str]] = []
    for block in git(repo, "worktree", "list", "--porcelain").strip().split("\n\n"):
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(" ")
            entry[key] = value
        entries.append(entry)
    return entries


def loop_worktrees(repo: Path) -> list[dict[str, str]]:
    """The worktrees on loop/ branches."""
    return [e for e in git_worktrees(repo) if e.get("branch", "").startswith("refs/heads/loop/")]


def all_text_under(*folders: Path) -> Iterable[tuple[Path, str]]:
    for folder in folders:
        if not folder.exists():
            continue
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink():
                yield path, path.read_bytes().decode("utf-8", "replace")


# --- waiting without sleeping as synchronisation ---------------------------------------------


def wait_for(predicate: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)


def read_pid(path: Path) -> int | None:
    """The host pid of the fake agent that wrote its pid to `path` (and still runs).

    A sandboxed agent lives in a PID namespace and writes the pid it sees there; the host
    process is the one whose command line names `path` and whose innermost pid is that one.
    """
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    if not text:
        return None
    pid = int(text.split()[0])
    return host_pid(pid, str(path)) or pid


def host_pid(inner: int, named: str) -> int | None:
    """The host pid of a live process whose argv contains `named` and whose own (innermost)
    PID namespace calls it `inner`; None when there is none."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        if named.encode() not in argv:
            continue
        for line in status.splitlines():
            if line.startswith("NSpid:") and int(line.split()[-1]) == inner:
                return int(entry.name)
    return None


def pid_alive(pid: int) -> bool:
    """True while `pid` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state letter follows the parenthesised command name, which may itself hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def kill_if_alive(pid: int | None) -> None:
    if pid is not None and pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def wait_until_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """The pids still alive after up to `timeout` seconds of polling (empty when all went)."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if pid_alive(pid)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)
