"""A program run in the sandbox loopctl builds, by a process of the account under test.

tests/programs/confined_run.py (loopctl's side) builds the sandbox for a checkout and worktree
and runs the program in it; tests/programs/tries_paths.py (the agent's side) reports what it
could write, remove, read and see. Verdicts are read on the host, from their JSON.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from support.accounts import as_user, runtime

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


def driver(
    user: str | None,
    root: Path,
    worktree: Path,
    home: Path,
    argv: list[str],
    *,
    loopctl_home: Path | None = None,
    path: str = "/usr/bin:/bin",
    **extra: Any,
) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """The command line, environment and Popen options of loopctl's side: confined_run.py as
    `user`, running `argv` (`{python}`: the account's interpreter) with HOME=`home` and
    PATH=`path` in the agent's environment, and `loopctl_home` (default `home`) as its own."""
    python, pythonpath = runtime(user)
    agent_env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8"}
    spec = {"root": str(root), "worktree": str(worktree), "env": agent_env, **extra}
    spec["argv"] = [python if word == "{python}" else word for word in argv]
    own_home = str(loopctl_home or home)
    env = {"PATH": "/usr/bin:/bin", "HOME": own_home, "LANG": "C.UTF-8", **pythonpath}
    command = [python, str(PROGRAMS / "confined_run.py"), json.dumps(spec)]
    return command, env, as_user(user)


def confined(
    user: str | None, root: Path, worktree: Path, home: Path, argv: list[str], **options: Any
) -> dict[str, Any]:
    """Run `argv` confined (as `driver` says); the program's exit code and output."""
    command, env, who = driver(user, root, worktree, home, argv, **options)
    done = subprocess.run(
        command, env=env, cwd="/", capture_output=True, text=True, timeout=180, check=False,
        stdin=subprocess.DEVNULL, **who,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def last_json(ran: dict[str, Any]) -> Any:
    """The JSON the confined program printed last, once it exited 0."""
    assert ran["code"] == 0, ran
    return json.loads(ran["stdout"].strip().splitlines()[-1])


def tries(
    user: str | None, root: Path, worktree: Path, home: Path, **wanted: Any
) -> dict[str, dict[str, Any]]:
    """tries_paths.py, confined: what it could write, remove, read and see (`readable`: the
    places the sandbox is asked to show, not tried)."""
    paths = {key: [str(p) for p in value] for key, value in wanted.items() if key != "readable"}
    argv = ["{python}", str(PROGRAMS / "tries_paths.py"), json.dumps(paths)]
    extra = {"readable": wanted["readable"]} if "readable" in wanted else {}
    return last_json(confined(user, root, worktree, home, argv, **extra))  # type: ignore[no-any-return]
