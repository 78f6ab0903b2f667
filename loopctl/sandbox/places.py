"""Paths as the sandbox reads them: the agent's home, `~` and `$NAME|default` in declared
places, the private temporary folders, and one spelling per place."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping, Sequence
from pathlib import Path

# Private, empty, writable inside every sandbox: nothing of the host's temporary files is seen.
PRIVATE_TMP: tuple[str, ...] = ("/tmp", "/var/tmp")


def home_of(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or str(Path.home()))


def passwd_home() -> list[Path]:
    # HOME can be changed by whoever started loopctl; the account's own home holds the real keys.
    try:
        return [Path(pwd.getpwuid(os.getuid()).pw_dir)]
    except KeyError:
        return []


def expand(text: str, env: Mapping[str, str], home: Path) -> Path:
    if text == "~" or text.startswith("~/"):
        return home / text[2:] if text != "~" else home
    return Path(text)


def state_path(spec: str, env: Mapping[str, str], home: Path) -> Path:
    """Resolve `$VAR|default[:sub]` against the agent's environment."""
    spec, _, sub = spec.partition(":")
    if spec.startswith("$"):
        name, _, default = spec[1:].partition("|")
        base = Path(env[name]) if env.get(name) else expand(default, env, home)
    else:
        base = expand(spec, env, home)
    return base / sub if sub else base


def under_private_tmp(path: Path) -> bool:
    return any(path == Path(tmp) or Path(tmp) in path.parents for tmp in PRIVATE_TMP)


def unique(paths: Sequence[Path]) -> list[Path]:
    seen: set[Path] = set()
    out: list[Path] = []
    for path in paths:
        resolved = Path(os.path.abspath(path))
        if resolved not in seen:
            seen.add(resolved)
            out.append(resolved)
    return out
