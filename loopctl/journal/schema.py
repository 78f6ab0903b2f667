"""One frozen class per event type, used both to write an event's `data` and to read it back.

Producers build one (`Recorder.record(TaskFinished(...), run=…)`) and consumers read one
(`read(TaskFinished, event)`, or the named readers at the end); loopctl.journal.payload says how
a class is read tolerantly and written in the log's unchanged format. A `note` is one event type
of many kinds (its `what`): `Note` reads any of them; a kind something reads back has its own
`NotePayload` class.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from msgspec import field

from loopctl.journal.events import Event, EventType
from loopctl.journal.overnight import (
    BackendPaused,
    BackendResumed,
    ReportShown,
    Stalled,
    WaitingForReview,
)
from loopctl.journal.payload import (
    ItemId,
    NotePayload,
    Payload,
    Read,
    Tokens,
    Usd,
    read,
    read_note,
)
from loopctl.journal.proposals import ProposalApplied, ProposalMade, ProposalRefused

__all__ = [
    "NotePayload",
    "Payload",
    "ProposalApplied",
    "ProposalMade",
    "ProposalRefused",
    "read",
    "read_note",
]


def _sparse(*names: str) -> frozenset[str]:
    return frozenset(names)


def _verdict(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


# --- ticks and runs ------------------------------------------------------------------------------


class TickStarted(Payload, frozen=True):
    """A tick or goal run began."""

    TYPE: ClassVar[EventType] = EventType.TICK_STARTED
    SPARSE: ClassVar[frozenset[str]] = _sparse("trigger")
    kind: str = "tick"  # tick | goal | requeue
    condition: str | None = None  # a goal's condition
    check: tuple[str, ...] | None = None  # the check command, when the loop has one
    maker: str | None = None
    judge: str | None = None
    in_place: bool = False
    settings: dict[str, Any] = field(default_factory=dict)
    command: str | None = None
    trigger: dict[str, Any] = field(default_factory=dict)  # what fired it: fired, due, …
    extra: dict[str, Any] = field(default_factory=dict)  # the push remote (delivery.remotes)


class TickFinished(Payload, frozen=True):
    """A tick or goal run ended."""

    TYPE: ClassVar[EventType] = EventType.TICK_FINISHED
    SPARSE: ClassVar[frozenset[str]] = _sparse("outcome")
    status: str | None = None  # a RunStatus's value
    reason: str = ""
    tasks: dict[str, int] = field(default_factory=dict)  # task status -> how many
    outcome: str | None = None  # an Outcome's value (statuses.Outcome); None in older logs


class TickSkipped(Payload, frozen=True):
    """The scheduler did not start a due tick."""

    TYPE: ClassVar[EventType] = EventType.TICK_SKIPPED
    reason: str = ""
    trigger: Any = None


class RunInterrupted(Payload, frozen=True):
    """A run was stopped before it ended (it resumes with the same command)."""

    TYPE: ClassVar[EventType] = EventType.RUN_INTERRUPTED
    SPARSE: ClassVar[frozenset[str]] = _sparse("reason", "outcome")
    reason: str = ""  # who stopped it, when it was not Ctrl-C: e.g. `up`'s mandate
    outcome: str | None = None  # Outcome.INTERRUPTED; None in older logs


class RunResumed(Payload, frozen=True):
    """An interrupted run went on."""

    TYPE: ClassVar[EventType] = EventType.RUN_RESUMED
    SPARSE: ClassVar[frozenset[str]] = _sparse("trigger")
    trigger: dict[str, Any] = field(default_factory=dict)


class TasksListed(Payload, frozen=True):
    """A run's task source was asked for tasks."""

    TYPE: ClassVar[EventType] = EventType.TASKS_LISTED
    count: int = 0
    found: int | None = None  # None: the source may hold more than the budget took


class BudgetStopped(Payload, frozen=True):
    """A budget stopped a task or a run."""

    TYPE: ClassVar[EventType] = EventType.BUDGET_STOPPED
    reason: str = ""


class SchedulerStarted(Payload, frozen=True):
    """`loopctl up` (or a service) started the scheduler."""

    TYPE: ClassVar[EventType] = EventType.SCHEDULER_STARTED
    SPARSE: ClassVar[frozenset[str]] = _sparse("until", "max_usd")
    by: str | None = None
    pid: int | None = None
    only: tuple[str, ...] | None = None
    loops: dict[str, Any] = field(default_factory=dict)  # loop -> its schedule, described
    # The session's mandate (`up --until/--max-usd`): its end (ISO, UTC) and its spend cap.
    until: str | None = None
    max_usd: float | None = None


class SchedulerStopped(Payload, frozen=True):
    """The scheduler stopped."""

    TYPE: ClassVar[EventType] = EventType.SCHEDULER_STOPPED
    SPARSE: ClassVar[frozenset[str]] = _sparse("reason", "checkpointed")
    by: str | None = None
    pid: int | None = None
    ticks: int | None = None
    failed: int | None = None
    reason: str = ""  # why, when it stopped of itself (the mandate); empty for `down`/Ctrl-C
    checkpointed: int = 0  # running ticks it interrupted, to resume on the next start


# --- tasks, worktrees and attempts ---------------------------------------------------------------


class TaskFound(Payload, frozen=True):
    """A run picked up a task."""

    TYPE: ClassVar[EventType] = EventType.TASK_FOUND
    prompt: str = ""
    title: str = ""
    base_ref: str | None = None
    raw_id: str | None = None  # the source's own id, when it differs from the task's
    fields: dict[str, Any] = field(default_factory=dict)  # the source's extra fields


class TaskFinished(Payload, frozen=True):
    """A task reached its outcome for this run."""

    TYPE: ClassVar[EventType] = EventType.TASK_FINISHED
    SPARSE: ClassVar[frozenset[str]] = _sparse("commit", "attempts", "outcome")
    status: str | None = None  # a TaskStatus's value
    reason: str = ""
    commit: str | None = None
    attempts: int | None = None
    outcome: str | None = None  # an Outcome's value (statuses.Outcome); None in older logs


class TaskRequeued(Payload, frozen=True):
    """A human sent a task back to run again (retry, or an answer to its question)."""

    TYPE: ClassVar[EventType] = EventType.TASK_REQUEUED
    item: str | None = None
    reason: str = ""
    raw_id: str | None = None
    prompt: str = ""
    title: str = ""
    base_ref: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    question: str | None = None
    answer: str | None = None


class WorktreeCreated(Payload, frozen=True):
    """A task's worktree (or the checkout itself, in place) was made ready to work in."""

    TYPE: ClassVar[EventType] = EventType.WORKTREE_CREATED
    SPARSE: ClassVar[frozenset[str]] = _sparse("base_ref_sha", "in_place", "dirty_at_start")
    path: str | None = None
    branch: str | None = None
    base_sha: str | None = None
    base_ref_sha: str | None = None
    in_place: bool = False
    dirty_at_start: dict[str, Any] = field(default_factory=dict)  # in place: path -> hash


class WorktreePrepared(Payload, frozen=True):
    """Files were placed into a fresh worktree before its agent ran."""

    TYPE: ClassVar[EventType] = EventType.WORKTREE_PREPARED
    files: dict[str, Any] = field(default_factory=dict)  # path -> hash


class AttemptStarted(Payload, frozen=True):
    """An attempt began (again, after an interruption, with the same number)."""

    TYPE: ClassVar[EventType] = EventType.ATTEMPT_STARTED
    attempt: int | None = None


class AgentStarted(Payload, frozen=True):
    """A maker or checker turn began."""

    TYPE: ClassVar[EventType] = EventType.AGENT_STARTED
    SPARSE: ClassVar[frozenset[str]] = _sparse("session_id")
    attempt: int | None = None
    role: str | None = None
    agent: str | None = None
    pid: int | None = None
    session_id: str | None = None  # the CLI session loopctl named for it, resumable (issue 31)


class AgentFinished(Payload, frozen=True):
    """One maker or checker turn ended (engine/agents.py writes it)."""

    TYPE: ClassVar[EventType] = EventType.AGENT_FINISHED
    # model, turns and tool_calls come in the backend's `extra`, when it has them.
    SPARSE: ClassVar[frozenset[str]] = _sparse("escalate", "model", "turns", "tool_calls")
    attempt: int | None = None
    role: str | None = None  # maker | judge
    agent: str | None = None
    backend: str | None = None
    request_model: str | None = None  # what was asked for
    output_tail: str = ""  # the last lines the agent printed
    escalate: str | None = None  # a question the agent wants a human to answer
    status: str | None = None  # ok, failed, timeout, approval, …
    exit_code: int | None = None
    duration_s: float | None = None
    input_tokens: Tokens = None  # None: not reported
    output_tokens: Tokens = None
    cached_tokens: Tokens = None
    cost_usd: Usd = None  # None: nobody priced it
    session_id: str | None = None
    text: str = ""  # the end of its final message
    model: str | None = None  # what answered, if the backend said
    turns: int | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # the rest of the backend's result

    @property
    def tokens(self) -> int:
        """Input plus output tokens; unknown counts as 0."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)


class CheckFinished(Payload, frozen=True):
    """An attempt's checks (commands and the checker's verdict) ended."""

    TYPE: ClassVar[EventType] = EventType.CHECK_FINISHED
    attempt: int | None = None
    passed: bool = False
    reason: str = ""
    fingerprint: str | None = None
    exit_code: int | None = None
    source: str | None = None
    failing_tests: tuple[str, ...] = ()
    output_tail: str = ""
    commands: tuple[dict[str, Any], ...] = ()  # one object per check command that ran


class AttemptFinished(Payload, frozen=True):
    """An attempt ended with a verdict."""

    TYPE: ClassVar[EventType] = EventType.ATTEMPT_FINISHED
    SPARSE: ClassVar[frozenset[str]] = _sparse(
        "output_tail", "fatal", "question", "tree", "tampering"
    )
    attempt: int | None = None
    verdict: str | None = None  # a Verdict's value; a plain string if this version lacks it
    reason: str = ""
    fingerprint: str | None = None
    output_tail: str = ""
    fatal: bool = False  # no further attempt can help
    question: str | None = None  # the maker asked a human
    tree: str | None = None  # the tree that passed
    tampering: dict[str, Any] = field(default_factory=dict)  # the findings, when any
    extra: dict[str, Any] = field(default_factory=dict)  # the review (engine.review)


class AttemptFootprint(Payload, frozen=True):
    """What an attempt touched, measured (checks.footprint), the steps outside its scope and
    its drift score (checks.drift), against the scope it ran under (definitions.scope)."""

    TYPE: ClassVar[EventType] = EventType.ATTEMPT_FOOTPRINT
    attempt: int | None = None
    footprint: dict[str, Any] = field(default_factory=dict)
    outside: tuple[dict[str, Any], ...] = ()
    drift: dict[str, Any] = field(default_factory=dict)
    scope: dict[str, Any] = field(default_factory=dict)


class BaselineChecked(Payload, frozen=True):
    """The check commands ran on the base before the agent, to tell its failures from ours."""

    TYPE: ClassVar[EventType] = EventType.BASELINE_CHECKED
    commands: tuple[dict[str, Any], ...] = ()
    hidden: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # the first run's exit_code, counts


class CommitCreated(Payload, frozen=True):
    """A task's work was committed."""

    TYPE: ClassVar[EventType] = EventType.COMMIT_CREATED
    sha: str | None = None
    branch: str | None = None
    tree: str | None = None
    parent: str | None = None
    folded: tuple[str, ...] = ()  # the agent's own commits folded into it


# --- the inbox, approvals and delivery -----------------------------------------------------------


class InboxOpened(Payload, frozen=True):
    """An inbox item opened; `id` is "" when the record has none."""

    TYPE: ClassVar[EventType] = EventType.INBOX_OPENED
    id: ItemId = ""
    kind: str | None = None  # an ItemKind's value
    summary: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


class InboxClosed(Payload, frozen=True):
    """An inbox item closed."""

    TYPE: ClassVar[EventType] = EventType.INBOX_CLOSED
    SPARSE: ClassVar[frozenset[str]] = _sparse("by", "reason", "outcome")
    id: ItemId = ""
    resolution: str = "closed"  # approved, dismissed, retried, resolved, …
    by: str | None = None
    reason: str | None = None
    outcome: Any = None


class Approved(Payload, frozen=True):
    """A human approved an item (a gated delivery step, or what an agent asked to run)."""

    TYPE: ClassVar[EventType] = EventType.APPROVED
    SPARSE: ClassVar[frozenset[str]] = _sparse("step")
    id: ItemId = ""
    sha: str | None = None
    step: int | None = None
    action: str | None = None
    note: str | None = None


class ApprovalRefused(Payload, frozen=True):
    """An approval could not be acted on."""

    TYPE: ClassVar[EventType] = EventType.APPROVAL_REFUSED
    id: ItemId = ""
    reason: str = "refused"


class DeliveryPlanned(Payload, frozen=True):
    """What delivering a task will do, step by step (delivery.gates.Plan)."""

    TYPE: ClassVar[EventType] = EventType.DELIVERY_PLANNED
    plan: dict[str, Any] = field(default_factory=dict)


class ActionStarted(Payload, frozen=True):
    """A delivery step began."""

    TYPE: ClassVar[EventType] = EventType.ACTION_STARTED
    step: int | None = None
    action: str | None = None
    commit: str | None = None
    gated: bool = False
    approval: Any = None


class ActionFinished(Payload, frozen=True):
    """A delivery step ended."""

    TYPE: ClassVar[EventType] = EventType.ACTION_FINISHED
    step: int | None = None
    action: str | None = None
    commit: str | None = None
    # None: the outcome is unknown (an interrupted custom action), and anything but a boolean
    # reads as unknown too.
    ok: Annotated[bool | None, Read(_verdict)] = None
    detail: str = ""
    url: str | None = None


class ActionDeferred(Payload, frozen=True):
    """A delivery step waits (for an approval, or a later run)."""

    TYPE: ClassVar[EventType] = EventType.ACTION_DEFERRED
    action: str | None = None


class Notified(Payload, frozen=True):
    """A `[notify]` channel took an item."""

    TYPE: ClassVar[EventType] = EventType.NOTIFIED
    item: str | None = None
    channel: str | None = None
    attempts: int | None = None
    error: str | None = None


class NotifyFailed(Payload, frozen=True):
    """A `[notify]` channel refused an item or a digest."""

    TYPE: ClassVar[EventType] = EventType.NOTIFY_FAILED
    SPARSE: ClassVar[frozenset[str]] = _sparse("item", "digest")
    item: str | None = None
    channel: str | None = None
    attempts: int | None = None
    error: str | None = None
    digest: str | None = None  # the digest's slot


class DigestSent(Payload, frozen=True):
    """The daily digest went out (to the channels that took it)."""

    TYPE: ClassVar[EventType] = EventType.DIGEST_SENT
    slot: str | None = None
    channels: dict[str, Any] = field(default_factory=dict)  # channel -> it took the digest
    waiting: int | None = None


# --- notes ---------------------------------------------------------------------------------------


class Note(Payload, frozen=True):
    """A `note`: something worth knowing, named by `what` (None when the record has none).

    Read for the fields every kind may carry; written for the kinds nothing reads back (their
    own fields in `extra`). A kind something reads has its own class below.
    """

    TYPE: ClassVar[EventType] = EventType.NOTE
    SPARSE: ClassVar[frozenset[str]] = _sparse("attempt", "role", "reason", "warning")
    what: str | None = None
    attempt: int | None = None
    role: str | None = None
    reason: str = ""
    warning: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# The `what` of the note loopctl.engine.containment records when the egress proxy refused
# connections during an agent turn or a check (issue 25).
NETWORK_REFUSED = "network_refused"


class NetworkRefused(NotePayload, frozen=True):
    """The `network_refused` note: each host:port a sandboxed process was refused, and whose
    (an agent's turn, as `role`, or a check)."""

    WHAT: ClassVar[str] = NETWORK_REFUSED
    SPARSE: ClassVar[frozenset[str]] = _sparse("attempt", "role", "agent", "check", "command")
    hosts: tuple[str, ...] = ()
    attempt: int | None = None
    role: str | None = None
    agent: str | None = None
    check: bool = False
    command: tuple[str, ...] | None = None  # the check's argv

    @property
    def who(self) -> str:
        if self.check:
            return "a check"
        return " ".join(p for p in (self.role or "agent", self.agent) if p)


# The `what` of the note loopctl.engine.warming records once a task's worktree is ready.
WORKSPACE_READY = "workspace_ready"


class WorkspaceReady(NotePayload, frozen=True):
    """The `workspace_ready` note: how a task's worktree was made ready, and what that saved."""

    WHAT: ClassVar[str] = WORKSPACE_READY
    SPARSE: ClassVar[frozenset[str]] = _sparse("decision", "reason")
    pool: str | None = None  # hit | miss
    discarded: Any = None
    worktree_s: float | None = None
    took_s: float | None = None
    saved_s: float | None = None
    decision: str | None = None  # skipped | seeded | ran, when the loop has a setup
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class IntegrityBaseline(NotePayload, frozen=True):
    """The digest of the files a check must not see changed, before an attempt's agent ran."""

    WHAT: ClassVar[str] = "integrity_baseline"
    attempt: int | None = None
    digest: Any = None


class NetworkOpen(NotePayload, frozen=True):
    """The `network` note: an agent (or the checks) ran with the network open."""

    WHAT: ClassVar[str] = "network"
    SPARSE: ClassVar[frozenset[str]] = _sparse("agent", "check")
    mode: str | None = None
    agent: str | None = None
    check: bool = False


class SandboxNote(NotePayload, frozen=True):
    """The `sandbox` note: how a run's agents and checks were confined (or not)."""

    WHAT: ClassVar[str] = "sandbox"
    SPARSE: ClassVar[frozenset[str]] = _sparse("mechanism", "program")
    mode: str | None = None
    mechanism: str | None = None
    program: str | None = None


class DefinitionsReloaded(NotePayload, frozen=True):
    """`loopctl up` reloaded the loop definitions after they changed."""

    WHAT: ClassVar[str] = "definitions_reloaded"
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    loops: dict[str, Any] = field(default_factory=dict)


class LoopStopped(NotePayload, frozen=True):
    """`loopctl up` stopped a loop's running tick."""

    WHAT: ClassVar[str] = "loop_stopped"
    pid: int | None = None


# Every payload class with its own event type (notes of every kind are `Note` here).
PAYLOADS: tuple[type[Payload], ...] = (
    TickStarted,
    TickFinished,
    TickSkipped,
    TaskFound,
    TaskFinished,
    WorktreeCreated,
    AttemptStarted,
    AgentStarted,
    AgentFinished,
    CheckFinished,
    AttemptFinished,
    CommitCreated,
    InboxOpened,
    InboxClosed,
    BudgetStopped,
    RunInterrupted,
    RunResumed,
    TasksListed,
    WorktreePrepared,
    BaselineChecked,
    ActionDeferred,
    Note,
    DeliveryPlanned,
    ActionStarted,
    ActionFinished,
    Approved,
    ApprovalRefused,
    TaskRequeued,
    Notified,
    NotifyFailed,
    DigestSent,
    SchedulerStarted,
    SchedulerStopped,
    ProposalMade,
    ProposalApplied,
    ProposalRefused,
    AttemptFootprint,
)
NOTES: tuple[type[NotePayload], ...] = (
    NetworkRefused,
    Stalled,
    WorkspaceReady,
    IntegrityBaseline,
    NetworkOpen,
    SandboxNote,
    DefinitionsReloaded,
    LoopStopped,
    WaitingForReview,
    ReportShown,
    BackendPaused,
    BackendResumed,
)


# --- the readers other modules call by name ------------------------------------------------------


def task_found(event: Event) -> TaskFound:
    return read(TaskFound, event)


def attempt_started(event: Event) -> AttemptStarted:
    return read(AttemptStarted, event)


def agent_finished(event: Event) -> AgentFinished:
    return read(AgentFinished, event)


def check_finished(event: Event) -> CheckFinished:
    return read(CheckFinished, event)


def attempt_finished(event: Event) -> AttemptFinished:
    return read(AttemptFinished, event)


def task_finished(event: Event) -> TaskFinished:
    return read(TaskFinished, event)


def tick_started(event: Event) -> TickStarted:
    return read(TickStarted, event)


def tick_finished(event: Event) -> TickFinished:
    return read(TickFinished, event)


def inbox_opened(event: Event) -> InboxOpened:
    return read(InboxOpened, event)


def inbox_closed(event: Event) -> InboxClosed:
    return read(InboxClosed, event)


def note(event: Event) -> Note:
    return read(Note, event)


def network_refused(event: Event) -> NetworkRefused | None:
    return read_note(NetworkRefused, event)


def workspace_ready(event: Event) -> WorkspaceReady | None:
    return read_note(WorkspaceReady, event)


def stalled(event: Event) -> Stalled | None:
    return read_note(Stalled, event)
