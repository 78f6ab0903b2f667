"""A worktree's own `node_modules`, linked to the checkout's, so a Node check imports the worktree.

`node_modules` is ignored, so a task's worktree (made from a commit) has none: `npx jest` there
finds no packages, and a `node_modules` linked whole to the checkout's resolves each workspace
package (`node_modules/a -> ../packages/a`, as npm, yarn and pnpm make them) into the *main
checkout*, so the check tests the checkout's code, not the task's.

Here a worktree that lacks the checkout's `node_modules` (the top one, and each workspace
package's) gets a real folder of links: every third-party entry links to the checkout's (shared,
used read-only: the sandbox binds the checkout read-only), and every workspace link — one that
resolves inside the checkout but outside any `node_modules` — is re-pointed, relatively, at the
same path in the worktree; `@scope/` and `.bin/` folders are made real and filled the same way.
Caches tools write into `node_modules` (`.cache`, `.vite`…) are left out: each worktree makes its
own. A `node_modules` the worktree already has (a `[worktree] setup` that runs `npm ci`, a
seed) is left alone, except a link to the checkout's own, which is what this replaces.

Nothing is written through a link: every folder is reached with `loopctl.nofollow`, and the
new folder is built under a temporary name and renamed into place, so a killed run never
leaves half of one. Its marker file holds the digest of what it was built from; a later
preparation rebuilds a folder whose checkout changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from loopctl import git, nofollow

NODE_MODULES = "node_modules"
MARKER = ".loopctl-linked"  # inside a folder built here: the digest of its plan
_PARTIAL = "node_modules.loopctl-partial"
# Written by tools at run time: a link would send those writes into the checkout (read-only in
# the sandbox, and the user's own outside it). A worktree's tools make their own.
CACHES = frozenset({".cache", ".vite", ".vitest", ".turbo", ".parcel-cache", ".nx"})
_MAX_FOLDERS = 200  # workspace packages looked at; a monorepo beyond that keeps the rest unlinked
_MAX_ENTRIES = 50_000
# Programs whose check is a Node check (what `describe` is shown for).
NODE_PROGRAMS = frozenset(
    {"node", "npm", "npx", "pnpm", "yarn", "bun", "bunx", "jest", "vitest", "tsc", "mocha", "ava"}
)


@dataclass(frozen=True, slots=True)
class Link:
    """One entry of a linked folder: `name` inside it ("a", "@scope/b", ".bin/x")."""

    name: str
    target: str  # what the link says: the checkout's entry, or a path relative to the link
    source: str | None  # a workspace link: the folder it points at, relative to the checkout


@dataclass(frozen=True, slots=True)
class Folder:
    """What one worktree `node_modules` is built from: the checkout's at `relative`."""

    relative: str  # "node_modules", "packages/b/node_modules"
    folders: tuple[str, ...]  # real subfolders: "@scope", ".bin"
    links: tuple[Link, ...]

    @property
    def workspace(self) -> tuple[Link, ...]:
        return tuple(link for link in self.links if link.source is not None)

    def digest(self) -> str:
        document = [self.relative, self.folders, [[lk.name, lk.target] for lk in self.links]]
        return hashlib.sha256(json.dumps(document).encode("utf-8", "surrogateescape")).hexdigest()


def plan(checkout: Path) -> tuple[Folder, ...]:
    """The checkout's `node_modules` folders a worktree gets its own of: the top one and each
    workspace package's (from the workspace links and the `workspaces` globs)."""
    checkout = checkout.resolve()
    found: list[Folder] = []
    top = _plan_folder(checkout, NODE_MODULES)
    if top is not None:
        found.append(top)
    links = top.workspace if top is not None else ()
    packages = [lk.source for lk in links if lk.source and not lk.name.startswith(".bin/")]
    packages += _workspace_globs(checkout)
    for package in list(dict.fromkeys(p for p in packages if p != "."))[:_MAX_FOLDERS]:
        folder = _plan_folder(checkout, f"{package}/{NODE_MODULES}")
        if folder is not None:
            found.append(folder)
    return tuple(found)


def link_node_modules(checkout: Path, worktree: Path) -> tuple[Folder, ...]:
    """Give `worktree` its own `node_modules` wherever the checkout has one and the worktree
    has none (or a stale one built here, or a link to the checkout's): the folders built."""
    if worktree.resolve() == checkout.resolve():
        return ()
    return tuple(folder for folder in plan(checkout) if _build(checkout, worktree, folder))


def describe(checkout: Path, *, setup: bool) -> str | None:
    """One line for --dry-run, validate and doctor: which tree a Node check imports."""
    if not (checkout / NODE_MODULES).is_dir():
        return None
    if setup:
        return (
            "a Node check imports what the loop's [worktree] setup puts in each worktree's"
            " node_modules (loopctl links none where setup made one; a link to the checkout's"
            " node_modules is replaced, so workspace packages are the worktree's)"
        )
    if not git.is_ignored(checkout, f"{NODE_MODULES}/"):
        return (
            "node_modules is not ignored by git, so loopctl gives worktrees none: a Node check"
            " there finds no packages (add node_modules/ to .gitignore)"
        )
    folders = plan(checkout)
    names = [
        link.name
        for folder in folders
        for link in folder.workspace
        if not link.name.startswith(".bin/")
    ]
    if not names:
        return (
            "a Node check in a worktree imports the project's own code from the worktree and"
            " its packages from the checkout's node_modules (linked, read-only)"
        )
    shown = ", ".join(dict.fromkeys(names[:6])) + (", …" if len(names) > 6 else "")
    return (
        f"a Node check imports the workspace packages ({shown}) from the worktree: loopctl"
        " gives each worktree a node_modules whose workspace links point into it, and whose"
        " other packages link to the checkout's (read-only)"
    )


def is_node_command(argv: Sequence[str], checkout: Path) -> bool:
    """Whether `argv` runs Node: a known program, or one of the checkout's `node_modules/.bin`."""
    if not argv:
        return False
    name = PurePosixPath(argv[0]).name
    return name in NODE_PROGRAMS or (checkout / NODE_MODULES / ".bin" / name).exists()


# --- the plan ----------------------------------------------------------------------------------


def _plan_folder(checkout: Path, relative: str) -> Folder | None:
    top = checkout / relative
    if top.is_symlink() or not top.is_dir():
        return None
    folders: list[str] = []
    links: list[Link] = []
    for name in _names(top):
        if name in CACHES or name == MARKER:
            continue
        path = top / name
        if (name.startswith("@") or name == ".bin") and path.is_dir() and not path.is_symlink():
            folders.append(name)
            links += [_link(checkout, relative, f"{name}/{inner}") for inner in _names(path)]
        else:
            links.append(_link(checkout, relative, name))
        if len(links) > _MAX_ENTRIES:
            return None  # not a node_modules this is for
    return Folder(relative, tuple(folders), tuple(links))


def _link(checkout: Path, relative: str, name: str) -> Link:
    path = checkout / relative / name
    if path.is_symlink():
        try:
            inside = path.resolve().relative_to(checkout)
        except (ValueError, OSError, RuntimeError):
            inside = None
        if inside is not None and NODE_MODULES not in inside.parts:
            # Relative, so the link holds wherever the worktree is (a pooled one moves).
            where = PurePosixPath(relative, name).parent
            source = inside.as_posix() or "."
            return Link(name, os.path.relpath(source, where.as_posix()), source)
    return Link(name, str(path), None)


def _names(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


_PNPM_ITEM = re.compile(r"""^\s*-\s*["']?([^"'#\s]+)["']?\s*(?:#.*)?$""")


def _workspace_globs(checkout: Path) -> list[str]:
    """Package folders the workspace globs name (package.json `workspaces`, pnpm's yaml); a
    `**` glob is left to the links, as walking it would walk node_modules."""
    patterns: list[str] = []
    with contextlib.suppress(OSError, ValueError):
        manifest = json.loads((checkout / "package.json").read_text(encoding="utf-8"))
        spaces = manifest.get("workspaces") if isinstance(manifest, dict) else None
        if isinstance(spaces, dict):
            spaces = spaces.get("packages")
        if isinstance(spaces, list):
            patterns += [p for p in spaces if isinstance(p, str)]
    with contextlib.suppress(OSError):
        listing = False
        for line in (checkout / "pnpm-workspace.yaml").read_text(encoding="utf-8").splitlines():
            if not line.startswith((" ", "-", "\t")):
                listing = line.strip().startswith("packages:")
                continue
            match = _PNPM_ITEM.match(line) if listing else None
            if match:
                patterns.append(match.group(1))
    found: list[str] = []
    for pattern in patterns:
        if pattern.startswith(("!", "/")) or "**" in pattern or ".." in pattern.split("/"):
            continue
        for path in sorted(checkout.glob(pattern.rstrip("/"))):
            if path.is_dir() and not path.is_symlink() and (path / "package.json").is_file():
                found.append(path.relative_to(checkout).as_posix())
            if len(found) >= _MAX_FOLDERS:
                return found
    return found


# --- building ----------------------------------------------------------------------------------


def _build(checkout: Path, worktree: Path, folder: Folder) -> bool:
    parent = PurePosixPath(folder.relative).parent
    try:
        fd = nofollow.open_folder(worktree, str(parent))
    except (OSError, ValueError):
        return False  # no such package in this worktree, or a link on the way to it
    try:
        # What a killed build left: never committed, as every build starts by removing it.
        nofollow.remove_tree(worktree / parent / _PARTIAL, within=worktree)
        if not _replaceable(fd, checkout, worktree, folder):
            return False
        if not git.is_ignored(worktree, f"{folder.relative}/"):
            return False  # it would be committed with the task's work
        os.mkdir(_PARTIAL, 0o755, dir_fd=fd)
        partial = os.open(_PARTIAL, _DIR, dir_fd=fd)
        try:
            for name in folder.folders:
                os.mkdir(name, 0o755, dir_fd=partial)
            for link in folder.links:
                os.symlink(link.target, link.name, dir_fd=partial)
            marker = os.open(MARKER, _NEW, 0o644, dir_fd=partial)
            with os.fdopen(marker, "w", encoding="utf-8") as handle:
                handle.write(folder.digest() + "\n")
        finally:
            os.close(partial)
        os.rename(_PARTIAL, NODE_MODULES, src_dir_fd=fd, dst_dir_fd=fd)
        return True
    finally:
        os.close(fd)


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _replaceable(fd: int, checkout: Path, worktree: Path, folder: Folder) -> bool:
    """Whether the worktree's `node_modules` (in the folder `fd`) is to be built: absent, a
    link to the checkout's own, or a folder built here from another plan (each removed now)."""
    try:
        info = os.stat(NODE_MODULES, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    path = worktree / folder.relative
    if stat.S_ISLNK(info.st_mode):
        # Only read to compare: the link is unlinked, never written through.
        if Path(os.path.realpath(path)) != (checkout / folder.relative).resolve():
            return False
        os.unlink(NODE_MODULES, dir_fd=fd)
        return True
    if not stat.S_ISDIR(info.st_mode):
        return False
    try:
        marker = nofollow.read_file(path / MARKER, within=worktree)
    except OSError:
        return False  # not built here: setup's, a seed's, or the user's
    if marker.decode("utf-8", "replace").strip() == folder.digest():
        return False
    nofollow.remove_tree(path, within=worktree)
    return True
