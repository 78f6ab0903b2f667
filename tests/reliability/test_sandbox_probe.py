"""The probe that a sandbox can be set up, before any worktree exists
(loopctl/sandbox/host.py), against bwraps that refuse, hang or cannot start, and on the
platforms it answers for without running anything (issue 27). Each test names the one-line
mutants of host.py it kills.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from loopctl import sandbox
from loopctl.sandbox import host

LINUX = sys.platform.startswith("linux")


def probe_with(monkeypatch: pytest.MonkeyPatch, bwrap: Path | None) -> tuple[object, ...]:
    """What the probe answers when `bwrap` is the bwrap this machine offers (not cached)."""
    monkeypatch.setattr(host, "find_bwrap", lambda: None if bwrap is None else str(bwrap))
    return host.probe.__wrapped__()  # type: ignore[no-any-return]


def fake_bwrap(folder: Path, body: str) -> Path:
    """An executable `bwrap` in `folder`: a shell script that runs `body`, then the real bwrap
    with every argument."""
    real = sandbox.find_bwrap()
    assert real is not None
    path = folder / "bwrap"
    path.write_text(f'#!/bin/sh\n{body}\nexec {real} "$@"\n')
    path.chmod(0o755)
    return path


# Every option the probe gives the smallest sandbox, as every agent's sandbox gets it.
OPTIONS = ("--unshare-user", "--unshare-pid", "--cap-drop", "--new-session", "--disable-userns")


@pytest.mark.parametrize("refused", OPTIONS)
def test_a_bwrap_that_refuses_an_option_every_sandbox_uses_is_no_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    """Kills any of `--unshare-user`, `--unshare-pid` or `--disable-userns` dropped from the
    probe's sandbox: a bwrap (or kernel) that refuses one of them would pass the probe, and
    every agent would then fail at its start, after its worktree was made."""
    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    refuse = (
        f'for arg in "$@"; do [ "$arg" = "{refused}" ] &&'
        ' { echo "bwrap: Unknown option $arg" >&2; exit 1; }; done'
    )
    bwrap = fake_bwrap(tmp_path, refuse)
    assert probe_with(monkeypatch, bwrap) == (
        None,
        str(bwrap),
        f"{bwrap} cannot set up a sandbox: bwrap: Unknown option {refused}",
    )


def test_canary_a_bwrap_that_refuses_nothing_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    bwrap = fake_bwrap(tmp_path, ":")
    assert probe_with(monkeypatch, bwrap) == ("bwrap", str(bwrap), "")


def test_a_bwrap_that_is_no_program_is_no_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills OSError dropped from what the probe and the version check pass over: a `bwrap`
    that the kernel cannot execute (a damaged download, another architecture's binary) is no
    sandbox, said as such, never a traceback."""
    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    bwrap = tmp_path / "bwrap"
    bwrap.write_bytes(b"\x00garbage, no program\n")
    bwrap.chmod(0o755)
    mechanism, program, why = probe_with(monkeypatch, bwrap)
    assert (mechanism, program) == (None, str(bwrap))
    assert isinstance(why, str)
    assert why.startswith(f"{bwrap} could not start: "), why
    assert "Exec format error" in why


def test_on_macos_the_probe_is_sandbox_exec_or_says_it_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the macOS branch turned off or changed (`darwin`, `seatbelt`, its path) and an
    element dropped from its answers: sandbox-exec cannot run here, so the answer is what is
    checked, with sandbox-exec present (a stand-in) and missing (its real path)."""
    monkeypatch.setattr(sys, "platform", "darwin")
    assert probe_with(monkeypatch, None) == (None, None, "/usr/bin/sandbox-exec is missing")
    stand_in = tmp_path / "sandbox-exec"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    monkeypatch.setattr(host, "_SEATBELT", str(stand_in))
    assert probe_with(monkeypatch, None) == ("seatbelt", str(stand_in), "")


def test_on_another_system_there_is_no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kills the Linux check turned off (or its prefix emptied) and an element dropped from
    its answer: on FreeBSD, say, bwrap is not looked for (not even a stray one on PATH)."""
    monkeypatch.setattr(sys, "platform", "freebsd14")
    assert probe_with(monkeypatch, Path("/usr/local/bin/bwrap")) == (
        None,
        None,
        "no sandbox for freebsd14",
    )


@pytest.mark.parametrize(
    ("apparmor", "most", "expected"),
    [
        ("1\n", "15000\n", "AppArmor restricts unprivileged user namespaces here"),
        ("0\n", "0\n", "user namespaces are disabled; run `sudo sysctl"),
        ("0\n", "15000\n", "bwrap cannot set up a sandbox: bwrap: denied"),
    ],
)
def test_a_failed_probe_names_the_setting_that_stops_user_namespaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apparmor: str, most: str, expected: str
) -> None:
    """Kills the AppArmor and the user-namespace-limit explanations turned off, or their
    /proc files or values changed: where the kernel stops bwrap, the refusal says which
    setting does it and how to change it, not only bwrap's words. The two /proc files are
    stand-ins in tmp_path (this machine's own say neither)."""
    stand_ins = {
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": tmp_path / "apparmor",
        "/proc/sys/user/max_user_namespaces": tmp_path / "max",
    }
    stand_ins["/proc/sys/kernel/apparmor_restrict_unprivileged_userns"].write_text(apparmor)
    stand_ins["/proc/sys/user/max_user_namespaces"].write_text(most)
    real = Path
    monkeypatch.setattr(host, "Path", lambda text: real(stand_ins.get(str(text), text)))
    why = host._explain_failure("bwrap", "bwrap: denied\n")
    assert expected in why, why


def test_a_bwrap_that_never_finishes_is_no_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills the timed-out probe's answer turned off (it was then explained as bwrap's own
    failure) or an element dropped from it: a bwrap that hangs (a stuck mount, a user
    namespace that never comes) is no sandbox, and the reason says it did not finish. The
    probe gives it 20 s; here 2 (the fake never finishes, so no machine is too slow for it)."""
    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    assert host.PROBE_TIMEOUT_S == 20
    monkeypatch.setattr(host, "PROBE_TIMEOUT_S", 2)
    hang = '[ "$1" = --version ] || exec sleep 600'
    bwrap = fake_bwrap(tmp_path, hang)
    assert probe_with(monkeypatch, bwrap) == (
        None,
        str(bwrap),
        f"{bwrap} could not start: it did not finish within 2s",
    )


def test_a_bwrap_whose_version_never_comes_is_taken_for_an_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bwrap --version` that hangs holds loopctl no longer than the probe's bound, and a
    version it could not read gets no option a newer bwrap would need (20 s; here 2, against a
    fake that never answers)."""
    if not LINUX:
        pytest.skip("bubblewrap is Linux only")
    monkeypatch.setattr(host, "PROBE_TIMEOUT_S", 2)
    bwrap = fake_bwrap(tmp_path, '[ "$1" = --version ] && exec sleep 600')

    assert host.bwrap_version(str(bwrap)) is None
    assert not host.knows_disable_userns(str(bwrap))


# Run as root in a mount namespace of its own (`unshare --mount`): the system folder given is
# overlaid with a writable layer of the namespace's own, where a `bwrap` is put (it runs the
# bundled one); nothing of the host's folder is touched. Prints the bwrap loopctl finds.
SYSTEM_BWRAP = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
scratch, folder, real = sys.argv[1:4]
def mount(source, target, kind, data):
    if libc.mount(source.encode(), target.encode(), kind.encode(), 0, data.encode()) != 0:
        raise OSError(ctypes.get_errno(), f"mount {kind} on {target}")
mount("tmpfs", scratch, "tmpfs", "mode=755")
os.mkdir(f"{scratch}/upper")
os.mkdir(f"{scratch}/work")
mount("overlay", folder, "overlay",
      f"lowerdir={folder},upperdir={scratch}/upper,workdir={scratch}/work")
with open(f"{folder}/bwrap", "w") as script:
    script.write(f'#!/bin/sh\nexec {real} "$@"\n')
os.chmod(f"{folder}/bwrap", 0o755)
from loopctl import sandbox
print(sandbox.find_bwrap())
"""


@pytest.mark.parametrize("folder", ["/usr/bin", "/usr/local/bin"])
def test_a_system_bwrap_comes_before_the_bundled_one(tmp_path: Path, folder: str) -> None:
    """Kills either system place dropped from (or changed in) where bwrap is looked for first,
    and the check that picks a system bwrap turned off: a distribution's bwrap carries its
    AppArmor profile (where unprivileged user namespaces are restricted, only it can make
    one), so it is the one used. Root only: the system folder gets a `bwrap` in a mount
    namespace of the test's own."""
    import subprocess

    if not LINUX or os.geteuid() != 0 or not Path("/usr/bin/unshare").exists():
        pytest.skip("needs root and unshare(1) for a system folder of the test's own")
    if any(os.access(p, os.X_OK) for p in ("/usr/bin/bwrap", "/usr/local/bin/bwrap")):
        pytest.skip("a system bwrap is there already")
    if not Path(folder).is_dir():
        pytest.skip(f"no {folder} here")
    real = sandbox.find_bwrap()
    assert real is not None
    import loopctl

    own = str(Path(loopctl.__file__).resolve().parents[1])  # this loopctl (a mutant's copy)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([own, os.environ.get("PYTHONPATH", "")])}
    (tmp_path / "scratch").mkdir()
    done = subprocess.run(
        ["/usr/bin/unshare", "--mount", "--propagation", "private", sys.executable, "-c",
         SYSTEM_BWRAP, str(tmp_path / "scratch"), folder, real],
        capture_output=True, text=True, env=env, cwd="/", timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"{folder}/bwrap", done.stdout + done.stderr
