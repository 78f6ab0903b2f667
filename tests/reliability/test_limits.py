"""An agent that uses up memory, processes, CPU or disk is stopped (issue 24, item 5).

Each hostile maker (agents/exhausts.py) runs through a real `loopctl run` with a small limit in
its `[sandbox]`; the turn must end with that limit as its reason, the task stopped with an inbox
item, the maker's log written and the main checkout as it was. The fork bomb runs as the
unprivileged `nobody` too, where the kernel's RLIMIT_NPROC bounds it: no more of its children
ever ran than the limit. The canary runs the same makers with `unlimited`: then nothing stops
them but their own end (or their timeout), so each assertion can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.accounts import as_user, give_to, unprivileged_python
from support.repos import git

from loopctl import limits, sandbox

PY = sys.executable
AGENT = Path(__file__).parents[1] / "agents" / "exhausts.py"

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def make_project(
    base: Path, mode: str, rules: str, python: str = PY, timeout: str = "90s", tries: int = 2
) -> Path:
    root = base / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (base / "out").mkdir()
    argv = [python, str(AGENT), mode, str(base / "out" / "forks.log")]
    (root / "agents").mkdir()
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps(argv)}\ntimeout = "{timeout}"\n\n'
        f"[sandbox]\nwrite = [{json.dumps(str(base / 'out'))}]\n{rules}\n"
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    config = '[defaults]\nmaker = "maker"\n'
    if python != PY:
        config += '\n[env]\nallow = ["PYTHONPATH"]\n'
    (root / ".loop" / "config.toml").write_text(config)
    check = json.dumps([python, "-B", "-c", "import calc; assert calc.add(2, 3) == 5"])
    (root / ".loop" / "loops" / "hog.toml").write_text(
        f'prompt = "Fix add()."\n\n[maker]\nagent = "maker"\n\n[checker]\ncommand = {check}\n\n'
        f"[budget]\nmax_iterations = {tries}\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root


def run_loop(
    root: Path, user: str | None = None, python: str = PY, pythonpath: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root.parent / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LANG": "C.UTF-8",
        **({"PYTHONPATH": pythonpath} if pythonpath else {}),
    }
    return subprocess.run(
        [python, "-m", "loopctl", "run", "hog", "--once"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
        stdin=subprocess.DEVNULL, **as_user(user),
    )  # fmt: skip


def log_events(root: Path) -> list[dict[str, object]]:
    found = []
    for path in sorted((root / ".loop" / "log").rglob("*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return found


def attempts(root: Path) -> list[dict[str, object]]:
    return [e for e in log_events(root) if e.get("type") == "attempt_finished"]


def assert_stopped_by(root: Path, reason: str, done: subprocess.CompletedProcess[str]) -> None:
    finished = attempts(root)
    assert len(finished) == 1, (finished, done.stdout + done.stderr)  # no second attempt
    data = finished[0].get("data") or {}
    assert isinstance(data, dict)
    assert reason in str(data.get("reason")), (data, done.stdout + done.stderr)
    assert data.get("fatal") is True
    assert done.returncode == 1, done.stdout + done.stderr
    inbox = (root / ".loop" / "INBOX.md").read_text()
    assert reason in inbox, inbox
    outs = list((root / ".loop" / "runs").glob("*/*/attempt-*/maker.out"))
    assert outs, "the maker's log is gone"
    assert "exhausting" in outs[0].read_text()
    # The main checkout is as it was: nothing changed or added but loopctl's own records.
    status = git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in status if not line.startswith("?? .loop/")] == [], status
    assert (root / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


@pytest.fixture
def base() -> Iterator[Path]:
    # Not pytest's tmp_path: an unprivileged user must be able to enter it.
    folder = Path(tempfile.mkdtemp(prefix="loopctl-limits-"))
    folder.chmod(0o755)
    (folder / "home").mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(
    ("mode", "rules", "reason"),
    [
        ("memory", 'memory = "96MiB"', "memory limit 96 MiB reached"),
        ("cpu", 'cpu_time = "2s"', "cpu_time limit 2s reached"),
        ("disk", 'disk = "16MiB"', "disk limit 16 MiB reached"),
        ("bigfile", 'disk = "16MiB"', "disk limit 16 MiB reached"),
    ],
)
def test_a_limit_ends_the_turn_with_its_reason(
    base: Path, mode: str, rules: str, reason: str
) -> None:
    root = make_project(base, mode, rules)
    done = run_loop(root)
    assert_stopped_by(root, reason, done)


def test_a_fork_bomb_as_root_is_ended_by_the_watcher(base: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the root case needs root")
    root = make_project(base, "forks", "pids = 32")
    done = run_loop(root)
    assert_stopped_by(root, "pids limit 32 reached", done)


def test_a_fork_bomb_as_an_unprivileged_user_is_bounded_by_the_kernel(base: Path) -> None:
    runtime = unprivileged_python()
    if runtime is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, pythonpath = runtime
    root = make_project(base, "forks", "pids = 32", python=python)
    give_to("nobody", base)
    done = run_loop(root, user="nobody", python=python, pythonpath=pythonpath)
    assert_stopped_by(root, "pids limit 32 reached", done)
    children = (base / "out" / "forks.log").read_text().split()
    # Every process of the account counts: loopctl, bwrap, the maker and its children.
    assert 0 < len(children) < 32, len(children)


# The canary's memory hog caps itself (RLIMIT_AS), so that it stays cheap: it dies of that,
# and loopctl, its own limit off, names none.
CAPPED_HOG = (
    "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (400 << 20, 400 << 20));"
    f" sys.argv = ['exhausts', 'memory']; runpy.run_path({str(AGENT)!r}, run_name='__main__')"
)


@pytest.mark.parametrize("mode", ["memory", "disk"])
def test_canary_unlimited_the_same_makers_are_not_stopped_by_a_limit(base: Path, mode: str) -> None:
    rules = 'memory = "unlimited"\ndisk = "unlimited"'
    root = make_project(base, mode, rules, timeout="5s", tries=1)
    if mode == "memory":
        agent = root / "agents" / "maker.toml"
        capped = [PY, "-c", CAPPED_HOG]
        text = agent.read_text()
        start = text.index("argv = ")
        agent.write_text(
            text[:start] + f"argv = {json.dumps(capped)}" + text[text.index("\n", start) :]
        )
        git(root, "commit", "-q", "-am", "capped")
    done = run_loop(root)
    finished = attempts(root)
    assert finished, done.stdout + done.stderr
    assert "limit" not in str(finished[0].get("data")), finished


def test_the_defaults_and_what_holds_here() -> None:
    default = limits.Limits()
    assert default.memory == 8 * limits.GIB
    assert default.pids == 4096
    assert default.cpu_time is None
    assert default.disk == 10 * limits.GIB
    held = {h.name: h for h in limits.holds(default, euid=0)}
    assert held["pids"].held is False  # root ignores RLIMIT_NPROC
    assert held["memory"].held
    assert held["disk"].held
    assert limits.holds(default, euid=1000)[1].held is True


def test_limits_are_read_from_the_agent_files_sandbox_table(tmp_path: Path) -> None:
    from support.repos import make_project as make_repo_project
    from support.repos import make_repo, write_agent

    from loopctl.definitions import load_project

    repo = make_repo_project(make_repo(tmp_path / "repo"))
    write_agent(
        repo,
        "maker",
        "fixer.py",
        extra='\n[sandbox]\nmemory = "512MiB"\npids = "unlimited"\ncpu_time = "90s"\n'
        'disk = "unlimited"\n',
    )
    agent = load_project(repo).agent("maker")
    assert agent.sandbox.limits == limits.Limits(
        memory=512 * 1024**2, pids=None, cpu_time=90.0, disk=None
    )
    write_agent(repo, "maker", "fixer.py", extra='\n[sandbox]\nmemory = "2GiB"\n')
    assert load_project(repo).agent("maker").sandbox.limits == limits.Limits(memory=2 * limits.GIB)
    for bad, word in (("pids = 0", "at least 1"), ('pids = "many"', "unlimited")):
        write_agent(repo, "maker", "fixer.py", extra=f"\n[sandbox]\n{bad}\n")
        errors = [p.message for p in load_project(repo).errors]
        assert any("pids" in message and word in message for message in errors), errors
