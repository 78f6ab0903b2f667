"""Typed payloads of the events more than one module reads, and one tolerant reader per type.

The log outlives the code that wrote it, and an agent may have had a hand in what it holds: a
reader here takes whatever an older or newer loopctl (or a hostile process) left in `data` and
returns a frozen value without ever raising. A missing key gives the field's default, a value of
the wrong type gives None (or the default), unknown keys are ignored; token counts and costs go
through `loopctl.usage`'s clamps. Writers are untouched: these types describe the log format,
they do not change it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loopctl.journal.events import Event
from loopctl.usage import clamp_tokens, clamp_usd

# --- tolerant field readers ----------------------------------------------------------------------


def _data(event: Event) -> Mapping[str, Any]:
    data = event.data
    return data if isinstance(data, Mapping) else {}


def _name(value: object) -> str | None:
    """A non-empty string (an id, a status, a name), or None."""
    return value if isinstance(value, str) and value else None


def _text(value: object, default: str = "") -> str:
    """Free text (a reason, an output tail): `default` when absent or not a string."""
    return value if isinstance(value, str) else default


def _int(value: object) -> int | None:
    """An integer (an attempt number, an exit code), or None; booleans are not numbers here."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: object) -> float | None:
    """A finite, non-negative duration in seconds, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # a 400-digit integer
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _flag(value: object) -> bool:
    """True only for a JSON `true`: "yes", 1 or a list is not a yes."""
    return value is True


def _mapping(value: object) -> dict[str, Any]:
    """A copy of a JSON object, or {} for anything else."""
    if not isinstance(value, Mapping):
        return {}
    return {str(key): item for key, item in value.items()}


def _records(value: object) -> tuple[dict[str, Any], ...]:
    """The objects of a JSON list (other entries dropped), or () for anything but a list."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(_mapping(item) for item in value if isinstance(item, Mapping))


def _words(value: object) -> tuple[str, ...] | None:
    """A list of strings (an argv, test names): entries as text; None when not a list."""
    if not isinstance(value, list | tuple):
        return None
    return tuple(item if isinstance(item, str) else str(item) for item in value)


# --- task_found and attempt_started -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskFound:
    """A run picked up a task."""

    prompt: str = ""
    title: str = ""
    base_ref: str | None = None
    raw_id: str | None = None  # the source's own id, when it differs from the task's
    fields: dict[str, Any] = field(default_factory=dict)  # the source's extra fields


def task_found(event: Event) -> TaskFound:
    """The payload of a `task_found` event, whatever wrote it."""
    data = _data(event)
    return TaskFound(
        prompt=_text(data.get("prompt")),
        title=_text(data.get("title")),
        base_ref=_name(data.get("base_ref")),
        raw_id=_name(data.get("raw_id")),
        fields=_mapping(data.get("fields")),
    )


@dataclass(frozen=True, slots=True)
class AttemptStarted:
    """An attempt began (again, after an interruption, with the same number)."""

    attempt: int | None = None


def attempt_started(event: Event) -> AttemptStarted:
    """The payload of an `attempt_started` event, whatever wrote it."""
    return AttemptStarted(attempt=_int(_data(event).get("attempt")))


# --- agent_finished ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentFinished:
    """One maker or checker turn ended (engine/agents.py writes it)."""

    attempt: int | None = None
    role: str | None = None  # maker | judge
    agent: str | None = None
    backend: str | None = None
    status: str | None = None  # ok, failed, timeout, approval, …
    exit_code: int | None = None
    duration_s: float | None = None
    input_tokens: int | None = None  # None: not reported (or not usable)
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None  # None: nobody priced the call
    model: str | None = None  # what answered, if the backend said
    request_model: str | None = None  # what was asked for
    session_id: str | None = None
    turns: int | None = None
    output_tail: str = ""  # the last lines the agent printed
    text: str = ""  # the end of its final message
    tool_calls: tuple[dict[str, Any], ...] = ()

    @property
    def tokens(self) -> int:
        """Input plus output tokens; unknown counts as 0."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)


def agent_finished(event: Event) -> AgentFinished:
    """The payload of an `agent_finished` event, whatever wrote it."""
    data = _data(event)
    return AgentFinished(
        attempt=_int(data.get("attempt")),
        role=_name(data.get("role")),
        agent=_name(data.get("agent")),
        backend=_name(data.get("backend")),
        status=_name(data.get("status")),
        exit_code=_int(data.get("exit_code")),
        duration_s=_seconds(data.get("duration_s")),
        # Clamped again on reading: a log written before usage was checked may hold 1e999.
        input_tokens=clamp_tokens(data.get("input_tokens")),
        output_tokens=clamp_tokens(data.get("output_tokens")),
        cached_tokens=clamp_tokens(data.get("cached_tokens")),
        cost_usd=clamp_usd(data.get("cost_usd")),
        model=_name(data.get("model")),
        request_model=_name(data.get("request_model")),
        session_id=_name(data.get("session_id")),
        turns=_int(data.get("turns")),
        output_tail=_text(data.get("output_tail")),
        text=_text(data.get("text")),
        tool_calls=_records(data.get("tool_calls")),
    )


# --- check_finished and attempt_finished ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckFinished:
    """An attempt's checks (commands and the checker's verdict) ended."""

    attempt: int | None = None
    passed: bool = False
    reason: str = ""
    fingerprint: str | None = None
    exit_code: int | None = None
    source: str | None = None
    failing_tests: tuple[str, ...] = ()
    output_tail: str = ""
    commands: tuple[dict[str, Any], ...] = ()  # one object per check command that ran


def check_finished(event: Event) -> CheckFinished:
    """The payload of a `check_finished` event, whatever wrote it."""
    data = _data(event)
    return CheckFinished(
        attempt=_int(data.get("attempt")),
        passed=_flag(data.get("passed")),
        reason=_text(data.get("reason")),
        fingerprint=_name(data.get("fingerprint")),
        exit_code=_int(data.get("exit_code")),
        source=_name(data.get("source")),
        failing_tests=_words(data.get("failing_tests")) or (),
        output_tail=_text(data.get("output_tail")),
        commands=_records(data.get("commands")),
    )


@dataclass(frozen=True, slots=True)
class AttemptFinished:
    """An attempt ended with a verdict."""

    attempt: int | None = None
    verdict: str | None = None  # a Verdict's value; a plain string if this version lacks it
    reason: str = ""
    fingerprint: str | None = None
    output_tail: str = ""
    fatal: bool = False  # no further attempt can help
    question: str | None = None  # the maker asked a human
    tree: str | None = None  # the tree that passed


def attempt_finished(event: Event) -> AttemptFinished:
    """The payload of an `attempt_finished` event, whatever wrote it."""
    data = _data(event)
    return AttemptFinished(
        attempt=_int(data.get("attempt")),
        verdict=_name(data.get("verdict")),
        reason=_text(data.get("reason")),
        fingerprint=_name(data.get("fingerprint")),
        output_tail=_text(data.get("output_tail")),
        fatal=_flag(data.get("fatal")),
        question=_name(data.get("question")),
        tree=_name(data.get("tree")),
    )


# --- task_finished -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskFinished:
    """A task reached its outcome for this run."""

    status: str | None = None  # a TaskStatus's value
    reason: str = ""
    commit: str | None = None
    attempts: int | None = None


def task_finished(event: Event) -> TaskFinished:
    """The payload of a `task_finished` event, whatever wrote it."""
    data = _data(event)
    return TaskFinished(
        status=_name(data.get("status")),
        reason=_text(data.get("reason")),
        commit=_name(data.get("commit")),
        attempts=_int(data.get("attempts")),
    )


# --- tick_started and tick_finished --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TickStarted:
    """A tick or goal run began."""

    kind: str = "tick"  # tick | goal
    maker: str | None = None
    judge: str | None = None
    condition: str | None = None  # a goal's condition
    in_place: bool = False
    check: tuple[str, ...] | None = None  # the check command, when the loop has one
    trigger: dict[str, Any] = field(default_factory=dict)  # what fired it: fired, due, …


def tick_started(event: Event) -> TickStarted:
    """The payload of a `tick_started` event, whatever wrote it."""
    data = _data(event)
    return TickStarted(
        kind=_name(data.get("kind")) or "tick",
        maker=_name(data.get("maker")),
        judge=_name(data.get("judge")),
        condition=_name(data.get("condition")),
        in_place=_flag(data.get("in_place")),
        check=_words(data.get("check")),
        trigger=_mapping(data.get("trigger")),
    )


@dataclass(frozen=True, slots=True)
class TickFinished:
    """A tick or goal run ended."""

    status: str | None = None  # a RunStatus's value
    reason: str = ""
    tasks: dict[str, int] = field(default_factory=dict)  # task status -> how many


def tick_finished(event: Event) -> TickFinished:
    """The payload of a `tick_finished` event, whatever wrote it."""
    data = _data(event)
    counts = {
        key: count
        for key, value in _mapping(data.get("tasks")).items()
        if (count := _int(value)) is not None
    }
    return TickFinished(
        status=_name(data.get("status")), reason=_text(data.get("reason")), tasks=counts
    )


# --- inbox_opened and inbox_closed ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InboxOpened:
    """An inbox item opened; `id` is "" when the record has none."""

    id: str = ""
    kind: str | None = None  # an ItemKind's value
    summary: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def _item_id(value: object) -> str:
    # Ids are short strings; a number written by hand still names an item the way `str` would.
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""


def inbox_opened(event: Event) -> InboxOpened:
    """The payload of an `inbox_opened` event, whatever wrote it."""
    data = _data(event)
    return InboxOpened(
        id=_item_id(data.get("id")),
        kind=_name(data.get("kind")),
        summary=_text(data.get("summary")),
        evidence=_mapping(data.get("evidence")),
    )


@dataclass(frozen=True, slots=True)
class InboxClosed:
    """An inbox item closed."""

    id: str = ""
    resolution: str = "closed"  # approved, dismissed, retried, resolved, …


def inbox_closed(event: Event) -> InboxClosed:
    """The payload of an `inbox_closed` event, whatever wrote it."""
    data = _data(event)
    return InboxClosed(
        id=_item_id(data.get("id")), resolution=_name(data.get("resolution")) or "closed"
    )


# --- note ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Note:
    """A `note`: something worth knowing, named by `what` (None when the record has none)."""

    what: str | None = None
    attempt: int | None = None
    role: str | None = None
    reason: str = ""
    warning: str = ""


def note(event: Event) -> Note:
    """The common fields of a `note` event, whatever wrote it."""
    data = _data(event)
    return Note(
        what=_name(data.get("what")),
        attempt=_int(data.get("attempt")),
        role=_name(data.get("role")),
        reason=_text(data.get("reason")),
        warning=_text(data.get("warning")),
    )


# The `what` of the note loopctl.engine.containment records when the egress proxy refused
# connections during an agent turn or a check (issue 25).
NETWORK_REFUSED = "network_refused"


@dataclass(frozen=True, slots=True)
class NetworkRefused:
    """The `network_refused` note: each host:port a sandboxed process was refused, and whose
    (an agent's turn, as `role`, or a check)."""

    hosts: tuple[str, ...] = ()
    attempt: int | None = None
    role: str | None = None
    agent: str | None = None
    check: bool = False

    @property
    def who(self) -> str:
        if self.check:
            return "a check"
        return " ".join(p for p in (self.role or "agent", self.agent) if p)


def network_refused(event: Event) -> NetworkRefused | None:
    """The payload of a `network_refused` note, or None for any other event."""
    data = _data(event)
    if event.type != "note" or data.get("what") != NETWORK_REFUSED:
        return None
    return NetworkRefused(
        hosts=_words(data.get("hosts")) or (),
        attempt=_int(data.get("attempt")),
        role=_name(data.get("role")),
        agent=_name(data.get("agent")),
        check=_flag(data.get("check")),
    )


# The `what` of the note loopctl.engine.warming records once a task's worktree is ready.
WORKSPACE_READY = "workspace_ready"


@dataclass(frozen=True, slots=True)
class WorkspaceReady:
    """The `workspace_ready` note: how a task's worktree was made ready, and what that saved."""

    pool: str | None = None  # hit | miss
    took_s: float | None = None
    saved_s: float | None = None
    decision: str | None = None  # skipped | seeded | ran, when the loop has a setup
    reason: str = ""


def workspace_ready(event: Event) -> WorkspaceReady | None:
    """The payload of a `workspace_ready` note, or None for any other event."""
    data = _data(event)
    if event.type != "note" or data.get("what") != WORKSPACE_READY:
        return None
    return WorkspaceReady(
        pool=_name(data.get("pool")),
        took_s=_seconds(data.get("took_s")),
        saved_s=_seconds(data.get("saved_s")),
        decision=_name(data.get("decision")),
        reason=_text(data.get("reason")),
    )
