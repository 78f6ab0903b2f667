"""Verdicts on a maker's turn: protected paths, checker commands, and the judge agent."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from loopctl.globs import first_match


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    reason: str
    fingerprint: str | None = None
    exit_code: int | None = None
    output_tail: str = ""
    source: str = "command"  # command | protect | judge | weakened | agent | none
    failing_tests: tuple[str, ...] = ()
    fatal: bool = False  # no further attempt can change this outcome (e.g. the check is missing)


def protected_violations(
    changed: Sequence[str],
    *,
    protected: Sequence[str],
    scope: Sequence[str],
) -> list[str]:
    """Human-readable reasons for each changed path the maker was not allowed to touch."""
    problems = []
    for path in changed:
        pattern = first_match(path, protected)
        if pattern is not None:
            problems.append(f"{path} (protected by {pattern})")
        elif scope and first_match(path, scope) is None:
            problems.append(f"{path} (outside the loop's scope {', '.join(scope)})")
    return problems


def protection_verdict(violations: list[str]) -> Verdict:
    import hashlib

    shown = "; ".join(violations[:5]) + (
        f"; and {len(violations) - 5} more" if len(violations) > 5 else ""
    )
    digest = hashlib.sha256("\n".join(sorted(violations)).encode()).hexdigest()[:12]
    return Verdict(
        passed=False,
        reason=f"the maker changed paths it may not change: {shown}",
        fingerprint=f"protect-{digest}",
        source="protect",
    )


def command_verdict(
    argv: Sequence[str], exit_code: int | None, timed_out: bool, output: str
) -> Verdict:
    """The verdict of one checker command from its exit code and output."""
    from loopctl.fingerprint import fingerprint

    shown = " ".join(argv)
    if timed_out:
        fp = fingerprint(None, "timeout " + shown)
        return Verdict(False, f"check `{shown}` timed out", fp.digest, None, output, "command")
    if exit_code == 0:
        return Verdict(True, f"check `{shown}` passed", None, 0, output, "command")
    fp = fingerprint(exit_code, output)
    tests = fp.failing_tests
    detail = f": failing {', '.join(tests[:5])}" if tests else ""
    if not tests and fp.error_lines:
        # The fingerprint compares normalised lines; a person reads the real one.
        detail = f": {first_error_line(output) or fp.error_lines[0]}"[:202]
    return Verdict(
        False,
        f"check `{shown}` exited {exit_code}{detail}",
        fp.digest,
        exit_code,
        output,
        "command",
        tests,
    )


_ERROR_MARKERS = re.compile(r"Error|error:|FAILED|FAIL:|assert|panic|Exception")


def first_error_line(output: str) -> str | None:
    from loopctl.fingerprint import strip_ansi

    for line in strip_ansi(output).splitlines():
        if _ERROR_MARKERS.search(line):
            return " ".join(line.split())
    return None


def parse_judge_answer(text: str) -> tuple[bool, str] | None:
    """Read `{"met": bool, "reason": str}` from the judge's last JSON line (or whole output)."""
    candidates = [line.strip() for line in reversed(text.splitlines()) if line.strip()]
    for candidate in candidates[:20]:
        start = candidate.find("{")
        if start == -1:
            continue
        try:
            value = json.loads(candidate[start:])
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("met"), bool):
            reason = value.get("reason")
            return value["met"], str(reason) if reason is not None else ""
        if isinstance(value, dict) and isinstance(value.get("result"), str):
            # A protocol result line whose `result` text holds the answer.
            nested = parse_judge_answer(value["result"])
            if nested is not None:
                return nested
    return None


def self_edit_paths(
    root: Path, agent_paths: Sequence[Path], skill_folders: Sequence[Path]
) -> list[str]:
    """Globs for loopctl's own definitions a maker may not rewrite (invariant 10)."""
    patterns = [".loop/**"]
    for path in (*agent_paths, *skill_folders):
        try:
            relative = path.relative_to(root)
        except ValueError:
            continue
        patterns.append(str(relative) + ("/**" if path.is_dir() else ""))
    return patterns
