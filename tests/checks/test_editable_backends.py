"""Editable installs other than setuptools' default, each found by one reading of the venv only:
setuptools' strict mode (a tree of links under `build/`: only the distribution's
`direct_url.json` names the checkout's sources) and hatchling's exact dev mode (the `editables`
finder module, `_editable_impl_<name>.py`, mapping the package to a `lib/` folder that no
`src/` rule would guess). For each, a check run in a worktree imports the worktree's fix.

Real installs: pip, setuptools, hatchling and editables from loopctl's own environment (lent
to the project's venv through a `.pth`, so no download), real git worktrees, real processes.
"""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

import pytest
from support.repos import git, make_repo

from loopctl.checks.import_roots import checkout_program, import_roots, redirected_env

BROKEN = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
SETUPTOOLS = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "edpkg"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]
"""
HATCHLING = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "edpkg"
version = "0.1"

[tool.hatch.build.targets.wheel]
packages = ["lib/edpkg"]

[tool.hatch.build]
dev-mode-exact = true
"""
# (pyproject, the package's folder, pip's extra arguments)
KINDS = {
    "setuptools-strict": (SETUPTOOLS, "src", ("--config-settings", "editable_mode=strict")),
    "hatchling-exact": (HATCHLING, "lib", ()),
}


def install(repo: Path, extra: tuple[str, ...]) -> None:
    venv = repo / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (theirs,) = venv.glob("lib/python*/site-packages")
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (theirs / "_lent_tools.pth").write_text("\n".join(ours) + "\n")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index",
         "--no-build-isolation", "--no-deps", *extra, "-e", str(repo)],
        check=True, capture_output=True,
    )  # fmt: skip


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_check_in_the_worktree_imports_the_worktrees_package(kind: str, tmp_path: Path) -> None:
    pyproject, folder, extra = KINDS[kind]
    repo = make_repo(tmp_path / "proj")
    (repo / folder / "edpkg").mkdir(parents=True)
    (repo / folder / "edpkg" / "__init__.py").write_text(BROKEN)
    (repo / "pyproject.toml").write_text(pyproject)
    (repo / ".gitignore").write_text(".venv/\nbuild/\n__pycache__/\n*.egg-info/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "edpkg with a bug")
    install(repo, extra)
    worktree = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(worktree))
    (worktree / folder / "edpkg" / "__init__.py").write_text(FIXED)
    argv = checkout_program(
        (".venv/bin/python", "-c", "import edpkg; print(edpkg.add(2, 3))"), repo, worktree
    )
    env = {"PATH": "/usr/bin:/bin"}

    roots = import_roots(argv, repo, worktree, env)

    assert (worktree / folder) in roots.worktree_entries, roots
    plain = subprocess.run(list(argv), cwd=worktree, env=env, capture_output=True, text=True)
    fixed = subprocess.run(
        list(argv),
        cwd=worktree,
        env=redirected_env(roots, env, repo),
        capture_output=True,
        text=True,
    )
    assert plain.stdout.strip() == "-1", plain.stderr  # as installed: the checkout's code
    assert fixed.stdout.strip() == "5", fixed.stderr
