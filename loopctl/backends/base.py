"""The interface every agent backend implements, and the result they all return."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from loopctl.definitions.agents import Agent
from loopctl.definitions.skills import Skill
from loopctl.egress_cassette import EgressTap
from loopctl.idle import IdleLimit
from loopctl.sandbox import Sandbox
from loopctl.secrets import Redactor
from loopctl.text import clean_data, strip_controls
from loopctl.usage import MAX_TOKENS, MAX_USD, clamp_tokens, clamp_usd, usage_problem

# Opens an inbox approval for something the agent wanted to do: (summary, evidence) -> item id.
ApprovalOpener = Callable[[str, dict[str, Any]], str]


class AgentStatus(StrEnum):
    OK = "ok"  # the agent finished its turn (exit 0, no error reported)
    ERROR = "error"  # non-zero exit or is_error in its result
    TIMEOUT = "timeout"
    STALLED = "stalled"  # no output and no file change for [budget] max_idle: ended
    INTERRUPTED = "interrupted"
    APPROVAL = "approval"  # stopped before a command that waits for a human (inbox item opened)


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """One agent turn: who, with what prompt, where, and with which environment."""

    agent: Agent
    role: str  # maker | checker
    prompt: str
    worktree: Path
    prompt_file: Path
    env: dict[str, str]
    stdout_path: Path
    stderr_path: Path
    redactor: Redactor
    loop: str
    task: str
    attempt: int
    session_id: str | None = None  # resume this session where the backend supports it
    # The id a new session takes where the CLI lets loopctl choose it (Claude's --session-id),
    # journaled before the turn runs so that a turn lost with loopctl can be resumed.
    new_session_id: str | None = None
    cancel: threading.Event | None = None  # set when the run is interrupted: stop the agent
    on_start: Callable[[int], None] | None = None  # told the agent's pid once it runs
    # Commands a human approved for this task (inbox item id -> argv), for agents that ask.
    approved_commands: dict[str, tuple[str, ...]] = field(default_factory=dict)
    skills: tuple[Skill, ...] = ()  # what loopctl's own agent can load_skill
    request_approval: ApprovalOpener | None = None  # how loopctl's own agent asks a human
    # Where every process of this turn runs confined; None only when [sandbox] mode = "off".
    sandbox: Sandbox | None = None
    # The turn's model cassette, for a backend whose model calls leave from loopctl's own
    # process (model_api): recorded there, or offline answered from it (loopctl.egress_cassette).
    cassette: EgressTap | None = None
    # A folder of this task the agent may write inside its sandbox, for a CLI's per-task state
    # kept outside the worktree (aider's chat history); None: use the attempt folder.
    state_dir: Path | None = None
    # Ends a turn that makes no progress ([budget] max_idle); None: only its timeout ends it.
    idle: IdleLimit | None = None
    # The loop's rules block and its marker line (engine.rules), for a CLI that compacts its
    # own context to be given again afterwards (backends.rules_hook); "" for a checker.
    rules: str = ""
    rules_marker: str = ""
    # The loop declares a [scope]: a CLI that can print its event stream prints it, for the
    # turn's footprint to be read from it (backends.stream_steps).
    stream: bool = False


@dataclass(frozen=True, slots=True)
class Invocation:
    """How a turn is launched: argv (empty for loopctl's own API agent), stdin, environment."""

    argv: list[str]
    stdin: str | None = None  # None: stdin is /dev/null
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentResult:
    """One turn's outcome, normalised across backends.

    `input_tokens` counts every input token the model processed, cached ones included (the
    OpenAI convention; Claude's cache reads and writes are added in); `cached_tokens` is the
    part of it served from a prompt cache. `cost_usd` is None when nobody reported or priced it.
    """

    status: AgentStatus
    exit_code: int | None
    duration_s: float
    text: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    session_id: str | None = None
    output_tail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    escalate: str | None = None  # a question the agent wants a human to answer (inbox item)

    def event_data(self) -> dict[str, Any]:
        asked = {"escalate": self.escalate} if self.escalate else {}
        return {
            **asked,
            "status": self.status.value,
            "exit_code": self.exit_code,
            "duration_s": round(self.duration_s, 3),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
            "session_id": self.session_id,
            "text": self.text[-2000:],
            **self.extra,
        }


# What the CLIs and APIs say when a credential is missing or refused (seen with the real CLIs).
_AUTH_FAILURE = re.compile(
    r"\b(401|403) Unauthorized|\bHTTP 40[13]\b|status(?:Code)?\W+40[13]\b|AuthenticationError"
    r"|Failed to authenticate|Not logged in|invalid[ _-]api[ _-]key|Incorrect API key"
    r"|not able to authenticate",
    re.I,
)


def auth_failure(result: AgentResult) -> str | None:
    """Why the agent could not authenticate, when that is why its turn failed.

    Another attempt cannot fix a refused credential, so the engine stops the task at once
    instead of retrying into the same 401.
    """
    if result.status is not AgentStatus.ERROR:
        return None
    if result.extra.get("api_error_status") in (401, 403):
        return str(result.extra.get("error") or result.text or "HTTP 401")[:300]
    for text in (str(result.extra.get("error") or ""), result.text, result.output_tail):
        found = _AUTH_FAILURE.search(text)
        if found:
            line = next(
                (line for line in text.splitlines() if found.group(0) in line), found.group(0)
            )
            return " ".join(line.split())[:300]
    return None


@dataclass(frozen=True, slots=True)
class ProbeCheck:
    """One finding of `loopctl agents test`."""

    name: str  # binary | version | credentials | api | model | program
    ok: bool
    detail: str
    warning: bool = False  # informative: does not make the test fail


class AgentBackend(Protocol):
    """A way to run an agent turn: a coding-agent CLI, a program, or a model API."""

    name: str

    def check_available(self, agent: Agent, env: dict[str, str]) -> None:
        """Raise AgentUnavailable (with how to fix it) when this agent cannot run here."""

    def run(self, request: AgentRequest) -> AgentResult:
        """Run one turn in request.worktree; failures are results, not exceptions."""

    def preview(self, request: AgentRequest) -> Invocation:
        """What `run` would launch for `request` (argv, stdin, environment), running nothing."""

    def probe(self, agent: Agent, env: dict[str, str], cwd: Path) -> list[ProbeCheck]:
        """Check, without doing work, that the agent is installed, configured and reachable."""


def trailing_json(stdout: str) -> dict[str, Any] | None:
    """The JSON object on stdout's last non-empty line, the agent protocol's result."""
    for line in reversed(stdout.splitlines()):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("{"):
            return None
        try:
            value = json.loads(stripped)
        except (ValueError, RecursionError):  # deep nesting exhausts the parser's stack
            return None
        return value if isinstance(value, dict) else None
    return None


def as_dict(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (agent output is untrusted)."""
    return value if isinstance(value, dict) else {}


def int_or_none(value: object) -> int | None:
    """A reported token count, finite and bounded (loopctl.usage); None when unusable."""
    return clamp_tokens(value)


def float_or_none(value: object) -> float | None:
    """A reported cost, finite and bounded (loopctl.usage); None when unusable."""
    return clamp_usd(value)


def usage_warnings(payload: dict[str, Any]) -> list[str]:
    """What was wrong with the usage numbers of a protocol result (they are clamped when read)."""
    usage = as_dict(payload.get("usage"))
    found: list[tuple[str, object, float]] = [
        (f"usage.{name}", usage.get(name), MAX_TOKENS)
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        )
    ]
    found += [(name, payload.get(name), MAX_USD) for name in ("total_cost_usd", "cost_usd")]
    warnings = []
    for name, value, ceiling in found:
        problem = usage_problem(value, ceiling)
        if problem is not None:
            warnings.append(f"{name} {problem}")
    return warnings


def checked(result: AgentResult) -> AgentResult:
    """`result` made safe to record and show: usage clamped, control characters stripped.

    Every backend's result passes here before it is priced or stored, whatever parsed it.
    """
    warnings = [str(w) for w in result.extra.get("usage_warnings") or ()]
    numbers: dict[str, Any] = {}
    for name in ("input_tokens", "output_tokens", "cached_tokens"):
        value = getattr(result, name)
        problem = usage_problem(value)
        if problem is not None:
            warnings.append(f"{name} {problem}")
            numbers[name] = clamp_tokens(value)
    problem = usage_problem(result.cost_usd, MAX_USD)
    if problem is not None:
        warnings.append(f"cost_usd {problem}")
        numbers["cost_usd"] = clamp_usd(result.cost_usd)
    extra = clean_data(result.extra)
    extra.pop("usage_warnings", None)
    if warnings:
        extra["usage_warning"] = "agent reported unusable usage, clamped: " + "; ".join(
            dict.fromkeys(warnings)
        )
    return replace(
        result,
        text=strip_controls(result.text),
        output_tail=strip_controls(result.output_tail),
        escalate=strip_controls(result.escalate) if result.escalate is not None else None,
        session_id=strip_controls(result.session_id) if result.session_id is not None else None,
        extra=extra,
        **numbers,
    )


@dataclass(frozen=True, slots=True)
class ProtocolResult:
    """Fields read from a `claude -p --output-format json`-shaped result object."""

    text: str | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    cost_usd: float | None
    is_error: bool
    session_id: str | None
    escalate: str | None = None  # `"escalate": "question"`: the agent asks for a human
    warnings: tuple[str, ...] = ()  # usage numbers that were unusable and got clamped


def escalation(payload: dict[str, Any]) -> str | None:
    """The question of a result's `"escalate"` field, if it holds a non-empty string."""
    asked = payload.get("escalate")
    if not isinstance(asked, str):
        return None
    # Stripped before anything else: a question of nothing but escape sequences asks nothing.
    asked = strip_controls(asked).strip()
    return asked[:4000] or None


def claude_input_tokens(usage: dict[str, Any]) -> int | None:
    """Every input token of a Claude usage block: fresh, cache writes and cache reads."""
    fresh = int_or_none(usage.get("input_tokens"))
    if fresh is None:
        return None
    written = int_or_none(usage.get("cache_creation_input_tokens")) or 0
    read = int_or_none(usage.get("cache_read_input_tokens")) or 0
    return fresh + written + read


def read_protocol_result(payload: dict[str, Any]) -> ProtocolResult:
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    result = payload.get("result")
    session = payload.get("session_id")
    cost = payload.get("total_cost_usd")
    if cost is None:
        cost = payload.get("cost_usd")  # the name before Claude Code 1.0.22
    return ProtocolResult(
        text=strip_controls(result) if isinstance(result, str) else None,
        input_tokens=clamp_tokens(claude_input_tokens(usage)),
        output_tokens=int_or_none(usage.get("output_tokens")),
        cached_tokens=int_or_none(usage.get("cache_read_input_tokens")),
        cost_usd=float_or_none(cost),
        is_error=payload.get("is_error") is True,
        session_id=strip_controls(session) if isinstance(session, str) else None,
        escalate=escalation(payload),
        warnings=tuple(usage_warnings(payload)),
    )
