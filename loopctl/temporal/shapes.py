"""What a workflow hands an activity and gets back: plain dataclasses, JSON on the wire.

Imported by the workflow sandbox too, so it imports nothing of loopctl's and nothing that starts a
program.
"""

from __future__ import annotations

from dataclasses import dataclass

# The activity's registered name: the workflow names it as a string, so the workflow module
# never imports the activity's (the engine's, subprocess's) modules.
RUN_ATTEMPT = "loopctl.run_attempt"


@dataclass(frozen=True, slots=True)
class AttemptRequest:
    """One tick of `loop`, known to Temporal and the journal by `attempt_id`."""

    loop: str
    attempt_id: str
    # Why it runs ("schedule", "start", …) and the slot it stands for (ISO 8601, with a zone;
    # empty for a manual start): recorded in its `tick_started` event, as `loopctl up` does.
    fired: str = "start"
    due: str = ""


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """What the tick ended as; `replayed` when a retried activity found it already done."""

    attempt_id: str
    run: str
    status: str
    reason: str
    tokens: int
    cost_usd: float
    worker: str
    replayed: bool = False
    outcome: str = ""  # the run's Outcome (journal.outcomes); "" from a worker before it
