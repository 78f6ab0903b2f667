"""Shell completion of the names a user types: loops, inbox ids, run ids, agents.

Each function is a typer `autocompletion=` callback, called on every <TAB>: it reads file names
(and, for inbox ids, the event log) and imports nothing heavy. Outside a repository, or on any
error, it completes nothing rather than print a traceback into the shell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

_AGENT_GLOBS = (  # AGENT_SOURCES
    ".loop/agents/*.toml",
    "agents/*.toml",
    ".codex/agents/*.toml",
    ".claude/agents/*.md",
)


def _root() -> Path | None:
    from loopctl.paths import find_repo_root

    try:
        return find_repo_root()
    except Exception:  # not a repository: nothing to complete
        logger.debug("no project to complete from", exc_info=True)
        return None


def _guarded(names: Callable[[Path], list[str]], incomplete: str) -> list[str]:
    root = _root()
    if root is None:
        return []
    try:
        found = names(root)
    except Exception:  # a half-written file must not break the user's shell
        logger.debug("reading names to complete failed", exc_info=True)
        return []
    return sorted(n for n in set(found) if n.startswith(incomplete))


def loop_names(incomplete: str) -> list[str]:
    """Loops defined in .loop/loops/."""
    return _guarded(
        lambda root: [p.stem for p in (root / ".loop" / "loops").glob("*.toml")], incomplete
    )


def run_ids(incomplete: str) -> list[str]:
    """Runs that left an attempt folder, newest last (their ids sort by start time)."""
    return _guarded(
        lambda root: [p.name for p in (root / ".loop" / "runs").iterdir() if p.is_dir()],
        incomplete,
    )


def loops_and_runs(incomplete: str) -> list[str]:
    """`loopctl stop` takes either."""
    return loop_names(incomplete) + run_ids(incomplete)


def agent_names(incomplete: str) -> list[str]:
    """Agents defined in agents/*.toml and the Markdown agent folders."""

    def names(root: Path) -> list[str]:
        return [p.stem for pattern in _AGENT_GLOBS for p in root.glob(pattern)]

    return _guarded(names, incomplete)


def inbox_ids(incomplete: str) -> list[str]:
    """Open inbox items."""

    def names(root: Path) -> list[str]:
        from loopctl.journal.events import EventLog
        from loopctl.journal.inbox import open_items

        events = EventLog(root / ".loop" / "log" / "events.jsonl").read()
        return [item.id for item in open_items(events)]

    return _guarded(names, incomplete)
