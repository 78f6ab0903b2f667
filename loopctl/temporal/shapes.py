"""What a workflow hands an activity and gets back: plain dataclasses, JSON on the wire.

Imported by the workflow sandbox too, so it imports nothing of loopctl's and nothing that starts a
program.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The activities' registered names: the workflow names them as strings, so the workflow module
# never imports the activities' (the engine's, subprocess's) modules.
RUN_ATTEMPT = "loopctl.run_attempt"
RELEASE = "loopctl.release_approval"
# The workflow a gated delivery waits in, its signal (`loopctl inbox approve`) and its query.
APPROVAL_WORKFLOW = "loopctl.AwaitApproval"
APPROVE_SIGNAL = "approve"
# `loopctl inbox reject` (and `reject --changes`) at home: the gate closes, nothing delivered.
REJECT_SIGNAL = "reject"
ANSWER_QUERY = "answer"


def approval_workflow_id(item: str) -> str:
    """One waiting workflow per approval item: a signal finds it by the item's id."""
    return f"loopctl-approval-{item}"


def own_queue(task_queue: str, identity: str) -> str:
    """The task queue only the worker `identity` polls: a delivery runs where its commit is."""
    return f"{task_queue}@{identity}"


@dataclass(frozen=True, slots=True)
class ApprovalWait:
    """A delivery stopped at a gate: its inbox item, the commit the item shows, and the queue
    of the worker whose clone holds that commit."""

    item: str
    sha: str
    loop: str
    queue: str


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
    # The gates the attempt's deliveries stopped at: each waits in an AwaitApproval workflow.
    waiting: list[ApprovalWait] = field(default_factory=list)
    outcome: str = ""  # the run's Outcome (journal.outcomes); "" from a worker before it


@dataclass(frozen=True, slots=True)
class ApprovalSignal:
    """A person's approval of `item`, bound to the commit they were shown; `nonce` names this
    signal's answer (the query), so a sender can tell its own from a repeat's."""

    item: str
    sha: str
    nonce: str
    note: str = ""
    by: str = ""
    reject: bool = False  # a rejection (REJECT_SIGNAL): `note` is its reason


@dataclass(frozen=True, slots=True)
class ApprovalRelease:
    """What the release activity gets: the gate and the signal that would release it."""

    wait: ApprovalWait
    signal: ApprovalSignal


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """What a signal did: `released` (the delivery ran on, or the loop's running tick runs it),
    `rejected` (closed without delivering), `refused` (another sha, recorded; or not now: the
    gate still waits for a signal) or `closed` (nothing left: released or rejected before)."""

    nonce: str
    outcome: str
    message: str
    ok: bool
    # The next gate of the same delivery, when the released steps stopped at one.
    waiting: list[ApprovalWait] = field(default_factory=list)


# The daily fuse across workers: one ledger workflow per task queue keeps the day's spend.
LEDGER_WORKFLOW = "loopctl.SpendLedger"
ADMIT = "loopctl.admit"  # the activity, and the ledger's update of the same name
SETTLE = "loopctl.settle"


def ledger_workflow_id(task_queue: str) -> str:
    """The spend ledger of the workers of `task_queue` (one repository's fleet)."""
    return f"loopctl-ledger-{task_queue}"


@dataclass(frozen=True, slots=True)
class Admission:
    """May attempt `attempt_id` start on `day` (the worker's local date) under these caps?"""

    attempt_id: str
    day: str
    max_tokens: int | None = None
    max_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Admitted:
    """The ledger's answer; `day` empty when no daily cap is configured (no ledger asked)."""

    ok: bool
    day: str = ""
    reason: str = ""
    tokens: int = 0  # the day's spend the answer saw
    usd: float = 0.0
    worker: str = ""
    # Not yet: no attempt's cost is known to reserve for the one running; asked again later.
    wait: bool = False


@dataclass(frozen=True, slots=True)
class Settlement:
    """What admitted attempt `attempt_id` spent (counted once, by its id)."""

    attempt_id: str
    day: str
    tokens: int
    usd: float


@dataclass(slots=True)
class DayTotal:
    tokens: int = 0
    usd: float = 0.0
    attempts: int = 0


@dataclass(slots=True)
class LedgerState:
    """The ledger's state, carried across continue-as-new: each day's settled spend and the
    attempts admitted but not yet settled (attempt id → day)."""

    days: dict[str, DayTotal] = field(default_factory=dict)
    running: dict[str, str] = field(default_factory=dict)
