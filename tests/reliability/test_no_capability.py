"""An agent holds no capability and no kernel door it does not need (issue 24, items 1 and 6).

As root, bubblewrap leaves the sandbox every capability in its own namespaces unless told
otherwise: enough to unmount the tmpfs that hides `~/.ssh` and read the key, and to remount the
read-only binds writable and write the user's files. The hostile maker (agents/
uses_capabilities.py) tries exactly that through a real `loopctl run`, as root and as an
unprivileged user; the outcome is checked on the host: the key's bytes are in no output, the
victim files are byte for byte as before, its effective capability set is empty, it has a session
of its own (so no TIOCSTI into loopctl's terminal) and cannot create a user namespace. The canary
runs the same program in the same sandbox without the hardening options, as root, and every
attack works: so each assertion can fail.
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

from loopctl import sandbox

PY = sys.executable
AGENT = Path(__file__).parents[1] / "agents" / "uses_capabilities.py"
SSH_KEY = "PRIVATE-KEY-material-2424"
HARDENING = ("--cap-drop", "ALL", "--new-session", "--disable-userns")

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def make_project(base: Path, python: str = PY) -> tuple[Path, list[Path]]:
    """A repository whose maker is the hostile program, a HOME with a key, and the victims."""
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SSH_KEY + "\n")
    (home / ".bashrc").write_text("# the user's own shell setup\n")
    (home / ".gitconfig").write_text("[user]\n\tname = t\n\temail = t@t\n")
    root = base / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "notes.txt").write_text("the user's notes\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / ".gitignore").write_text("__pycache__/\n")
    victims = [home / ".bashrc", root / "notes.txt"]
    (root / "agents").mkdir()
    argv = [python, str(AGENT), *map(str, victims)]
    (root / "agents" / "maker.toml").write_text(
        f'backend = "command"\nargv = {json.dumps(argv)}\ntimeout = "120s"\n'
    )
    (root / ".loop" / "loops").mkdir(parents=True)
    config = '[defaults]\nmaker = "maker"\n'
    if python != PY:
        # The system interpreter finds this checkout's loopctl and pytest through PYTHONPATH.
        config += '\n[env]\nallow = ["PYTHONPATH"]\n'
    (root / ".loop" / "config.toml").write_text(config)
    check = json.dumps([python, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
    (root / ".loop" / "loops" / "attack.toml").write_text(
        'prompt = "Fix add()."\n\n[maker]\nagent = "maker"\n\n'
        f"[checker]\ncommand = {check}\n\n[budget]\nmax_iterations = 1\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    return root, victims


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
        [python, "-m", "loopctl", "run", "attack", "--once"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
        stdin=subprocess.DEVNULL, **as_user(user),
    )  # fmt: skip


def maker_output(root: Path) -> str:
    outs = sorted((root / ".loop" / "runs").glob("*/*/attempt-*/maker.out"))
    return "\n".join(out.read_text(errors="replace") for out in outs)


def assert_contained(root: Path, victims: list[Path], before: dict[Path, bytes]) -> str:
    output = maker_output(root)
    assert "CAPS capeff" in output, "the hostile maker never ran"
    assert "CAPS capeff 0000000000000000" in output, output
    assert "CAPS umount ok" not in output, output
    assert "CAPS remount refused all" in output, output
    assert "CAPS userns refused" in output, output
    # A session of its own: its leader (bwrap's child) is inside the sandbox's PID namespace.
    assert "CAPS session sid=0" not in output, output
    assert SSH_KEY not in output
    for record in [*(root / ".loop").rglob("*")]:
        if record.is_file():
            assert SSH_KEY.encode() not in record.read_bytes(), record
    for victim in victims:
        assert victim.read_bytes() == before[victim], victim
    return output


@pytest.fixture
def base() -> Iterator[Path]:
    # Not pytest's tmp_path: an unprivileged user must be able to enter it.
    folder = Path(tempfile.mkdtemp(prefix="loopctl-caps-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_as_root_the_agent_holds_no_capability_and_cannot_unhide_or_remount(base: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the root case needs root")
    root, victims = make_project(base)
    before = {victim: victim.read_bytes() for victim in victims}
    done = run_loop(root)
    output = assert_contained(root, victims, before)
    assert "CAPS victim refused" in output
    assert done.returncode == 0, done.stdout + done.stderr  # the fix itself still lands


def test_as_an_unprivileged_user_the_same_attacks_fail(base: Path) -> None:
    runtime = unprivileged_python()
    if runtime is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, pythonpath = runtime
    root, victims = make_project(base, python=python)
    before = {victim: victim.read_bytes() for victim in victims}
    give_to("nobody", base)
    done = run_loop(root, user="nobody", python=python, pythonpath=pythonpath)
    assert_contained(root, victims, before)
    assert done.returncode == 0, done.stdout + done.stderr


def _wrapped(base: Path, victims: list[Path]) -> tuple[str, list[str], dict[str, str]]:
    root = base / "repo"
    worktree = base / "work"
    worktree.mkdir()
    env = {**os.environ, "HOME": str(base / "home")}
    box = sandbox.make_sandbox(root=root, worktree=worktree)
    return box.wrap([PY, str(AGENT), *map(str, victims)], PY, worktree, env)


def test_canary_without_the_hardening_options_root_breaks_out(base: Path) -> None:
    """The same sandbox minus `--cap-drop ALL --new-session --disable-userns`, as root: the
    attacks work, so the assertions above are not vacuous."""
    if os.geteuid() != 0:
        pytest.skip("as an ordinary user bwrap drops every capability by itself")
    _root, victims = make_project(base)
    program, argv, env = _wrapped(base, victims)
    assert all(option in argv for option in HARDENING)
    weakened = [arg for arg in argv if arg not in HARDENING]
    done = subprocess.run(
        weakened, executable=program, env=env, capture_output=True, text=True, check=False,
        stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    assert "CAPS capeff 000000" not in done.stdout, done.stdout
    assert "CAPS umount ok" in done.stdout
    assert f"CAPS key READ {SSH_KEY}" in done.stdout
    assert "CAPS session sid=0" in done.stdout
    assert "CAPS userns ok" in done.stdout
    for victim in victims:
        assert "PWNED" in victim.read_text(), victim


def test_only_a_cli_that_nests_its_own_sandbox_may_make_a_user_namespace(base: Path) -> None:
    """Codex confines its tools with a bwrap of its own, which needs a user namespace: only its
    sandbox keeps that right, and it still drops every capability."""
    worktree = base / "work"
    worktree.mkdir()
    env = {**os.environ, "HOME": str(base / "home")}
    (base / "home").mkdir()
    code = (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True);"
        "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())"
    )
    seen = {}
    for cli in ("codex", "claude", None):
        box = sandbox.make_sandbox(root=base, worktree=worktree, cli=cli)
        program, argv, inner = box.wrap([PY, "-c", code], PY, worktree, env)
        assert "--cap-drop" in argv
        assert "--new-session" in argv
        done = subprocess.run(
            argv, executable=program, env=inner, capture_output=True, text=True, check=False,
            timeout=120,
        )  # fmt: skip
        seen[cli] = done.stdout.split()[1] if done.stdout else done.stderr
    assert seen == {"codex": "0", "claude": "-1", None: "-1"}


def test_a_bwrap_older_than_0_8_gets_no_disable_userns(base: Path) -> None:
    """`--disable-userns` came with bubblewrap 0.8: an older bwrap is not told it (it would
    refuse to start), and a system bwrap that old loses to the bundled one."""
    old = base / "bwrap"
    old.write_text("#!/bin/sh\necho 'bubblewrap 0.6.1'\n")
    old.chmod(0o755)
    assert sandbox.bwrap_version(str(old)) == (0, 6, 1)
    assert not sandbox.knows_disable_userns(str(old))
    bundled = sandbox.find_bwrap()
    assert bundled is not None
    assert sandbox.knows_disable_userns(bundled)
    box = sandbox.Sandbox("bwrap", str(old), base, base, disable_userns=False)
    args = box.bwrap_args(base, {"HOME": str(base)}, PY)
    assert "--disable-userns" not in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
