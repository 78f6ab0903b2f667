"""Test counts: what a test run's output (or loopctl's report of it) says ran, passed, failed
and was skipped, and whether a run that exited 0 proves its tests passed (§4): no failures, a
summary where one is due, not fewer tests run nor more skipped than on the base commit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl.checks import runners
from loopctl.checks.fingerprint import strip_ansi
from loopctl.checks.runner_detection import prints_summary, runner_of


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
