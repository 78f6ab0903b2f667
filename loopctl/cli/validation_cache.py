"""A remembered `loopctl validate` answer, replayed while no definition file has changed.

`validate` runs in pre-commit hooks, editors and prompts; most runs see the same files as the
last one. The key hashes every file under the folders definitions come from (and loopctl's
version), so any edit, addition or removal there means a fresh validation. A symlink anywhere
under them turns the cache off: what it points at could change unseen.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

CACHE_VERSION = 1
DEFINITION_ROOTS = (
    ".loop/config.toml",
    ".loop/loops",
    ".loop/agents",
    "agents",
    ".codex/agents",
    ".claude/agents",
    "skills",
    ".claude/skills",
    ".agents/skills",
)
_MAX_FILES = 2000


@dataclass(frozen=True, slots=True)
class Answer:
    stdout: str
    stderr: str
    exit_code: int


def definitions_key(root: Path, mode: str) -> str | None:
    """A digest of everything validation reads, or None when it cannot be known cheaply."""
    from loopctl._version import __version__

    digest = hashlib.sha256(f"{CACHE_VERSION}\0{__version__}\0{mode}\0{root}".encode())
    # Some answers depend on PATH (delivery tools) and on HEAD (files an agent runs).
    digest.update(f"\0env {_environment_key(root)}".encode(errors="surrogateescape"))
    files = 0
    for relative in DEFINITION_ROOTS:
        top = root / relative
        if top.is_symlink():
            return None
        if not top.exists():
            digest.update(f"\0absent {relative}".encode())
            continue
        if top.is_file():
            digest.update(f"\0file {relative}\0".encode() + top.read_bytes())
            continue
        for folder, dirs, names in os.walk(top):
            dirs.sort()
            for name in sorted([*dirs, *names]):
                path = Path(folder) / name
                if path.is_symlink():
                    return None
                files += 1
                if files > _MAX_FILES:
                    return None
                rel = path.relative_to(root).as_posix()
                if path.is_file():
                    digest.update(f"\0file {rel}\0".encode() + path.read_bytes())
                else:
                    digest.update(f"\0dir {rel}".encode())
    return digest.hexdigest()


def _environment_key(root: Path) -> str:
    """What validation reads besides the definition files: PATH (delivery tools must be on it),
    the commit at HEAD (files an agent runs must be in it) and the checkout's node_modules."""
    import shutil

    from loopctl import git
    from loopctl.errors import GitError

    path = os.environ.get("PATH", "")
    try:
        head = git.git(["rev-parse", "--verify", "--quiet", "HEAD"], cwd=root, check=False)
        commit = head.stdout.strip()
    except GitError:
        commit = ""
    # The checkout's node_modules (its folder changes with every package added or removed)
    # decides which tree validate says a Node check imports.
    try:
        modules = str((root / "node_modules").lstat().st_mtime_ns)
    except OSError:
        modules = "absent"
    # The checkout's venv (an editable install adds its .pth to site-packages) decides which
    # tree validate says a Python check imports.
    sites = sorted(str(p.stat().st_mtime_ns) for p in root.glob(".venv/lib/python*/site-packages"))
    return f"{path}\0{shutil.which('gh', path=path)}\0{commit}\0{modules}\0{','.join(sites)}"


def _cache_file(root: Path, mode: str) -> Path:
    return root / ".loop" / "cache" / f"validate-{mode}.json"


def recall(root: Path, mode: str, key: str) -> Answer | None:
    try:
        saved = json.loads(_cache_file(root, mode).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("key") != key:
        return None
    stdout, stderr, code = saved.get("stdout"), saved.get("stderr"), saved.get("exit_code")
    if not isinstance(stdout, str) or not isinstance(stderr, str) or not isinstance(code, int):
        return None
    return Answer(stdout, stderr, code)


def remember(root: Path, mode: str, key: str, answer: Answer) -> None:
    """Save the answer, but only where `.loop/.gitignore` keeps the cache out of commits."""
    from loopctl.atomicfile import write_atomic

    ignore = root / ".loop" / ".gitignore"
    try:
        if "cache/" not in ignore.read_text(encoding="utf-8").split():
            return
        payload = {
            "version": CACHE_VERSION,
            "key": key,
            "stdout": answer.stdout,
            "stderr": answer.stderr,
            "exit_code": answer.exit_code,
        }
        write_atomic(_cache_file(root, mode), json.dumps(payload))
    except OSError:  # a cache that cannot be written is only a slower next run
        logger.debug("writing the validation cache failed; carrying on", exc_info=True)
