"""File operations inside folders an agent could write, that never follow a link (invariant 11).

loopctl runs unconfined, perhaps as root. After a turn it deletes, opens up (chmod) and copies
inside worktrees, state folders, pooled worktrees and seeds, where the agent may have left a
link to any folder of the host. A path-based walk (`os.walk`, `os.chmod(path)`, `Path.mkdir`)
follows such a link, in the last component or in any before it, and would delete or chmod what
it points at. Here every folder is opened relative to its parent's descriptor with
`O_NOFOLLOW`: a link is only ever unlinked, never entered, and the operation works on exactly
the folder it inspected.

`within` is the trusted part of a path (a folder loopctl made, or the user's own): it is opened
as given; everything below it is opened one component at a time, links refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Collection
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO left in a file's place must not hold loopctl at the open (no writer ever
# comes); it is then refused as no regular file. A regular file ignores the flag.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# Linux lets a descriptor name a file it may not read (O_PATH); elsewhere 0 (not used).
_O_PATH = getattr(os, "O_PATH", 0)


def open_folder(within: Path, relative: str | Path = "") -> int:
    """A descriptor of `within/relative`; no component of `relative` may be a link (ELOOP) or
    other than a folder (ENOTDIR). The caller closes it. `within` itself is opened as given,
    links followed: a folder whose own name an agent could replace goes in `relative`."""
    fd = os.open(within, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in _parts(relative):
            child = _enter(fd, part, open_up=False)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_folders(within: Path, relative: str | Path) -> None:
    """Create `within/relative` and its missing parents; refuse (OSError ELOOP) when a
    component is a link, so nothing is created wherever a planted link points."""
    fd = os.open(within, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in _parts(relative):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
            child = _enter(fd, part, open_up=False)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def remove_tree(path: Path, *, within: Path | None = None) -> None:
    """Delete `path` (a file, a link, or a folder with everything in it), giving back to its
    owner each folder an agent took permissions away from; a link is unlinked, never followed.
    `within`: the trusted folder `path` lies under (its parent when not given). Nothing there:
    nothing to do."""
    top = within if within is not None else path.parent
    relative = path.relative_to(top)
    if not relative.parts:
        raise ValueError(f"remove_tree: {path} is the trusted folder itself")
    try:
        parent = open_folder(top, relative.parent)
    except FileNotFoundError:
        return
    try:
        _remove_entry(parent, relative.name)
    finally:
        os.close(parent)


def open_up(path: Path, *, within: Path | None = None, skip: Collection[str] = ()) -> None:
    """Give the owner rwx on every folder under `path` (what a maker may have taken away, so
    that git can clean it); `skip`: folders, relative to `path`, left as they are. No link is
    followed, and a folder loopctl cannot open up is left as it is."""
    top = within if within is not None else path.parent
    try:
        fd = open_folder(top, path.relative_to(top))
    except OSError:
        return
    skipped = {Path(name) for name in skip}
    stack: list[tuple[int, Path]] = [(fd, Path())]
    try:
        while stack:
            folder, relative = stack.pop()
            try:
                names = os.listdir(folder)
            except OSError:
                names = []
            for name in names:
                below = relative / name
                if below in skipped:
                    continue
                with contextlib.suppress(OSError):
                    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
                    if stat.S_ISDIR(info.st_mode):
                        stack.append((_enter(folder, name, open_up=True), below))
            os.close(folder)
    finally:
        for unvisited, _ in stack:
            os.close(unvisited)


def read_file(path: Path, *, within: Path) -> bytes:
    """The bytes of a regular file under `within`, reached without following a link."""
    relative = path.relative_to(within)
    parent = open_folder(within, relative.parent)
    try:
        fd = os.open(relative.name, _FILE_FLAGS, dir_fd=parent)
    finally:
        os.close(parent)
    return _regular_bytes(fd, path)


def read_regular(path: Path) -> bytes:
    """The bytes of `path` when it is a regular file: a link in its last component, a FIFO
    (whose open(2) would wait for ever for a writer) or a device (`/dev/zero` never ends) is
    refused (OSError), never read. For files an agent could have replaced; the folders on the
    way are followed (see `read_file` to refuse those too)."""
    return _regular_bytes(os.open(path, _FILE_FLAGS), path)


def _regular_bytes(fd: int, path: Path) -> bytes:
    """The bytes of the open `fd` when it is a regular file, else OSError; closes `fd`. The
    check comes before fdopen, which refuses a folder without closing what it was given."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def write_new(path: Path, data: bytes, *, within: Path) -> None:
    """Write `path` as a new file under `within`: whatever was there (a link, a hard link to
    another file) is unlinked first, never written through."""
    relative = path.relative_to(within)
    parent = open_folder(within, relative.parent)
    try:
        _remove_entry(parent, relative.name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(relative.name, flags, 0o600, dir_fd=parent)
    finally:
        os.close(parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def refresh_copy(source: Path, target: Path, *, within: Path, skip: Collection[str] = ()) -> None:
    """Bring `target` (under `within`, where an agent writes) up to date with `source` (a file
    or folder of the user's own): folders are made, a file is copied (mode and times kept) when
    the target has none or an older one, a link is recreated as the same link. Nothing is taken
    away from the target: what was written there since stays until the user's file is newer.
    `skip`: names at the top of a folder `source` not to copy. No link under `within` is
    followed: whatever stands where a copy goes is removed first."""
    relative = target.relative_to(within)
    if not relative.parts:
        raise ValueError(f"refresh_copy: {target} is the trusted folder itself")
    make_folders(within, relative.parent)
    if not source.is_dir():
        parent = open_folder(within, relative.parent)
        try:
            # The user's own path, named by the user: a link there is theirs to follow.
            _copy_newer(os.open(source, os.O_RDONLY | os.O_CLOEXEC), parent, relative.name)
        finally:
            os.close(parent)
        return
    _replace_with_folder(within, relative)
    for folder, dirs, files in os.walk(source):
        here = Path(folder).relative_to(source)
        if not here.parts:
            dirs[:] = [name for name in dirs if name not in skip]
            files = [name for name in files if name not in skip]
        try:
            parent = open_folder(within, relative / here)
        except OSError:
            dirs[:] = []
            continue
        try:
            for name in [*dirs, *files]:
                with contextlib.suppress(OSError):
                    _copy_entry(Path(folder) / name, parent, name)
        finally:
            os.close(parent)


# --- internals ---------------------------------------------------------------------------------


def _parts(relative: str | Path) -> tuple[str, ...]:
    parts = tuple(part for part in Path(relative).parts if part not in ("", "."))
    if any(part == ".." or part.startswith("/") for part in parts):
        raise ValueError(f"not a path below its folder: {relative}")
    return parts


def _enter(parent: int, name: str, *, open_up: bool) -> int:
    """Open the folder `name` in `parent` without following a link; with `open_up`, first give
    its owner rwx back when the agent took them (root opens it regardless)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        if not open_up:
            raise
        _chmod_at(parent, name, 0o700)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    if open_up:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_mode & 0o700 != 0o700:
                os.fchmod(fd, 0o700)
    return fd


def _replace_with_folder(within: Path, relative: Path) -> None:
    """Make `within/relative` a real folder: a link or file standing there is removed."""
    parent = open_folder(within, relative.parent)
    try:
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(relative.name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode):
                _remove_entry(parent, relative.name)
        with contextlib.suppress(FileExistsError):
            os.mkdir(relative.name, 0o700, dir_fd=parent)
    finally:
        os.close(parent)


def _copy_entry(source: Path, parent: int, name: str) -> None:
    """One entry of a folder being copied into `parent` (see `refresh_copy`)."""
    info = source.lstat()
    if stat.S_ISLNK(info.st_mode):
        wanted = os.readlink(source)
        with contextlib.suppress(OSError):
            if os.readlink(name, dir_fd=parent) == wanted:
                return
        _remove_entry(parent, name)
        os.symlink(wanted, name, dir_fd=parent)
    elif stat.S_ISDIR(info.st_mode):
        with contextlib.suppress(FileNotFoundError):
            there = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(there.st_mode):
                return
            _remove_entry(parent, name)
        os.mkdir(name, 0o700, dir_fd=parent)
    elif stat.S_ISREG(info.st_mode):
        _copy_newer(os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), parent, name)


def _copy_newer(source_fd: int, parent: int, name: str) -> None:
    """Copy the open regular file `source_fd` to `name` in `parent` unless a regular file at
    least as new is there; closes `source_fd`."""
    with os.fdopen(source_fd, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode):
            return
        with contextlib.suppress(FileNotFoundError):
            there = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISREG(there.st_mode) and there.st_mtime_ns >= info.st_mtime_ns:
                return
        _remove_entry(parent, name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o600, dir_fd=parent)
        except FileExistsError:
            return  # a turn of the same loop and role, started at the same time, made it
        with os.fdopen(fd, "wb") as copy:
            shutil.copyfileobj(source, copy, 1 << 20)
            copy.flush()
            os.fchmod(copy.fileno(), stat.S_IMODE(info.st_mode))
            # The user's mtime, so that the next refresh knows this copy is not older.
            os.utime(copy.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))


def _chmod_at(parent: int, name: str, mode: int) -> None:
    """chmod `name` in `parent` unless it is a link (the link's target is never touched)."""
    if not _O_PATH:
        os.chmod(name, mode, dir_fd=parent, follow_symlinks=False)  # lchmod where there is one
        return
    fd = os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            return
        # The descriptor names this very inode: chmod through /proc/self/fd reaches it and
        # nothing else (glibc's own fchmodat(AT_SYMLINK_NOFOLLOW) does the same).
        os.chmod(f"/proc/self/fd/{fd}", mode)
    finally:
        os.close(fd)


def _remove_entry(parent: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    # Depth first with a stack of open folders: a tree an agent made ten thousand levels deep
    # costs descriptors, not Python's recursion limit.
    stack: list[tuple[int, str, list[str]]] = []
    try:
        fd = _enter(parent, name, open_up=True)
        stack.append((fd, name, os.listdir(fd)))
        while stack:
            folder, _own_name, pending = stack[-1]
            if pending:
                entry = pending.pop()
                try:
                    entry_info = os.stat(entry, dir_fd=folder, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(entry_info.st_mode):
                    child = _enter(folder, entry, open_up=True)
                    stack.append((child, entry, os.listdir(child)))
                else:
                    os.unlink(entry, dir_fd=folder)
                continue
            stack.pop()
            os.close(folder)
            if stack:
                os.rmdir(_own_name, dir_fd=stack[-1][0])
    finally:
        for folder, _, _ in stack:
            os.close(folder)
    os.rmdir(name, dir_fd=parent)
