"""The corpus of real open-source projects (scripts/fetch-corpus): where it is, and each project
made into a user's checkout — a fresh git repository with the project as published, its own
`.venv` (humanize installed into it with `pip install -e .`) or `node_modules`.

The corpus is fetched once, pinned, outside the repository. Where it is missing the tests are
skipped with the reason, unless LOOPCTL_REQUIRE_REAL_CLIS=1 (CI sets it) or CI=true, which make
a missing corpus a failure, as for the real agent CLIs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.repos import commit_all, git

# Read at import, before any test swaps HOME for its own.
REAL_HOME = Path.home()
PINS = Path(__file__).resolve().parents[2] / "scripts" / "corpus"


def corpus_root() -> Path:
    given = os.environ.get("LOOPCTL_CORPUS")
    return Path(given) if given else REAL_HOME / ".cache" / "loopctl" / "corpus"


def require_corpus() -> Path:
    """The fetched corpus, or a skip (a failure in CI) saying how to fetch it."""
    root = corpus_root()
    if (root / "installed").is_file():
        return root
    reason = f"the corpus of real projects is not fetched into {root}: run scripts/fetch-corpus"
    if os.environ.get("LOOPCTL_REQUIRE_REAL_CLIS") == "1" or os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI or LOOPCTL_REQUIRE_REAL_CLIS=1)")
    pytest.skip(reason)


@contextmanager
def work_folder() -> Iterator[Path]:
    """A private folder for one test's checkout, beside the corpus rather than under /tmp: a
    user's project lives in their home, and a sandbox treats /tmp apart."""
    parent = require_corpus() / "work"
    parent.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="checkout-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def checkout(name: str, into: Path) -> Path:
    """The project `name` as published, committed as the first commit of a new repository."""
    repo = into / name
    shutil.copytree(require_corpus() / "projects" / name, repo, symlinks=True)
    git(repo, "init", "-q", "-b", "main")
    return repo


def ignore(repo: Path, *patterns: str) -> None:
    gitignore = repo / ".gitignore"
    text = gitignore.read_text() if gitignore.exists() else ""
    gitignore.write_text(text + "".join(f"\n{p}" for p in patterns) + "\n")


def python_venv(repo: Path, *, editable: bool) -> Path:
    """`repo/.venv` with the pinned test tools installed from the corpus's wheels (checked
    against their hashes), and the project installed with `pip install -e .` when `editable`."""
    root = require_corpus()
    tools = root / "python-tools" / "bin" / "python"
    venv = repo / ".venv"
    python = venv / "bin" / "python"
    subprocess.run([tools, "-m", "venv", "--without-pip", venv], check=True)
    pip = [tools, "-m", "pip", "--python", python, "install", "-q", "--no-index"]
    subprocess.run(
        [
            *pip,
            *("--find-links", root / "wheels", "--require-hashes"),
            *("-r", PINS / "python-tools.txt"),
        ],
        check=True,
        capture_output=True,
    )
    if editable:
        # The build backend (hatchling) is one of the tools: no download at install time.
        subprocess.run(
            [*pip, "--no-build-isolation", "--no-deps", "-e", repo],
            check=True,
            capture_output=True,
        )
    return python


def node_modules(repo: Path) -> None:
    """The project's test toolchain pinned: its devDependencies replaced by the corpus's (its
    lint and coverage tools dropped), the lockfile beside them, and the `node_modules` that
    `npm ci` made from that lockfile in scripts/fetch-corpus (a copy: the same tree, in seconds)."""
    package_path = repo / "package.json"
    package = json.loads(package_path.read_text())
    pinned = json.loads((PINS / "node-tools" / "package.json").read_text())
    package["devDependencies"] = pinned["devDependencies"]
    package_path.write_text(json.dumps(package, indent=2) + "\n")
    shutil.copy2(PINS / "node-tools" / "package-lock.json", repo / "package-lock.json")
    tools = require_corpus() / "node-tools"
    shutil.copytree(tools / "node_modules", repo / "node_modules", symlinks=True)


def worktree_setup(repo: Path) -> list[str]:
    """A Node worktree's setup: a copy of the checkout's `node_modules`.

    Not `npm ci`: the sandbox lets a setup command write only its worktree and a private /tmp,
    and npm writes to its cache even with `--offline` (EROFS), so `npm ci` from a shared cache
    cannot run there; the checkout's tree is readable.
    """
    return ["cp", "-a", str(repo / "node_modules"), "."]


def commit(repo: Path, message: str) -> None:
    commit_all(repo, message)


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path} no longer contains {old!r}: the corpus pin changed"
    path.write_text(text.replace(old, new, 1))
