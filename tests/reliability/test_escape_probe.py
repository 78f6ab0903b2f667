"""`loopctl doctor`'s live probe tries the escapes a hostile agent would (issue 24, item 7).

Inside a real sandbox the probe (loopctl/escape_probe.py) unmounts what hides a credential
store, remounts every mount writable, creates a user namespace, writes through links planted
in its worktree, asks for the kernel keyring and traces its parent and a child of its own. With
the sandbox as loopctl builds it every finding is `ok`, as root and as an unprivileged user. The
canaries switch one defence off and show the probe sees the hole: as root without `--cap-drop
ALL`, `--disable-userns` and the seccomp filter the umount, the remount and the user namespace
work; without the filter alone, for any user, the keyring and ptrace do; with the checkout
writable the planted link writes through; and `doctor` then exits 1 with one clear line.
"""

from __future__ import annotations

import dataclasses
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
from support.cli import invoke
from support.outside_tmp import Place
from support.repos import git

from loopctl import limits, sandbox, syscall_filter
from loopctl.egress import EgressPolicy, NetworkMode
from loopctl.secrets import build_env

PY = sys.executable
ESCAPES = ("umount", "link", "remount", "userns", "keyring", "ptrace", "network")

pytestmark = pytest.mark.skipif(
    sandbox.probe()[0] != "bwrap", reason=f"no bwrap sandbox here: {sandbox.probe()[2]}"
)


def lay_out(folder: Path) -> Path:
    """A checkout with notes and `.loop/`, and a home with a key, in `folder`."""
    root = folder / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "notes.txt").write_text("the user's notes\n")
    (root / ".loop").mkdir()
    (folder / "home" / ".ssh").mkdir(parents=True, exist_ok=True)
    (folder / "home" / ".ssh" / "id_ed25519").write_text("KEY\n")
    return folder


@pytest.fixture
def base() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="loopctl-escape-"))
    folder.chmod(0o755)
    yield lay_out(folder)
    shutil.rmtree(folder, ignore_errors=True)


def findings(box: sandbox.Sandbox, base: Path) -> dict[str, bool]:
    env = {**build_env(allow=()), "HOME": str(base / "home")}
    store = base / "home" / ".ssh"
    found = sandbox.probe_findings(box, base / "repo", env, base / "home", store)
    return {f.name: f.ok for f in found}


def scratch(base: Path) -> Path:
    worktree = base / "worktree"
    worktree.mkdir(exist_ok=True)
    return worktree


def test_every_escape_fails_in_the_sandbox_as_built(place: Place) -> None:
    """With the checkout and HOME under /tmp, and outside it (issue 27)."""
    base = lay_out(place.base)
    box = sandbox.make_sandbox(root=base / "repo", worktree=scratch(base), limits=limits.Limits())
    found = findings(box, base)
    assert all(found.values()), found
    assert set(ESCAPES) <= set(found)
    assert (base / "repo" / "notes.txt").read_text() == "the user's notes\n"
    assert not list((base / "repo" / ".loop").iterdir())


def test_canary_without_the_hardening_root_unmounts_remounts_and_unshares(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("capabilities are kept only by a root caller")
    monkeypatch.setattr(sandbox.host, "HARDENING", ())
    box = sandbox.make_sandbox(root=base / "repo", worktree=scratch(base))
    # The seccomp filter would refuse them too (tests/reliability/test_syscall_filter.py).
    found = findings(dataclasses.replace(box, disable_userns=False, syscall_filter=False), base)
    assert found["umount"] is False, found
    assert found["remount"] is False, found
    assert found["userns"] is False, found


def test_canary_with_the_hosts_network_the_probe_reaches_its_listener_and_socket(
    base: Path,
) -> None:
    """`network = "open"` (the opt-out) shares the host's namespace: the probe must then see
    the host's loopback listener and abstract socket it is given (issue 25)."""
    box = sandbox.make_sandbox(
        root=base / "repo", worktree=scratch(base), egress=EgressPolicy(mode=NetworkMode.OPEN)
    )
    env = {**build_env(allow=()), "HOME": str(base / "home")}
    store = base / "home" / ".ssh"
    found = sandbox.probe_findings(box, base / "repo", env, base / "home", store)
    (network,) = [f for f in found if f.name == "network"]
    assert not network.ok
    assert "127.0.0.1 listener" in network.detail
    assert "abstract socket" in network.detail


# The canary's sandbox, built and probed in a process of the account under test.
UNFILTERED = """
import dataclasses, json, sys
from pathlib import Path
from loopctl import limits, sandbox
from loopctl.secrets import build_env
base = Path(sys.argv[1])
box = sandbox.make_sandbox(
    root=base / "repo", worktree=base / "worktree", limits=limits.Limits()
)
box = dataclasses.replace(box, syscall_filter=False)
env = {**build_env(allow=()), "HOME": str(base / "home")}
found = sandbox.probe_findings(box, base / "repo", env, base / "home", base / "home" / ".ssh")
print(json.dumps({f.name: f.ok for f in found}))
"""


@pytest.mark.parametrize("user", [None, "nobody"], ids=["caller", "unprivileged"])
def test_canary_without_the_filter_the_keyring_and_ptrace_open_to_any_user(
    base: Path, user: str | None
) -> None:
    """Doors no capability guards: `--cap-drop ALL` and `--disable-userns` stay in place."""
    python, pythonpath = PY, None
    scratch(base)
    if user is not None:
        runtime = unprivileged_python()
        if runtime is None:
            pytest.skip("needs root and an interpreter the account `nobody` can run")
        python, pythonpath = runtime
        give_to(user, base)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        **({"PYTHONPATH": pythonpath} if pythonpath else {}),
    }
    done = subprocess.run(
        [python, "-c", UNFILTERED, str(base)], cwd=base, env=env, capture_output=True,
        text=True, timeout=300, check=False, **as_user(user),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)
    assert found["keyring"] is False, found
    assert found["ptrace"] is False, found
    assert found["umount"] is True, found  # the rest of the hardening still holds


def test_canary_a_writable_checkout_lets_the_planted_link_write(base: Path) -> None:
    root = base / "repo"
    box = sandbox.make_sandbox(root=root, worktree=scratch(base), writable=[str(root)])
    found = findings(box, base)
    assert found["link"] is False, found
    assert (root / ".loop" / ".doctor-probe-link").exists()


def test_doctor_fails_with_one_line_when_an_escape_works(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0:
        pytest.skip("capabilities are kept only by a root caller")
    monkeypatch.setattr(sandbox.host, "HARDENING", ())
    monkeypatch.setattr(sandbox.host, "knows_disable_userns", lambda program: False)
    monkeypatch.setattr(syscall_filter, "program", lambda nested_userns: None)
    monkeypatch.setenv("HOME", str(base / "home"))
    result = invoke(monkeypatch, base / "repo", "doctor")
    assert result.exit_code == 1, result.output
    assert "FAIL umount" in result.output
    assert "the sandbox probe found a hole" in result.output
    assert "Traceback" not in result.output


def test_as_an_unprivileged_user_every_escape_fails(base: Path) -> None:
    runtime = unprivileged_python()
    if runtime is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, pythonpath = runtime
    give_to("nobody", base)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        **({"PYTHONPATH": pythonpath} if pythonpath else {}),
    }
    done = subprocess.run(
        [python, "-m", "loopctl", "doctor", "--json"], cwd=base / "repo", env=env,
        capture_output=True, text=True, timeout=300, check=False, **as_user("nobody"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["doctor"]
    found = {f["name"]: f["ok"] for f in report["probe"]}
    assert all(found.values()), found
    assert set(ESCAPES) <= set(found), found
    held = {h["name"]: h["held"] for h in report["limits"]}
    assert held["pids"] is True  # RLIMIT_NPROC holds for an ordinary user
