"""Goal conditions: resolve a condition to a check command, and notice a weakened test run (§4)."""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from loopctl.checks import runners
from loopctl.checks.fingerprint import strip_ansi
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
    if len(words) >= 3 and words[0].startswith("python") and words[1] == "-m":
        return words[2] if words[2] in _KNOWN_TOOLS else None
    if words[0] in ("npx", "pnpm", "yarn", "bunx") and len(words) >= 2:
        named = [word for word in words[1:] if not word.startswith("-")]
        if named and named[0] in _KNOWN_TOOLS:
            return named[0]
        return "npm"
    if words[0] in _KNOWN_TOOLS:
        return words[0]
    return None


_KNOWN_TOOLS = frozenset(
    {
        *("pytest", "unittest", "mypy", "ruff"),
        *("npm", "jest", "vitest", "eslint", "tsc"),
        *("cargo", "go", "make"),
    }
)

# --- detection --------------------------------------------------------------------------------

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
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
# npm init's placeholder script: `echo "Error: no test specified" && exit 1`.
_NPM_DEFAULT_TEST = "no test specified"

# Folders a scan for Python files skips: environments, dependencies and build output.
_SKIP_DIRS = frozenset(
    {"node_modules", "venv", "env", "target", "build", "dist", "site-packages", "__pycache__"}
)
_SCAN_LIMIT = 5000  # entries; a scan never walks a whole monorepo to answer "any Python here?"


def _detect_tests(repo: Path) -> Detected | None:
    # Explicit configuration wins; a bare tests/ folder is weak evidence (cargo uses one too).
    if _has_pytest_config(repo):
        argv = _pytest(repo)
        return argv, "pytest", runner_protect(argv, repo)
    if (repo / "Cargo.toml").is_file():
        return ("cargo", "test"), "cargo", _CARGO_TEST_PROTECT
    if (repo / "go.mod").is_file():
        # -v prints one line per test, without which the run cannot be counted (§4's
        # "fewer tests than on the base commit" needs counts).
        return ("go", "test", "-v", "./..."), "go", _GO_TEST_PROTECT
    package = _package_json(repo)
    script = _scripts(package).get("test")
    if isinstance(script, str) and script.strip() and _NPM_DEFAULT_TEST not in script:
        return ("npm", "test"), "npm", _NPM_TEST_PROTECT
    if _has_python_tests(repo):
        argv = _pytest(repo)
        return argv, "pytest", runner_protect(argv, repo)
    makefile = _makefile_with_target(repo, "test")
    if makefile is not None:
        return ("make", "test"), "make", (makefile, *runner_protect(("make", "test"), repo))
    return None


def _detect_lint(repo: Path) -> Detected | None:
    ruff_argv = (_python_tool(repo, "ruff"), "check", ".")
    if _toml_has(repo / "pyproject.toml", "tool", "ruff") or any(
        (repo / name).is_file() for name in ("ruff.toml", ".ruff.toml")
    ):
        return ruff_argv, "ruff", _RUFF_PROTECT
    package = _package_json(repo)
    if _depends_on(package, "eslint") or any((repo / name).is_file() for name in _ESLINT_CONFIGS):
        # --no: never download eslint on the fly; a project without it installed fails visibly.
        return ("npx", "--no", "eslint", "."), "eslint", _ESLINT_PROTECT
    if _has_python_files(repo) and _which_python_tool(repo, "ruff") is not None:
        return ruff_argv, "ruff", _RUFF_PROTECT
    return None


def _detect_build(repo: Path) -> Detected | None:
    if (repo / "Cargo.toml").is_file():
        return ("cargo", "build"), "cargo", ("Cargo.toml", "**/Cargo.toml", "build.rs")
    if (repo / "go.mod").is_file():
        return ("go", "build", "./..."), "go", ("go.mod",)
    script = _scripts(_package_json(repo)).get("build")
    if isinstance(script, str) and script.strip():
        return ("npm", "run", "build"), "npm", ("package.json",)
    makefile = next((name for name in _MAKEFILES if (repo / name).is_file()), None)
    if makefile is not None:
        return ("make",), "make", (makefile,)
    if _has_python_files(repo):
        # Byte-compiling every module is the only "build" a plain Python project has; skip
        # environments and dependencies, which are not the project's code.
        skip = r"(^|[/\\])(\.[^/\\]+|node_modules|venv|env|site-packages|build|dist)([/\\]|$)"
        return (_python(repo), "-m", "compileall", "-q", "-x", skip, "."), "python", ()
    return None


def _detect_types(repo: Path) -> Detected | None:
    mypy_files = _mypy_files(repo)
    if mypy_files is not None:
        # With `files` configured, mypy checks exactly those; without, it needs a target.
        argv = (_python_tool(repo, "mypy"),) if mypy_files else (_python_tool(repo, "mypy"), ".")
        return argv, "mypy", _MYPY_PROTECT
    if (repo / "tsconfig.json").is_file():
        return ("npx", "--no", "tsc", "--noEmit"), "tsc", _TSC_PROTECT
    return None


_BUILTINS: dict[str, Callable[[Path], Detected | None]] = {
    **dict.fromkeys(
        ("tests green", "tests pass", "tests passing", "test green", "green tests"), _detect_tests
    ),
    **dict.fromkeys(("lint clean", "lint passes"), _detect_lint),
    **dict.fromkeys(("build passes", "build green"), _detect_build),
    **dict.fromkeys(("types check", "type check passes", "types pass"), _detect_types),
}

# --- which interpreter and binaries --------------------------------------------------------------


def _venv_bin(repo: Path) -> Iterator[Path]:
    for name in (".venv", "venv"):
        for sub in ("bin", "Scripts"):
            folder = repo / name / sub
            if folder.is_dir():
                yield folder


def _pytest(repo: Path) -> tuple[str, ...]:
    # `python -m pytest` rather than the `pytest` script: -m puts the working directory on
    # sys.path, so a flat layout imports the worktree's modules. The interpreter is chosen where
    # the project's dependencies most likely are: the repository's own virtualenv first, then the
    # interpreter running loopctl (when loopctl is installed into the project's environment,
    # pytest is importable there), then whatever `pytest` is on PATH. Resolved once, here, so a
    # run reports the exact command it used.
    for folder in _venv_bin(repo):
        python = _first_file(folder, "python", "python3", "python.exe")
        if python is not None and _venv_has_module(folder.parent, "pytest"):
            return (str(python), "-m", "pytest", "-q")
    if importlib.util.find_spec("pytest") is not None:
        return (sys.executable, "-m", "pytest", "-q")
    found = shutil.which("pytest")
    return (found or "pytest", "-q")


def _python(repo: Path) -> str:
    for folder in _venv_bin(repo):
        python = _first_file(folder, "python", "python3", "python.exe")
        if python is not None:
            return str(python)
    return sys.executable


def _which_python_tool(repo: Path, name: str) -> str | None:
    for folder in _venv_bin(repo):
        found = _first_file(folder, name, f"{name}.exe")
        if found is not None:
            return str(found)
    beside = _first_file(Path(sys.executable).parent, name, f"{name}.exe")
    if beside is not None:
        return str(beside)
    return shutil.which(name)


def _python_tool(repo: Path, name: str) -> str:
    return _which_python_tool(repo, name) or name


def _first_file(folder: Path, *names: str) -> Path | None:
    for name in names:
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _venv_has_module(venv: Path, module: str) -> bool:
    patterns = (f"lib/python*/site-packages/{module}", f"Lib/site-packages/{module}")
    return any(any(venv.glob(pattern)) for pattern in patterns)


# --- reading project files -----------------------------------------------------------------------


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _toml(path: Path) -> dict[str, Any]:
    text = _read_text(path)
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _toml_has(path: Path, *keys: str) -> bool:
    node: object = _toml(path)
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _ini_sections(path: Path) -> configparser.ConfigParser | None:
    text = _read_text(path)
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error:
        return None
    return parser


def _ini_has(path: Path, section: str) -> bool:
    parser = _ini_sections(path)
    return parser is not None and parser.has_section(section)


def _has_pytest_config(repo: Path) -> bool:
    return (
        any((repo / name).is_file() for name in ("pytest.toml", ".pytest.toml", "pytest.ini"))
        or (repo / ".pytest.ini").is_file()
        or (repo / "conftest.py").is_file()
        or _toml_has(repo / "pyproject.toml", "tool", "pytest")
        or _ini_has(repo / "setup.cfg", "tool:pytest")
        or _ini_has(repo / "tox.ini", "pytest")
    )


def _mypy_files(repo: Path) -> str | None:
    """The `files` mypy is configured with ("" when none), or None when mypy is not configured."""
    pyproject = _toml(repo / "pyproject.toml").get("tool", {})
    if isinstance(pyproject, dict) and isinstance(pyproject.get("mypy"), dict):
        files = pyproject["mypy"].get("files", "")
        return ",".join(files) if isinstance(files, list) else str(files)
    for name in ("mypy.ini", ".mypy.ini", "setup.cfg"):
        parser = _ini_sections(repo / name)
        if parser is not None and parser.has_section("mypy"):
            return parser.get("mypy", "files", fallback="")
    return None


def _package_json(repo: Path) -> dict[str, Any]:
    text = _read_text(repo / "package.json")
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _scripts(package: Mapping[str, Any]) -> dict[str, Any]:
    scripts = package.get("scripts")
    return scripts if isinstance(scripts, dict) else {}


def _depends_on(package: Mapping[str, Any], name: str) -> bool:
    for key in ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies"):
        deps = package.get(key)
        if isinstance(deps, dict) and name in deps:
            return True
    return False


def _makefile_with_target(repo: Path, target: str) -> str | None:
    rule = re.compile(rf"^{re.escape(target)}\s*:(?!=)", re.MULTILINE)
    for name in _MAKEFILES:
        text = _read_text(repo / name)
        if text is not None and rule.search(text):
            return name
    return None


def _python_files(repo: Path) -> Iterator[Path]:
    """Python files under repo, skipping hidden folders and dependencies; bounded."""
    seen = 0
    for root, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in files:
            seen += 1
            if seen > _SCAN_LIMIT:
                return
            if name.endswith(".py"):
                yield Path(root, name)
        seen += len(dirs)


def _has_python_files(repo: Path) -> bool:
    return next(_python_files(repo), None) is not None


def _has_python_tests(repo: Path) -> bool:
    for path in _python_files(repo):
        relative = path.relative_to(repo).parts
        if relative[0] in ("tests", "test") and len(relative) > 1:
            return True
        if path.name.startswith("test_") or path.name.endswith("_test.py"):
            return True
    return False


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
    globs: list[str] = []
    if runner == "pytest":
        globs += _PYTEST_PROTECT
        globs += _pytest_extras(_pytest_args(argv), repo)
    elif runner == "unittest":
        globs += _UNITTEST_PROTECT
    elif runner in ("npm", "jest", "vitest"):
        globs += _NPM_TEST_PROTECT
        if "workspaces" in _package_json(repo) or (repo / "pnpm-workspace.yaml").is_file():
            # Each workspace's package.json holds its own test script and jest settings.
            globs += ("**/package.json", "pnpm-workspace.yaml")
    elif runner == "cargo":
        globs += _CARGO_TEST_PROTECT
    elif runner == "go":
        globs += _GO_TEST_PROTECT
    elif runner == "make":
        globs += (*_MAKEFILES, "*.mk", "**/*.mk")
        # What `make test` runs is in the recipe: protect that runner's files too.
        text = "\n".join(_read_text(repo / name) or "" for name in _MAKEFILES)
        for pattern, inner in _MAKE_RUNNERS:
            if re.search(pattern, text):
                globs += runner_protect(inner, repo)
    globs += runners.shadow_protect(runner)
    return tuple(dict.fromkeys(globs))


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
            table = _toml(repo / name).get("pytest")
            return _split_opts(table.get("addopts") if isinstance(table, dict) else None)
    for name in ("pytest.ini", ".pytest.ini"):
        if (repo / name).is_file():
            parser = _ini_sections(repo / name)
            if parser is None or not parser.has_section("pytest"):
                return []
            return _split_opts(parser.get("pytest", "addopts", fallback=""))
    tool = _toml(repo / "pyproject.toml").get("tool", {})
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if isinstance(pytest_table, dict):
        options = pytest_table.get("ini_options", pytest_table)
        return _split_opts(options.get("addopts") if isinstance(options, dict) else None)
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = _ini_sections(repo / name)
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


def _prints_summary(runner: str, argv: Sequence[str], repo: Path) -> bool:
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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def unproven_pass(
    argv: Sequence[str],
    output: str,
    base: TestCounts | None,
    *,
    baselined: bool,
    repo: Path,
    report: runners.Report | None = None,
) -> tuple[str, str] | None:
    """Why a test run that exited 0 does not show that its tests passed, as (kind, reason) with
    kind "counts" or "weakened", or None when it does.

    The code under test runs inside the runner and can force its exit status (`os._exit(0)`,
    an atexit hook), so the counts the runner printed decide as much as the exit code: any
    failed or errored test fails the check, as does a run that printed no summary (where the
    base commit's run printed one, or the runner always prints one), or that ran fewer tests,
    or skipped more, than on the base commit. `baselined`: the run was counted on the base
    commit, and `base` holds what it printed (None: no summary there either).

    `report`: what loopctl's reporter wrote, for a run it armed (`runners.arm`). Then the
    report's counts decide, a report the run never finished fails it, and a printed summary
    that says otherwise fails it as forged ("the report and the output disagree").
    """
    runner = runner_of(argv)
    if runner is None:
        return None
    shown = " ".join(argv)
    printed = parse_test_counts(runner, output)
    reported = report_counts(report)
    if reported is not None and printed is not None and reported != printed:
        return "counts", (
            f"the report and the output disagree: check `{shown}` printed a summary of"
            f" {_described(printed)}, but loopctl's report of the run counts"
            f" {_described(reported)}"
        )
    if printed is None:
        expected = base is not None if baselined else _prints_summary(runner, argv, repo)
        if expected:
            where = " (the base commit's run printed one)" if base is not None else ""
            return "counts", f"check `{shown}` exited 0 but printed no test summary{where}"
    if report is not None and reported is None:
        how = {
            "unfinished": "the test run ended before it finished (its report was left empty)",
            "missing": "it wrote no report (the runner loopctl armed did not run to its end)",
        }.get(report.state, "its report cannot be read")
        return "counts", f"check `{shown}` exited 0, but {how}"
    counts = reported or printed
    if counts is None:
        return None
    if counts.failed or counts.errors:
        problems = [_plural(counts.failed, "failed test"), _plural(counts.errors, "error")]
        told = " and ".join(p for p in problems if not p.startswith("0 "))
        said = "its summary reports" if printed is not None else "its report counts"
        return "counts", f"check `{shown}` exited 0, yet {said} {told}"
    reason = weakened(base, counts)
    return ("weakened", reason) if reason is not None else None


def report_counts(report: runners.Report | None) -> TestCounts | None:
    """The counts a finished report holds, in the words the printed summary uses."""
    if report is None or report.state != "ok":
        return None
    pairs = report.counts
    if "run" in pairs:  # unittest's counters: as `_parse_unittest` reads its summary
        failed, errors = pairs.get("failures", 0), pairs.get("errors", 0)
        skipped = pairs.get("skipped", 0) + pairs.get("expected failures", 0)
        passed = max(pairs["run"] - failed - errors - skipped, 0)
        return TestCounts(passed=passed, failed=failed, skipped=skipped, errors=errors)
    # pytest's categories, or jest's words (checks.runners maps its report onto them).
    return _counts(pairs, ("skipped", "xfailed", "todo"))


def _described(counts: TestCounts) -> str:
    parts = [
        f"{counts.passed} passed",
        f"{counts.failed} failed",
        f"{counts.skipped} skipped",
        _plural(counts.errors, "error"),
    ]
    return ", ".join(parts)


# --- test counts and weakened runs ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TestCounts:
    """How many tests a run passed, failed, skipped and errored."""

    __test__ = False  # not a pytest test class, despite the name

    passed: int
    failed: int
    skipped: int
    errors: int

    @property
    def executed(self) -> int:
        """Tests that actually ran: passed, failed or errored."""
        return self.passed + self.failed + self.errors


_PYTEST_LINE = re.compile(
    r"^[=\s]*(?P<body>no tests ran|\d+ \w+(?:, \d+ \w+)*)"
    r"\s+in\s+[\d.]+\s?s(?:econds)?(?:\s+\([\d:.]+\))?[=\s]*$"
)
_PAIR = re.compile(r"(\d+) ([a-z]+)")
_CARGO_LINE = re.compile(
    r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; \d+ measured", re.MULTILINE
)
_GO_RUN = re.compile(r"^=== RUN\s", re.MULTILINE)
_GO_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP):", re.MULTILINE)
_JEST_LINE = re.compile(r"^Tests:\s+(.*\d+ total)\s*$")
_VITEST_LINE = re.compile(r"^\s*Tests\s+(\d+ [a-z]+(?: \| \d+ [a-z]+)*)(?: \(\d+\))?\s*$")
_NODE_LINE = re.compile(r"^(?:#|ℹ) (tests|pass|fail|cancelled|skipped|todo) (\d+)\s*$")
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.MULTILINE)
_UNITTEST_RESULT = re.compile(r"^(?:OK|FAILED)(?: \((.*)\))?\s*$", re.MULTILINE)


def _counts(pairs: Mapping[str, int], skipped_words: Sequence[str] = ("skipped",)) -> TestCounts:
    return TestCounts(
        passed=pairs.get("passed", 0) + pairs.get("xpassed", 0),
        failed=pairs.get("failed", 0),
        skipped=sum(pairs.get(word, 0) for word in skipped_words),
        errors=pairs.get("errors", 0) + pairs.get("error", 0),
    )


def _parse_pytest(lines: Sequence[str]) -> TestCounts | None:
    for line in reversed(lines):
        match = _PYTEST_LINE.match(line)
        if match is None:
            continue
        pairs = {word: int(n) for n, word in _PAIR.findall(match["body"])}
        # An expected failure proves nothing about the goal, and marking a test xfail is a way to
        # weaken a run, so it counts as skipped.
        return _counts(pairs, ("skipped", "xfailed"))
    return None


def _parse_cargo(text: str) -> TestCounts | None:
    # One line per test binary (unit, each integration file, doc-tests): add them up.
    results = _CARGO_LINE.findall(text)
    if not results:
        return None
    return TestCounts(
        passed=sum(int(r[0]) for r in results),
        failed=sum(int(r[1]) for r in results),
        skipped=sum(int(r[2]) for r in results),
        errors=0,
    )


def _parse_go(text: str) -> TestCounts | None:
    # Without -v go prints only failures and per-package "ok" lines: passing tests are invisible.
    if not _GO_RUN.search(text):
        return None
    results = _GO_RESULT.findall(text)
    return TestCounts(
        passed=results.count("PASS"),
        failed=results.count("FAIL"),
        skipped=results.count("SKIP"),
        errors=0,
    )


def _parse_jest(lines: Sequence[str]) -> TestCounts | None:
    for line in reversed(lines):
        match = _JEST_LINE.match(line.strip())
        if match is not None:
            pairs = {word: int(n) for n, word in _PAIR.findall(match[1])}
            return _counts(pairs, ("skipped", "todo", "pending"))
        match = _VITEST_LINE.match(line)
        if match is not None:
            pairs = {word: int(n) for n, word in _PAIR.findall(match[1])}
            return _counts(pairs, ("skipped", "todo"))
    return None


def _parse_node(lines: Sequence[str]) -> TestCounts | None:
    pairs: dict[str, int] = {}
    for line in lines:
        match = _NODE_LINE.match(line.strip())
        if match is not None:
            pairs[match[1]] = int(match[2])
    if "tests" not in pairs:
        return None
    return TestCounts(
        passed=pairs.get("pass", 0),
        failed=pairs.get("fail", 0),
        skipped=pairs.get("skipped", 0) + pairs.get("todo", 0),
        errors=pairs.get("cancelled", 0),
    )


def _parse_unittest(text: str) -> TestCounts | None:
    ran = _UNITTEST_RAN.findall(text)
    results = _UNITTEST_RESULT.findall(text)
    if not ran or not results:
        return None
    details = {
        key.strip(): int(value)
        for key, _, value in (item.partition("=") for item in results[-1].split(","))
        if value.strip().isdigit()
    }
    failed = details.get("failures", 0)
    errors = details.get("errors", 0)
    skipped = details.get("skipped", 0) + details.get("expected failures", 0)
    passed = int(ran[-1]) - failed - errors - skipped
    return TestCounts(passed=max(passed, 0), failed=failed, skipped=skipped, errors=errors)


def parse_test_counts(tool: str | None, output: str) -> TestCounts | None:
    """The test counts a run's output reports, or None when the output shows none."""
    text = strip_ansi(output)
    lines = text.splitlines()
    parsers: dict[str, Callable[[], TestCounts | None]] = {
        "pytest": lambda: _parse_pytest(lines),
        "cargo": lambda: _parse_cargo(text),
        "go": lambda: _parse_go(text),
        "jest": lambda: _parse_jest(lines),
        "node": lambda: _parse_node(lines),
        "unittest": lambda: _parse_unittest(text),
    }
    aliases = {"vitest": "jest"}
    chosen = aliases.get(tool or "", tool or "")
    if chosen in parsers:
        return parsers[chosen]()
    if tool in ("ruff", "eslint", "mypy", "tsc"):
        return None  # not test runners
    # npm, make, a custom --check: whatever runner it wraps, try each format in turn.
    for parse in parsers.values():
        counts = parse()
        if counts is not None:
            return counts
    return None


def _tests(n: int) -> str:
    return f"{n} test" if n == 1 else f"{n} tests"


def weakened(base: TestCounts | None, now: TestCounts | None) -> str | None:
    """Why a run proves less than the base commit's (fewer tests run, more skipped), or None."""
    if base is None or now is None:
        return None
    reasons = []
    if now.executed < base.executed:
        reasons.append(f"the check ran {_tests(now.executed)}, {base.executed} on the base commit")
    if now.skipped > base.skipped:
        reasons.append(
            f"the check skipped {_tests(now.skipped)}, {base.skipped} on the base commit"
        )
    return "; ".join(reasons) or None
