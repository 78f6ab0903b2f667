"""The error types a caller branches on, and the exit codes they map to
(docs/reference.md, "Commands and exit codes")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging


class ExitCode(IntEnum):
    OK = 0
    NOT_MET = 1  # the loop ran but did not succeed, or a known runtime refusal
    USAGE = 2  # usage or definition error
    UNEXPECTED = 3
    INTERRUPTED = 130


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding about a definition file: where it is and what to do about it."""

    path: Path | None
    line: int | None
    message: str
    severity: str = "error"  # "error" | "warning"

    def render(self, root: Path | None = None) -> str:
        if self.path is None:
            return self.message if self.severity == "error" else f"warning: {self.message}"
        shown = self.path
        if root is not None:
            try:
                shown = self.path.relative_to(root)
            except ValueError:
                shown = self.path
        where = f"{shown}:{self.line}" if self.line else f"{shown}"
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{where}: {prefix}{self.message}"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


class LoopctlError(Exception):
    """Base for every foreseeable failure; the message says what failed and how to fix it."""

    exit_code: ExitCode = ExitCode.NOT_MET


class UsageError(LoopctlError):
    """Bad command-line input."""

    exit_code = ExitCode.USAGE


class DefinitionError(LoopctlError):
    """One or more definition files are invalid."""

    exit_code = ExitCode.USAGE

    def __init__(self, problems: list[Problem], root: Path | None = None) -> None:
        self.problems = [p for p in problems if p.is_error]
        self.root = root
        lines = [p.render(root) for p in self.problems] or ["invalid definition"]
        super().__init__("\n".join(lines))


class NotAGitRepository(LoopctlError):
    """loopctl needs a git repository and this is not one."""


class LockHeld(LoopctlError):
    """Another runner holds the lock for this loop."""


class AgentUnavailable(LoopctlError):
    """An agent's backend cannot run here (CLI not installed, credentials missing)."""


class GitError(LoopctlError):
    """A git command loopctl needed failed."""


class ForeignWorkTree(GitError):
    """git takes another folder than a task's worktree as its working tree (a `core.worktree`
    or `.git` file an agent changed): loopctl refuses to snapshot, reset or clean it."""


@contextlib.contextmanager
def swallowed(logger: logging.Logger, what: str, *kinds: type[BaseException]) -> Iterator[None]:
    """Carry on past an exception of `kinds` (any Exception when none is named) raised in the
    block, leaving a trace: it goes to `logger` at debug level with its traceback, which `-v`
    or LOOPCTL_DEBUG=1 shows (loopctl.cli.debug_log) and nothing else does."""
    caught = kinds or (Exception,)
    try:
        yield
    except caught:
        logger.debug("%s failed; carrying on", what, exc_info=True)
