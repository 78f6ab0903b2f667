"""loopctl's pytest reporter: the run's counts, in a file the code under test is not told about.

loopctl loads it with `-p loopctl_pytest_report` from its own folder (on PYTHONPATH, read-only
to every check). The report's path comes in LOOPCTL_TEST_REPORT, which this module removes from
the environment when it is imported: that is before any conftest.py or test module is, so the
code under test finds the path neither in `os.environ` nor in `sys.argv`, and no child it starts
inherits it. The file is made at once (a new file, never through a link) and stays empty until
the session finishes: an empty report is a run that ended before its end (`os._exit` from a
test, an exit hook, a kill).

The counts are the categories pytest's own terminal summary is built from (what
`pytest_report_teststatus` says of each report), so an honest run's report and its printed
"N passed, M failed" line agree; a line printed by anyone else does not change the report.

What it cannot stop: the code under test runs in this same process and can, with effort, find
this module and rewrite its counts. That is why loopctl also scans the change, and why the
checker agent and the approval gate come after it.

It runs under the project's interpreter, whatever its version: standard library only, and
nothing newer than Python 3.8 offers.
"""

from __future__ import annotations

import json
import os
from typing import Any

_VARIABLE = "LOOPCTL_TEST_REPORT"
_path = os.environ.pop(_VARIABLE, "")
_fd = -1
if _path:
    _fd = os.open(_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
_counts: dict[str, int] = {}
_config: Any = None


def _add(category: str) -> None:
    if category:
        _counts[category] = _counts.get(category, 0) + 1


def pytest_configure(config: Any) -> None:
    global _config
    _config = config


def pytest_runtest_logreport(report: Any) -> None:
    if _config is None or not getattr(report, "count_towards_summary", True):
        return
    status = _config.hook.pytest_report_teststatus(report=report, config=_config)
    if status:
        _add(str(status[0]))


def pytest_collectreport(report: Any) -> None:
    # As the terminal reporter counts them: a module that failed to import is an error.
    if report.failed:
        _add("error")
    elif report.skipped:
        _add("skipped")


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    global _fd
    if _fd < 0:
        return
    data = {"format": 1, "runner": "pytest", "counts": _counts, "exitstatus": int(exitstatus)}
    payload = json.dumps(data, sort_keys=True).encode()
    fd, _fd = _fd, -1
    try:
        while payload:
            payload = payload[os.write(fd, payload) :]
    finally:
        os.close(fd)
