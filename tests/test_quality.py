"""The code stays lint-clean, formatted and type-checked (the README's one test command runs it)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tool(name: str) -> list[str]:
    beside = Path(sys.executable).with_name(name)
    if beside.exists():
        return [str(beside)]
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'")
    return [found]


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_check_is_clean() -> None:
    done = run([*tool("ruff"), "check", "loopctl", "tests", "bench"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean() -> None:
    done = run([*tool("ruff"), "format", "--check", "loopctl", "tests", "bench"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_is_clean() -> None:
    done = run([*tool("mypy"), "--no-incremental"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_imports_follow_the_layers() -> None:
    """The contracts in pyproject.toml: the layer rule and the nevers of ARCHITECTURE.md."""
    done = run([*tool("lint-imports"), "--no-cache"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_lint_imports_catches_an_upward_import(tmp_path: Path) -> None:
    """A lazy import of the engine from journal/ breaks the contracts (so the check can fail)."""
    copy = tmp_path / "tree"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "loopctl", copy / "loopctl", ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    events = copy / "loopctl" / "journal" / "events.py"
    with events.open("a", encoding="utf-8") as handle:
        handle.write("\n\ndef _upward() -> None:\n    import loopctl.engine  # noqa\n")
    done = subprocess.run(
        [*tool("lint-imports"), "--no-cache"],
        cwd=copy,
        env={**os.environ, "PYTHONPATH": str(copy)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "loopctl.journal is not allowed to import loopctl.engine" in done.stdout
    assert "loopctl.journal.events -> loopctl.engine (l." in done.stdout


def test_only_git_runner_and_gh_py_name_git_and_gh_as_a_program() -> None:
    """An argv starting with "git" or "gh" is built in git/runner.py or gh.py alone."""
    owners = {"git": ROOT / "loopctl" / "git" / "runner.py", "gh": ROOT / "loopctl" / "gh.py"}
    wrong = []
    for path in sorted((ROOT / "loopctl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.List | ast.Tuple) or not node.elts:
                continue
            first = node.elts[0]
            named = isinstance(first, ast.Constant) and first.value in owners
            if named and owners[first.value] != path:
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} runs {first.value}")
    assert wrong == [], "\n".join(wrong)


def test_every_module_a_benchmark_imports_exists() -> None:
    """Benchmarks are not tests, so a module they import late (inside `measure`) is not loaded
    by the suite: one moved away (as the real-CLI harness was, into tests/support/) would break
    `bench/run.py` unseen. Every import in bench/, at any depth, must resolve with the paths the
    benchmarks put first (bench/ itself and tests/)."""
    import importlib.util

    bench = ROOT / "bench"
    saved = list(sys.path)
    sys.path[:0] = [str(bench), str(ROOT / "tests")]
    try:
        missing = []
        for script in sorted(bench.glob("*.py")):
            for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    if importlib.util.find_spec(name) is None:
                        missing.append(f"{script.name}:{node.lineno}: {name}")
    finally:
        sys.path[:] = saved
    assert missing == []
