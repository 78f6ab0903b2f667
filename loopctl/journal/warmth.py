"""What warm workspaces saved, from the log: pool hits, seed hits, setups skipped and run."""

from __future__ import annotations

from collections.abc import Iterable

from loopctl.journal.events import Event
from loopctl.journal.schema import WORKSPACE_READY, workspace_ready

# The note loopctl.engine.warming records once a task's worktree is ready (WORKSPACE_READY) has:
# pool (hit | miss), took_s, saved_s, and with setup: decision (skipped | seeded | ran), reason,
# inputs_hash, inputs, preserve, method (reflink | copy), published, setup_s.
__all__ = ["MAX_SAVED_S", "WARM_COUNTS", "WORKSPACE_READY", "time_saved"]

# What `time_saved` counts besides the seconds, in the order people read them.
WARM_COUNTS = ("pool_hits", "seed_hits", "setups_skipped", "setups_run")

# The total is held below this (about 31 years): two hostile savings of 1e308 s each would
# otherwise sum to infinity, which `status --json` would print as `Infinity` (not JSON).
MAX_SAVED_S = 1e9


def time_saved(events: Iterable[Event]) -> dict[str, float | int]:
    """What warm workspaces saved, from the log: seconds, pool hits, seed hits, skipped setups."""
    saved = 0.0
    counts = dict.fromkeys(WARM_COUNTS, 0)
    for event in events:
        ready = workspace_ready(event)
        if ready is None:
            continue
        counts["pool_hits"] += ready.pool == "hit"
        counts["seed_hits"] += ready.decision == "seeded"
        counts["setups_skipped"] += ready.decision == "skipped"
        counts["setups_run"] += ready.decision == "ran"
        # NaN, infinite or negative: not a saving (schema._seconds).
        saved = min(saved + (ready.saved_s or 0.0), MAX_SAVED_S)
    return {"saved_s": round(saved, 3), **counts}
