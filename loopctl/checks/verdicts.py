"""Verdicts on a maker's turn: protected paths, checker commands, and the judge agent."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl import git
from loopctl.checks.conditions import ResolvedCondition
from loopctl.checks.counts import TestCounts
from loopctl.checks.fingerprint import fingerprint, strip_ansi
from loopctl.checks.runner_detection import runner_of
from loopctl.definitions.loops import CheckerSpec
from loopctl.globs import compile_glob, first_match


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


@dataclass(frozen=True, slots=True)
class Baseline:
    """What a task's checks are held to, recorded before its first maker turn."""

    # Test counts of each counted check command on the base commit (None: it printed none).
    counts: Mapping[tuple[str, ...], TestCounts | None] = field(default_factory=dict)
    # Protected files that already differed from the base commit in a way `git diff` does not
    # show (ignored files a setup step made, an in-place run's own), with their digests.
    hidden: Mapping[str, str | None] = field(default_factory=dict)


def _command_key(argv: Sequence[str]) -> tuple[str, ...]:
    """What a command runs, however it is spelt: `pytest -q`, `/venv/bin/pytest -q` and
    `python3 -m pytest -q` all run pytest with `-q`."""
    if not argv:
        return ()
    program = Path(argv[0]).name.removesuffix(".exe")
    if re.fullmatch(r"python[0-9.]*", program) and len(argv) >= 3 and argv[1] == "-m":
        return (argv[2], *argv[3:])
    return (program, *argv[1:])


def same_command(one: Sequence[str], other: Sequence[str]) -> bool:
    """True when two check commands run the same check (one run answers for both)."""
    return _command_key(one) == _command_key(other)


def check_commands(
    checker: CheckerSpec, condition: ResolvedCondition | None
) -> tuple[tuple[str, ...], ...]:
    """The commands a verdict runs, each once: the loop's checker commands as written, then the
    goal's check unless one of them already runs it (a test suite takes minutes)."""
    goal = [condition.argv] if condition is not None and condition.argv else []
    commands: list[tuple[str, ...]] = []
    for argv in (*checker.commands, *goal):
        if not any(same_command(argv, kept) for kept in commands):
            commands.append(tuple(argv))
    return tuple(commands)


def counted_commands(
    checker: CheckerSpec, condition: ResolvedCondition | None
) -> list[tuple[str, ...]]:
    """Check commands counted on the base commit: a built-in condition's test run, and each of
    the loop's checker commands that runs a known test runner (unless `protect = []`).

    Each is the argv `check_commands` runs, so the counts are looked up under that argv."""
    # A built-in's run is always counted; a `--check`/`[conditions]` one unless
    # `protect = []` turned the runner's protections off.
    counted_goal = condition is not None and (
        condition.source == "builtin" or checker.runner_protect
    )
    goal = condition.argv if condition is not None and counted_goal else None
    own = {tuple(argv) for argv in checker.commands}
    counted: list[tuple[str, ...]] = []
    for argv in check_commands(checker, condition):
        if runner_of(argv) is None:
            continue
        if goal is not None and same_command(argv, goal):
            counted.insert(0, argv)  # the goal's run first, as logs before several runs had it
        elif checker.runner_protect and argv in own:
            counted.append(argv)
    return counted


def baseline_data(
    runs: Sequence[tuple[tuple[str, ...], int | None, TestCounts | None]],
    hidden: Mapping[str, str | None],
) -> dict[str, Any]:
    """The `baseline_checked` event's data for these (argv, exit code, counts) runs."""

    def shape(counts: TestCounts | None) -> dict[str, int] | None:
        if counts is None:
            return None
        return {
            "passed": counts.passed,
            "failed": counts.failed,
            "skipped": counts.skipped,
            "errors": counts.errors,
        }

    data: dict[str, Any] = {
        "commands": [
            {"argv": list(argv), "exit_code": code, "counts": shape(counts)}
            for argv, code, counts in runs
        ],
        "hidden": dict(hidden),
    }
    if runs:  # the first run, as the log showed it before there could be several
        data.update(exit_code=runs[0][1], counts=shape(runs[0][2]))
    return data


def baseline_from(data: Mapping[str, Any], condition: ResolvedCondition | None) -> Baseline:
    """The Baseline a `baseline_checked` event recorded."""

    def counts_of(value: object) -> TestCounts | None:
        return TestCounts(**value) if isinstance(value, dict) else None

    commands = data.get("commands")
    if isinstance(commands, list):
        counts = {
            tuple(item["argv"]): counts_of(item.get("counts"))
            for item in commands
            if isinstance(item, dict) and isinstance(item.get("argv"), list)
        }
    elif condition is not None and condition.argv:
        # Written before a run could count several commands: the condition's own.
        counts = {tuple(condition.argv): counts_of(data.get("counts"))}
    else:
        counts = {}
    hidden = data.get("hidden")
    return Baseline(counts, dict(hidden) if isinstance(hidden, dict) else {})


# loopctl's own runtime files, which it rewrites itself while a run goes on (in place).
_LOOPCTL_OWN = (".loop/log/**", ".loop/runs/**", ".loop/locks/**", ".loop/cache/**")
_LOOPCTL_OWN_FILES = frozenset({".loop/STATE.md", ".loop/INBOX.md", ".loop/.gitignore"})
# Folders of dependencies, environments and caches: the test runners loopctl knows do not
# collect tests or configuration from them (pytest's norecursedirs, jest's and vitest's
# node_modules exclusion), and walking them would cost seconds on every verdict.
_NOT_WALKED = frozenset(
    {
        *("node_modules", ".venv", "venv", "site-packages", "__pycache__", ".eggs"),
        *(".git", ".hg", ".svn", "target", "build", "dist", ".tox", ".nox"),
        *(".mypy_cache", ".pytest_cache", ".ruff_cache"),
    }
)


def hidden_changes(
    worktree: Path, base_sha: str, protected: Sequence[str]
) -> dict[str, str | None]:
    """Protected paths that differ from `base_sha` where `git.changed_paths` may not say so,
    with a digest of their content (None: deleted): untracked files git ignores, and tracked
    files whose index entry hides an edit (assume-unchanged, skip-worktree, forged stat data).
    """

    if not protected:
        return {}
    # One alternation each: matched against every tracked and ignored path, on every verdict.
    patterns = re.compile("|".join(compile_glob(p).pattern for p in protected), re.S)
    own = re.compile("|".join(compile_glob(p).pattern for p in _LOOPCTL_OWN), re.S)

    def wanted(path: str) -> bool:
        if patterns.match(path) is None:
            return False
        return path not in _LOOPCTL_OWN_FILES and own.match(path) is None

    def descend(folder: str) -> bool:
        try:
            virtualenv = (worktree / folder / "pyvenv.cfg").is_file()
        except OSError:
            # A folder the maker made unsearchable (mode 000): not a reason to fail the verdict;
            # the walk below reads what it can, as for any folder it cannot list.
            virtualenv = False
        if virtualenv:
            return False  # a virtualenv, whatever its name
        if any(part in _NOT_WALKED for part in folder.split("/")):
            # Only what a protect glob names literally inside (`node_modules/.bin/**`, whose
            # links decide which runner a script starts); the rest stays unwalked.
            return any(p.startswith(folder + "/") for p in protected)
        if own.match(folder + "/x"):
            return False
        return any(could_match_below(folder, pattern) for pattern in protected)

    found = git.ignored_files(worktree, wanted=wanted, descend=descend)
    found += git.tracked_content_changes(worktree, base_sha, wanted=wanted)
    return {path: _digest(worktree / path) for path in sorted(set(found))}


def _digest(path: Path) -> str | None:
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path)
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def could_match_below(folder: str, pattern: str) -> bool:
    """Whether `pattern` (a protect glob) can match some path inside `folder`."""

    segments = [s for s in pattern.strip().lstrip("/").removeprefix("./").split("/") if s]
    for index, part in enumerate(folder.split("/")):
        if index >= len(segments):
            return True  # the pattern names an ancestor folder: it covers everything inside
        if "**" in segments[index]:
            return True
        if not compile_glob(segments[index]).match(part):
            return False
    return True


def protection_verdict(violations: list[str]) -> Verdict:
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
