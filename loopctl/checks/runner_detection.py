"""Which test runner an argv runs, the command "tests green" runs in a repository, and what a
run depends on besides the code under test (the globs the maker may not change).

Each runner's part of these answers is its entry in `checks/test_runners.py`; this module asks
them in the table's order. How a run's counts are read and judged is `checks/counts.py`; arming
a runner with loopctl's own reporter is `checks/runners.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from loopctl.checks import runners, test_runners
from loopctl.checks.test_runners import TestRunner

Detected = tuple[tuple[str, ...], tuple[str, ...]]  # argv, protect


def detect_tests(repo: Path) -> Detected | None:
    """The tests command of `repo`: explicit configuration wins (in the table's order), then
    weaker evidence such as files that look like tests."""
    for strong in (True, False):
        for runner in test_runners.RUNNERS:
            detect = runner.detect if strong else runner.guess
            found = detect(repo, runner_protect) if detect is not None else None
            if found is not None:
                return found
    return None


def runner_of(argv: Sequence[str]) -> str | None:
    """The name of the test runner `argv` runs ("pytest", "npm", "cargo", …, an entry of
    `test_runners.RUNNERS`), or None when it runs none loopctl knows."""
    runner = _runner_of(argv)
    return runner.name if runner is not None else None


def _runner_of(argv: Sequence[str]) -> TestRunner | None:
    return _runner_of_words([Path(word).name.removesuffix(".exe") for word in argv])


def _runner_of_words(words: Sequence[str]) -> TestRunner | None:
    if not words:
        return None
    rest = list(words[1:])
    plain = [word for word in rest if not word.startswith(("-", "+"))]
    if words[0] in test_runners.ENV_WRAPPERS and plain[:1] == ["run"]:
        after = rest[rest.index("run") + 1 :]
        while after and after[0].startswith("-"):
            after = after[1:]
        return _runner_of_words(after)
    return test_runners.recognised(words)


def runner_protect(argv: Sequence[str], repo: Path) -> tuple[str, ...]:
    """Globs a test run of `argv` depends on: the tests, and every file the runner reads its
    configuration or plugins from. Empty when `argv` runs no test runner loopctl knows."""
    runner = _runner_of(argv)
    if runner is None:
        return ()
    globs = [*runner.protect(argv, repo)]
    for inner in runner.wraps(argv, repo) if runner.wraps is not None else ():
        globs += runner_protect(inner, repo)
    globs += runners.shadow_protect(runner.name)
    return tuple(dict.fromkeys(globs))


def prints_summary(runner: str, argv: Sequence[str], repo: Path) -> bool:
    """Whether `runner`, run as `argv`, always ends with its counts when it runs to the end."""
    entry = test_runners.named(runner)
    return entry is not None and entry.prints_summary(argv, repo)
