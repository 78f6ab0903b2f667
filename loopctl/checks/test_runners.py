"""The test runners loopctl knows, one entry each: how a run of it is recognised (from its command
and from a repository's files), what a run depends on and what would replace the runner (the
globs the maker may not change), how its printed summary is read, and how loopctl arms it with
a report the code under test cannot forge.

This table is the only place that knows a runner by name. The rest of `checks/` consults it:
`runner_detection` (which runner an argv runs, the tests command a repository has, what a run
depends on), `counts` (reading and judging a run's counts) and `runners` (arming a run, reading
its report). Adding a runner is adding an entry to `RUNNERS`; `tests/checks/test_test_runners.py`
fails when an entry and its users disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl.checks import pytest_options, summaries
from loopctl.checks.project_files import (
    MAKEFILES,
    has_pytest_config,
    has_python_tests,
    makefile_with_target,
    package_json,
    package_scripts,
    read_text,
)
from loopctl.checks.summaries import TestCounts
from loopctl.checks.tool_paths import pytest_argv

Words = Sequence[str]  # a command's words as program names: each file name, without `.exe`
ProtectOf = Callable[[Sequence[str], Path], tuple[str, ...]]  # what a run of an argv depends on
Found = tuple[tuple[str, ...], tuple[str, ...]]  # the tests command a repository has, its protect


@dataclass(frozen=True, slots=True)
class Reporter:
    """How a run is armed with a report the code under test is not told about (`runners.arm`)
    and how that report is read back."""

    # (argv, its program names, where the command starts after `uv run`) → (index of the word
    # that names the runner, run as `python -m`), or None to run the command as written.
    locate: Callable[[Sequence[str], Words, int], tuple[int, bool] | None]
    # The armed argv: (argv's words, that index, run as `-m`, the report file to write).
    argv: Callable[[list[str], int, bool, Path], list[str]]
    # True: the run imports loopctl's reporter modules (`checks/reporters/`), so it gets them on
    # PYTHONPATH, the report's path in LOOPCTL_TEST_REPORT and, when run as `-m`, PYTHONSAFEPATH.
    python: bool
    # The report (parsed JSON) → counts in the words of the runner's printed summary, or None
    # when it is not a report of this runner.
    read: Callable[[object], dict[str, int] | None]


def _nothing(argv: Sequence[str], repo: Path) -> Sequence[str]:
    return ()


def _never(argv: Sequence[str], repo: Path) -> bool:
    return False


def _always(argv: Sequence[str], repo: Path) -> bool:
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class TestRunner:
    """One test runner: everything `checks/` needs to know about it."""

    __test__ = False  # not a pytest test class, despite the name

    name: str  # what `runner_of` answers and events record: "pytest", "npm", …
    # --- detection
    # Whether a command (its program names, after `uv run` and the like) runs this runner; None:
    # no command is recognised as it (a format read in what a wrapping runner prints).
    matches: Callable[[Words], bool] | None = None
    examples: tuple[tuple[str, ...], ...] = ()  # commands `matches` recognises (tested)
    # The "tests green" command of a repository whose configuration names this runner; `guess`
    # is weaker evidence (files that look like its tests), tried after every runner's `detect`.
    detect: Callable[[Path, ProtectOf], Found | None] | None = None
    guess: Callable[[Path, ProtectOf], Found | None] | None = None
    # --- protection
    # What a run of `argv` depends on besides the code under test: its tests, configuration,
    # plugins (globs the maker may not change, added or edited).
    protect: Callable[[Sequence[str], Path], Sequence[str]] = _nothing
    # Other runs this one starts (make's recipe): their protect globs are added to its own.
    wraps: Callable[[Sequence[str], Path], Sequence[tuple[str, ...]]] | None = None
    # (a pattern in a Makefile recipe that runs this runner, the run it stands for) for `wraps`.
    recipe: tuple[str, tuple[str, ...]] | None = None
    # What would stand in for the runner, its plugins' machinery or the interpreter's start-up
    # if a change added or edited it (protected while `runners.DEFENCE` is on).
    shadows: tuple[str, ...] = ()
    reporter: Reporter | None = None
    # --- counts
    # Its printed summary → counts; None: it runs some other runner (its output is read in every
    # known format, in table order).
    parse: Callable[[str], TestCounts | None] | None = None
    parse_last: bool = False  # a loose format: tried after every other when reading in all
    # Whether a run of `argv` always ends with a summary when it runs to its end.
    prints_summary: Callable[[Sequence[str], Path], bool] = _never


# --- recognising a command -------------------------------------------------------------------

# `uv run pytest -q`: these run the command that follows `run` (after run's own options).
ENV_WRAPPERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "rye"})
_NODE_PACKAGE_MANAGERS = frozenset({"npm", "pnpm", "yarn", "bun"})


def _plain(words: Words) -> list[str]:
    """The words after the program that are not options (`+nightly` is cargo's toolchain)."""
    return [word for word in words[1:] if not word.startswith(("-", "+"))]


def _program(*names: str) -> Callable[[Words], bool]:
    return lambda words: words[0] in names


def _python_module(words: Words) -> str | None:
    """The module `python … -m module` runs."""
    rest = list(words[1:])
    if words[0].startswith("python") and "-m" in rest[:-1]:
        return rest[rest.index("-m") + 1]
    return None


def _node_exec(words: Words) -> str | None:
    """The package `npx`, `bunx`, `pnpm exec|dlx` and `yarn exec|dlx` run."""
    first, plain = words[0], _plain(words)
    if first in ("npx", "bunx") or (first in ("pnpm", "yarn") and plain[:1] in (["exec"], ["dlx"])):
        named = [word for word in plain if word not in ("exec", "dlx")]
        return named[0] if named else None
    return None


def _node_script(words: Words) -> str | None:
    """The script (or, for pnpm and yarn, the binary) a node package manager runs."""
    if words[0] not in _NODE_PACKAGE_MANAGERS:
        return None
    plain = _plain(words)
    run = plain[:1] in (["run"], ["run-script"])
    return plain[1] if run and len(plain) > 1 else (plain[0] if plain and not run else "")


def _node_package(name: str) -> Callable[[Words], bool]:
    """`name …`, `npx name …`, `pnpm exec name`, `yarn name …`."""

    def matches(words: Words) -> bool:
        if words[0] == name or _node_exec(words) == name:
            return True
        return words[0] in ("pnpm", "yarn") and _node_script(words) == name

    return matches


def _test_script(words: Words) -> bool:
    script = _node_script(words)
    return script is not None and (script in ("test", "t", "tst") or script.startswith("test:"))


def _subcommand(program: str, subcommand: str) -> Callable[[Words], bool]:
    return lambda words: words[0] == program and _plain(words)[:1] == [subcommand]


def _make_target(words: Words) -> bool:
    return words[0] in ("make", "gmake") and any(
        word in ("test", "tests", "check") for word in _plain(words)
    )


def _pytest(words: Words) -> bool:
    return words[0] in _PYTEST_PROGRAMS or _python_module(words) in _PYTEST_PROGRAMS


_PYTEST_PROGRAMS = ("pytest", "py.test")


# --- what a run depends on -------------------------------------------------------------------

# A new file of these names is refused as well as an edited one: pytest prefers `.pytest.ini`
# over `pyproject.toml`, and a config file nearer the test paths wins over the root's, so the
# names are protected at any depth where that matters.
_PYTEST_PROTECT = (
    *("tests/**", "test/**", "**/test_*.py", "**/*_test.py", "test_*.py", "*_test.py"),
    "**/conftest.py",
    "conftest.py",
    *pytest_options.CONFIGS,
    # Only these four name pytest alone; a nested pyproject.toml is some package's own.
    *("**/pytest.toml", "**/.pytest.toml", "**/pytest.ini", "**/.pytest.ini"),
)
_UNITTEST_PROTECT = ("tests/**", "test/**", "**/test*.py")
_NPM_TEST_PROTECT = (
    *("**/*.test.*", "**/*.spec.*", "*.test.*", "*.spec.*", "__tests__/**", "**/__tests__/**"),
    *("test/**", "tests/**", "package.json"),
    ".npmrc",  # script-shell, node-options
    *(".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", "bunfig.toml"),
    *("jest.config.*", "**/jest.config.*", "jest.setup.*"),
    *("vitest.config.*", "**/vitest.config.*", "vitest.workspace.*", "vitest.setup.*"),
    "vite.config.*",  # vitest reads it when there is no vitest.config
    "babel.config.*",  # jest transforms every test through babel
    *(".babelrc", ".babelrc.*", ".swcrc", "setupTests.*", "**/setupTests.*", ".mocharc*"),
)
_CARGO_TEST_PROTECT = (
    *("tests/**", "**/tests/**", "Cargo.toml", "**/Cargo.toml"),
    "build.rs",  # runs at build time and can configure the tests away
    "**/build.rs",
    ".cargo/**",  # [target] runner, rustflags
    *("**/.cargo/**", "rust-toolchain", "rust-toolchain.toml"),
)
_GO_TEST_PROTECT = (
    *("**/*_test.go", "*_test.go", "**/testdata/**", "testdata/**"),
    *("go.mod", "**/go.mod", "go.work"),
    "vendor/**",  # go test builds against vendored packages: an assertion library lives there
)

# What would replace a Python runner: the interpreter's start-up, at any depth (a folder becomes
# an import root through PYTHONPATH, and a `.pth` file runs code in any site folder), and
# loopctl's own reporter modules, which, imported instead of loopctl's, would write the report.
_PYTHON_START = ("**/sitecustomize.py", "**/usercustomize.py", "**/*.pth")
_REPORTER_NAMES = tuple(
    f"**/{name}"
    for name in ("loopctl_pytest_report.py", "loopctl_pytest_main.py", "loopctl_unittest_main.py")
)
# npm runs the test script from package.json (protected with the tests) through the binaries
# in node_modules/.bin: a link there decides what `jest` is.
_NODE_SHADOWS = ("package.json", "node_modules/.bin/**")


def _pytest_args(argv: Sequence[str]) -> list[str]:
    """The arguments pytest itself gets from `argv` (after `pytest` or `-m pytest`)."""
    for index, word in enumerate(argv):
        if Path(word).name in _PYTEST_PROGRAMS:
            return list(argv[index + 1 :])
    return []


def _pytest_protect(argv: Sequence[str], repo: Path) -> Sequence[str]:
    return (*_PYTEST_PROTECT, *pytest_options.extras(_pytest_args(argv), repo))


def _npm_protect(argv: Sequence[str], repo: Path) -> Sequence[str]:
    if "workspaces" in package_json(repo) or (repo / "pnpm-workspace.yaml").is_file():
        # Each workspace's package.json holds its own test script and jest settings.
        return (*_NPM_TEST_PROTECT, "**/package.json", "pnpm-workspace.yaml")
    return _NPM_TEST_PROTECT


def _make_protect(argv: Sequence[str], repo: Path) -> Sequence[str]:
    return (*MAKEFILES, "*.mk", "**/*.mk")


def _make_wraps(argv: Sequence[str], repo: Path) -> list[tuple[str, ...]]:
    # What `make test` runs is in the recipe: that runner's files are protected too.
    text = "\n".join(read_text(repo / name) or "" for name in MAKEFILES)
    return [
        runner.recipe[1]
        for runner in RUNNERS
        if runner.recipe is not None and re.search(runner.recipe[0], text)
    ]


# --- the tests command a repository has ------------------------------------------------------

# npm init's placeholder script: `echo "Error: no test specified" && exit 1`.
_NPM_DEFAULT_TEST = "no test specified"


def _pytest_detect(repo: Path, protect_of: ProtectOf) -> Found | None:
    if not has_pytest_config(repo):
        return None
    argv = pytest_argv(repo)
    return argv, protect_of(argv, repo)


def _pytest_guess(repo: Path, protect_of: ProtectOf) -> Found | None:
    if not has_python_tests(repo):  # a bare tests/ folder is weak evidence (cargo uses one too)
        return None
    argv = pytest_argv(repo)
    return argv, protect_of(argv, repo)


def _cargo_detect(repo: Path, protect_of: ProtectOf) -> Found | None:
    return (("cargo", "test"), _CARGO_TEST_PROTECT) if (repo / "Cargo.toml").is_file() else None


def _go_detect(repo: Path, protect_of: ProtectOf) -> Found | None:
    # -v prints one line per test, without which the run cannot be counted (§4's "fewer tests
    # than on the base commit" needs counts).
    found = (("go", "test", "-v", "./..."), _GO_TEST_PROTECT)
    return found if (repo / "go.mod").is_file() else None


def _npm_detect(repo: Path, protect_of: ProtectOf) -> Found | None:
    script = package_scripts(package_json(repo)).get("test")
    if isinstance(script, str) and script.strip() and _NPM_DEFAULT_TEST not in script:
        return ("npm", "test"), _NPM_TEST_PROTECT
    return None


def _make_guess(repo: Path, protect_of: ProtectOf) -> Found | None:
    makefile = makefile_with_target(repo, "test")
    if makefile is None:
        return None
    return ("make", "test"), (makefile, *protect_of(("make", "test"), repo))


# --- whether a run ends with its summary -----------------------------------------------------


def _pytest_prints_summary(argv: Sequence[str], repo: Path) -> bool:
    # -qq drops pytest's "N passed in Xs" line.
    options = [*pytest_options.addopts(repo), *_pytest_args(argv)]
    return pytest_options.verbosity(options) > -2


def _go_prints_summary(argv: Sequence[str], repo: Path) -> bool:
    return any(word in ("-v", "-v=true", "-test.v") for word in argv)


def _node_prints_summary(argv: Sequence[str], repo: Path) -> bool:
    return not any(word.startswith(("--json", "--reporter")) for word in argv)


# --- arming a run with a report ---------------------------------------------------------------


def _python_m_at(names: Words, start: int) -> tuple[str, int] | None:
    """(module, its index) for `python [options] -m module …` starting at `start`."""
    if not names[start].startswith("python"):
        return None
    # Interpreter options before `-m` (`-B`, `-X dev`); `-c` or a script runs no module.
    at = start + 1
    while at < len(names) and names[at].startswith("-") and names[at] not in ("-c", "-"):
        if names[at] == "-m":
            return (names[at + 1] if at + 1 < len(names) else ""), at + 1
        at += 2 if names[at] in ("-X", "-W") else 1
    return None


def _pytest_at(argv: Sequence[str], names: Words, start: int) -> tuple[int, bool] | None:
    if names[start] in _PYTEST_PROGRAMS:
        return start, False
    module = _python_m_at(names, start)
    return (module[1], True) if module is not None and module[0] == "pytest" else None


def _unittest_at(argv: Sequence[str], names: Words, start: int) -> tuple[int, bool] | None:
    module = _python_m_at(names, start)
    return (module[1], True) if module is not None and module[0] == "unittest" else None


def _jest_at(argv: Sequence[str], names: Words, start: int) -> tuple[int, bool] | None:
    """Where `jest` is named in `jest …` or `npx [--no] jest …` (the forms whose argument
    passing is known: other package managers' exec forms run as written)."""
    at = start
    if names[start] == "npx":
        at += 1
        while at < len(names) and names[at].startswith("-"):
            at += 1
    if at >= len(names) or names[at] != "jest":
        return None
    # Options of its own that say where results go: the user's choice, left alone.
    taken = any(word.startswith(("--json", "--outputFile", "--reporters")) for word in argv)
    return None if taken else (at, False)


def _pytest_armed(words: list[str], index: int, as_module: bool, report: Path) -> list[str]:
    entry = ["loopctl_pytest_main"] if as_module else [words[index]]
    return [*words[:index], *entry, "-p", "loopctl_pytest_report", *words[index + 1 :]]


def _unittest_armed(words: list[str], index: int, as_module: bool, report: Path) -> list[str]:
    return [*words[:index], "loopctl_unittest_main", *words[index + 1 :]]


def _jest_armed(words: list[str], index: int, as_module: bool, report: Path) -> list[str]:
    # jest writes its own JSON report (from its parent process; the tests may run in workers).
    # npx reads options up to `--` as npm's own.
    wrapped = index > 0 and "--" not in words[index:]
    return [*words, *(["--"] if wrapped else []), "--json", f"--outputFile={report}"]


def _loopctl_report(runner: str) -> Callable[[object], dict[str, int] | None]:
    """Reads what loopctl's reporter modules write: {"runner": …, "counts": {word: n}}."""

    def read(value: object) -> dict[str, int] | None:
        if not isinstance(value, dict):
            return None
        counts = value.get("counts")
        if value.get("runner") != runner or not isinstance(counts, dict):
            return None
        return {str(k): v for k, v in counts.items() if isinstance(v, int) and v >= 0}

    return read


# jest's JSON report, in the words of its printed "Tests:" line; a suite that could not run is
# an error.
_JEST_FIELDS = {
    "numPassedTests": "passed",
    "numFailedTests": "failed",
    "numPendingTests": "skipped",
    "numTodoTests": "todo",
    "numRuntimeErrorTestSuites": "errors",
}


def _jest_report(value: object) -> dict[str, int] | None:
    if not isinstance(value, dict) or not isinstance(value.get("numTotalTests"), int):
        return None
    counts = {word: value.get(field, 0) for field, word in _JEST_FIELDS.items()}
    if not all(isinstance(n, int) and n >= 0 for n in counts.values()):
        return None
    return counts


# --- the table ---------------------------------------------------------------------------------

# In order: `detect` and `guess` are tried in it (pytest's configuration, then cargo, go, npm;
# then Python test files, then a Makefile), so are recipes (`wraps`) and summary formats.
RUNNERS: tuple[TestRunner, ...] = (
    TestRunner(
        name="pytest",
        matches=_pytest,
        examples=(("pytest", "-q"), ("python3", "-B", "-m", "pytest"), ("uv", "run", "pytest")),
        detect=_pytest_detect,
        guess=_pytest_guess,
        protect=_pytest_protect,
        recipe=(r"\bpytest\b|\bpy\.test\b", ("pytest",)),
        shadows=(
            *("**/pytest.py", "**/pytest/**", "**/_pytest/**", "**/py.py", "**/pluggy/**"),
            *_PYTHON_START,
            *_REPORTER_NAMES,
        ),
        reporter=Reporter(_pytest_at, _pytest_armed, True, _loopctl_report("pytest")),
        parse=summaries.parse_pytest,
        prints_summary=_pytest_prints_summary,
    ),
    TestRunner(
        name="unittest",
        matches=lambda words: _python_module(words) == "unittest",
        examples=(("python", "-m", "unittest", "discover"),),
        protect=lambda argv, repo: _UNITTEST_PROTECT,
        recipe=(r"-m\s+unittest\b", ("python", "-m", "unittest")),
        shadows=("**/unittest.py", "**/unittest/**", *_PYTHON_START, *_REPORTER_NAMES),
        reporter=Reporter(_unittest_at, _unittest_armed, True, _loopctl_report("unittest")),
        parse=summaries.parse_unittest,
        parse_last=True,  # "Ran N tests" and "OK" are the loosest evidence of all the formats
        prints_summary=_always,
    ),
    TestRunner(
        name="cargo",
        matches=_subcommand("cargo", "test"),
        examples=(("cargo", "test"), ("cargo", "+nightly", "test", "--all")),
        detect=_cargo_detect,
        protect=lambda argv, repo: _CARGO_TEST_PROTECT,
        recipe=(r"\bcargo\s+test\b", ("cargo", "test")),
        # build.rs runs before the tests and can rewrite them; .cargo/config sets a test runner.
        shadows=("build.rs", "**/build.rs", ".cargo/**", "**/.cargo/**"),
        parse=summaries.parse_cargo,
        prints_summary=_always,
    ),
    TestRunner(
        name="go",
        matches=_subcommand("go", "test"),
        examples=(("go", "test", "-v", "./..."),),
        detect=_go_detect,
        protect=lambda argv, repo: _GO_TEST_PROTECT,
        recipe=(r"\bgo\s+test\b", ("go", "test")),
        # go.work and a go.mod `replace` directive point a module's imports at other code.
        shadows=("go.work", "go.work.sum", "**/go.work", "go.mod", "**/go.mod"),
        parse=summaries.parse_go,
        prints_summary=_go_prints_summary,
    ),
    TestRunner(
        name="jest",
        matches=_node_package("jest"),
        examples=(("jest", "--ci"), ("npx", "--no", "jest"), ("yarn", "exec", "jest")),
        protect=_npm_protect,
        shadows=_NODE_SHADOWS,
        reporter=Reporter(_jest_at, _jest_armed, False, _jest_report),
        parse=summaries.parse_jest,
        prints_summary=_node_prints_summary,
    ),
    TestRunner(
        name="vitest",
        matches=_node_package("vitest"),
        examples=(("vitest", "run"), ("yarn", "vitest", "run"), ("pnpm", "exec", "vitest")),
        protect=_npm_protect,
        shadows=_NODE_SHADOWS,
        parse=summaries.parse_jest,  # vitest's "Tests" line, which parse_jest reads too
        prints_summary=_node_prints_summary,
    ),
    TestRunner(
        # node's built-in runner: its summary is read in what `npm test` prints; `node --test`
        # itself is not (yet) recognised as a runner.
        name="node",
        parse=summaries.parse_node,
    ),
    TestRunner(
        name="npm",
        matches=_test_script,
        examples=(("npm", "test"), ("npm", "run", "test:unit"), ("pnpm", "t")),
        detect=_npm_detect,
        protect=_npm_protect,
        recipe=(
            r"\b(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test\b|\bjest\b|\bvitest\b",
            ("npm", "test"),
        ),
        shadows=_NODE_SHADOWS,
        # What the script runs is the project's: its output is read in every format.
    ),
    TestRunner(
        name="make",
        matches=_make_target,
        examples=(("make", "test"), ("make", "-C", "sub", "check"), ("gmake", "tests")),
        guess=_make_guess,
        protect=_make_protect,
        wraps=_make_wraps,
    ),
)


def named(name: str | None) -> TestRunner | None:
    """The runner called `name`, or None."""
    return next((runner for runner in RUNNERS if runner.name == name), None)


def recognised(words: Words) -> TestRunner | None:
    """The runner a command runs (its program names, after any `uv run`), or None."""
    return next((r for r in RUNNERS if r.matches is not None and r.matches(words)), None)


def summary_parsers() -> list[Callable[[str], TestCounts | None]]:
    """Every summary format, in the order an output of unknown format is read in."""
    ordered = sorted(RUNNERS, key=lambda runner: runner.parse_last)
    return list(dict.fromkeys(runner.parse for runner in ordered if runner.parse is not None))
