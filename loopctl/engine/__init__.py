"""The run: tasks found, a worktree each, maker and checker turns, verdicts, then delivery."""

from __future__ import annotations

from loopctl.engine.runner import (
    GOAL_LOOP,
    Engine,
    GoalOptions,
    RunOutcome,
    TaskOutcome,
)
from loopctl.journal.recorder import Observer, Recorder

__all__ = [
    "GOAL_LOOP",
    "Engine",
    "GoalOptions",
    "Observer",
    "Recorder",
    "RunOutcome",
    "TaskOutcome",
]
