"""Fingerprints of failed checks: are two failures the same failure?

Invariant 4 (docs/INVARIANTS.md): identical failures in a row stop a task.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

# The stop rule (`stop_after_identical_failures`) compares fingerprints of consecutive attempts,
# so everything that changes between two runs of one unchanged failure (where the run happened,
# when, how long it took, which process and address it got) must be normalised away, while what
# the maker can change (which tests fail, with what message, the exit code) must survive.

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")

_UUID = re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_ISO_TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
)
_CLOCK = re.compile(r"(?<![\w:])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?![\w:])")
_HEX_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
# Build hashes, commit ids, object ids: long hex runs with at least one digit and one letter.
_HEX_RUN = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b")
# tempfile's "tmpk3j_2x9a", mktemp's "tmp.AbCdEf1234", pytest's base folder.
_TEMP_NAME = re.compile(r"\btmp[._]?[A-Za-z0-9_]{6,}\b|\bpytest-of-[\w.-]+")
# Go's t.TempDir() and similar append a long random number to a name: "TestAdd2849305723".
_GLUED_LONG_NUMBER = re.compile(r"(?<=[A-Za-z_])\d{6,}(?![A-Za-z_\d])")
# Go's compound durations (1m2.5s) first, then a number with a unit, with or without a space.
_DURATION = re.compile(
    r"(?<![\w.])(?:\d+(?:\.\d+)?(?:h|m|s|ms|µs|us|ns)){2,}(?!\w)"
    r"|(?<![\w.])\d+(?:\.\d+)?\s?(?:ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?)(?!\w)"
)
# A run of path segments ending in a separator: removing it keeps only the basename.
# Segments before a separator are never empty, so a run of slashes cannot make it backtrack.
_PATH_PREFIX = re.compile(r"(?:[A-Za-z]:)?[/\\]?(?:[\w.@%+=~-]+[/\\])+(?=[\w.@%+=~-])")
_LINE_WORD = re.compile(r"\b(line|lines|col|column)\s+\d+", re.IGNORECASE)
# Counts in a summary ("3 failed, 2 passed") are part of a failure's identity; other numbers
# (line numbers, pids, ports, sizes, values in messages) are not, so they become N.
_COUNT_WORDS = (
    r"failed|failing|failures?|passed|passing|skipped|ignored|errors?|xfailed|xpassed|"
    r"deselected|pending|todo|total|measured|filtered out|tests?"
)
_NUMBER = re.compile(rf"(?<![A-Za-z_\d])\d+(?:\.\d+)*(?![A-Za-z_\d])(?!\s(?:{_COUNT_WORDS})\b)")
# pytest pads its section titles with "=" to the terminal width, so the padding length varies.
_RULE = re.compile(r"([=\-_*#~])\1{2,}")
_SPACE = re.compile(r"\s+")
_MAX_LINE = 2000


def strip_ansi(text: str) -> str:
    """Remove terminal colour and cursor escape sequences."""
    return _ANSI.sub("", text)


def normalise_line(line: str) -> str:
    """Reduce one output line to what stays the same when the same failure happens again."""
    # A line past this length is data (minified code, a dump), not a message worth comparing.
    text = strip_ansi(line[:_MAX_LINE])
    text = _UUID.sub("<uuid>", text)
    text = _ISO_TIMESTAMP.sub("<time>", text)
    text = _CLOCK.sub("<time>", text)
    text = _HEX_ADDRESS.sub("<addr>", text)
    text = _HEX_RUN.sub("<hex>", text)
    text = _DURATION.sub("<dur>", text)
    text = _PATH_PREFIX.sub("", text)
    text = _TEMP_NAME.sub("<tmp>", text)
    text = _LINE_WORD.sub(lambda m: f"{m.group(1)} N", text)
    text = _GLUED_LONG_NUMBER.sub("N", text)
    text = _NUMBER.sub("N", text)
    text = _RULE.sub(r"\1\1\1", text)
    return _SPACE.sub(" ", text).strip()


# --- failing test names --------------------------------------------------------------------

_PYTEST_SUMMARY = re.compile(r"(?:^|\]\s)\s*(?:FAILED|ERROR)\s+(\S+?(?:::\S+|\.py))(?:\s+-\s.*)?$")
_PYTEST_VERBOSE = re.compile(r"^\s*(\S+::\S+)\s+(?:FAILED|ERROR)\b")
_UNITTEST = re.compile(r"^(?:FAIL|ERROR):\s+(\w+)\s+\(([\w.]+)\)")
_GO = re.compile(r"^\s*--- FAIL:\s+(\S+)")
_CARGO = re.compile(r"^test\s+(.+?)\s+\.\.\.\s+FAILED\b")
_CROSS = re.compile(r"^\s*[✕✗✖×]\s+(.+)$")
_FAIL_PATH = re.compile(r"^\s*FAIL\s+(\S.*)$")
_TAP = re.compile(r"^\s*not ok \d+ - (.+?)(?:\s+#\s.*)?$")
_TRAILING_DURATION = re.compile(r"\s*(?:\(\s*\d+(?:\.\d+)?\s*m?s\s*\)|\d+(?:\.\d+)?\s*m?s)\s*$")


def failing_tests(output: str) -> tuple[str, ...]:
    """Names of the tests the output reports as failing, sorted and deduplicated."""
    names: set[str] = set()
    for raw in output.splitlines():
        line = strip_ansi(raw).rstrip()
        name = _failing_test_in(line)
        if name:
            names.add(name)
    return tuple(sorted(names))


def _failing_test_in(line: str) -> str | None:
    for pattern in (_PYTEST_SUMMARY, _PYTEST_VERBOSE, _GO, _CARGO, _TAP):
        match = pattern.search(line)
        if match:
            return match.group(1).strip()
    match = _UNITTEST.match(line)
    if match:
        method, where = match.groups()
        # Python 3.11+ prints "(mod.Class.test_a)", older versions "(mod.Class)".
        return where if where.endswith(f".{method}") else f"{where}.{method}"
    match = _CROSS.match(line)
    if match:
        return _TRAILING_DURATION.sub("", match.group(1)).strip() or None
    match = _FAIL_PATH.match(line)
    if match:
        # jest "FAIL src/a.test.js (5.1 s)", vitest "FAIL src/a.test.ts > suite > case",
        # go "FAIL\texample.com/pkg\t0.01s" or "FAIL\texample.com/pkg [build failed]".
        rest = _TRAILING_DURATION.sub("", match.group(1)).strip()
        return rest if " > " in rest else rest.split()[0]
    return None


# --- error lines ----------------------------------------------------------------------------

_ERRORISH = re.compile(
    r"Error|Exception|\b[Ee]rrors?\b|\bERROR\b|\bassert|\bAssert|\b[Ff]ail|FAIL|"
    r"\bpanic(?:ked|:)|\bTraceback\b"
)
_PYTEST_E = re.compile(r"^E\s{2,}\S")
# "file.py:N: message", "file.go:N:N: message", "file.ts(N,N): error ..." — a diagnostic at a place.
_LOCATED = re.compile(r"^[\w.@+-]+\.\w+(?::N(?::N)?:|\(N,N\):)\s")
# Linter rule codes opening a line (ruff's full format: "F401 [*] `os` imported but unused").
_RULE_CODE = re.compile(r"^[A-Z]{1,4}\d{2,5}\b")
# jest's failing-test headers and expectation details, cargo's assert_eq! operands, and the
# "--> file:line:col" that ruff and rustc print under a diagnostic.
_DETAIL = re.compile(r"^(?:●|Expected|Received|left:|right:|-->\s)")
_PROGRESS = re.compile(r"\[\s*\d+%\]\s*$|^\s*\d+%\s*\|")
# Stack frames repeat the same runtime internals for every failure and crowd out the message.
_FRAME = re.compile(r"^\s*(?:\d+:\s|at\s)")


def error_lines(output: str, limit: int = 20) -> tuple[str, ...]:
    """The normalised lines that look like errors, deduplicated in order, at most `limit`."""
    found: dict[str, None] = {}
    in_traceback = False
    for raw in output.splitlines():
        plain = strip_ansi(raw)
        if not plain.strip() or _PROGRESS.search(plain):
            continue
        if plain.startswith("Traceback (most recent call last)"):
            in_traceback = True
            continue
        is_final_of_traceback = in_traceback and not plain[0].isspace()
        if is_final_of_traceback:
            in_traceback = False
        line = normalise_line(plain)
        if not line or line == "E":
            continue
        if is_final_of_traceback or _looks_like_error(plain, line):
            found.setdefault(line, None)
            if len(found) >= limit:
                break
    return tuple(found)


def _looks_like_error(plain: str, line: str) -> bool:
    if _PYTEST_E.match(plain):
        return True
    if _FRAME.match(plain):
        return False
    return bool(
        _ERRORISH.search(line)
        or _LOCATED.match(line)
        or _RULE_CODE.match(line)
        or _DETAIL.match(line)
    )


# --- fingerprint ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What identifies one failed check: exit code, failing tests and normalised error lines."""

    exit_code: int | None
    failing_tests: tuple[str, ...]
    error_lines: tuple[str, ...]
    digest: str

    def short(self) -> str:
        """One line for a human: the digest, the exit code and the first failing test or error."""
        code = "no exit code" if self.exit_code is None else f"exit {self.exit_code}"
        if self.failing_tests:
            first = self.failing_tests[0]
            more = len(self.failing_tests) - 1
            what = f"failing {first}" + (f" (+{more} more)" if more else "")
        elif self.error_lines:
            first = self.error_lines[0]
            what = first if len(first) <= 80 else first[:79] + "…"
        else:
            what = "no error lines"
        return f"{self.digest} {code}: {what}"


def fingerprint(exit_code: int | None, output: str) -> Fingerprint:
    """Fingerprint one check run from its exit code and combined output."""
    tests = failing_tests(output)
    lines = error_lines(output)
    canonical = json.dumps(
        {"v": 1, "exit_code": exit_code, "failing_tests": tests, "error_lines": lines},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:12]
    return Fingerprint(exit_code=exit_code, failing_tests=tests, error_lines=lines, digest=digest)
