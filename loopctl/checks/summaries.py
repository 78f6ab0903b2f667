"""Test summaries: the counts a runner prints at the end of a run, read from its output.

One parser per format; which runner prints which format is the runner's entry in
`checks/test_runners.py`. Each takes the output with its colour codes already stripped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


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


def counts_of(pairs: Mapping[str, int], skipped_words: Sequence[str] = ("skipped",)) -> TestCounts:
    """Counts from a summary's "N word" pairs (pytest's and jest's words)."""
    return TestCounts(
        passed=pairs.get("passed", 0) + pairs.get("xpassed", 0),
        failed=pairs.get("failed", 0),
        skipped=sum(pairs.get(word, 0) for word in skipped_words),
        errors=pairs.get("errors", 0) + pairs.get("error", 0),
    )


def parse_pytest(text: str) -> TestCounts | None:
    for line in reversed(text.splitlines()):
        match = _PYTEST_LINE.match(line)
        if match is None:
            continue
        pairs = {word: int(n) for n, word in _PAIR.findall(match["body"])}
        # An expected failure proves nothing about the goal, and marking a test xfail is a way to
        # weaken a run, so it counts as skipped.
        return counts_of(pairs, ("skipped", "xfailed"))
    return None


def parse_cargo(text: str) -> TestCounts | None:
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


def parse_go(text: str) -> TestCounts | None:
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


def parse_jest(text: str) -> TestCounts | None:
    """jest's "Tests:" line or vitest's "Tests" line, whichever comes last."""
    for line in reversed(text.splitlines()):
        match = _JEST_LINE.match(line.strip())
        if match is not None:
            pairs = {word: int(n) for n, word in _PAIR.findall(match[1])}
            return counts_of(pairs, ("skipped", "todo", "pending"))
        match = _VITEST_LINE.match(line)
        if match is not None:
            pairs = {word: int(n) for n, word in _PAIR.findall(match[1])}
            return counts_of(pairs, ("skipped", "todo"))
    return None


def parse_node(text: str) -> TestCounts | None:
    pairs: dict[str, int] = {}
    for line in text.splitlines():
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


def parse_unittest(text: str) -> TestCounts | None:
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
