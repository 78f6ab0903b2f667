"""Dependency seeds: what a workspace's setup produced, kept per inputs hash and handed on.

The first workspace that runs `[worktree] setup` for an inputs hash (the lockfiles and the setup
commands) publishes its preserved folders (`node_modules`, `.venv`, `target`) here; a new
workspace with the same hash gets a copy (a reflink clone where the filesystem has them) instead
of running setup. A seed is a private copy, never linked into a worktree: a maker runs as the
same user, so through a hard link it could chmod and rewrite the seed every other task gets. Each
seed records a stat digest of its tree (the change time included, which no one can set back), and
is checked against it each time it is copied: a seed anything touched is dropped, never handed
on.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import stat
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl import nofollow, process
from loopctl.atomicfile import write_atomic
from loopctl.errors import LoopctlError, swallowed

logger = logging.getLogger(__name__)

SEED_VERSION = 1
_META = "seed.json"
_TREE = "tree"

# Lockfiles and manifests whose content decides what a package manager installs, by tool.
DEFAULT_INPUTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("npm", ("package.json", "package-lock.json", "npm-shrinkwrap.json", ".npmrc")),
    ("pnpm", ("pnpm-lock.yaml", "pnpm-workspace.yaml")),
    ("yarn", ("yarn.lock", ".yarnrc.yml")),
    ("uv", ("uv.lock", "pyproject.toml", ".python-version")),
    ("poetry", ("poetry.lock", "pyproject.toml")),
    ("pip-tools", ("requirements*.txt", "requirements*.in")),
    ("cargo", ("Cargo.toml", "Cargo.lock", "rust-toolchain.toml", "rust-toolchain")),
    ("go", ("go.mod", "go.sum")),
)
# The folder each ecosystem installs into, and the files that say the ecosystem is present.
DEFAULT_PRESERVE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("node_modules", ("package.json",)),
    (".venv", ("uv.lock", "poetry.lock", "pyproject.toml", "requirements*.txt")),
    ("target", ("Cargo.toml",)),
)


@dataclass(frozen=True, slots=True)
class Seed:
    """One published seed: the preserved folders a setup made for one inputs hash."""

    path: Path
    inputs_hash: str
    folders: tuple[str, ...]
    files: int
    bytes: int
    created: float
    last_used: float
    setup_s: float  # how long the setup that made it ran: what a seed hit saves


def detect_inputs(worktree: Path) -> tuple[str, ...]:
    """The default `setup_inputs`: every known lockfile or manifest the worktree has at its top."""
    found: list[str] = []
    for _tool, patterns in DEFAULT_INPUTS:
        for name in _matches(worktree, patterns):
            if name not in found:
                found.append(name)
    return tuple(found)


def detect_preserve(worktree: Path) -> tuple[str, ...]:
    """The default `preserve`: the install folders of the ecosystems the worktree uses."""
    return tuple(folder for folder, markers in DEFAULT_PRESERVE if _matches(worktree, markers))


def inputs_hash(
    worktree: Path,
    inputs: Sequence[str],
    setup: Sequence[Sequence[str]],
    preserve: Sequence[str],
) -> str:
    """The hash that decides whether setup must run: its inputs' content and its commands."""
    digest = hashlib.sha256()
    names = sorted({name for pattern in inputs for name in _matches(worktree, (pattern,))})
    files: list[tuple[str, str | None]] = []
    for name in names:
        path = worktree / name
        # A symlink is hashed as its target text: following it could read outside the tree.
        if path.is_symlink():
            files.append((name, "symlink:" + os.readlink(path)))
        elif path.is_file():
            files.append((name, hashlib.sha256(path.read_bytes()).hexdigest()))
    document = {
        "version": SEED_VERSION,
        "setup": [list(argv) for argv in setup],
        "inputs": files,
        "patterns": sorted(inputs),
        "preserve": sorted(preserve),
    }
    digest.update(json.dumps(document, sort_keys=True).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def tree_digest(path: Path) -> str:
    """A digest of every entry's name, type, mode, size, times and inode under `path`.

    Any write, chmod, rename, new or deleted file changes it: the change time moves with each
    of those and cannot be set back. "absent" when nothing is there; a symlink in place of the
    folder digests as such, so it never matches the folder it replaced.
    """
    try:
        top = path.lstat()
    except FileNotFoundError:
        return "absent"
    digest = hashlib.sha256()
    _digest_entry(digest, ".", top, path)
    if stat.S_ISDIR(top.st_mode):
        for relative, info, full in _walk(path):
            _digest_entry(digest, relative, info, full)
    return digest.hexdigest()


def tree_size(path: Path) -> tuple[int, int]:
    """(files, bytes on disk) under `path`, symlinks not followed."""
    files = 0
    used = 0
    if not path.exists() and not path.is_symlink():
        return 0, 0
    for _relative, info, _full in _walk(path):
        files += 0 if stat.S_ISDIR(info.st_mode) else 1
        used += info.st_blocks * 512
    return files, used


def copy_tree(source: Path, target: Path) -> str:
    """Copy a folder with its modes, times and symlinks; "reflink" when cloned, else "copy"."""
    target.parent.mkdir(parents=True, exist_ok=True)
    cp = shutil.which("cp")
    if cp is not None and _gnu_cp(cp):
        # --reflink=auto clones each file where the filesystem can and copies it otherwise.
        done = process.run(
            [cp, "-a", "--reflink=auto", "--", str(source), str(target)],
            cwd=target.parent,
            env=_cp_env(),
            timeout=COPY_TIMEOUT,
        )
        if done.ok:
            return "reflink" if _reflinks(cp, target.parent) else "copy"
        remove_tree(target)
    shutil.copytree(source, target, symlinks=True)
    return "copy"


def remove_tree(path: Path, *, within: Path | None = None) -> None:
    """Delete a folder even where a maker took away its write permission; a symlink is unlinked.
    No link is followed, at `path` or (with `within`, the trusted folder it lies under) on the
    way to it: see `loopctl.nofollow`."""
    nofollow.remove_tree(path, within=within)


def remove_preserved(worktree: Path, name: str) -> None:
    """Delete the preserved folder `name` of `worktree`. A link or file on the way to it (one a
    commit or a maker put there) means the folder is not in the worktree: nothing is removed,
    least of all where the link points."""
    try:
        remove_tree(worktree / name, within=worktree)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise


class SeedStore:
    """The seeds of one repository: `<cache>/seeds/<repo>/<inputs hash>/`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, inputs_hash: str) -> Seed | None:
        """The seed published for `inputs_hash` (`restore` verifies it as it copies it)."""
        folder = self.root / inputs_hash
        meta = _read_meta(folder)
        if meta is None or "digest" not in meta:
            return None
        return _seed_of(folder, meta)

    def verify(self, seed: Seed) -> bool:
        """True when the seed is exactly as published; a touched seed is dropped."""
        if tree_digest(seed.path / _TREE) == (_read_meta(seed.path) or {}).get("digest"):
            return True
        self.drop(seed.inputs_hash)
        return False

    def publish(
        self, inputs_hash: str, worktree: Path, folders: Sequence[str], setup_s: float
    ) -> Seed | None:
        """Copy `folders` of a just-set-up worktree into a new seed (first writer wins)."""
        target = self.root / inputs_hash
        if _read_meta(target) is not None:
            return None
        present = [name for name in folders if _is_real_folder(worktree, name)]
        if not present:
            return None
        staging = self.root / f".{inputs_hash}.{os.getpid()}.{time.monotonic_ns()}"
        try:
            for name in present:
                copy_tree(worktree / name, staging / _TREE / name)
            files, used = tree_size(staging / _TREE)
            now = time.time()
            meta = {
                "version": SEED_VERSION,
                "inputs_hash": inputs_hash,
                "folders": present,
                "files": files,
                "bytes": used,
                "created": now,
                "setup_s": setup_s,
            }
            write_atomic(staging / _META, json.dumps(meta, indent=1) + "\n")
            # The digest covers the tree only, taken after its last write, in its final place.
            # FileExistsError: another workspace published the same seed first.
            with swallowed(logger, f"publishing the seed {target.name}", OSError):
                staging.rename(target)
        finally:
            if staging.exists():
                remove_tree(staging)
        meta_now = _read_meta(target)
        if meta_now is None or meta_now.get("inputs_hash") != inputs_hash:
            return None
        if "digest" not in meta_now:
            meta_now["digest"] = tree_digest(target / _TREE)
            write_atomic(target / _META, json.dumps(meta_now, indent=1) + "\n")
        self._touch(target)
        return _seed_of(target, meta_now)

    def restore(self, seed: Seed, worktree: Path) -> str:
        """Give `worktree` its own copy of the seed's folders; returns "reflink" or "copy"."""
        method = "copy"
        for name in seed.folders:
            target = worktree / name
            # A link on the way (committed, or left by a maker) must not take the copy, nor
            # the removal before it, out of the worktree: nofollow refuses it (OSError).
            remove_tree(target, within=worktree)
            nofollow.make_folders(worktree, Path(name).parent)
            method = copy_tree(seed.path / _TREE / name, target)
        # Verified after copying, not before: a change before or during the copy moved some
        # entry's change time, so what was copied is what was published, or nothing is kept.
        if not self.verify(seed):
            for name in seed.folders:
                remove_preserved(worktree, name)
            raise SeedTampered(f"the seed {seed.inputs_hash[:12]} is not as it was published")
        self._touch(seed.path)
        return method

    def seeds(self) -> list[Seed]:
        """Every published seed, newest use first."""
        if not self.root.is_dir():
            return []
        seeds = []
        for folder in self.root.iterdir():
            meta = _read_meta(folder)
            if meta is not None and "digest" in meta:
                seeds.append(_seed_of(folder, meta))
        return sorted(seeds, key=lambda seed: seed.last_used, reverse=True)

    def drop(self, inputs_hash: str) -> None:
        """Delete one seed (a rename first, so no reader sees half a seed)."""
        folder = self.root / inputs_hash
        if not folder.exists():
            return
        doomed = self.root / f".drop-{inputs_hash}-{time.monotonic_ns()}"
        with swallowed(logger, f"dropping the seed {folder.name}", OSError):
            folder.rename(doomed)
            remove_tree(doomed)

    def prune(
        self,
        *,
        max_age_s: float | None,
        max_bytes: int | None,
        now: float | None = None,
        dry_run: bool = False,
    ) -> list[Seed]:
        """Drop seeds unused for `max_age_s`, then the least recently used beyond `max_bytes`."""
        now = time.time() if now is None else now
        dropped: list[Seed] = []
        kept: list[Seed] = []
        for seed in self.seeds():
            if max_age_s is not None and now - seed.last_used > max_age_s:
                dropped.append(seed)
            else:
                kept.append(seed)
        total = 0
        for seed in kept:  # newest use first: the oldest go when the total is too big
            total += seed.bytes
            if max_bytes is not None and total > max_bytes:
                dropped.append(seed)
        if dry_run:
            return dropped
        for seed in dropped:
            self.drop(seed.inputs_hash)
        if self.root.is_dir():
            for stale in self.root.glob(".*"):  # staging or drops a killed process left
                if time.time() - stale.lstat().st_mtime > 3600:
                    remove_tree(stale)
        return dropped

    def _touch(self, folder: Path) -> None:
        with contextlib.suppress(OSError):
            (folder / _META).touch()  # its mtime is the last use; the content stays as written


class SeedTampered(Exception):
    """A seed changed while it was being handed on."""


# --- internals ---------------------------------------------------------------------------------


def _matches(worktree: Path, patterns: Iterable[str]) -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        if any(char in pattern for char in "*?["):
            found += sorted(
                path.relative_to(worktree).as_posix()
                for path in worktree.glob(pattern)
                if path.is_file() or path.is_symlink()
            )
        elif (worktree / pattern).is_file() or (worktree / pattern).is_symlink():
            found.append(pattern)
    return found


def _is_real_folder(worktree: Path, name: str) -> bool:
    path = worktree / name
    return (
        path.is_dir()
        and not path.is_symlink()
        and not any(
            (worktree / Path(*Path(name).parts[:depth])).is_symlink()
            for depth in range(1, len(Path(name).parts))
        )
    )


def _walk(top: Path) -> Iterable[tuple[str, os.stat_result, str]]:
    stack = [("", str(top))]
    while stack:
        prefix, folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except OSError:
            continue  # unreadable: its digest stays as the folder's own entry shows
        for entry in entries:
            relative = f"{prefix}{entry.name}"
            info = entry.stat(follow_symlinks=False)
            yield relative, info, entry.path
            if stat.S_ISDIR(info.st_mode):
                stack.append((relative + "/", entry.path))


def _digest_entry(
    digest: hashlib._Hash, relative: str, info: os.stat_result, full: Path | str
) -> None:
    link = os.readlink(full) if stat.S_ISLNK(info.st_mode) else ""
    digest.update(
        (
            f"{relative}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0"
            f"{info.st_ctime_ns}\0{info.st_ino}\0{link}\n"
        ).encode("utf-8", "surrogateescape")
    )


def _read_meta(folder: Path) -> dict[str, object] | None:
    try:
        meta = json.loads((folder / _META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("version") != SEED_VERSION:
        return None
    return meta


def _seed_of(folder: Path, meta: dict[str, object]) -> Seed:
    def number(key: str) -> float:
        value = meta.get(key, 0)
        return float(value) if isinstance(value, int | float) else 0.0

    folders = meta.get("folders", [])
    try:
        last_used = (folder / _META).stat().st_mtime
    except OSError:
        last_used = 0.0
    return Seed(
        path=folder,
        inputs_hash=str(meta.get("inputs_hash", folder.name)),
        folders=tuple(str(name) for name in folders) if isinstance(folders, list) else (),
        files=int(number("files")),
        bytes=int(number("bytes")),
        created=number("created"),
        last_used=last_used,
        setup_s=number("setup_s"),
    )


_GNU_CP: dict[str, bool] = {}
_REFLINKS: dict[int, bool] = {}
_PROBE_TIMEOUT = 10.0
# A copy that takes longer than this is stuck (a hung network filesystem): it is killed, and
# the seed is copied in-process instead, where an error at least surfaces as one.
COPY_TIMEOUT = 1800.0


def _reflinks(cp: str, folder: Path) -> bool:
    """Whether the filesystem of `folder` clones files (probed once per device)."""
    device = folder.stat().st_dev
    if device not in _REFLINKS:
        probe = folder / f".reflink-probe-{os.getpid()}"
        try:
            probe.write_bytes(b"x")
            done = process.run(
                [cp, "--reflink=always", "--", str(probe), f"{probe}.clone"],
                cwd=folder,
                env=_cp_env(),
                timeout=_PROBE_TIMEOUT,
            )
            _REFLINKS[device] = done.ok
        except (OSError, LoopctlError):
            _REFLINKS[device] = False
        finally:
            for leftover in (probe, Path(f"{probe}.clone")):
                leftover.unlink(missing_ok=True)
    return _REFLINKS[device]


def _cp_env() -> dict[str, str]:
    """cp's environment: untranslated words, and nothing else of the caller's (no secrets)."""
    return {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"}


def _gnu_cp(cp: str) -> bool:
    if cp not in _GNU_CP:
        try:
            out = process.run(
                [cp, "--version"], cwd=Path("/"), env=_cp_env(), timeout=_PROBE_TIMEOUT
            ).stdout_tail
        except (OSError, LoopctlError):
            out = ""
        _GNU_CP[cp] = "GNU coreutils" in out
    return _GNU_CP[cp]
