"""The interface every agent backend implements, and the result they all return."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from loopctl.definitions.agents import Agent
from loopctl.secrets import Redactor


class AgentStatus(StrEnum):
    OK = "ok"  # the agent finished its turn (exit 0, no error reported)
    ERROR = "error"  # non-zero exit or is_error in its result
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


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
    cancel: threading.Event | None = None  # set when the run is interrupted: stop the agent
    on_start: Callable[[int], None] | None = None  # told the agent's pid once it runs


@dataclass(frozen=True, slots=True)
class AgentResult:
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

    def event_data(self) -> dict[str, Any]:
        return {
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


class AgentBackend(Protocol):
    """A way to run an agent turn: a coding-agent CLI, a program, or a model API."""

    name: str

    def check_available(self, agent: Agent, env: dict[str, str]) -> None:
        """Raise AgentUnavailable (with how to fix it) when this agent cannot run here."""

    def run(self, request: AgentRequest) -> AgentResult:
        """Run one turn in request.worktree; failures are results, not exceptions."""


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
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    return None


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 0 else None


def _float_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 else None


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


def read_protocol_result(payload: dict[str, Any]) -> ProtocolResult:
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    result = payload.get("result")
    session = payload.get("session_id")
    return ProtocolResult(
        text=result if isinstance(result, str) else None,
        input_tokens=_int_or_none(usage.get("input_tokens")),
        output_tokens=_int_or_none(usage.get("output_tokens")),
        cached_tokens=_int_or_none(usage.get("cache_read_input_tokens")),
        cost_usd=_float_or_none(payload.get("total_cost_usd")),
        is_error=payload.get("is_error") is True,
        session_id=session if isinstance(session, str) else None,
    )
