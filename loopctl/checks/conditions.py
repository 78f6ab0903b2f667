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

from loopctl.checks import test_runners
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
    protect: tuple[str, ...] = ()  # globs the maker may not change, for built-in conditions
    tool: str | None = None  # "pytest", "npm", "cargo", "go", "make", "ruff", "eslint", "mypy", …

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
        return ResolvedCondition(text, argv, "--check", (), _tool_of(argv))
    wanted = normalise_condition(text)
    for name, command in configured.items():
        if normalise_condition(name) == wanted:
            argv = _argv(
                command,
                f"the condition {name!r} in [conditions] of .loop/config.toml has an empty "
                'command: give it an argv list such as ["pytest", "-q"]',
            )
            return ResolvedCondition(text, argv, "config", (), _tool_of(argv))
    detect = _BUILTINS.get(wanted.rstrip(".!"))
    if detect is not None:
        found = detect(repo.resolve())
        if found is not None:
            argv, tool, protect = found
            return ResolvedCondition(text, argv, "builtin", protect, tool)
    # A built-in name with no tool detected is judged too; the caller may refuse instead.
    return ResolvedCondition(text, None, "judge", (), None)


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


def _tool_of(argv: Sequence[str]) -> str | None:
    """The known tool an argv runs, so its output can be parsed for test counts."""
    words = [Path(word).name.removesuffix(".exe") for word in argv]
    known = _CHECK_TOOLS | test_runners.command_names()
    if len(words) >= 3 and words[0].startswith("python") and words[1] == "-m":
        return words[2] if words[2] in known else None
    if words[0] in ("npx", "pnpm", "yarn", "bunx") and len(words) >= 2:
        named = [word for word in words[1:] if not word.startswith("-")]
        if named and named[0] in known:
            return named[0]
        return "npm"
    if words[0] in known:
        return words[0]
    return None


# The tools a check command names that are not test runners (those are `test_runners.RUNNERS`).
_CHECK_TOOLS = frozenset({"mypy", "ruff", "eslint", "tsc"})


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
        return ruff_argv, "ruff", _RUFF_PROTECT
    package = package_json(repo)
    if depends_on(package, "eslint") or any((repo / name).is_file() for name in _ESLINT_CONFIGS):
        # --no: never download eslint on the fly; a project without it installed fails visibly.
        return ("npx", "--no", "eslint", "."), "eslint", _ESLINT_PROTECT
    if has_python_files(repo) and which_python_tool(repo, "ruff") is not None:
        return ruff_argv, "ruff", _RUFF_PROTECT
    return None


def _detect_build(repo: Path) -> Detected | None:
    if (repo / "Cargo.toml").is_file():
        return ("cargo", "build"), "cargo", ("Cargo.toml", "**/Cargo.toml", "build.rs")
    if (repo / "go.mod").is_file():
        return ("go", "build", "./..."), "go", ("go.mod",)
    script = package_scripts(package_json(repo)).get("build")
    if isinstance(script, str) and script.strip():
        return ("npm", "run", "build"), "npm", ("package.json",)
    makefile = next((name for name in MAKEFILES if (repo / name).is_file()), None)
    if makefile is not None:
        return ("make",), "make", (makefile,)
    if has_python_files(repo):
        # Byte-compiling every module is the only "build" a plain Python project has; skip
        # environments and dependencies, which are not the project's code.
        skip = r"(^|[/\\])(\.[^/\\]+|node_modules|venv|env|site-packages|build|dist)([/\\]|$)"
        return (python_for(repo), "-m", "compileall", "-q", "-x", skip, "."), "python", ()
    return None


def _detect_types(repo: Path) -> Detected | None:
    files = mypy_files(repo)
    if files is not None:
        # With `files` configured, mypy checks exactly those; without, it needs a target.
        argv = (python_tool(repo, "mypy"),) if files else (python_tool(repo, "mypy"), ".")
        return argv, "mypy", _MYPY_PROTECT
    if (repo / "tsconfig.json").is_file():
        return ("npx", "--no", "tsc", "--noEmit"), "tsc", _TSC_PROTECT
    return None


_BUILTINS: dict[str, Callable[[Path], Detected | None]] = {
    **dict.fromkeys(
        ("tests green", "tests pass", "tests passing", "test green", "green tests"), detect_tests
    ),
    **dict.fromkeys(("lint clean", "lint passes"), _detect_lint),
    **dict.fromkeys(("build passes", "build green"), _detect_build),
    **dict.fromkeys(("types check", "type check passes", "types pass"), _detect_types),
}
