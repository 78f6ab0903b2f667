"""Which interpreter and binaries a check runs with: the repository's own virtualenv first, then
the interpreter running loopctl, then PATH."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path


def venv_bins(repo: Path) -> Iterator[Path]:
    for name in (".venv", "venv"):
        for sub in ("bin", "Scripts"):
            folder = repo / name / sub
            if folder.is_dir():
                yield folder


def pytest_argv(repo: Path) -> tuple[str, ...]:
    # `python -m pytest` rather than the `pytest` script: -m puts the working directory on
    # sys.path, so a flat layout imports the worktree's modules. The interpreter is chosen where
    # the project's dependencies most likely are: the repository's own virtualenv first, then the
    # interpreter running loopctl (when loopctl is installed into the project's environment,
    # pytest is importable there), then whatever `pytest` is on PATH. Resolved once, here, so a
    # run reports the exact command it used.
    for folder in venv_bins(repo):
        python = _first_file(folder, "python", "python3", "python.exe")
        if python is not None and _venv_has_module(folder.parent, "pytest"):
            return (str(python), "-m", "pytest", "-q")
    if importlib.util.find_spec("pytest") is not None:
        return (sys.executable, "-m", "pytest", "-q")
    found = shutil.which("pytest")
    return (found or "pytest", "-q")


def python_for(repo: Path) -> str:
    for folder in venv_bins(repo):
        python = _first_file(folder, "python", "python3", "python.exe")
        if python is not None:
            return str(python)
    return sys.executable


def which_python_tool(repo: Path, name: str) -> str | None:
    for folder in venv_bins(repo):
        found = _first_file(folder, name, f"{name}.exe")
        if found is not None:
            return str(found)
    beside = _first_file(Path(sys.executable).parent, name, f"{name}.exe")
    if beside is not None:
        return str(beside)
    return shutil.which(name)


def python_tool(repo: Path, name: str) -> str:
    return which_python_tool(repo, name) or name


def _first_file(folder: Path, *names: str) -> Path | None:
    for name in names:
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _venv_has_module(venv: Path, module: str) -> bool:
    patterns = (f"lib/python*/site-packages/{module}", f"Lib/site-packages/{module}")
    return any(any(venv.glob(pattern)) for pattern in patterns)
