"""What warm workspaces saved, from the log: pool hits, seed hits, setups skipped and run."""

from __future__ import annotations

from collections.abc import Iterable

from loopctl.journal.events import Event, EventType

# The `what` of the note loopctl.engine.warming records once a task's worktree is ready:
# pool (hit | miss), took_s, saved_s, and with setup: decision (skipped | seeded | ran), reason,
# inputs_hash, inputs, preserve, method (reflink | copy), published, setup_s.
WORKSPACE_READY = "workspace_ready"


def time_saved(events: Iterable[Event]) -> dict[str, float | int]:
    """What warm workspaces saved, from the log: seconds, pool hits, seed hits, skipped setups."""
    saved = 0.0
    counts = {"pool_hits": 0, "seed_hits": 0, "setups_skipped": 0, "setups_run": 0}
    for event in events:
        if event.type != EventType.NOTE:
            continue
        if event.data.get("what") != WORKSPACE_READY:
            continue
        counts["pool_hits"] += event.data.get("pool") == "hit"
        decision = event.data.get("decision")
        counts["seed_hits"] += decision == "seeded"
        counts["setups_skipped"] += decision == "skipped"
        counts["setups_run"] += decision == "ran"
        value = event.data.get("saved_s")
        if isinstance(value, int | float) and not isinstance(value, bool):
            saved += float(value)
    return {"saved_s": round(saved, 3), **counts}
