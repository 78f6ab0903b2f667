"""`python -m unittest`, with the working folder put first on `sys.path` only once unittest is
in, and the run's counts written where the code under test is not told about.

loopctl runs `python -m unittest …` as `python -m loopctl_unittest_main …` with
PYTHONSAFEPATH=1, as it does pytest (see loopctl_pytest_main). The report's path comes in
LOOPCTL_TEST_REPORT, removed from the environment here before any test module is imported; the
file is made at once and stays empty until the run ends, when the result's own counters are
written: the numbers unittest's "Ran N tests" and "OK"/"FAILED (…)" lines are made from.

The code under test runs in this process and could, with effort, rewrite these counters too;
the report stops forged summary lines and exit statuses, not that.

Standard library only, nothing newer than Python 3.8 offers: it runs under the project's
interpreter.
"""

from __future__ import annotations

import json
import os
import sys
import unittest
from typing import Any

__unittest = True  # keep this module out of tracebacks, as unittest's own __main__ does

os.environ.pop("PYTHONSAFEPATH", None)
_path = os.environ.pop("LOOPCTL_TEST_REPORT", "")
_fd = -1
if _path:
    _fd = os.open(_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
_counts = {
    "run": 0,
    "failures": 0,
    "errors": 0,
    "skipped": 0,
    "expected failures": 0,
    "unexpected successes": 0,
}


def _write() -> None:
    global _fd
    if _fd < 0:
        return
    payload = json.dumps({"format": 1, "runner": "unittest", "counts": _counts}).encode()
    fd, _fd = _fd, -1
    try:
        while payload:
            payload = payload[os.write(fd, payload) :]
    finally:
        os.close(fd)


class _Result(unittest.TextTestResult):
    """Counts as the result's own lists grow, in counters of its own."""

    def startTest(self, test: Any) -> None:
        _counts["run"] += 1
        super().startTest(test)

    def addFailure(self, test: Any, err: Any) -> None:
        _counts["failures"] += 1
        super().addFailure(test, err)

    def addError(self, test: Any, err: Any) -> None:
        _counts["errors"] += 1
        super().addError(test, err)

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            _counts["failures" if failed else "errors"] += 1
        super().addSubTest(test, subtest, err)

    def addSkip(self, test: Any, reason: str) -> None:
        _counts["skipped"] += 1
        super().addSkip(test, reason)

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        _counts["expected failures"] += 1
        super().addExpectedFailure(test, err)

    def addUnexpectedSuccess(self, test: Any) -> None:
        _counts["unexpected successes"] += 1
        super().addUnexpectedSuccess(test)

    def stopTestRun(self) -> None:
        super().stopTestRun()
        _write()


class _Runner(unittest.TextTestRunner):
    """unittest's own runner, with the counting result; `unittest.main` gives it its options."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["resultclass"] = _Result
        super().__init__(*args, **kwargs)


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    sys.argv[0] = "python -m unittest"
    unittest.main(module=None, testRunner=_Runner)
