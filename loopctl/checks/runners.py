"""Test runners, held to a report and to their own code (issue 26, invariant 12).

A test check's counts decide its verdict, and the code under test runs inside the runner: it
can print any summary line it likes and force any exit status. So for a runner loopctl knows,
the check runs *armed*:

- **A report the code under test is not told about.** pytest gets loopctl's reporter plugin
  (`-p loopctl_pytest_report`) and `python -m unittest` loopctl's own entry point, both from
  `reporters/` beside this file, which checks can read but not write. They write the counts to
  a file in a folder loopctl makes fresh for that one run, outside the worktree, named to them
  in an environment variable they remove before any test is imported; loopctl reads it back
  following no link. A plugin rather than `--junitxml`: the XML's path would be on the command
  line (`sys.argv`, where the code under test looks first), and its counts are not the words
  the printed summary uses (an xfail is a skip there), so the two could not be compared
  exactly. jest (`jest …`, `npx jest …`) writes its own report there (`--json --outputFile`).
  A runner's structured output that the code under test writes itself
  (`go test -json` is made from the test binary's own stdout; cargo's JSON output is unstable)
  would prove nothing more than the printed summary, so go and cargo are read as before.
- **A runner that cannot be replaced.** `python -m pytest` and `python -m unittest` start with
  PYTHONSAFEPATH=1 (`python -P`): the runner is imported before the working folder joins
  `sys.path`, so a `pytest.py` in the worktree is not what runs. The names that would still
  shadow a runner or the interpreter's start-up from wherever they are imported first (an
  import root on PYTHONPATH, a site folder) are protected like the tests are: `SHADOWS`.

The report is written by code in the same process as the tests, so code that sets out to find
it can still rewrite it; what it stops is a forged summary line or exit status, and a replaced
runner. The checker agent and the approval gate are the next lines (README, "Verdicts").
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl import nofollow

# Where loopctl's reporter programs are: a folder of their own, so that putting it on a
# check's PYTHONPATH adds nothing else to the project's imports.
REPORTERS = Path(__file__).resolve().with_name("reporters")
REPORT_VARIABLE = "LOOPCTL_TEST_REPORT"
REPORT_NAME = "report.json"
_MAX_REPORT = 1 << 20

# Tests switch this off to show that each hostile variant they try works without the defence;
# nothing else changes it. Off: no report, no PYTHONSAFEPATH, no SHADOWS.
DEFENCE = True

# Per runner, what would stand in for the runner, its plugins' machinery or the interpreter's
# start-up if a change added or edited it where it is imported first. At any depth: a folder
# becomes an import root through PYTHONPATH (an editable install's twin in the worktree, or the
# user's own), and a `.pth` file runs code in any site folder.
_PYTHON_START = ("**/sitecustomize.py", "**/usercustomize.py", "**/*.pth")
# loopctl's own reporter modules: one of these names in the worktree, imported instead of
# loopctl's, would write the report itself.
_REPORTER_NAMES = tuple(
    f"**/{name}"
    for name in ("loopctl_pytest_report.py", "loopctl_pytest_main.py", "loopctl_unittest_main.py")
)
SHADOWS: Mapping[str, tuple[str, ...]] = {
    "pytest": (
        *("**/pytest.py", "**/pytest/**", "**/_pytest/**", "**/py.py", "**/pluggy/**"),
        *_PYTHON_START,
        *_REPORTER_NAMES,
    ),
    "unittest": ("**/unittest.py", "**/unittest/**", *_PYTHON_START, *_REPORTER_NAMES),
    # npm runs the test script from package.json (protected with the tests) through the
    # binaries in node_modules/.bin: a link there decides what `jest` is.
    "npm": ("package.json", "node_modules/.bin/**"),
    "jest": ("package.json", "node_modules/.bin/**"),
    "vitest": ("package.json", "node_modules/.bin/**"),
    # build.rs runs before the tests and can rewrite them; .cargo/config sets a test runner.
    "cargo": ("build.rs", "**/build.rs", ".cargo/**", "**/.cargo/**"),
    # go.work and a go.mod `replace` directive point a module's imports at other code.
    "go": ("go.work", "go.work.sum", "**/go.work", "go.mod", "**/go.mod"),
}


def shadow_protect(runner: str | None) -> tuple[str, ...]:
    """Globs that would replace `runner` (see SHADOWS); none while the defence is off."""
    if not DEFENCE or runner is None:
        return ()
    return SHADOWS.get(runner, ())


# --- arming a check ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Armed:
    """A check command as loopctl runs it: its argv, what it adds to the environment, and the
    folder its report is written to."""

    runner: str  # "pytest" | "unittest" | "jest"
    argv: tuple[str, ...]
    env: Mapping[str, str]
    folder: Path


@dataclass(frozen=True, slots=True)
class Report:
    """What an armed run's report says: `state` "ok" with the counts by the runner's own
    words, "missing" (the reporter never ran), "unfinished" (the run ended before its end), or
    "unreadable"."""

    state: str
    counts: Mapping[str, int]


def arm(argv: Sequence[str], env: Mapping[str, str]) -> Armed | None:
    """`argv` armed with loopctl's reporter, or None when it is not a runner invocation loopctl
    recognises (it then runs as written). The caller removes `Armed.folder` (`disarm`)."""
    if not DEFENCE:
        return None
    found = _locate(argv)
    if found is None:
        return None
    runner, index, as_module = found
    words = list(argv)
    folder = Path(tempfile.mkdtemp(prefix="loopctl-report-"))
    if runner == "jest":
        # jest writes its own JSON report (from its parent process; the tests may run in
        # workers). npx reads options up to `--` as npm's own.
        wrapped = index > 0 and "--" not in words[index:]
        words += [*(["--"] if wrapped else []), "--json", f"--outputFile={folder / REPORT_NAME}"]
        return Armed(runner, tuple(words), {}, folder)
    if runner == "pytest":
        entry = ["loopctl_pytest_main"] if as_module else [words[index]]
        words[index : index + 1] = [*entry, "-p", "loopctl_pytest_report"]
    else:
        words[index] = "loopctl_unittest_main"
    paths = [str(REPORTERS), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    added = {
        "PYTHONPATH": os.pathsep.join(paths),
        REPORT_VARIABLE: str(folder / REPORT_NAME),
    }
    if as_module:
        # `python -P`, for every interpreter option order and for wrappers such as `uv run`.
        added["PYTHONSAFEPATH"] = "1"
    return Armed(runner, tuple(words), added, folder)


def _locate(argv: Sequence[str]) -> tuple[str, int, bool] | None:
    """(runner, index of the word that names it, run with `-m`) for pytest and unittest."""
    names = [Path(word).name.removesuffix(".exe") for word in argv]
    start = 0
    # `uv run …`, `poetry run …`: the command after `run` and run's own options.
    if names and names[0] in _ENV_WRAPPERS and "run" in names:
        start = names.index("run") + 1
        while start < len(names) and names[start].startswith("-"):
            start += 1
    if start >= len(names):
        return None
    first = names[start]
    if first in ("pytest", "py.test"):
        return "pytest", start, False
    jest = _jest_at(names, start)
    if jest is not None:
        # Options of its own that say where results go: the user's choice, left alone.
        taken = any(word.startswith(("--json", "--outputFile", "--reporters")) for word in argv)
        return None if taken else ("jest", jest, False)
    if first.startswith("python"):
        # Interpreter options before `-m` (`-B`, `-X dev`); `-c` or a script runs no runner.
        at = start + 1
        while at < len(names) and names[at].startswith("-") and names[at] not in ("-c", "-"):
            if names[at] == "-m":
                module = names[at + 1] if at + 1 < len(names) else ""
                return (module, at + 1, True) if module in ("pytest", "unittest") else None
            at += 2 if names[at] in ("-X", "-W") else 1
    return None


_ENV_WRAPPERS = frozenset({"uv", "poetry", "pipenv", "pdm", "hatch", "rye"})


def _jest_at(names: Sequence[str], start: int) -> int | None:
    """Where `jest` is named in `jest …` or `npx [--no] jest …` (the forms whose argument
    passing is known: other package managers' exec forms run as written)."""
    if names[start] == "jest":
        return start
    if names[start] != "npx":
        return None
    at = start + 1
    while at < len(names) and names[at].startswith("-"):
        at += 1
    return at if at < len(names) and names[at] == "jest" else None


def read_report(armed: Armed) -> Report:
    """The report an armed run left, read following no link the check could have planted."""
    try:
        fd = nofollow.open_folder(armed.folder)
    except OSError:
        return Report("unreadable", {})
    try:
        try:
            # O_NONBLOCK: a FIFO the check left in the report's place must not block the open
            # (it is then refused as no regular file); reads of a regular file ignore it.
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
            file_fd = os.open(REPORT_NAME, flags, dir_fd=fd)
        except FileNotFoundError:
            return Report("missing", {})
        except OSError:
            return Report("unreadable", {})
        try:
            info = os.fstat(file_fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_REPORT:
                return Report("unreadable", {})
            data = os.read(file_fd, _MAX_REPORT + 1)
        finally:
            os.close(file_fd)
    finally:
        os.close(fd)
    if not data:
        return Report("unfinished", {})
    return _parsed(data, armed.runner)


def _parsed(data: bytes, runner: str) -> Report:
    try:
        value = json.loads(data)
    except ValueError:
        return Report("unreadable", {})
    if runner == "jest":
        return _jest_report(value)
    counts = value.get("counts") if isinstance(value, dict) else None
    if value.get("runner") != runner or not isinstance(counts, dict):
        return Report("unreadable", {})
    clean = {str(k): v for k, v in counts.items() if isinstance(v, int) and v >= 0}
    return Report("ok", clean)


# jest's JSON report, in the words of its printed "Tests:" line; a suite that could not run is
# an error.
_JEST_FIELDS = {
    "numPassedTests": "passed",
    "numFailedTests": "failed",
    "numPendingTests": "skipped",
    "numTodoTests": "todo",
    "numRuntimeErrorTestSuites": "errors",
}


def _jest_report(value: object) -> Report:
    if not isinstance(value, dict) or not isinstance(value.get("numTotalTests"), int):
        return Report("unreadable", {})
    counts = {word: value.get(field, 0) for field, word in _JEST_FIELDS.items()}
    if not all(isinstance(n, int) and n >= 0 for n in counts.values()):
        return Report("unreadable", {})
    return Report("ok", counts)


def disarm(armed: Armed) -> None:
    """Remove the run's report folder (whatever the check left in it, links never followed)."""
    nofollow.remove_tree(armed.folder)
