"""What the private /tmp would hide but an agent must still read: the files its command line
names, and the install folders of a program (and of its interpreter) living under a temp root."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from loopctl.sandbox.places import PRIVATE_TMP, under_private_tmp


def program_files(args: Sequence[str]) -> list[Path]:
    """Files an agent's command line names (a script, a config), with their folders: what the
    private /tmp must not hide. A folder that is a private temp root itself is never exposed
    whole, only the file in it."""
    found: list[Path] = []
    for arg in args:
        if not arg.startswith("/") or "\n" in arg or len(arg) > 4096:
            continue
        path = Path(arg)
        try:
            if not path.is_file():
                continue
        except OSError:
            continue
        if str(path.parent) not in PRIVATE_TMP:
            found.append(path.parent)  # the folder: a script's own modules sit beside it
        elif not path.is_symlink():
            found.append(path)
    return found


# Files that mark the top of an installed program: a Node package (its modules and vendored
# binaries sit below it), a virtualenv (its site-packages).
_INSTALL_MARKERS = ("package.json", "pyvenv.cfg")


def installed(executable: str, env: Mapping[str, str]) -> list[Path]:
    """What a program under a private temp root needs (a CLI installed in `HOME=/tmp/…`): the
    install folder of every link on the way to the file it runs, and of the interpreter its
    `#!` line names. Never a temp root itself: the rest of the host's /tmp stays hidden."""
    found: list[Path] = []
    todo, seen = [Path(executable)], set[Path]()
    while todo and len(seen) < 8:
        path = Path(os.path.abspath(todo.pop()))
        if path in seen:
            continue
        seen.add(path)
        hops = [path]
        with contextlib.suppress(OSError):
            for _ in range(40):  # the kernel's own bound on a chain of links
                if not hops[-1].is_symlink():
                    break
                target = Path(os.readlink(hops[-1]))
                hops.append(Path(os.path.abspath(hops[-1].parent / target)))
        hops.append(Path(os.path.realpath(path)))
        found += [install_root(hop) for hop in hops if under_private_tmp(hop)]
        runs_it = interpreter(hops[-1], env)
        if runs_it is not None:
            todo.append(runs_it)
    return found


def install_root(path: Path) -> Path:
    """The folder an installed file belongs to: the nearest one holding a package marker,
    else its own folder; the file alone when that folder is a temp root. Inside a Node tree it
    is the outermost `node_modules`: a package finds its dependencies in any `node_modules`
    above it (Codex's launcher its platform binary, a sibling package)."""
    if "node_modules" in path.parts[:-1]:
        return Path(*path.parts[: path.parts.index("node_modules") + 1])
    for folder in path.parents:
        if str(folder) in PRIVATE_TMP or folder == folder.parent:
            break
        if any((folder / marker).is_file() for marker in _INSTALL_MARKERS):
            return folder
    return path if str(path.parent) in PRIVATE_TMP else path.parent


def interpreter(script: Path, env: Mapping[str, str]) -> Path | None:
    """The program a script's `#!` line runs (`#!/usr/bin/env node`: node on PATH)."""
    try:
        with script.open("rb") as opened:
            head = opened.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        named = next((w for w in words[1:] if not w.startswith("-") and "=" not in w), None)
        found = shutil.which(named, path=env.get("PATH", os.defpath)) if named else None
        return Path(found) if found else None
    return Path(words[0])


def through_links(path: Path) -> list[Path]:
    """What to bind for `path` to be seen inside the sandbox as it is on the host: the folder
    holding each link met on the way (so the link itself is there), then where it all leads.

    bwrap makes a mount point by walking to it from the sandbox's new root, where an absolute
    link names what is not there yet (the host's /tmp is not): binding `/tmp/a/link/sub` as
    it is spelled stops bwrap ("Can't mkdir"), and no agent starts. A link's holding folder
    that is a temp root is left to the caller, which never binds one whole."""
    places: list[Path] = []
    walked, todo, hops = Path("/"), list(Path(os.path.abspath(path)).parts[1:]), 0
    while todo and hops < 40:  # the kernel's own bound on a chain of links
        step = walked / todo.pop(0)
        if not os.path.islink(step):  # False, not an error, where this account cannot look
            walked = step
            continue
        hops += 1
        places.append(step.parent)
        try:
            target = os.readlink(step)
        except OSError:
            break
        todo = [*Path(os.path.abspath(step.parent / target)).parts[1:], *todo]
        walked = Path("/")
    return [*places, Path(os.path.realpath(path))]
