"""Claimed vs measured: what the maker says it did beside what loopctl counted, and where the
two disagree.

An agent's summary ("all tests pass", "fixed the bug in src/calc.py") is the easiest thing
for it to get wrong or to make up. Wherever a human decides, loopctl shows it beside what it
measured itself: the tests run, passed and failed against the base, the files changed, the
lines added and removed, anything outside the maker's scope. A disagreement is called out.

Pure: the summary's text and the measurements in, a `Comparison` out. Every kind of claim is
one row of `CLAIMS`; the checks are deliberately simple (a sentence that says the tests pass,
a file it says it changed), so a human can predict them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loopctl.globs import first_match

# What of the summary is kept with the comparison: the commit body keeps the rest.
SAID_CHARS = 600


@dataclass(frozen=True, slots=True)
class Claim:
    name: str
    pattern: re.Pattern[str]
    means: str  # what the agent asserts, in loopctl's words


def _claim(name: str, pattern: str, means: str) -> Claim:
    return Claim(name, re.compile(pattern, re.IGNORECASE), means)


CLAIMS: tuple[Claim, ...] = (
    _claim(
        "tests-pass",
        r"\b(?:all\s+(?:the\s+)?|the\s+|every\s+)?(?:unit\s+)?tests?\s+(?:now\s+|all\s+)?"
        r"(?:pass(?:es|ed|ing)?|succeed(?:s|ed)?|(?:are|is)\s+(?:now\s+)?(?:passing|green))\b"
        r"|\ball\s+green\b|\b(?:suite|build|ci)\s+(?:is\s+)?(?:passes|passing|green)\b"
        r"|\b(?:no|zero|0)\s+(?:test\s+)?failures?\b",
        "the tests pass",
    ),
    _claim(
        "count",
        r"\b(\d+)\s*(?:/\s*\d+\s+)?(?:tests?\s+)?(?:passed|passing|pass)\b",
        "a number of tests passed",
    ),
    _claim(
        "fixed",
        r"\b(?:fixed|resolved|works\s+now|now\s+works|is\s+done|implemented|completed)\b",
        "the task is done",
    ),
    # Each file named after the verb, in the same sentence: see `_PATH`.
    _claim(
        "changed-file",
        r"\b(?:changed|edited|modified|updated|fixed|rewrote|patched|touched|added|created)\b",
        "it changed this file",
    ),
)
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyi|js|mjs|cjs|ts|tsx|jsx|go|rs|rb|java|c|h|cc"
    r"|cpp|toml|json|ya?ml|cfg|ini|md|txt|sh))\b"
)

# A sentence that says so is not claiming success ("tests still fail", "could not fix").
_NEGATED = re.compile(
    r"\b(?:not|n't|never|no\s+longer|still\s+fail\w*|fail(?:s|ed|ing)?|unable|cannot|can't)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True, slots=True)
class Counts:
    passed: int
    failed: int  # failures and errors together: either makes the run red
    skipped: int = 0

    def describe(self) -> str:
        return f"{self.passed} passed, {self.failed} failed" + (
            f", {self.skipped} skipped" if self.skipped else ""
        )


@dataclass(frozen=True, slots=True)
class Measured:
    """What loopctl measured of an attempt."""

    check_passed: bool | None  # None: no check ran
    tests: Counts | None  # None: no test count was read
    base: Counts | None = None
    files: tuple[str, ...] = ()
    added: int = 0
    removed: int = 0
    out_of_scope: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Comparison:
    said: str
    measured: Measured
    disagree: tuple[str, ...]  # each way what was said and what was measured differ

    def to_json(self) -> dict[str, Any]:
        m = self.measured
        return {
            "said": self.said,
            "measured": {
                "check_passed": m.check_passed,
                "tests": _counts_json(m.tests),
                "base": _counts_json(m.base),
                "files": list(m.files),
                "added": m.added,
                "removed": m.removed,
                "out_of_scope": list(m.out_of_scope),
            },
            "disagree": list(self.disagree),
        }


def _counts_json(counts: Counts | None) -> dict[str, int] | None:
    if counts is None:
        return None
    return {"passed": counts.passed, "failed": counts.failed, "skipped": counts.skipped}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def claims_in(text: str) -> list[tuple[str, str]]:
    """(claim name, what it matched) for each claim the summary makes, in sentence order."""
    found: list[tuple[str, str]] = []
    for sentence in sentences(text):
        for claim in CLAIMS:
            for match in claim.pattern.finditer(sentence):
                success = claim.name in ("tests-pass", "count", "fixed")
                if success and _NEGATED.search(sentence):
                    continue
                if claim.name == "changed-file":
                    paths = _PATH.findall(sentence, match.end())
                    found += [(claim.name, path) for path in paths]
                    break  # one verb names the sentence's files
                said = match.group(1) if match.groups() else match.group(0)
                found.append((claim.name, said))
    return found


def compare(said: str, measured: Measured) -> Comparison:
    """The summary beside the measurements, with each disagreement in one line."""
    problems: list[str] = []
    claims = claims_in(said)
    names = {name for name, _ in claims}
    tests = measured.tests
    if "tests-pass" in names or "count" in names:
        if tests is None:
            problems.append("says the tests pass, but loopctl counted no test run")
        elif tests.failed:
            problems.append(f"says the tests pass, but loopctl counted {tests.failed} failed")
    if tests is not None:
        for number in sorted({int(s) for name, s in claims if name == "count"}):
            if number != tests.passed:
                problems.append(f"says {number} passed, but loopctl counted {tests.passed}")
    if "fixed" in names and measured.check_passed is False:
        problems.append("says the work is done, but the check failed")
    if names & {"fixed", "changed-file"} and not measured.files:
        problems.append("says it changed something, but the change is empty")
    changed = set(measured.files)
    for path in dict.fromkeys(s for name, s in claims if name == "changed-file"):
        if not any(f == path or f.endswith("/" + path) for f in changed):
            problems.append(f"says it changed {path}, which the change does not touch")
    if measured.out_of_scope:
        problems.append("changed files outside its scope: " + ", ".join(measured.out_of_scope))
    text = " ".join(said.split())
    kept = text if len(text) <= SAID_CHARS else text[: SAID_CHARS - 1] + "…"
    return Comparison(kept, measured, tuple(problems))


def diff_size(diff: str) -> tuple[int, int]:
    """Lines a unified diff adds and removes (its file headers not counted)."""
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def from_counts(passed: int, failed: int, errors: int = 0, skipped: int = 0) -> Counts:
    return Counts(passed=passed, failed=failed + errors, skipped=skipped)


def out_of_scope(files: Sequence[str], scope: Sequence[str]) -> tuple[str, ...]:
    """The changed files no `scope` pattern covers (none when the maker has no scope)."""
    if not scope:
        return ()
    return tuple(f for f in files if first_match(f, scope) is None)
