"""Claimed vs measured, as recorded on `attempt_finished` (`claims`), read back and put in words.

The engine compares the maker's summary with what loopctl measured (loopctl.checks.claims) and
records the comparison with the attempt; STATE.md, INBOX.md, `inbox show` and the dashboard
show it from here, so all four say the same thing. A log without the field shows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loopctl.text import strip_controls

# How many changed files a one-line view names before "and N more".
FILES_SHOWN = 6


@dataclass(frozen=True, slots=True)
class TestsSeen:
    __test__ = False  # not a pytest test class, despite the name

    passed: int
    failed: int
    skipped: int = 0

    def describe(self) -> str:
        return f"{self.passed} passed, {self.failed} failed" + (
            f", {self.skipped} skipped" if self.skipped else ""
        )


@dataclass(frozen=True, slots=True)
class ClaimedView:
    said: str
    check_passed: bool | None
    tests: TestsSeen | None
    base: TestsSeen | None
    files: tuple[str, ...]
    added: int
    removed: int
    out_of_scope: tuple[str, ...]
    disagree: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        def seen(t: TestsSeen | None) -> dict[str, int] | None:
            return (
                None
                if t is None
                else {"passed": t.passed, "failed": t.failed, "skipped": t.skipped}
            )

        return {
            "said": self.said,
            "measured": {
                "check_passed": self.check_passed,
                "tests": _seen(self.tests),
                "base": _seen(self.base),
                "files": list(self.files),
                "added": self.added,
                "removed": self.removed,
                "out_of_scope": list(self.out_of_scope),
            },
            "disagree": list(self.disagree),
        }


def _seen(tests: TestsSeen | None) -> dict[str, int] | None:
    if tests is None:
        return None
    return {"passed": tests.passed, "failed": tests.failed, "skipped": tests.skipped}


def read(data: Any) -> ClaimedView | None:
    """The recorded comparison, tolerant of a hand-edited or older log (None: nothing usable)."""
    if not isinstance(data, Mapping):
        return None
    measured = data.get("measured")
    measured = measured if isinstance(measured, Mapping) else {}
    check = measured.get("check_passed")
    return ClaimedView(
        said=strip_controls(str(data.get("said") or "")),
        check_passed=check if isinstance(check, bool) else None,
        tests=_tests(measured.get("tests")),
        base=_tests(measured.get("base")),
        files=_strings(measured.get("files")),
        added=_int(measured.get("added")),
        removed=_int(measured.get("removed")),
        out_of_scope=_strings(measured.get("out_of_scope")),
        disagree=_strings(data.get("disagree")),
    )


def _tests(value: Any) -> TestsSeen | None:
    if not isinstance(value, Mapping):
        return None
    return TestsSeen(
        _int(value.get("passed")), _int(value.get("failed")), _int(value.get("skipped"))
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(strip_controls(str(v)) for v in value)


def said_line(view: ClaimedView) -> str:
    return view.said or "(no summary)"


def measured_line(view: ClaimedView) -> str:
    """What loopctl measured, on one line: tests against the base, files, lines."""
    parts = []
    if view.tests is not None:
        base = f" (base: {view.base.describe()})" if view.base is not None else ""
        parts.append(f"tests {view.tests.describe()}{base}")
    elif view.check_passed is None:
        parts.append("no check ran")
    else:
        parts.append(f"check {'passed' if view.check_passed else 'failed'}, no test count read")
    count = len(view.files)
    names = ", ".join(view.files[:FILES_SHOWN]) + (
        f" and {count - FILES_SHOWN} more" if count > FILES_SHOWN else ""
    )
    parts.append(
        f"{count} file{'' if count == 1 else 's'} changed, +{view.added} −{view.removed}"
        + (f" ({names})" if names else "")
    )
    if view.out_of_scope:
        parts.append("out of scope: " + ", ".join(view.out_of_scope))
    return "; ".join(parts)


def text_lines(view: ClaimedView) -> list[str]:
    """Claimed, measured and each disagreement, one line each (plain text, not escaped)."""
    lines = [f"claimed: {said_line(view)}", f"measured: {measured_line(view)}"]
    lines += [f"DISAGREES: {problem}" for problem in view.disagree]
    return lines
