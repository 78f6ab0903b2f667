"""The sandbox's rules as a Seatbelt (SBPL) profile for macOS's sandbox-exec (untested here)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.egress import NetworkMode
from loopctl.sandbox.git_admin import PROTECTED_IN_CHECKOUT
from loopctl.sandbox.places import expand, home_of

if TYPE_CHECKING:  # the policy imports this module to write a profile
    from loopctl.sandbox.policy import Sandbox


def seatbelt_profile(sandbox: Sandbox, env: Mapping[str, str]) -> str:
    """The same rules as a Seatbelt (SBPL) profile for macOS's sandbox-exec (untested here)."""
    home = home_of(env)

    def quoted(path: Path) -> str:
        return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [
        "(version 1)",
        "(deny default)",
        "(allow process-fork)",
        "(allow process-exec)",
        "(allow signal (target same-sandbox))",
        "(allow sysctl-read)",
        "(allow mach-lookup)",
        "(allow ipc-posix-shm)",
        "(allow file-read*)",
        '(allow file-write* (literal "/dev/null") (literal "/dev/tty"))',
        '(allow file-write* (subpath "/private/tmp") (subpath "/private/var/folders"))',
    ]
    for path in sandbox.writable_paths(env):
        lines.append(f"(allow file-write* (subpath {quoted(path)}))")
    if sandbox.git_objects is not None:
        # Seatbelt has no overlay: the object store is writable, so `git add` works.
        lines.append(f"(allow file-write* (subpath {quoted(sandbox.git_objects)}))")
    exposed = {expand(p, env, home) for p in sandbox.readable}
    for path in sandbox.hidden_paths(env):
        if path not in exposed:
            lines.append(f"(deny file-read* file-write* (subpath {quoted(path)}))")
    if sandbox.worktree == sandbox.root:
        for name in PROTECTED_IN_CHECKOUT:
            lines.append(f"(deny file-write* (subpath {quoted(sandbox.root / name)}))")
    for path in sandbox.git_pinned:
        lines.append(f"(deny file-write* (literal {quoted(path)}))")
    # Seatbelt cannot filter by host, and no proxy runs for it yet: proxy mode keeps loopback
    # only (so a local model server works, the host's loopback services too); untested.
    mode = sandbox.egress.mode
    if mode is NetworkMode.OPEN:
        lines.append("(allow network*)")
    elif mode is NetworkMode.PROXY:
        lines += [
            "(deny network*)",
            '(allow network* (remote ip "localhost:*"))',
            '(allow network* (local ip "localhost:*"))',
        ]
    else:
        lines.append("(deny network*)")
    return "\n".join(lines) + "\n"
