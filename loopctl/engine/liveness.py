"""Liveness (issue 30): a turn or a check that makes no progress is ended as `stalled`.

Progress is any byte printed (a CLI's event stream is its stdout) or any change to the files
it works on: the worktree, the turn's state folder, and inside the sandbox its git admin
folder, object layer and the CLI's private state (where a CLI that prints only at the end
writes its session as it goes). Nothing of the kind for `[budget] max_idle` and the program is
ended as for a timeout (loopctl.idle.IdleLimit); the engine records a `stalled` note naming
the last line it printed, and the task ends with the outcome `stalled`, its `failed` inbox item
saying so. Another attempt would most likely hang the same way, so none is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from loopctl.definitions.fields import format_duration
from loopctl.engine.context import RunContext, ctx_events
from loopctl.idle import IdleLimit, TreeWatch
from loopctl.journal.events import EventType
from loopctl.journal.overnight import Stalled
from loopctl.journal.schema import stalled
from loopctl.sandbox import Sandbox

# A verdict's `source` when its check stalled.
STALLED_SOURCE = "stalled"


def idle_limit(
    ctx: RunContext,
    worktree: Path,
    sandbox: Sandbox | None,
    env: Mapping[str, str],
    extra: Sequence[Path] = (),
) -> IdleLimit:
    """The loop's `max_idle`, with a probe of the files a process there may write."""
    roots = [worktree, *extra]
    if sandbox is not None:
        roots += sandbox.watched_folders(env)
        if sandbox.cli_layer is not None:
            roots.append(sandbox.cli_layer)
    return IdleLimit(ctx.loop.budget.max_idle_s, TreeWatch(roots))


def record_stall(ctx: RunContext, task: str, note: Stalled) -> str:
    """Record that `note`'s turn or check stalled; the reason the attempt stops with."""
    ctx.record(task, note)
    return stall_reason(note)


def stall_reason(note: Stalled) -> str:
    last = f"; it last printed: {note.last!r}" if note.last else "; it printed nothing"
    return (
        f"stalled: {note.who} made no progress for {format_duration(note.idle_s)} (no output,"
        f" no file change; [budget] max_idle) and was ended{last}"
    )


def stalled_attempt(ctx: RunContext, task: str, attempt: int) -> bool:
    """Whether attempt `attempt` of `task` in this run ended because something in it stalled."""
    return any(
        (note := stalled(event)) is not None and note.attempt == attempt
        for event in ctx_events(ctx.log.read(), ctx.run_id, task, EventType.NOTE)
    )
