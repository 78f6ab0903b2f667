"""Test counts: what a test run's output (or loopctl's report of it) says ran, passed, failed
and was skipped, and whether a run that exited 0 proves its tests passed (§4): no failures, a
summary where one is due, not fewer tests run nor more skipped than on the base commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from loopctl.checks import runners, test_runners
from loopctl.checks.fingerprint import strip_ansi
from loopctl.checks.runner_detection import prints_summary, runner_of

# TestCounts lives with the summaries it is read from; callers import it from here too.
from loopctl.checks.summaries import TestCounts as TestCounts
from loopctl.checks.summaries import counts_of


def parse_test_counts(tool: str | None, output: str) -> TestCounts | None:
    """The test counts a run's output reports, or None when the output shows none."""
    text = strip_ansi(output)
    runner = test_runners.named(tool)
    if runner is not None and runner.parse is not None:
        return runner.parse(text)
    if tool in ("ruff", "eslint", "mypy", "tsc"):
        return None  # not test runners
    # npm, make, a custom --check: whatever runner it wraps, try each format in turn.
    for parse in test_runners.summary_parsers():
        counts = parse(text)
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
        expected = base is not None if baselined else prints_summary(runner, argv, repo)
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
    if "run" in pairs:  # unittest's counters: as `summaries.parse_unittest` reads them
        failed, errors = pairs.get("failures", 0), pairs.get("errors", 0)
        skipped = pairs.get("skipped", 0) + pairs.get("expected failures", 0)
        passed = max(pairs["run"] - failed - errors - skipped, 0)
        return TestCounts(passed=passed, failed=failed, skipped=skipped, errors=errors)
    # pytest's categories, or jest's words (checks.runners maps its report onto them).
    return counts_of(pairs, ("skipped", "xfailed", "todo"))


def _described(counts: TestCounts) -> str:
    parts = [
        f"{counts.passed} passed",
        f"{counts.failed} failed",
        f"{counts.skipped} skipped",
        _plural(counts.errors, "error"),
    ]
    return ", ".join(parts)
