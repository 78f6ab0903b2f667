"""Agent backends behind one interface; the engine asks `backend_for(agent)`."""

from __future__ import annotations

from loopctl.backends.base import (
    AgentBackend,
    AgentRequest,
    AgentResult,
    AgentStatus,
    ProbeCheck,
)
from loopctl.definitions.agents import Agent, Backend

__all__ = [
    "AgentBackend",
    "AgentRequest",
    "AgentResult",
    "AgentStatus",
    "ProbeCheck",
    "backend_for",
]


def backend_for(agent: Agent) -> AgentBackend:
    """The backend that runs `agent` (modules load on first use: startup stays fast)."""
    kind = agent.backend
    if kind is Backend.COMMAND:
        from loopctl.backends.command import CommandBackend

        return CommandBackend()
    if kind is Backend.CLAUDE:
        from loopctl.backends.claude import ClaudeBackend

        return ClaudeBackend()
    if kind is Backend.CODEX:
        from loopctl.backends.codex import CodexBackend

        return CodexBackend()
    if kind is Backend.OPENCODE:
        from loopctl.backends.opencode import OpencodeBackend

        return OpencodeBackend()
    if kind is Backend.AIDER:
        from loopctl.backends.aider import AiderBackend

        return AiderBackend()
    if kind is Backend.GOOSE:
        from loopctl.backends.goose import GooseBackend

        return GooseBackend()
    from loopctl.backends.model_api import ModelApiBackend

    return ModelApiBackend(kind.value)
