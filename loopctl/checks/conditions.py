"""Goal conditions: resolve a condition to a check command (--check, [conditions] in config, a
built-in such as "tests green" detected from the repository, else a judge).

Test runners are `checks/test_runners.py`, one entry each; detecting one and what its run depends
on is `checks/runner_detection.py`; reading and judging a run's counts is `checks/counts.py`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from loopctl.checks.project_files import (
    MAKEFILES,
    depends_on,
    has_python_files,
    mypy_files,
    package_json,
    package_scripts,
    toml_has,
)
from loopctl.checks.runner_detection import Detected, detect_tests
from loopctl.checks.tool_paths import python_for, python_tool, which_python_tool
from loopctl.errors import UsageError

_NO_CONDITIONS: Mapping[str, Sequence[str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ResolvedCondition:
    """A goal condition and how it is checked: a command (argv) or, when argv is None, a judge."""

    text: str
    argv: tuple[str, ...] | None
    source: str  # "--check" | "config" | "builtin" | "judge"
    # Globs the maker may not change, for built-in conditions. Which test runner the command
    # runs, and so how its counts are read, is `runner_detection.runner_of(argv)`.
    protect: tuple[str, ...] = ()

    @property
    def judged(self) -> bool:
        """True when a checker agent, not a command, decides whether the condition holds."""
        return self.argv is None


def normalise_condition(text: str) -> str:
    """The form condition names are compared in: case-folded, whitespace collapsed."""
    return " ".join(text.split()).casefold()


def resolve_condition(
    text: str,
    repo: Path,
    *,
    check: Sequence[str] | None = None,
    configured: Mapping[str, Sequence[str]] = _NO_CONDITIONS,
) -> ResolvedCondition:
    """Resolve a condition: --check, then [conditions] in config, then built-ins, else a judge."""
    if check is not None:
        argv = _argv(check, "--check is empty: give the command that checks the condition")
        return ResolvedCondition(text, argv, "--check")
    wanted = normalise_condition(text)
    for name, command in configured.items():
        if normalise_condition(name) == wanted:
            argv = _argv(
                command,
                f"the condition {name!r} in [conditions] of .loop/config.toml has an empty "
                'command: give it an argv list such as ["pytest", "-q"]',
            )
            return ResolvedCondition(text, argv, "config")
    detect = _BUILTINS.get(wanted.rstrip(".!"))
    if detect is not None:
        found = detect(repo.resolve())
        if found is not None:
            argv, protect = found
            return ResolvedCondition(text, argv, "builtin", protect)
    # A built-in name with no tool detected is judged too; the caller may refuse instead.
    return ResolvedCondition(text, None, "judge")


def is_builtin(text: str) -> bool:
    """True when `text` names a built-in condition ("tests green", "lint clean", …)."""
    return normalise_condition(text).rstrip(".!") in _BUILTINS


def _argv(command: Sequence[str], empty_message: str) -> tuple[str, ...]:
    # A lone string is a Sequence[str] too; split it as a shell would, without running a shell.
    try:
        argv = tuple(shlex.split(command)) if isinstance(command, str) else tuple(command)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"cannot split {command!r} into a command: {exc}") from None
    if not argv or not argv[0]:
        raise UsageError(empty_message)
    return argv


# --- detection: lint, build, types (tests: `checks/runner_detection.py`) ----------------------

_RUFF_PROTECT = ("pyproject.toml", "ruff.toml", ".ruff.toml", "**/ruff.toml", "**/.ruff.toml")
_ESLINT_CONFIGS = (
    "eslint.config.js",
    "eslint.config.mjs",
    "eslint.config.cjs",
    "eslint.config.ts",
    "eslint.config.mts",
    "eslint.config.cts",
    ".eslintrc",
    ".eslintrc.js",
    ".eslintrc.cjs",
    ".eslintrc.json",
    ".eslintrc.yml",
    ".eslintrc.yaml",
)
_ESLINT_PROTECT = (
    "eslint.config.*",
    ".eslintrc*",
    "**/.eslintrc*",
    ".eslintignore",
    "package.json",
)
_MYPY_PROTECT = ("pyproject.toml", "mypy.ini", ".mypy.ini", "setup.cfg")
_TSC_PROTECT = ("tsconfig.json", "tsconfig.*.json", "**/tsconfig.json", "**/tsconfig.*.json")


def _detect_lint(repo: Path) -> Detected | None:
    ruff_argv = (python_tool(repo, "ruff"), "check", ".")
    if toml_has(repo / "pyproject.toml", "tool", "ruff") or any(
        (repo / name).is_file() for name in ("ruff.toml", ".ruff.toml")
    ):
        return ruff_argv, _RUFF_PROTECT
    package = package_json(repo)
    if depends_on(package, "eslint") or any((repo / name).is_file() for name in _ESLINT_CONFIGS):
        # --no: never download eslint on the fly; a project without it installed fails visibly.
        return ("npx", "--no", "eslint", "."), _ESLINT_PROTECT
    if has_python_files(repo) and which_python_tool(repo, "ruff") is not None:
        return ruff_argv, _RUFF_PROTECT
    return None


def _detect_build(repo: Path) -> Detected | None:
    if (repo / "Cargo.toml").is_file():
        return ("cargo", "build"), ("Cargo.toml", "**/Cargo.toml", "build.rs")
    if (repo / "go.mod").is_file():
        return ("go", "build", "./..."), ("go.mod",)
    script = package_scripts(package_json(repo)).get("build")
    if isinstance(script, str) and script.strip():
        return ("npm", "run", "build"), ("package.json",)
    makefile = next((name for name in MAKEFILES if (repo / name).is_file()), None)
    if makefile is not None:
        return ("make",), (makefile,)
    if has_python_files(repo):
        # Byte-compiling every module is the only "build" a plain Python project has; skip
        # environments and dependencies, which are not the project's code.
        skip = r"(^|[/\\])(\.[^/\\]+|node_modules|venv|env|site-packages|build|dist)([/\\]|$)"
        return (python_for(repo), "-m", "compileall", "-q", "-x", skip, "."), ()
    return None


def _detect_types(repo: Path) -> Detected | None:
    files = mypy_files(repo)
    if files is not None:
        # With `files` configured, mypy checks exactly those; without, it needs a target.
        argv = (python_tool(repo, "mypy"),) if files else (python_tool(repo, "mypy"), ".")
        return argv, _MYPY_PROTECT
    if (repo / "tsconfig.json").is_file():
        return ("npx", "--no", "tsc", "--noEmit"), _TSC_PROTECT
    return None


_BUILTINS: dict[str, Callable[[Path], Detected | None]] = {
    **dict.fromkeys(
        ("tests green", "tests pass", "tests passing", "test green", "green tests"), detect_tests
    ),
    **dict.fromkeys(("lint clean", "lint passes"), _detect_lint),
    **dict.fromkeys(("build passes", "build green"), _detect_build),
    **dict.fromkeys(("types check", "type check passes", "types pass"), _detect_types),
}
