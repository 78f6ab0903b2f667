"""Test runners loopctl knows (pytest, unittest, npm/jest/vitest, cargo, go, make): which one an
argv runs, the command "tests green" runs in a repository, and what a run depends on besides the
code under test (the globs the maker may not change).

How a run's counts are read and judged is `checks/counts.py`; arming a runner with
loopctl's own reporter is `checks/runners.py`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from loopctl.checks import runners
from loopctl.checks.project_files import (
    MAKEFILES,
    has_pytest_config,
    has_python_tests,
    ini_sections,
    makefile_with_target,
    package_json,
    package_scripts,
    read_text,
    read_toml,
)
from loopctl.checks.tool_paths import pytest_argv

Detected = tuple[tuple[str, ...], str, tuple[str, ...]]  # argv, tool, protect

# What a test run depends on besides the code under test: the tests, and every file the runner
# reads its configuration (or plugins) from. A new file of these names is refused as well as an
# edited one: pytest prefers `.pytest.ini` over `pyproject.toml`, and a config file nearer the test
# paths wins over the root's, so the names are protected at any depth where that matters.
_PYTEST_TEST_FILES = (
    "tests/**",
    "test/**",
    "**/test_*.py",
    "**/*_test.py",
    "test_*.py",
    "*_test.py",
)
_PYTEST_CONFIGS = (
    "pytest.toml",  # pytest 9 reads these first
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
)
_PYTEST_PROTECT = (
    *_PYTEST_TEST_FILES,
    "**/conftest.py",
    "conftest.py",
    *_PYTEST_CONFIGS,
    # Only these four name pytest alone; a nested pyproject.toml is some package's own.
    "**/pytest.toml",
    "**/.pytest.toml",
    "**/pytest.ini",
    "**/.pytest.ini",
)
_UNITTEST_PROTECT = ("tests/**", "test/**", "**/test*.py")
_NPM_TEST_PROTECT = (
    "**/*.test.*",
    "**/*.spec.*",
    "*.test.*",
    "*.spec.*",
    "__tests__/**",
    "**/__tests__/**",
    "test/**",
    "tests/**",
    "package.json",
    ".npmrc",  # script-shell, node-options
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    "bunfig.toml",
    "jest.config.*",
    "**/jest.config.*",
    "jest.setup.*",
    "vitest.config.*",
    "**/vitest.config.*",
    "vitest.workspace.*",
    "vitest.setup.*",
    "vite.config.*",  # vitest reads it when there is no vitest.config
    "babel.config.*",  # jest transforms every test through babel
    ".babelrc",
    ".babelrc.*",
    ".swcrc",
    "setupTests.*",
    "**/setupTests.*",
    ".mocharc*",
)
_CARGO_TEST_PROTECT = (
    "tests/**",
    "**/tests/**",
    "Cargo.toml",
    "**/Cargo.toml",
    "build.rs",  # runs at build time and can configure the tests away
    "**/build.rs",
    ".cargo/**",  # [target] runner, rustflags
    "**/.cargo/**",
    "rust-toolchain",
    "rust-toolchain.toml",
)
_GO_TEST_PROTECT = (
    "**/*_test.go",
    "*_test.go",
    "**/testdata/**",
    "testdata/**",
    "go.mod",
    "**/go.mod",
    "go.work",
    "vendor/**",  # go test builds against vendored packages: an assertion library lives there
)
# npm init's placeholder script: `echo "Error: no test specified" && exit 1`.
_NPM_DEFAULT_TEST = "no test specified"


def detect_tests(repo: Path) -> Detected | None:
    # Explicit configuration wins; a bare tests/ folder is weak evidence (cargo uses one too).
    if has_pytest_config(repo):
        argv = pytest_argv(repo)
        return argv, "pytest", runner_protect(argv, repo)
    if (repo / "Cargo.toml").is_file():
        return ("cargo", "test"), "cargo", _CARGO_TEST_PROTECT
    if (repo / "go.mod").is_file():
        # -v prints one line per test, without which the run cannot be counted (§4's
        # "fewer tests than on the base commit" needs counts).
        return ("go", "test", "-v", "./..."), "go", _GO_TEST_PROTECT
    package = package_json(repo)
    script = package_scripts(package).get("test")
    if isinstance(script, str) and script.strip() and _NPM_DEFAULT_TEST not in script:
        return ("npm", "test"), "npm", _NPM_TEST_PROTECT
    if has_python_tests(repo):
        argv = pytest_argv(repo)
        return argv, "pytest", runner_protect(argv, repo)
    makefile = makefile_with_target(repo, "test")
    if makefile is not None:
        return ("make", "test"), "make", (makefile, *runner_protect(("make", "test"), repo))
    return None


# --- test runners: what a run depends on ---------------------------------------------------------

# `uv run pytest -q`: these run the command that follows `run` (after run's own options).
_ENV_WRAPPERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "rye"})
_NODE_PACKAGE_MANAGERS = frozenset({"npm", "pnpm", "yarn", "bun"})
_PYTHON_RUNNERS = {"pytest": "pytest", "py.test": "pytest", "unittest": "unittest"}
# pytest short options whose letters after the first are a value (`-rA`, `-kfoo`), not flags.
_PYTEST_VALUED_SHORT = frozenset("rkmpocWn")


def runner_of(argv: Sequence[str]) -> str | None:
    """The test runner `argv` runs ("pytest", "unittest", "npm", "jest", "vitest", "cargo",
    "go" or "make"), or None when it runs none loopctl knows."""
    return _runner_of_words([Path(word).name.removesuffix(".exe") for word in argv])


def _runner_of_words(words: Sequence[str]) -> str | None:
    if not words:
        return None
    first, rest = words[0], list(words[1:])
    plain = [word for word in rest if not word.startswith(("-", "+"))]
    if first in _ENV_WRAPPERS and plain[:1] == ["run"]:
        after = rest[rest.index("run") + 1 :]
        while after and after[0].startswith("-"):
            after = after[1:]
        return _runner_of_words(after)
    if first.startswith("python"):
        if "-m" in rest[:-1]:
            return _PYTHON_RUNNERS.get(rest[rest.index("-m") + 1])
        return None
    if first in ("pytest", "py.test"):
        return "pytest"
    if first in ("jest", "vitest"):
        return first
    if first in ("npx", "bunx") or (first in ("pnpm", "yarn") and plain[:1] in (["exec"], ["dlx"])):
        named = [word for word in plain if word not in ("exec", "dlx")]
        return named[0] if named and named[0] in ("jest", "vitest") else None
    if first in _NODE_PACKAGE_MANAGERS:
        run = plain[:1] in (["run"], ["run-script"])
        script = plain[1] if run and len(plain) > 1 else (plain[0] if plain and not run else "")
        if script in ("test", "t", "tst") or script.startswith("test:"):
            return "npm"
        return script if first in ("pnpm", "yarn") and script in ("jest", "vitest") else None
    if first == "cargo":
        return "cargo" if plain[:1] == ["test"] else None
    if first == "go":
        return "go" if plain[:1] == ["test"] else None
    if first in ("make", "gmake"):
        return "make" if any(word in ("test", "tests", "check") for word in plain) else None
    return None


def runner_protect(argv: Sequence[str], repo: Path) -> tuple[str, ...]:
    """Globs a test run of `argv` depends on: the tests, and every file the runner reads its
    configuration or plugins from. Empty when `argv` runs no test runner loopctl knows."""
    runner = runner_of(argv)
    protect = _PROTECTS.get(runner) if runner is not None else None
    globs = [*(protect(argv, repo) if protect is not None else ()), *runners.shadow_protect(runner)]
    return tuple(dict.fromkeys(globs))


def _pytest_protect(argv: Sequence[str], repo: Path) -> Sequence[str]:
    return (*_PYTEST_PROTECT, *_pytest_extras(_pytest_args(argv), repo))


def _npm_protect(argv: Sequence[str], repo: Path) -> Sequence[str]:
    if "workspaces" in package_json(repo) or (repo / "pnpm-workspace.yaml").is_file():
        # Each workspace's package.json holds its own test script and jest settings.
        return (*_NPM_TEST_PROTECT, "**/package.json", "pnpm-workspace.yaml")
    return _NPM_TEST_PROTECT


def _make_protect(argv: Sequence[str], repo: Path) -> Sequence[str]:
    globs: list[str] = [*MAKEFILES, "*.mk", "**/*.mk"]
    # What `make test` runs is in the recipe: protect that runner's files too.
    text = "\n".join(read_text(repo / name) or "" for name in MAKEFILES)
    for pattern, inner in _MAKE_RUNNERS:
        if re.search(pattern, text):
            globs += runner_protect(inner, repo)
    return globs


# What a run of each runner `runner_of` names depends on, from its argv and the repository.
_PROTECTS: dict[str, Callable[[Sequence[str], Path], Sequence[str]]] = {
    "pytest": _pytest_protect,
    "unittest": lambda argv, repo: _UNITTEST_PROTECT,
    "npm": _npm_protect,
    "jest": _npm_protect,
    "vitest": _npm_protect,
    "cargo": lambda argv, repo: _CARGO_TEST_PROTECT,
    "go": lambda argv, repo: _GO_TEST_PROTECT,
    "make": _make_protect,
}


_MAKE_RUNNERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\bpytest\b|\bpy\.test\b", ("pytest",)),
    (r"-m\s+unittest\b", ("python", "-m", "unittest")),
    (r"\bcargo\s+test\b", ("cargo", "test")),
    (r"\bgo\s+test\b", ("go", "test")),
    (r"\b(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test\b|\bjest\b|\bvitest\b", ("npm", "test")),
)


def _pytest_args(argv: Sequence[str]) -> list[str]:
    """The arguments pytest itself gets from `argv` (after `pytest` or `-m pytest`)."""
    words = [Path(word).name for word in argv]
    for index, word in enumerate(words):
        if word in ("pytest", "py.test"):
            return list(argv[index + 1 :])
    return []


def _pytest_addopts(repo: Path) -> list[str]:
    """`addopts` of the configuration file pytest would use at the repository root."""
    # The first of these that exists is pytest's configuration, even when it is empty.
    for name in ("pytest.toml", ".pytest.toml"):
        if (repo / name).is_file():
            table = read_toml(repo / name).get("pytest")
            return _split_opts(table.get("addopts") if isinstance(table, dict) else None)
    for name in ("pytest.ini", ".pytest.ini"):
        if (repo / name).is_file():
            parser = ini_sections(repo / name)
            if parser is None or not parser.has_section("pytest"):
                return []
            return _split_opts(parser.get("pytest", "addopts", fallback=""))
    tool = read_toml(repo / "pyproject.toml").get("tool", {})
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if isinstance(pytest_table, dict):
        options = pytest_table.get("ini_options", pytest_table)
        return _split_opts(options.get("addopts") if isinstance(options, dict) else None)
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = ini_sections(repo / name)
        if parser is not None and parser.has_section(section):
            return _split_opts(parser.get(section, "addopts", fallback=""))
    return []


def _split_opts(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(item) for item in value]
    if not isinstance(value, str):
        return []
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _pytest_extras(args: Sequence[str], repo: Path) -> list[str]:
    """Globs for what this pytest run loads beyond the usual names: `-p` plugin modules (from
    the command and from addopts), a `-c` config file, and the config files and conftests in
    the folders of the test paths it is given (pytest looks for its configuration there first)."""
    globs: list[str] = []
    words = [*_pytest_addopts(repo), *args]
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else ""
        if word == "-p":
            globs += _module_globs(following)
        elif word.startswith("-p") and len(word) > 2 and not word.startswith("--"):
            globs += _module_globs(word[2:])
        elif word in ("-c", "--config-file") and following:
            globs.append(following)
        elif word.startswith("--config-file="):
            globs.append(word.partition("=")[2])
    for arg in args:
        if arg.startswith("-"):
            continue
        target = arg.split("::", 1)[0].rstrip("/")
        if not target or Path(target).is_absolute() or ".." in Path(target).parts:
            continue
        if not (repo / target).exists():
            continue  # an option's value, not a test path
        globs += (target, target + "/**")
        for parent in Path(target).parents:
            if parent != Path("."):
                globs += (f"{parent.as_posix()}/{name}" for name in _PYTEST_CONFIGS)
    return globs


def _module_globs(module: str) -> list[str]:
    """Files that importing `module` (a dotted name) may run, wherever it sits on sys.path."""
    if not module or module.startswith("no:"):
        return []
    parts = module.split(".")
    globs = [f"**/{'/'.join(parts)}.py", f"**/{'/'.join(parts)}/**"]
    # Importing a.b runs a/__init__.py first.
    globs += (f"**/{'/'.join(parts[:n])}/__init__.py" for n in range(1, len(parts)))
    return globs


def _pytest_verbosity(args: Sequence[str]) -> int:
    level = 0
    for word in args:
        if word == "--quiet":
            level -= 1
        elif word == "--verbose":
            level += 1
        elif word.startswith("--verbosity="):
            value = word.partition("=")[2]
            level = int(value) if value.lstrip("-").isdigit() else level
        elif re.fullmatch(r"-[A-Za-z]+", word) and word[1] not in _PYTEST_VALUED_SHORT:
            level += word.count("v") - word.count("q")
    return level


def prints_summary(runner: str, argv: Sequence[str], repo: Path) -> bool:
    """Whether `runner`, run as `argv`, always ends with its counts when it runs to the end."""
    words = list(argv)
    if runner == "pytest":
        # -qq drops pytest's "N passed in Xs" line.
        return _pytest_verbosity([*_pytest_addopts(repo), *_pytest_args(argv)]) > -2
    if runner == "go":
        return any(word in ("-v", "-v=true", "-test.v") for word in words)
    if runner in ("jest", "vitest"):
        return not any(word.startswith(("--json", "--reporter")) for word in words)
    return runner in ("unittest", "cargo")
