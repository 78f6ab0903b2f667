"""`loopctl inbox --sort risk`: which waiting item a reviewer should look at first (issue 30).

Each item's risk is a score over factors a reviewer weighs, each shown with it (`--json`):

- `lines` and `files`: the size of the change (what the engine measured for the task's last
  attempt, `claims` on `attempt_finished`; else the diff of its commit against its base);
- `protected`: changed files the loop protects (its checker's `protect`, its goal's built-in
  protected files, the test runner's files, loopctl's own `.loop/`);
- `sensitive`: changed files that steer builds, CI, dependencies or secrets (`SENSITIVE`);
- `weaker_checks`: the checks counted fewer tests than on the base (tests deleted or skipped);
- `tampering`: the sabotage scan's findings on the diff;
- `checker_confidence`: a checker agent's confidence, when one was recorded (none is yet).

The default order of `loopctl inbox` is unchanged, and so is its fast path: only `--sort risk`
reads the definitions and git.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from loopctl import git
from loopctl.checks.conditions import resolve_condition
from loopctl.checks.runner_detection import runner_protect
from loopctl.definitions import Loop, Project
from loopctl.errors import LoopctlError
from loopctl.globs import matches
from loopctl.journal import history
from loopctl.journal.claimed import ClaimedView
from loopctl.journal.events import Event
from loopctl.journal.inbox import InboxItem

# Files whose change steers what runs where, or what secrets are: CI, builds, dependencies,
# keys. Repository-relative globs, as `protect` writes them.
SENSITIVE = (
    ".github/**",
    ".gitlab-ci.yml",
    ".circleci/**",
    "**/Dockerfile",
    "Dockerfile",
    "**/.env",
    "**/.env.*",
    ".env",
    ".env.*",
    "**/*.pem",
    "**/*.key",
    "**/id_rsa*",
    ".gitmodules",
    ".gitattributes",
    ".pre-commit-config.yaml",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "**/requirements*.txt",
    "requirements*.txt",
    "package.json",
    "**/package.json",
    "Makefile",
)
LOOP_FILES = (".loop/**",)

_STAT_LINE = re.compile(
    r"(\d+) files? changed(?:, (\d+) insertions?\(\+\))?(?:, (\d+) deletions?\(-\))?"
)


@dataclass(frozen=True, slots=True)
class Risk:
    """One item's risk: its score and the factors it is made of."""

    score: float
    lines: int | None = None
    files: int | None = None
    protected: tuple[str, ...] = ()
    sensitive: tuple[str, ...] = ()
    weaker_checks: dict[str, int] | None = None  # {"tests": n, "base": m} when fewer ran
    tampering: int = 0
    checker_confidence: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 2),
            "lines": self.lines,
            "files": self.files,
            "protected": list(self.protected),
            "sensitive": list(self.sensitive),
            "weaker_checks": self.weaker_checks,
            "tampering": self.tampering,
            "checker_confidence": self.checker_confidence,
        }

    def describe(self) -> str:
        """A few words for the table: what makes it risky."""
        parts = []
        if self.lines is not None:
            parts.append(f"{self.lines} lines/{self.files or 0} files")
        if self.protected:
            parts.append(f"protected: {', '.join(self.protected[:2])}")
        if self.sensitive:
            parts.append(f"sensitive: {', '.join(self.sensitive[:2])}")
        if self.weaker_checks:
            w = self.weaker_checks
            parts.append(f"fewer tests ({w['tests']} < {w['base']})")
        if self.tampering:
            parts.append(f"{self.tampering} tampering finding(s)")
        return "; ".join(parts) or "-"


def score(risk: Risk) -> float:
    """Size counts on a log scale (a 1,000-line change is not ten times a 100-line one); every
    file a loop protects, a weaker test count and tampering findings weigh more than any size."""
    total = 0.0
    if risk.lines:
        total += 5 * math.log10(1 + risk.lines)
    if risk.files:
        total += 2 * math.log10(1 + risk.files)
    total += 30 if risk.protected else 0
    total += 15 if risk.sensitive else 0
    total += 25 if risk.weaker_checks else 0
    total += 25 if risk.tampering else 0
    if risk.checker_confidence is not None:
        total += 10 * (1 - max(0.0, min(1.0, risk.checker_confidence)))
    return total


def assess(project: Project, events: Sequence[Event], found: Sequence[InboxItem]) -> list[Risk]:
    """The risk of each of `found`, in the same order."""
    runs = history.fold(events)
    protected: dict[str, tuple[str, ...]] = {}
    risks = []
    for item in found:
        task = runs[item.run].tasks.get(item.task or "") if item.run in runs else None
        loop = project.loops.get(item.loop or "")
        if item.loop and item.loop not in protected:
            protected[item.loop] = _protected(project, loop)
        risks.append(_assess(project, item, task, protected.get(item.loop or "", LOOP_FILES)))
    return risks


def sort_by_risk(
    project: Project, events: Sequence[Event], found: Sequence[InboxItem]
) -> list[tuple[InboxItem, Risk]]:
    """`found` riskiest first; equal risks keep their order (oldest first)."""
    paired = list(zip(found, assess(project, events, found), strict=True))
    return sorted(paired, key=lambda pair: -pair[1].score)


def _assess(
    project: Project,
    item: InboxItem,
    task: history.TaskView | None,
    protect: tuple[str, ...],
) -> Risk:
    claims = _claims(task)
    evidence = item.evidence
    paths: list[str] = list(claims.files) if claims is not None else []
    lines = claims.added + claims.removed if claims is not None else None
    files = len(claims.files) if claims is not None else None
    commit = evidence.get("commit") or (task.commit if task else None)
    base = task.base_sha if task else None
    if claims is None and isinstance(commit, str) and base and commit != base:
        paths, lines, files = _from_git(project, base, commit)
    weaker = None
    if claims is not None and claims.tests is not None and claims.base is not None:
        ran = claims.tests.passed + claims.tests.failed
        before = claims.base.passed + claims.base.failed
        if ran < before:
            weaker = {"tests": ran, "base": before}
    sabotage = evidence.get("sabotage")
    tampering = len(sabotage) if isinstance(sabotage, list) else 0
    confidence = _confidence(task)
    risk = Risk(
        score=0.0,  # set below, from the factors
        lines=lines,
        files=files,
        protected=tuple(p for p in paths if matches(p, protect)),
        sensitive=tuple(p for p in paths if matches(p, SENSITIVE)),
        weaker_checks=weaker,
        tampering=tampering,
        checker_confidence=confidence,
    )
    return replace(risk, score=score(risk))


def _claims(task: history.TaskView | None) -> ClaimedView | None:
    if task is None:
        return None
    return next((a.claims for a in reversed(task.attempts) if a.claims is not None), None)


def _confidence(task: history.TaskView | None) -> float | None:
    """A checker's confidence, if its last attempt recorded one (`confidence` in the attempt's
    review); no checker reports one yet, so this is None today."""
    del task
    return None


def _from_git(project: Project, base: str, commit: str) -> tuple[list[str], int | None, int]:
    try:
        paths = git.tree_changes(project.root, base, commit)
        stat = git.diff_stat_between(project.root, base, commit)
    except LoopctlError:
        return [], None, 0
    found = _STAT_LINE.search(stat)
    lines = int(found.group(2) or 0) + int(found.group(3) or 0) if found else None
    return paths, lines, len(paths)


def _protected(project: Project, loop: Loop | None) -> tuple[str, ...]:
    """What the loop's tasks may not change, as the engine holds them to it (engine.setup)."""
    if loop is None:
        return LOOP_FILES
    patterns = list(loop.checker.protect)
    if loop.checker.runner_protect:
        for argv in loop.checker.commands:
            patterns += runner_protect(argv, project.root)
    if loop.goal:
        try:
            condition = resolve_condition(
                loop.goal, project.root, configured=project.config.condition_map()
            )
        except LoopctlError:
            condition = None
        if condition is not None and condition.source == "builtin":
            patterns += condition.protect
        elif condition is not None and condition.argv and loop.checker.runner_protect:
            patterns += runner_protect(condition.argv, project.root)
    return tuple(dict.fromkeys([*patterns, *LOOP_FILES]))
