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
  import root on PYTHONPATH, a site folder) are protected like the tests are: each runner's
  `shadows` in `checks/test_runners.py`.

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
from loopctl.checks import test_runners

# Where loopctl's reporter programs are: a folder of their own, so that putting it on a
# check's PYTHONPATH adds nothing else to the project's imports.
REPORTERS = Path(__file__).resolve().with_name("reporters")
REPORT_VARIABLE = "LOOPCTL_TEST_REPORT"
REPORT_NAME = "report.json"
_MAX_REPORT = 1 << 20

# Tests switch this off to show that each hostile variant they try works without the defence;
# nothing else changes it. Off: no report, no PYTHONSAFEPATH, no shadows protected.
DEFENCE = True


def shadow_protect(runner: str | None) -> tuple[str, ...]:
    """Globs that would replace `runner` (its entry's `shadows`); none while the defence is off."""
    entry = test_runners.named(runner) if DEFENCE else None
    return entry.shadows if entry is not None else ()


# --- arming a check ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Armed:
    """A check command as loopctl runs it: its argv, what it adds to the environment, and the
    folder its report is written to."""

    runner: str  # the name of a runner with a reporter (`test_runners.RUNNERS`)
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
    runner, reporter, index, as_module = found
    folder = Path(tempfile.mkdtemp(prefix="loopctl-report-"))
    words = tuple(reporter.argv(list(argv), index, as_module, folder / REPORT_NAME))
    if not reporter.python:
        return Armed(runner, words, {}, folder)
    paths = [str(REPORTERS), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    added = {
        "PYTHONPATH": os.pathsep.join(paths),
        REPORT_VARIABLE: str(folder / REPORT_NAME),
    }
    if as_module:
        # `python -P`, for every interpreter option order and for wrappers such as `uv run`.
        added["PYTHONSAFEPATH"] = "1"
    return Armed(runner, words, added, folder)


def _locate(argv: Sequence[str]) -> tuple[str, test_runners.Reporter, int, bool] | None:
    """(runner, its reporter, index of the word that names it, run with `-m`)."""
    names = [Path(word).name.removesuffix(".exe") for word in argv]
    start = 0
    # `uv run …`, `poetry run …`: the command after `run` and run's own options.
    if names and names[0] in test_runners.ENV_WRAPPERS and "run" in names:
        start = names.index("run") + 1
        while start < len(names) and names[start].startswith("-"):
            start += 1
    if start >= len(names):
        return None
    for runner in test_runners.RUNNERS:
        at = runner.reporter.locate(argv, names, start) if runner.reporter is not None else None
        if runner.reporter is not None and at is not None:
            return runner.name, runner.reporter, *at
    return None


def read_report(armed: Armed) -> Report:
    """The report an armed run left, read following no link the check could have planted."""
    try:
        # From its parent: the folder's own name may be a link too. With the sandbox off the
        # check runs as the user in the host's temporary folder, where it can move the folder
        # away and leave a link to one with a report of its own.
        fd = nofollow.open_folder(armed.folder.parent, armed.folder.name)
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
    entry = test_runners.named(runner)
    counts = entry.reporter.read(value) if entry is not None and entry.reporter else None
    return Report("ok", counts) if counts is not None else Report("unreadable", {})


def disarm(armed: Armed) -> None:
    """Remove the run's report folder (whatever the check left in it, links never followed)."""
    nofollow.remove_tree(armed.folder)
