"""Test repositories: the one `git()` for set-up, the calc project with fake agents, worktrees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

PY = sys.executable
TESTS = Path(__file__).resolve().parents[1]
AGENTS = TESTS / "agents"
GOAL_BRANCH = "loop/goal/tests-green"

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYTEST_CHECK = (PY, "-m", "pytest", "-q", "-p", "no:cacheprovider")
# A quick stand-in for pytest where a test only needs *a* check: -B so no bytecode is cached.
FAST_CHECK = (PY, "-B", "-c", "import calc; assert calc.add(2, 3) == 5, 'add(2, 3) is not 5'")

_IDENTITY = ("-c", "user.name=t", "-c", "user.email=t@example.com")
# What an agent may have planted in a repository stays off in the test's own git commands.
_HARDENED = (
    *("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"),
    # A hostile test hands its repository to another user; its checks still read it as root.
    *("-c", "safe.directory=*"),
)


def git(cwd: Path, *args: str, plain: bool = False, program: str = "git") -> str:
    """Run git for a test's set-up or checks and return stdout; fail the test when git fails.

    Commits get a fixed identity. Hooks and fsmonitor are off unless `plain` (a test that
    shows a planted trap is live wants git as a user runs it). `program` is another git binary
    (a test that puts a recording wrapper first on PATH).
    """
    hardening = () if plain else _HARDENED
    done = subprocess.run(
        [program, *_IDENTITY, *hardening, *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def git_succeeds(cwd: Path, *args: str) -> bool:
    """Whether a git command exits 0 (for questions such as `check-ref-format`)."""
    done = subprocess.run(["git", *_IDENTITY, *args], cwd=cwd, capture_output=True, check=False)
    return done.returncode == 0


def make_repo(root: Path) -> Path:
    """A git repository at `root` with one commit (README.md) on `main`."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("hello\n")
    commit_all(root, "initial")
    return root


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def add_remote(repo: Path, tmp_path: Path) -> Path:
    """A bare repository as `origin`."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    return remote


def remote_refs(remote: Path) -> dict[str, str]:
    out = git(remote, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split(" ", 1) for line in out.splitlines())


# --- the calc project and its fake agents ------------------------------------------------------


def toml_value(value: Any) -> str:
    """A TOML literal for a string or a list of strings (JSON strings are valid TOML)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(json.dumps(str(v)) for v in value) + "]"
    return json.dumps(str(value))


def agent_argv(script: str, *args: str | Path, python: str = PY) -> list[str]:
    return [python, str(AGENTS / script), *(str(a) for a in args)]


def write_agent(
    repo: Path,
    name: str,
    script: str,
    *args: str | Path,
    extra: str = "",
    timeout: str = "60s",
    python: str = PY,
) -> Path:
    """agents/<name>.toml running tests/agents/<script> with `args`, by `python` (another
    account's interpreter when the test's own sits where that account cannot reach it).

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
        f"argv = {toml_value(agent_argv(script, *args, python=python))}\n"
        f'timeout = "{timeout}"\n' + extra + sandbox
    )
    return path


def write_loop(repo: Path, name: str, body: str) -> Path:
    path = repo / ".loop" / "loops" / f"{name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def write_config(repo: Path, text: str) -> None:
    path = repo / ".loop" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_project(
    repo: Path,
    script: str = "fixer.py",
    *args: str | Path,
    agent: str = "maker",
    agent_extra: str = "",
    agent_timeout: str = "60s",
    check: Sequence[str] | None = FAST_CHECK,
    config_extra: str = "",
    python: str = PY,
) -> Path:
    """The calc project from issue 3 in `repo`, with one fake agent as the default maker.

    `check` None leaves "tests green" to the built-in pytest detection (which protects tests).
    `python` runs the agent (support.accounts.runtime: another account's interpreter).
    """
    (repo / "calc.py").write_text(CALC)
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "tests" / "test_calc.py").write_text(TEST_CALC)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    write_agent(repo, agent, script, *args, extra=agent_extra, timeout=agent_timeout, python=python)
    config = f'version = 1\n\n[defaults]\nmaker = "{agent}"\n'
    if check is not None:
        config += f'\n[conditions]\n"tests green" = {toml_value(check)}\n'
    write_config(repo, config + config_extra)
    commit_all(repo, "calc with a bug in add()")
    return repo


# --- worktrees and files -----------------------------------------------------------------------


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


def tasks_command(*ids: str) -> str:
    """A `[tasks] command` line printing one JSON item per id."""
    items = [{"id": task_id, "title": f"task {task_id}"} for task_id in ids]
    return f"command = {toml_value([PY, '-c', f'import json; print(json.dumps({items!r}))'])}\n"
