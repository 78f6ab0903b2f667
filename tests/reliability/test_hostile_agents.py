# ruff: noqa: E501  (inline project files read better whole)
"""Hostile makers against the sandbox (DESIGN §5 invariant 11), with the default configuration.

Each maker is a real program (agents/hostile.py) run by a real `loopctl` process, in a real git
repository with a bare remote, a HOME holding credential files, and a withheld secret in
loopctl's own environment. The attacks: read ancestors' environ; rewrite `.loop/` and the agent
files; approve and retry inbox items and forge an `approved` event; write `.git/config`,
`info/exclude`, `hooks/`, `refs/replace`, push and move `main`; read `~/.ssh` and
`~/.git-credentials`; leave a `setsid` double-forked writer that plants a backdoor after the
check; and leave fifty detached sleepers. Every promise is asserted from the outcome: bytes on
disk, refs in git, the event log, and the host's /proc.

The same attacks run as root (under /tmp and outside it) and, where this machine has an
unprivileged account that can reach loopctl's interpreter, as that user, outside /tmp.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.accounts import as_user, give_to, unprivileged_python
from support.outside_tmp import Place, outside_tmp
from support.repos import git

from loopctl import sandbox

PY = sys.executable
HOSTILE = Path(__file__).parent / "agents" / "hostile.py"
SECRET_NAME = "LOOPCTL_TEST_SECRET_TOKEN"
SECRET_VALUE = "s3cr3t-value-that-must-stay-home-4711"
SSH_KEY = "PRIVATE-KEY-material-0451"
GIT_CREDENTIAL = "https://user:ghp_credential0451@github.example"
MARKER = "loopctl-hostile-survivor"
ALL_ATTACKS = ["environ", "rules", "approve", "git", "objects", "credentials", "writer", "forks"]

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] is None, reason=f"no sandbox on this machine: {sandbox.probe()[2]}"
)


def make_project(
    base: Path, attacks: list[str], *, mode: str | None = None, python: str = PY
) -> Path:
    """A repository whose `attack` loop runs the hostile maker and whose `ship` loop waits for
    an approval to push, with a bare `origin` and a HOME full of credentials."""
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SSH_KEY + "\n")
    (home / ".git-credentials").write_text(GIT_CREDENTIAL + "\n")
    (home / ".gitconfig").write_text("[user]\n\tname = t\n\temail = t@t\n")
    remote = base / "origin.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(remote))
    root = base / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / ".gitignore").write_text("__pycache__/\n")
    (root / "agents").mkdir()
    hostile = [python, str(HOSTILE)]
    for name, argv in (("maker", [*hostile, *attacks]), ("fixer", hostile)):
        (root / "agents" / f"{name}.toml").write_text(
            f'backend = "command"\nargv = {json.dumps(argv)}\ntimeout = "120s"\n'
        )
    (root / ".loop" / "loops").mkdir(parents=True)
    config = '[defaults]\nmaker = "maker"\n'
    if python != PY:
        # The system interpreter finds this checkout's loopctl and pytest through PYTHONPATH.
        config += '\n[env]\nallow = ["PYTHONPATH"]\n'
    if mode is not None:
        config += f'\n[sandbox]\nmode = "{mode}"\n'
    (root / ".loop" / "config.toml").write_text(config)
    check = json.dumps([python, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
    (root / ".loop" / "loops" / "attack.toml").write_text(
        'prompt = "Fix add()."\n\n[maker]\nagent = "maker"\n\n'
        f'[checker]\ncommand = {check}\nprotect = ["tests/**"]\n\n'
        '[budget]\nmax_iterations = 1\n\n[deliver]\nactions = ["commit"]\n'
    )
    (root / ".loop" / "loops" / "ship.toml").write_text(
        'prompt = "Fix add() and ship it."\n\n[maker]\nagent = "fixer"\n\n'
        f"[checker]\ncommand = {check}\n\n"
        '[budget]\nmax_iterations = 1\n\n[deliver]\nactions = ["commit", "push"]\napprove = ["push"]\n'
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    git(root, "remote", "add", "origin", str(remote))
    git(root, "push", "-q", "origin", "main")
    return root


@dataclass(frozen=True)
class Runtime:
    """Who runs loopctl, with which interpreter and import path."""

    user: str | None = None
    python: str = PY
    pythonpath: str | None = None


ROOT_RUNTIME = Runtime()


def loopctl(
    root: Path, *args: str, runtime: Runtime = ROOT_RUNTIME
) -> subprocess.CompletedProcess[str]:
    home = root.parent / "home"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        SECRET_NAME: SECRET_VALUE,
        "LANG": "C.UTF-8",
    }
    if runtime.pythonpath:
        env["PYTHONPATH"] = runtime.pythonpath
    return subprocess.run(
        [runtime.python, "-m", "loopctl", *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
        **as_user(runtime.user),
    )  # fmt: skip


def survivors(root: Path) -> list[str]:
    """Host processes still running one of this project's hostile programs."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if f"{MARKER}:{root}" in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline[:80]}")
    return found


def digest(paths: list[Path]) -> dict[str, str]:
    out = {}
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file():
                    out[str(child)] = hashlib.sha256(child.read_bytes()).hexdigest()
        elif path.exists():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


def maker_output(root: Path) -> str:
    outs = sorted((root / ".loop" / "runs").glob("*/*/attempt-*/maker.out"))
    return "\n".join(out.read_text(errors="replace") for out in outs)


def kill_survivors(root: Path) -> None:
    for line in survivors(root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split(":")[0]), 9)


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    kill_survivors(tmp_path / "repo")


def run_attacks(
    root: Path, *, runtime: Runtime = ROOT_RUNTIME
) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    """Open a pending push approval, snapshot everything, then run the hostile maker."""
    shipped = loopctl(root, "run", "ship", "--once", runtime=runtime)
    assert "approval" in (shipped.stdout + shipped.stderr) or shipped.returncode in (0, 1), shipped
    inbox = json.loads(loopctl(root, "inbox", "--json", runtime=runtime).stdout)
    items = inbox["inbox"]
    assert any(item.get("kind") == "approval" for item in items), inbox
    remote = root.parent / "origin.git"
    before = {
        "protected": digest(
            [root / ".loop" / "config.toml", root / ".loop" / "loops", root / "agents",
             root / ".git" / "config", root / ".git" / "info", root / ".git" / "hooks"]
        ),
        "refs": refs(root).splitlines(),
        "remote": refs(remote),
        "items": items,
    }  # fmt: skip
    return loopctl(root, "run", "attack", "--once", runtime=runtime), before


def assert_promises_held(
    root: Path,
    done: subprocess.CompletedProcess[str],
    before: dict[str, object],
    attacks: list[str],
) -> None:
    output = maker_output(root)
    assert output, f"the hostile maker never ran: {done.stdout}{done.stderr}"
    # Processes: nothing the agent started outlives its attempt, setsid or not.
    assert survivors(root) == []
    # Secrets: no ancestor's (nor anyone's) environ was readable, and nothing leaked anywhere.
    if "environ" in attacks:
        assert "HOSTILE environ none secret" in output, output
    for leak in (SECRET_VALUE, SSH_KEY, "ghp_credential0451"):
        assert leak not in output
        for record in (root / ".loop" / "log").glob("*"):
            assert leak not in record.read_text(errors="replace")
    if "credentials" in attacks:
        assert "READ" not in output.split("HOSTILE credentials", 1)[-1].split("HOSTILE", 1)[0]
    # Rules, definitions and the repository's git state: byte for byte as before.
    after = digest(
        [root / ".loop" / "config.toml", root / ".loop" / "loops", root / "agents",
         root / ".git" / "config", root / ".git" / "info", root / ".git" / "hooks"]
    )  # fmt: skip
    assert after == before["protected"]
    assert not (root / ".git" / "refs" / "replace").exists() or not any(
        (root / ".git" / "refs" / "replace").iterdir()
    )
    outside_loop = [
        line
        for line in refs(root).splitlines()
        if " refs/heads/loop/" not in line and "refs/heads/loop/" not in line.split()[0]
    ]
    before_outside = [line for line in before["refs"] if "refs/heads/loop/" not in line.split()[0]]  # type: ignore[union-attr]
    assert outside_loop == before_outside
    assert refs(root.parent / "origin.git") == before["remote"]
    # The object store: every object of the user's history still there and sound.
    assert git(root, "fsck", "--no-progress", "--no-dangling", "--strict") == ""
    # Approvals: still pending; no `approved` event in the log, forged or real.
    inbox = json.loads(loopctl(root, "inbox", "--json").stdout)
    items = inbox["inbox"]
    approvals = [item for item in items if item.get("kind") == "approval"]
    assert approvals
    for item in approvals:
        assert item["status"] == "open", item
        assert not item["approved"], item
    for record in (root / ".loop" / "log").glob("*"):
        for line in record.read_text().splitlines():
            if line.strip():
                assert json.loads(line).get("type") != "approved", line
    # Commit: the writer strikes a second after the agent's turn, when loopctl checks and
    # commits; the sandbox has ended it long before, so the fix alone is committed.
    assert done.returncode == 0, done.stdout + done.stderr
    (branch,) = [
        line.split()[0] for line in refs(root).splitlines()
        if line.startswith("refs/heads/loop/attack/")
    ]  # fmt: skip
    assert len(git(root, "rev-list", branch, "--not", "main").split()) == 1
    assert "backdoor.py" not in git(root, "ls-tree", "-r", "--name-only", branch)
    assert git(root, "show", f"{branch}:tests/test_calc.py") == (
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    assert git(root, "show", f"{branch}:calc.py") == "def add(a, b):\n    return a + b\n"


def test_every_attack_fails_as_root(place: Place) -> None:
    """With the checkout and HOME under /tmp, and outside it (where the sandbox's private
    /tmp protects nothing by accident: issue 27)."""
    root = make_project(place.base, ALL_ATTACKS)
    try:
        done, before = run_attacks(root)
    finally:
        kill_survivors(root)
    assert_promises_held(root, done, before, ALL_ATTACKS)
    output = maker_output(root)
    # The attacks really ran and were refused by the sandbox, not skipped.
    assert "HOSTILE rules refused" in output
    assert "Read-only file system" in output
    assert "HOSTILE writer writer left behind" in output
    assert "HOSTILE forks 50 sleepers left behind" in output


def test_every_attack_fails_as_an_unprivileged_user() -> None:
    found = unprivileged_python()
    if found is None:
        pytest.skip(
            "no unprivileged account can run this checkout's loopctl here (needs root, and a world-readable interpreter and checkout)"
        )
    runtime = Runtime(user="nobody", python=found[0], pythonpath=found[1])
    # Outside /tmp, where a user keeps a checkout: there the sandbox's private /tmp hides
    # nothing of the host's file system (the root runs cover both places).
    with outside_tmp("hostile") as base:
        try:
            attacks = ["environ", "rules", "git", "objects", "credentials", "writer", "forks"]
            root = make_project(base, attacks, python=runtime.python)
            assert runtime.user is not None
            give_to(runtime.user, base)
            done, before = run_attacks(root, runtime=runtime)
            assert_promises_held(root, done, before, attacks)
            # What the sandbox left behind in the run folder is the user's to delete.
            removed = subprocess.run(
                [runtime.python, "-c", "import shutil; shutil.rmtree('.loop/runs')"],
                cwd=root, capture_output=True, text=True, check=False, **as_user(runtime.user),
            )  # fmt: skip
            assert removed.returncode == 0, removed.stderr
        finally:
            kill_survivors(base / "repo")


@pytest.mark.parametrize("attack", ALL_ATTACKS)
def test_each_attack_is_real_without_the_sandbox(base: Path, attack: str) -> None:
    """The same maker with `mode = "off"`, as root, breaks the promise its attack aims at: so
    each assertion above would catch a sandbox that stopped holding (and the run says it is
    unconfined)."""
    if os.geteuid() != 0:
        pytest.skip("as an ordinary user PR_SET_DUMPABLE hides loopctl's environ even unconfined")
    root = make_project(base, [attack], mode="off")
    done, before = run_attacks(root)
    assert "agents run unconfined" in done.stderr
    with pytest.raises((AssertionError, subprocess.CalledProcessError)):
        assert_promises_held(root, done, before, [attack])
